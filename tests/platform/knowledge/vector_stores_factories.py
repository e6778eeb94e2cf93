"""Vector stores for the tenant-isolation matrix: one factory per path parameter (and ``file_id`` in bodies).

A tenant's store is made once per test and holds one uploaded file, attached; ``file_id`` is that file (so it is
both a ``/v1/files`` file and one of the store's), ``batch_id`` a batch attaching another file. Ingestion runs inline.
"""

from __future__ import annotations

from typing import Any

from switchyard.platform.background.inline import InlineDispatcher
from tests.platform.agents_api.factories import run_inline

_stores: dict[str, tuple[str, str]] = {}


async def _store_and_file(client: Any, tenant: Any) -> tuple[str, str]:
    if not isinstance(getattr(client.app.state, "jobs", None), InlineDispatcher):
        run_inline(client)
    if tenant.id not in _stores:
        headers = tenant.headers("developer")
        files = {"file": ("notes.txt", b"The ferry leaves at 07:15 from pier 4.", "text/plain")}
        uploaded = await client.post("/v1/files", files=files, data={"purpose": "assistants"}, headers=headers)
        assert uploaded.status_code == 200, uploaded.text
        file_id = uploaded.json()["id"]
        created = await client.post("/v1/vector_stores", json={"name": "docs", "file_ids": [file_id]}, headers=headers)
        assert created.status_code == 200, created.text
        _stores[tenant.id] = (created.json()["id"], file_id)
    return _stores[tenant.id]


async def _vector_store(client: Any, tenant: Any) -> str:
    return (await _store_and_file(client, tenant))[0]


async def _file(client: Any, tenant: Any) -> str:
    return (await _store_and_file(client, tenant))[1]


async def _batch(client: Any, tenant: Any) -> str:
    store_id, _ = await _store_and_file(client, tenant)
    headers = tenant.headers("developer")
    files = {"file": ("more.txt", b"The return ferry leaves at 18:40.", "text/plain")}
    uploaded = await client.post("/v1/files", files=files, data={"purpose": "assistants"}, headers=headers)
    assert uploaded.status_code == 200, uploaded.text
    response = await client.post(
        f"/v1/vector_stores/{store_id}/file_batches", json={"file_ids": [uploaded.json()["id"]]}, headers=headers
    )
    assert response.status_code == 200, response.text
    return str(response.json()["id"])


VECTOR_STORE_FACTORIES = {"vector_store_id": _vector_store, "file_id": _file, "batch_id": _batch}
