"""Fields the official client sends that Switchyard once refused: Responses ``custom`` tools (accepted, echoed and
never called, as in chat), ``access_programs`` in the SDK's shape, and a chat assistant message's
``reasoning_content`` (accepted and dropped: no served model reasons)."""

from __future__ import annotations

from typing import Any

import openai
import pytest

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
CUSTOM_TOOL = {
    "type": "custom",
    "name": "run_sql",
    "description": "Runs one SQL statement.",
    "format": {"type": "grammar", "syntax": "lark", "definition": "start: /SELECT .+/"},
}


def _sdk(client: Any, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url="http://switchyard.test/v1", api_key=key, http_client=client, max_retries=0)


async def test_a_custom_tool_is_accepted_echoed_and_never_called(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    sdk = _sdk(client, tenant.keys["owner"])
    response = await sdk.responses.create(
        model=MODEL,
        input="Please use run_sql to count the users.",
        tools=[CUSTOM_TOOL, {"type": "custom", "name": "free_text"}],  # type: ignore[list-item]
        tool_choice={"type": "custom", "name": "run_sql"},
        max_output_tokens=8,
    )
    assert response.status in ("completed", "incomplete")
    assert [item.type for item in response.output] == ["message"]
    assert [(tool.type, getattr(tool, "name", None)) for tool in response.tools] == [
        ("custom", "run_sql"),
        ("custom", "free_text"),
    ]


@pytest.mark.parametrize(
    ("tool", "param"),
    [
        ({"type": "custom"}, "tools[0].name"),
        ({**CUSTOM_TOOL, "format": {"type": "grammar", "syntax": "ebnf", "definition": "x"}}, "tools[0].format"),
        ({**CUSTOM_TOOL, "format": {"type": "grammar", "syntax": "lark"}}, "tools[0].format"),
    ],
)
async def test_a_malformed_custom_tool_is_refused_by_name(
    client: Any, make_tenant: Any, tool: dict[str, Any], param: str
) -> None:
    tenant = await make_tenant()
    body = {"model": MODEL, "input": "hi", "tools": [tool]}
    refused = await client.post("/v1/responses", json=body, headers=tenant.headers("developer"))
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"] == param


async def test_access_programs_is_the_sdks_object(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    sdk = _sdk(client, tenant.keys["owner"])
    response = await sdk.responses.create(
        model=MODEL, input="hi", access_programs={"cyber": "standard"}, max_output_tokens=4
    )
    assert response.status in ("completed", "incomplete")
    body = {"model": MODEL, "input": "hi", "access_programs": {"cyber": "crimson"}}
    refused = await client.post("/v1/responses", json=body, headers=tenant.headers("developer"))
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["param"].startswith("access_programs")


async def test_reasoning_content_of_an_assistant_message_is_accepted_and_dropped(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    sdk = _sdk(client, tenant.keys["owner"])
    messages: list[Any] = [
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3 + 3?"},
    ]
    plain = await sdk.chat.completions.create(model=MODEL, messages=messages, max_tokens=2, seed=1)
    messages[1] = {**messages[1], "reasoning_content": "Two and two make four; a long chain of thought. " * 20}
    with_reasoning = await sdk.chat.completions.create(model=MODEL, messages=messages, max_tokens=2, seed=1)
    assert plain.usage is not None
    assert with_reasoning.usage is not None
    assert with_reasoning.usage.prompt_tokens == plain.usage.prompt_tokens  # dropped: neither counted nor sent
