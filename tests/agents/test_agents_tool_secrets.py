"""MCP headers are sealed for one server URL and header, open only with the process's key, and read as
``<redacted>`` wherever a definition is shown."""

from __future__ import annotations

import pytest

from switchyard.agents import AgentSpec
from switchyard.agents.errors import ToolExecutionError
from switchyard.agents.tools import secrets
from switchyard.agents.tools.secrets import (
    REDACTED,
    configure_tool_secrets,
    kept_secrets,
    open_header,
    open_headers,
    redact_tool_secrets,
    seal_header,
    seal_tool_secrets,
)

TOKEN = "Bearer sk-mcp-very-secret-0123456789"
URL = "https://mcp.example.com/mcp"


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(secrets, "_keys", {})
    monkeypatch.setattr(secrets, "_newest", [])
    configure_tool_secrets("k" * 64)


def _spec(**headers: str) -> AgentSpec:
    return AgentSpec.model_validate(
        {
            "name": "a",
            "model": "m",
            "tools": [{"type": "mcp", "server_label": "kb", "server_url": URL, "headers": headers}],
        }
    )


def test_a_sealed_header_opens_for_its_server_and_header_only() -> None:
    sealed = seal_header(TOKEN, server_url=URL, header="Authorization")
    assert TOKEN not in sealed
    assert "sk-mcp" not in sealed
    assert sealed != seal_header(TOKEN, server_url=URL, header="Authorization")  # a nonce each time
    assert open_header(sealed, server_url=URL, header="authorization") == TOKEN  # header names ignore case
    with pytest.raises(ToolExecutionError, match="does not open"):
        open_header(sealed, server_url="https://evil.example.com/mcp", header="Authorization")
    with pytest.raises(ToolExecutionError, match="does not open"):
        open_header(sealed, server_url=URL, header="X-Echo")


def test_a_sealed_header_does_not_open_without_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    sealed = seal_header(TOKEN, server_url=URL, header="Authorization")
    monkeypatch.setattr(secrets, "_keys", {})
    configure_tool_secrets("another key, just as long as the first one was")
    with pytest.raises(ToolExecutionError, match="SWITCHYARD_SECRETS_KEY"):
        open_header(sealed, server_url=URL, header="Authorization")


def test_a_spec_s_headers_are_sealed_and_open_for_the_connection() -> None:
    sealed = seal_tool_secrets(_spec(Authorization=TOKEN, **{"X-Team": "blue"}))
    assert TOKEN not in sealed.model_dump_json()
    assert "blue" not in sealed.model_dump_json()
    assert open_headers(sealed.tools[0]) == {"Authorization": TOKEN, "X-Team": "blue"}  # type: ignore[arg-type]
    shown = redact_tool_secrets(sealed.model_dump(mode="json"))
    assert shown["tools"][0]["headers"] == {"Authorization": REDACTED, "X-Team": REDACTED}


def test_redacted_sent_back_keeps_the_stored_value_for_the_same_url_only() -> None:
    stored = seal_tool_secrets(_spec(Authorization=TOKEN))
    again = seal_tool_secrets(_spec(Authorization=REDACTED), kept=kept_secrets(stored))
    assert again.model_dump() == stored.model_dump()  # no new version for a definition read and sent back
    same_value = seal_tool_secrets(_spec(Authorization=TOKEN), kept=kept_secrets(stored))
    assert same_value.model_dump() == stored.model_dump()
    moved = AgentSpec.model_validate(
        {
            "name": "a",
            "model": "m",
            "tools": [
                {"type": "mcp", "server_label": "kb", "server_url": "https://evil.example.com/mcp", "headers": {}}
            ],
        }
    )
    moved = moved.model_copy(
        update={"tools": [moved.tools[0].model_copy(update={"headers": {"Authorization": REDACTED}})]}
    )
    with pytest.raises(ValueError, match="no value is stored"):
        seal_tool_secrets(moved, kept=kept_secrets(stored))
    with pytest.raises(ValueError, match="no value is stored"):
        seal_tool_secrets(_spec(Authorization=REDACTED))


def test_a_value_that_looks_sealed_is_sealed_like_any_other() -> None:
    stored = seal_tool_secrets(_spec(Authorization=TOKEN))
    forged = seal_tool_secrets(_spec(Authorization="sealed:v1:00000000:AAAA"), kept=kept_secrets(stored))
    assert open_headers(forged.tools[0]) == {"Authorization": "sealed:v1:00000000:AAAA"}  # type: ignore[arg-type]
