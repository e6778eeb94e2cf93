"""A model's refusal through `/v1/responses`: an `openai-compatible` upstream that refuses (OpenAI's `refusal`
field) answers a message whose content part is `{"type": "refusal"}`, streamed as `response.refusal.delta`/`done`
events, and a chain goes on after it; every object is read by the official client and validated against the
`openai` package's types."""

from __future__ import annotations

from typing import Any

import openai
from openai.types.responses import Response, ResponseStreamEvent

from switchyard.accelerator.pool.echo_upstream import REFUSAL, REFUSAL_TRIGGER
from tests.compat.test_chat_fidelity import RECORDED, base_url, client
from tests.compat.test_responses_wire_shapes import validate

__all__ = ["base_url", "client"]  # the fidelity test's server, whose `recorded` model is a refusing-capable upstream


def _parts(response: Response) -> list[Any]:
    return [part for item in response.output if item.type == "message" for part in item.content]


def test_a_refusal_is_a_refusal_part_and_the_conversation_goes_on(client: openai.OpenAI) -> None:
    refused = client.responses.create(model=RECORDED, input=f"{REFUSAL_TRIGGER}, now")
    Response.model_validate(refused.model_dump())
    assert [(p.type, getattr(p, "refusal", None)) for p in _parts(refused)] == [("refusal", REFUSAL)]
    assert refused.output_text == ""  # the SDK's text of the answer: a refusal holds none
    stored = client.responses.retrieve(refused.id)
    assert [p.type for p in _parts(stored)] == ["refusal"]

    after = client.responses.create(model=RECORDED, input="Then tell me the weather.", previous_response_id=refused.id)
    assert after.status == "completed"
    assert [p.type for p in _parts(after)] == ["output_text"]


def test_a_refusal_streams_as_refusal_events(client: openai.OpenAI) -> None:
    events = list(client.responses.create(model=RECORDED, input=f"{REFUSAL_TRIGGER}, now", stream=True))
    for event in events:
        validate(ResponseStreamEvent, event.model_dump(mode="json"))
    kinds = [e.type for e in events]
    assert "response.output_text.delta" not in kinds
    refusal = [e for e in events if e.type.startswith("response.refusal.")]
    assert [e.type for e in refusal] == ["response.refusal.delta", "response.refusal.done"]
    assert refusal[0].delta == refusal[1].refusal == REFUSAL  # type: ignore[union-attr]
    added = kinds.index("response.content_part.added")
    assert added < kinds.index("response.refusal.delta") < kinds.index("response.content_part.done")
    assert kinds[-1] == "response.completed"
    final = events[-1].response  # type: ignore[union-attr]
    assert [(p.type, getattr(p, "refusal", None)) for p in _parts(final)] == [("refusal", REFUSAL)]
