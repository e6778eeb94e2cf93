"""``server-timing``: where a request's time went, stage by stage, on the answer itself."""

from __future__ import annotations

import re
import time
from typing import Any

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
_ENTRY = re.compile(r'^(?P<stage>[a-z]+);dur=(?P<dur>\d+\.\d{3});desc="cpu (?P<cpu>\d+\.\d{3})"$')


def stages(answer: Any) -> dict[str, tuple[float, float]]:
    """The answer's stages in order, each with its wall and CPU milliseconds."""
    found = {}
    for entry in answer.headers["server-timing"].split(", "):
        match = _ENTRY.match(entry)
        assert match, entry
        found[match["stage"]] = (float(match["dur"]), float(match["cpu"]))
    return found


def _chat(**extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 8, **extra}


async def test_a_chat_completion_reports_each_stage_once_in_order_within_its_own_time(
    client: Any, make_tenant: Any
) -> None:
    headers = (await make_tenant()).headers("developer")
    started = time.perf_counter()
    answer = await client.post("/v1/chat/completions", json=_chat(), headers=headers)
    elapsed_ms = (time.perf_counter() - started) * 1e3
    assert answer.status_code == 200, answer.text

    timing = stages(answer)
    assert list(timing) == ["auth", "parse", "admission", "upstream", "metering", "respond"]
    assert sum(wall for wall, _ in timing.values()) <= elapsed_ms


async def test_embeddings_report_the_same_stages(client: Any, make_tenant: Any) -> None:
    headers = (await make_tenant()).headers("developer")
    answer = await client.post(
        "/v1/embeddings", json={"model": "BAAI/bge-large-en-v1.5", "input": ["a", "b"]}, headers=headers
    )
    assert answer.status_code == 200, answer.text
    assert list(stages(answer)) == ["auth", "parse", "admission", "upstream", "metering", "respond"]


async def test_a_stream_reports_the_stages_before_its_first_byte(client: Any, make_tenant: Any) -> None:
    headers = (await make_tenant()).headers("developer")
    async with client.stream("POST", "/v1/chat/completions", json=_chat(stream=True), headers=headers) as answer:
        assert answer.status_code == 200
        assert list(stages(answer)) == ["auth", "parse", "admission", "respond"]
        assert b"[DONE]" in b"".join([part async for part in answer.aiter_bytes()])


async def test_a_refusal_reports_the_stages_it_reached_and_an_unauthenticated_request_none(
    client: Any, make_tenant: Any
) -> None:
    headers = (await make_tenant()).headers("developer")
    refused = await client.post("/v1/chat/completions", json=_chat(model="no-such-model"), headers=headers)
    assert refused.status_code == 404, refused.text
    assert list(stages(refused)) == ["auth", "parse", "respond"]

    anonymous = await client.post("/v1/chat/completions", json=_chat())
    assert anonymous.status_code == 401
    assert "server-timing" not in anonymous.headers
