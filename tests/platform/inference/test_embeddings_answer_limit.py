"""One embeddings call cannot make a huge answer on a shared API process (issue 22, finding 8): its answer's size,
inputs x dimensions x bytes a value (plus each item's wrapper), is bounded by
`SWITCHYARD_MAX_EMBEDDINGS_ANSWER_BYTES` (16 MiB), and a call past it is refused before admission with 400 naming
`input`, having used and billed nothing."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from switchyard.platform.db import UNSCOPED
from switchyard.platform.models import UsageEvent

BGE = "bge-large-en-v1.5"  # 1024 dimensions


async def _usage_events(client: Any) -> list[UsageEvent]:
    await client.app.state.gateway.drain()
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        return list((await session.execute(select(UsageEvent))).scalars())


async def test_the_issues_2048_token_inputs_at_4096_dimensions_are_refused_naming_input_and_billed_nothing(
    client: Any, make_tenant: Any
) -> None:
    tenant = await make_tenant()
    body = {"model": "qwen3-embedding-8b", "input": [[0]] * 2048}
    refused = await client.post("/v1/embeddings", json=body, headers=tenant.headers("developer"))

    assert refused.status_code == 400, refused.text[:300]
    error = refused.json()["error"]
    assert (error["type"], error["param"], error["code"]) == ("invalid_request_error", "input", "answer_too_large")
    assert "2048 inputs x 4096 dimensions" in error["message"]
    assert "SWITCHYARD_MAX_EMBEDDINGS_ANSWER_BYTES" in error["message"]
    assert await _usage_events(client) == []


LIMIT = 2 * (1024 * 24 + 64) + 1024  # two 1024-dimension vectors as JSON floats (24 bytes a value, 64 an item) fit


@pytest.mark.parametrize(
    ("model", "inputs", "encoding_format", "dimensions", "status"),
    [
        (BGE, 2, "float", None, 200),
        (BGE, 3, "float", None, 400),
        (BGE, 8, "base64", None, 200),  # 16/3 bytes a value: 8 x (1024 x 16/3 + 64) + 1024 = 45,227 bytes
        (BGE, 9, "base64", None, 400),  # 50,752 bytes: past LIMIT, 50,304
        ("qwen3-embedding-8b", 1, "float", None, 400),  # 4096 dimensions: 99,392 bytes
        ("qwen3-embedding-8b", 4, "float", 256, 200),  # cut to 256: 25,856 bytes
    ],
)
async def test_the_limit_counts_inputs_dimensions_and_the_encoding(
    client: Any, make_tenant: Any, model: str, inputs: int, encoding_format: str, dimensions: int | None, status: int
) -> None:
    client.app.state.settings.max_embeddings_answer_bytes = LIMIT  # read at each call
    tenant = await make_tenant()
    body: dict[str, Any] = {"model": model, "input": ["text"] * inputs, "encoding_format": encoding_format}
    if dimensions is not None:
        body["dimensions"] = dimensions
    answer = await client.post("/v1/embeddings", json=body, headers=tenant.headers("developer"))

    assert answer.status_code == status, answer.text[:300]
    if status == 200:
        assert len(answer.json()["data"]) == inputs
        assert len(answer.content) <= client.app.state.settings.max_embeddings_answer_bytes
    else:
        assert answer.json()["error"]["param"] == "input"
    assert len(await _usage_events(client)) == (1 if status == 200 else 0)
