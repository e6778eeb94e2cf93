"""The README's SDK example runs as written against a real installation."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT
from tests.sdk.conftest import Installation
from tests.sdk.test_sdk_runs import new_tenant_key

pytestmark = pytest.mark.slow


def test_the_readme_example_runs(installation: Installation) -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme[readme.index("## Python SDK") :]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match
    env = {
        **os.environ,
        "SWITCHYARD_API_KEY": new_tenant_key(installation),
        "SWITCHYARD_BASE_URL": installation.base_url,
    }
    result = subprocess.run(
        [sys.executable, "-c", match.group(1)], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "1 thread.run.created"
    assert re.search(r"^completed [1-9]\d* chip-us$", result.stdout, re.MULTILINE)
    assert re.fullmatch(r"agent_\w+ 1", lines[-1])
