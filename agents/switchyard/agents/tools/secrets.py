"""Credentials in tool definitions (an MCP server's ``headers``): sealed at rest, redacted when shown, opened
only to connect.

A tenant's header values are sealed with AES-256-GCM the moment a definition is accepted
(:func:`seal_tool_secrets`); what is stored is ``sealed:v1:<key id>:<nonce + ciphertext>``, bound to the server
URL and header name it was given for, so a sealed value copied to another server or header does not open.
:func:`build_tools <switchyard.agents.tools.factory.build_tools>` opens them for the connection and nowhere
else; every answer that shows a definition shows :data:`REDACTED` in their place (:func:`redact_tool_secrets`).

The process's keys come from the platform (``SWITCHYARD_SECRETS_KEY``) through :func:`configure_tool_secrets`;
values are sealed with the newest and open with any the process was given.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Mapping
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from switchyard.agents.errors import ToolExecutionError
from switchyard.agents.spec import AgentSpec, McpToolSpec

__all__ = [
    "REDACTED",
    "SEALED_PREFIX",
    "configure_tool_secrets",
    "is_sealed",
    "kept_secrets",
    "open_header",
    "open_headers",
    "redact_tool",
    "redact_tool_secrets",
    "seal_header",
    "seal_tool_secrets",
]

SEALED_PREFIX = "sealed:v1:"
REDACTED = "<redacted>"
"""What a secret's value reads as wherever a definition is shown (an agent, a version, a response's tools)."""
_NONCE_BYTES = 12
_CONTEXT = b"switchyard-tool-secrets\0"

_keys: dict[str, AESGCM] = {}
_newest: list[str] = []


def _key_id(key: bytes) -> str:
    return hashlib.sha256(key).hexdigest()[:8]


def configure_tool_secrets(secret: str) -> None:
    """Seal this process's new tool secrets under ``secret`` (a long random string); values sealed under any
    secret given before keep opening."""
    key = hmac.new(secret.encode(), _CONTEXT, hashlib.sha256).digest()
    key_id = _key_id(key)
    _keys[key_id] = AESGCM(key)
    _newest[:] = [key_id]


def _aad(server_url: str, header: str) -> bytes:
    return f"{server_url}\0{header.lower()}".encode()


def is_sealed(value: str) -> bool:
    """Whether a stored header value is a sealed one (values stored before sealing existed are not)."""
    return value.startswith(SEALED_PREFIX)


def seal_header(value: str, *, server_url: str, header: str) -> str:
    """``value`` sealed for ``header`` of the MCP server at ``server_url``."""
    if not _newest:
        raise RuntimeError("no key to seal tool secrets with: configure_tool_secrets() was not called")
    key_id = _newest[0]
    nonce = os.urandom(_NONCE_BYTES)
    sealed = nonce + _keys[key_id].encrypt(nonce, value.encode(), _aad(server_url, header))
    return f"{SEALED_PREFIX}{key_id}:{base64.urlsafe_b64encode(sealed).decode()}"


def open_header(value: str, *, server_url: str, header: str) -> str:
    """The cleartext of a sealed header value (a value stored before sealing existed is returned as it is).

    Raises :class:`ToolExecutionError` naming ``SWITCHYARD_SECRETS_KEY`` when this process lacks its key."""
    if not is_sealed(value):
        return value
    key_id, _, payload = value[len(SEALED_PREFIX) :].partition(":")
    cipher = _keys.get(key_id)
    if cipher is None:
        raise ToolExecutionError(
            f"the {header!r} header of MCP server {server_url} was sealed with a key this process does not have "
            "(every API process and worker needs the same SWITCHYARD_SECRETS_KEY)"
        )
    try:
        sealed = base64.urlsafe_b64decode(payload)
        plain = cipher.decrypt(sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:], _aad(server_url, header))
    except (InvalidTag, ValueError):
        raise ToolExecutionError(f"the {header!r} header of MCP server {server_url} does not open") from None
    return plain.decode()


def open_headers(tool: McpToolSpec) -> dict[str, str]:
    """The headers to send to ``tool``'s server, opened."""
    return {name: open_header(value, server_url=tool.server_url, header=name) for name, value in tool.headers.items()}


def seal_tool_secrets(spec: AgentSpec, *, kept: Mapping[tuple[str, str, str], str] | None = None) -> AgentSpec:
    """``spec`` with every MCP header value sealed. A value that reads :data:`REDACTED` keeps the sealed value
    ``kept`` holds for the same ``(server_label, server_url, header)`` — what a client sends back after reading
    a definition — and is refused (``ValueError`` naming it) when there is none: a secret given for one server
    URL is never sent to another. A cleartext value equal to the kept one keeps its sealed form."""
    kept = kept or {}
    tools: list[Any] = []
    for tool in spec.tools:
        if isinstance(tool, McpToolSpec) and tool.headers:
            headers = {}
            for name, value in tool.headers.items():
                previous = kept.get((tool.server_label, tool.server_url, name.lower()))
                if previous is not None and value == previous:  # unchanged: the stored definition's own
                    headers[name] = previous
                elif value == REDACTED:
                    if previous is None:
                        raise ValueError(
                            f"header {name!r} of MCP server {tool.server_label!r} is {REDACTED!r} but no value is "
                            "stored for it at this server_url: send the value"
                        )
                    headers[name] = previous
                elif previous is not None and open_header(previous, server_url=tool.server_url, header=name) == value:
                    headers[name] = previous
                else:
                    headers[name] = seal_header(value, server_url=tool.server_url, header=name)
            tool = tool.model_copy(update={"headers": headers})
        tools.append(tool)
    return spec.model_copy(update={"tools": tools})


def kept_secrets(spec: AgentSpec) -> dict[tuple[str, str, str], str]:
    """The sealed header values of ``spec``, by ``(server_label, server_url, header)``: what
    :func:`seal_tool_secrets` keeps for a definition that replaces it."""
    return {
        (tool.server_label, tool.server_url, name.lower()): value
        for tool in spec.tools
        if isinstance(tool, McpToolSpec)
        for name, value in tool.headers.items()
        if is_sealed(value)
    }


def redact_tool_secrets(definition: dict[str, Any]) -> dict[str, Any]:
    """A definition as JSON (an agent spec's, or a Responses request's ``tools`` item) with every secret's value
    replaced by :data:`REDACTED`: the header names stay, so a reader sees which are set."""
    if "tools" in definition and isinstance(definition["tools"], list):
        return {**definition, "tools": [redact_tool(tool) for tool in definition["tools"]]}
    return definition


def redact_tool(tool: Any) -> Any:
    """One tool definition (JSON) with its secrets' values replaced by :data:`REDACTED`."""
    if not isinstance(tool, dict) or tool.get("type") != "mcp":
        return tool
    redacted = dict(tool)
    if isinstance(tool.get("headers"), dict):
        redacted["headers"] = {name: REDACTED for name in tool["headers"]}
    if tool.get("authorization") is not None:
        redacted["authorization"] = REDACTED
    return redacted
