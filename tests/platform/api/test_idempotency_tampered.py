"""A stored answer that no longer opens (its sealed bytes changed in the database) is treated as expired: the retry
runs again and the damage is logged, instead of a 500 for the record's whole lifetime."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
from sqlalchemy import select, update
from sqlmodel import col

from switchyard.platform.db import UNSCOPED
from switchyard.platform.models import IdempotencyRecord

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


async def test_a_tampered_stored_answer_is_treated_as_expired_and_logged(
    client: Any, make_tenant: Any, caplog: pytest.LogCaptureFixture
) -> None:
    tenant = await make_tenant()
    headers = {**tenant.headers("developer"), "Idempotency-Key": str(uuid.uuid4())}
    first = await client.post("/v1/chat/completions", json=CHAT, headers=headers)
    assert first.status_code == 200, first.text
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        [stored] = (await session.execute(select(IdempotencyRecord))).scalars().all()
        assert stored.response_sealed is not None
        flipped = bytes([stored.response_sealed[-1] ^ 1])
        await session.execute(
            update(IdempotencyRecord)
            .where(col(IdempotencyRecord.id) == stored.id)
            .values(response_sealed=stored.response_sealed[:-1] + flipped)
        )
    with caplog.at_level(logging.WARNING, logger="switchyard.platform.idempotency"):
        again = await client.post("/v1/chat/completions", json=CHAT, headers=headers)
    assert again.status_code == 200, again.text
    assert "idempotent-replayed" not in again.headers  # it ran again
    assert again.json()["id"] != first.json()["id"]
    assert any("could not be opened" in record.getMessage() for record in caplog.records)
    replayed = await client.post("/v1/chat/completions", json=CHAT, headers=headers)
    assert replayed.headers["idempotent-replayed"] == "true"  # the new answer is stored and replays
    assert replayed.json() == again.json()
