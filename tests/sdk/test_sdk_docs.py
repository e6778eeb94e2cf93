"""The README's SDK example runs as written against a real installation."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime

import pytest

from tests.conftest import REPO_ROOT
from tests.sdk.conftest import Installation
from tests.sdk.test_sdk_runs import new_tenant_key

pytestmark = pytest.mark.slow


def _run_readme_example(installation: Installation, section: str) -> str:
    """Run the first Python block of the README's ``section`` as written; what it printed."""
    readme = (REPO_ROOT / "README.md").read_text()
    match = re.search(r"```python\n(.*?)```", readme[readme.index(section) :], re.DOTALL)
    assert match
    key = new_tenant_key(installation)
    env = {**os.environ, "SWITCHYARD_API_KEY": key, "OPENAI_API_KEY": key, "SWITCHYARD_BASE_URL": installation.base_url}
    result = subprocess.run(
        [sys.executable, "-c", match.group(1)], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_the_readme_example_runs(installation: Installation) -> None:
    printed = _run_readme_example(installation, "## Python SDK")
    lines = printed.splitlines()
    assert lines[0] == "1 thread.run.created"
    assert re.search(r"^completed [1-9]\d* chip-us$", printed, re.MULTILINE)
    assert re.fullmatch(r"agent_\w+ 1", lines[-1])
    assert_books_reconcile(installation)


def assert_books_reconcile(installation: Installation, within_s: float = 30.0) -> None:
    """`switchyard billing reconcile` is clean, its chip-µs check done, once usage is rated and busy time flushed
    (the agent run's compute, simulated for the worker by the fleet process, once went unrecorded)."""
    period = datetime.now(UTC).strftime("%Y-%m")
    command = [sys.executable, "-m", "switchyard.platform.cli", "billing", "reconcile", "--period", period]
    deadline = time.monotonic() + within_s
    while True:
        result = subprocess.run(command, env=installation.env, capture_output=True, text=True, timeout=60)
        if result.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"trn2\.48xlarge: attributed [1-9][\d,]* chip-us, fleet busy [1-9]", result.stdout), result.stdout


def test_the_readme_handoffs_example_runs(installation: Installation) -> None:
    printed = _run_readme_example(installation, "- **Handoffs and guardrails.**").splitlines()
    assert printed == [
        "[('mcp_call', 'transfer_to_refunds'), ('message', None)]",  # the triage agent handed off on the server
        "failed guardrail_tripped",  # the card number never reached a model
    ]
