"""The exported names of ``switchyard.agents`` and the package's independence from the platform."""

from __future__ import annotations

import subprocess
import sys

import pytest

import switchyard.agents as agents
import switchyard.agents.tools as tools


@pytest.mark.parametrize("module", [agents, tools])
def test_all_names_exist_and_are_sorted(module: object) -> None:
    exported = module.__all__  # type: ignore[attr-defined]
    # isort style, as ruff's RUF022 keeps it: CONSTANTS, then Classes, then functions
    assert exported == sorted(exported, key=lambda n: (not n.isupper(), not n[:1].isupper(), n))
    assert len(set(exported)) == len(exported)
    for name in exported:
        assert getattr(module, name) is not None


def test_the_run_loop_api_is_exported() -> None:
    for name in ("AgentSpec", "RunLoop", "RunState", "CallModel", "ExecuteTools", "AwaitClient", "RunFinished"):
        assert name in agents.__all__
    for name in ("SSRFGuard", "HttpRequestTool", "McpServerConnection", "build_tools"):
        assert name in tools.__all__


@pytest.mark.slow  # starts a process
def test_package_imports_without_platform_or_server_code() -> None:
    code = (
        "import sys, switchyard.agents; "
        "bad = [m for m in sys.modules if m.startswith(('switchyard.platform', 'sqlalchemy', 'litestar', "
        "'celery', 'uvicorn', 'starlette', 'mcp'))]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
