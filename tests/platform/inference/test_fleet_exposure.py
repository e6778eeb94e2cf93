"""The fleet process fails closed (issue 22, finding 17): beyond loopback it listens only with a token.

Anything that reaches the fleet process gets completions nobody meters and can reload the fleet, so
`switchyard fleet` refuses to listen on any address but a loopback one without `SWITCHYARD_FLEET_TOKEN`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from switchyard.platform.inference.fleet_process import exposed_without_token
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow  # starts a process
def test_switchyard_fleet_refuses_to_listen_beyond_loopback_without_a_token(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "SWITCHYARD_FLEET_TOKEN"}
    env |= {"SWITCHYARD_DATA_DIR": str(tmp_path), "SWITCHYARD_FLEET_URL": f"http://127.0.0.1:{free_port()}"}
    command = [sys.executable, "-m", "switchyard.platform.cli", "fleet", "--host", "0.0.0.0"]
    try:
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("switchyard fleet listened on 0.0.0.0 without a token")
    assert result.returncode != 0
    assert "SWITCHYARD_FLEET_TOKEN" in result.stderr
    assert "0.0.0.0" in result.stderr
    assert "Uvicorn running" not in result.stderr  # it never listened


@pytest.mark.parametrize(
    ("host", "token", "refused"),
    [
        ("0.0.0.0", "", True),
        ("::", "", True),
        ("10.0.0.5", "", True),
        ("fleet", "", True),  # a name: whatever it resolves to, it is not known to be loopback
        ("", "", True),
        ("127.0.0.1", "", False),
        ("127.0.0.2", "", False),
        ("::1", "", False),
        ("[::1]", "", False),
        ("localhost", "", False),
        ("0.0.0.0", "s3cret", False),
    ],
)
def test_only_loopback_addresses_may_go_without_a_token(host: str, token: str, refused: bool) -> None:
    assert (exposed_without_token(host, token) is not None) is refused


def test_the_compose_layout_requires_a_fleet_token_for_its_fleet_beyond_loopback() -> None:
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    fleet = compose["services"]["fleet"]
    host = fleet["command"][fleet["command"].index("--host") + 1]
    assert exposed_without_token(host, "") is not None  # it listens where a token is needed
    token = compose["x-switchyard"]["environment"]["SWITCHYARD_FLEET_TOKEN"]
    assert token.startswith("${SWITCHYARD_FLEET_TOKEN:?")  # compose refuses to start without one
    assert fleet["environment"]["SWITCHYARD_FLEET_TOKEN"] == token
