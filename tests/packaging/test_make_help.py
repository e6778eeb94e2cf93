"""`make help` lists every target a contributor runs, each with the line that says what it does."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_make_help_lists_every_phony_target_with_its_description() -> None:
    if shutil.which("make") is None:
        pytest.fail("make is not on PATH")
    makefile = (ROOT / "Makefile").read_text()
    phony = re.search(r"^\.PHONY:(.*)$", makefile, re.MULTILINE)
    assert phony is not None
    listed = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    described = dict(re.findall(r"^  make (\S+)\s+(.+)$", listed, re.MULTILINE))
    for target in phony.group(1).split():
        assert target in described, f"`make help` does not list `make {target}`:\n{listed}"
        assert len(described[target]) > 10, f"`make {target}` has no description"
    assert "Run the whole test suite" in described["test"]
