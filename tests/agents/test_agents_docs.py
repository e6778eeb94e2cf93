"""The examples in docs/agents.md run and print what the document says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "agents.md"


@pytest.mark.slow  # starts a process
def test_quickstart_example_runs() -> None:
    text = DOC.read_text()
    match = re.search(r"<!-- example: quickstart -->\n```python\n(.*?)```\n\nprints `(.*?)`", text, re.S)
    assert match is not None, "the quick-start example is missing from docs/agents.md"
    code, expected = match.groups()
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected
