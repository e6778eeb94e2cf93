"""The key that seals the credentials tenants put in tool definitions (``switchyard.agents.tools.secrets``).

``SWITCHYARD_SECRETS_KEY`` when set; else a random key kept in ``<data_dir>/secrets.key`` (made by the first
process that needs it, readable by its owner only), which every process sharing that data directory reads.
Processes that do not share a data directory (compose, several machines) must share the setting, or a run on a
worker cannot open the headers an API process sealed (it fails naming the setting).
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from sqlalchemy import String, cast, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from switchyard.agents import AgentSpec
from switchyard.agents.tools.secrets import (
    configure_tool_secrets,
    kept_secrets,
    redact_tool,
    redact_tool_secrets,
    seal_tool_secrets,
)
from switchyard.platform.models import AgentVersion, ResponseEventRecord, ResponseRecord
from switchyard.platform.settings import Settings

__all__ = ["KEY_FILE", "configure_secrets_key", "seal_stored_credentials"]

KEY_FILE = "secrets.key"


def _key_file_secret(settings: Settings) -> str:
    path = settings.data_dir / KEY_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        draft = path.with_name(f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
        descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write(secrets.token_hex(32))
        try:  # a link appears whole: of two processes starting together, the first's key is everyone's
            os.link(draft, path)
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    return path.read_text().strip()


def configure_secrets_key(settings: Settings) -> None:
    """Seal and open this process's tool secrets with the installation's key (see the module docstring)."""
    secret = settings.secrets_key.get_secret_value() if settings.secrets_key else _key_file_secret(settings)
    configure_tool_secrets(secret)


def _sealed_spec(definition: dict[str, Any]) -> dict[str, Any]:
    spec = AgentSpec.model_validate(definition, strict=False)
    sealed: dict[str, Any] = seal_tool_secrets(spec, kept=_as_kept(spec)).model_dump(mode="json")
    return sealed


def _as_kept(spec: AgentSpec) -> dict[tuple[str, str, str], str]:
    return kept_secrets(spec)  # values sealed already stay as they are


async def seal_stored_credentials(session: AsyncSession) -> int:
    """Seal the MCP headers stored in clear before sealing existed (agent versions, responses' definitions) and
    redact them where responses echo their request (``responses.request``, ``response_events.data``); returns the
    rows changed. Idempotent: ``switchyard db upgrade`` runs it after the migrations."""
    changed = 0
    mentions_mcp = "%mcp%"
    versions = select(AgentVersion).where(cast(col(AgentVersion.definition), String).like(mentions_mcp))
    for version in (await session.execute(versions)).scalars():
        definition = _sealed_spec(version.definition)
        if definition != version.definition:
            version.definition, changed = definition, changed + 1
    responses = select(ResponseRecord).where(cast(col(ResponseRecord.request), String).like(mentions_mcp))
    for response in (await session.execute(responses)).scalars():
        request = dict(response.request)
        if isinstance(request.get("spec"), dict):
            request["spec"] = _sealed_spec(request["spec"])
        if isinstance(request.get("echo"), dict):
            request["echo"] = redact_tool_secrets(request["echo"])
        if request != response.request:
            response.request, changed = request, changed + 1
    events = select(ResponseEventRecord).where(cast(col(ResponseEventRecord.data), String).like(mentions_mcp))
    for event in (await session.execute(events)).scalars():
        shown = event.data.get("response")
        if isinstance(shown, dict) and isinstance(shown.get("tools"), list):
            tools = [redact_tool(tool) for tool in shown["tools"]]
            if tools != shown["tools"]:
                event.data, changed = {**event.data, "response": {**shown, "tools": tools}}, changed + 1
    await session.flush()
    return changed
