"""Responses and conversations for the tenant-isolation matrix: one factory per path parameter."""

from __future__ import annotations

from typing import Any

from switchyard.platform.background.inline import InlineDispatcher
from tests.platform.agents_api.factories import MODEL, run_inline

_conversations: dict[str, str] = {}


async def _response(client: Any, tenant: Any) -> str:
    """A background response (what every response route accepts, cancel included), executed inline."""
    if not isinstance(getattr(client.app.state, "jobs", None), InlineDispatcher):
        run_inline(client)
    body = {"model": MODEL, "input": "Say hello.", "background": True}
    response = await client.post("/v1/responses", json=body, headers=tenant.headers("developer"))
    assert response.status_code == 200, response.text
    return str(response.json()["id"])


async def _conversation(client: Any, tenant: Any) -> str:
    if tenant.id not in _conversations:
        response = await client.post("/v1/conversations", json={}, headers=tenant.headers("developer"))
        assert response.status_code == 200, response.text
        _conversations[tenant.id] = response.json()["id"]
    return _conversations[tenant.id]


async def _item(client: Any, tenant: Any) -> str:
    """An item of the tenant's conversation (the one ``_conversation`` gives the same route)."""
    conversation_id = await _conversation(client, tenant)
    items = [{"type": "message", "role": "user", "content": "Hello."}]
    response = await client.post(
        f"/v1/conversations/{conversation_id}/items", json={"items": items}, headers=tenant.headers("developer")
    )
    assert response.status_code == 200, response.text
    return str(response.json()["data"][0]["id"])


RESPONSE_FACTORIES = {"response_id": _response, "conversation_id": _conversation, "item_id": _item}
