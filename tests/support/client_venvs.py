"""Client libraries whose pins clash with ours live in virtual environments of their own (the Makefile's
`compat-venvs`, under `.venv-compat/<name>`): a test runs a client script there against a live server and reads
the JSON lines it prints."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[2]


def client_python(name: str) -> Path:
    """The interpreter of the client library `name`'s own virtual environment, built (or found up to date) by make."""
    subprocess.run(["make", "-s", "compat-venvs"], cwd=ROOT, check=True, capture_output=True)
    return ROOT / ".venv-compat" / name / "bin" / "python"


def run_client(python: Path, script: Path, *args: str) -> list[dict[str, Any]]:
    """Run `script` with `python` and `args`; the JSON objects it printed, a line each."""
    ran = subprocess.run(
        [str(python), str(script), *args],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},  # no OPENAI_API_KEY or proxy the client could pick up
        check=False,
        timeout=240,
    )
    assert ran.returncode == 0, ran.stderr
    return [json.loads(line) for line in ran.stdout.splitlines()]
