"""Chat completions at full fidelity, through the official `openai` client against a real Switchyard server.

Every parameter of OpenAI's chat-completions request is accepted; an `openai-compatible` upstream (a recording
server on 127.0.0.1) receives each one exactly as the client sent it; the `sim` model (served by a fleet process, as
`switchyard up` runs it) honours `response_format` and `stop`, so `chat.completions.parse` works against it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import httpx
import jsonschema
import openai
import pytest
import uvicorn
from openai.types.chat.completion_create_params import CompletionCreateParamsBase
from pydantic import BaseModel

from switchyard.accelerator.pool import AcceleratorPool, DeploymentSpec, FleetServer
from switchyard.platform.app import create_app
from switchyard.platform.bootstrap import bootstrap
from switchyard.platform.db import Database
from switchyard.platform.settings import Settings

SIM = "sim-small"
RECORDED = "recorded"
SIM_SPEC = {"name": SIM, "model": "meta-llama/Llama-3.1-8B", "instance": "trn2.3xlarge", "tp": 4}


def _serve(app: Any) -> tuple[uvicorn.Server, threading.Thread, int]:
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.02)
    return server, thread, int(server.servers[0].sockets[0].getsockname()[1])


@pytest.fixture(scope="module")
def base_url(sqlite_template: Path, tmp_path_factory: pytest.TempPathFactory, fake_upstream: Any) -> Iterator[str]:
    """Switchyard serving the sim model from a fleet process and `recorded` from the recording upstream."""
    fleet, fleet_thread, fleet_port = _serve(FleetServer(AcceleratorPool.from_specs([DeploymentSpec(**SIM_SPEC)])))
    data = tmp_path_factory.mktemp("fidelity")
    shutil.copyfile(sqlite_template, data / "switchyard.db")
    recorded = {"name": RECORDED, "backend": "openai-compatible", "base_url": fake_upstream.base_url}
    (data / "fleet.json").write_text(json.dumps({"deployments": [SIM_SPEC, recorded | {"upstream_model": "real"}]}))
    settings = Settings(
        data_dir=data,
        database_url=f"sqlite+aiosqlite:///{data / 'switchyard.db'}",
        fleet_file=str(data / "fleet.json"),
        fleet_url=f"http://127.0.0.1:{fleet_port}",
        time_scale=0,
    )

    async def first_start() -> Any:
        database = Database(settings.database_url)
        try:
            return await bootstrap(database)
        finally:
            await database.dispose()

    keys = asyncio.run(first_start())
    api, api_thread, api_port = _serve(create_app(settings))
    yield f"http://127.0.0.1:{api_port}/v1|{keys.tenant_key}"
    api.should_exit = True
    api_thread.join(timeout=20)
    fleet.should_exit = True
    fleet_thread.join(timeout=20)


@pytest.fixture(scope="module")
def client(base_url: str) -> Iterator[openai.OpenAI]:
    url, key = base_url.split("|")
    with openai.OpenAI(base_url=url, api_key=key, max_retries=0) as sdk:
        yield sdk


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "strict": True,
    },
}
GREP = {"type": "custom", "custom": {"name": "grep", "format": {"type": "text"}}}
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
CUSTOM_CALL = {"id": "call_2", "type": "custom", "custom": {"name": "grep", "input": "TODO"}}
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"}}
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
    "required": ["city", "celsius"],
    "additionalProperties": False,
}
EVERY_MESSAGE: list[Any] = [
    {"role": "system", "content": "Be brief.", "name": "house-rules"},
    {"role": "developer", "content": [{"type": "text", "text": "Answer in JSON."}]},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in this picture?", "cache_control": {"type": "ephemeral"}},
            IMAGE,
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
            {"type": "file", "file": {"file_id": "file-1", "filename": "notes.pdf"}},
        ],
        "name": "alice",
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [CALL, CUSTOM_CALL],
        "function_call": None,
        "audio": None,
        "refusal": None,
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C", "name": "get_weather"},
    {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "no matches"}]},
    {"role": "assistant", "content": "", "function_call": {"name": "lookup", "arguments": "{}"}},
    {"role": "function", "name": "lookup", "content": "nothing"},
    {"role": "user", "content": "And tomorrow?"},
]
EVERY_PARAMETER: dict[str, Any] = {
    "messages": EVERY_MESSAGE,
    "audio": {"format": "mp3", "voice": "alloy"},
    "frequency_penalty": 0.5,
    "function_call": "auto",
    "functions": [{"name": "lookup", "description": "Look a word up", "parameters": {"type": "object"}}],
    "logit_bias": {"50256": -100},
    "logprobs": True,
    "max_completion_tokens": 50,
    "max_tokens": 50,
    "metadata": {"team": "search"},
    "modalities": ["text"],
    "moderation": {"model": "omni-moderation-latest", "policy": {"input": {"mode": "score"}}},
    "n": 1,
    "parallel_tool_calls": False,
    "prediction": {"type": "content", "content": "It will be sunny."},
    "presence_penalty": -0.5,
    "prompt_cache_key": "weather-v1",
    "prompt_cache_options": {"mode": "implicit", "ttl": "30m"},
    "prompt_cache_retention": "24h",
    "reasoning_effort": "low",
    "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": ANSWER_SCHEMA}},
    "safety_identifier": "user-7f3a",
    "seed": 11,
    "service_tier": "flex",
    "stop": ["\n\n", "END"],
    "store": False,
    "stream_options": {"include_usage": False},
    "temperature": 0.2,
    "tool_choice": {
        "type": "allowed_tools",
        "allowed_tools": {"mode": "auto", "tools": [{"type": "function", "function": {"name": "get_weather"}}]},
    },
    "tools": [WEATHER, GREP],
    "top_logprobs": 3,
    "top_p": 0.9,
    "user": "alice@example.com",
    "verbosity": "low",
    "web_search_options": {
        "search_context_size": "low",
        "user_location": {"type": "approximate", "approximate": {"city": "Oslo", "country": "NO"}},
    },
}


def test_the_test_sends_every_parameter_of_openais_request() -> None:
    assert set(CompletionCreateParamsBase.__annotations__) - {"model"} <= set(EVERY_PARAMETER)


def test_an_upstream_receives_every_parameter_exactly_as_sent(client: openai.OpenAI, fake_upstream: Any) -> None:
    completion = client.chat.completions.create(
        model=RECORDED, **EVERY_PARAMETER, extra_body={"priority": "interactive"}
    )
    assert completion.choices[0].finish_reason == "tool_calls"
    received = fake_upstream.requests[-1]
    assert received == {"model": "real", **EVERY_PARAMETER}  # nothing dropped, added or defaulted; no `priority`

    stream = client.chat.completions.create(
        model=RECORDED,
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_obfuscation": False},
        temperature=0,
    )
    assert [c for c in stream if c.usage is not None] == []  # the client did not ask for usage
    received = fake_upstream.requests[-1]
    assert received["temperature"] == 0
    assert received["stream"] is True
    # the usage chunk is what compute is metered by: always asked of the upstream
    assert received["stream_options"] == {"include_obfuscation": False, "include_usage": True}


PREVIOUSLY_REFUSED: dict[str, dict[str, Any]] = {
    "tool message name": {
        "messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny", "name": "get_weather"},
        ]
    },
    "image_url part": {"messages": [{"role": "user", "content": [{"type": "text", "text": "see"}, IMAGE]}]},
    "cache_control on a text part": {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}
        ]
    },
    "function_call and audio null": {
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello", "function_call": None, "audio": None},
            {"role": "user", "content": "again"},
        ]
    },
    "reasoning_effort": {"reasoning_effort": "minimal"},
    "verbosity": {"verbosity": "high"},
    "prompt_cache_key": {"prompt_cache_key": "k"},
    "safety_identifier": {"safety_identifier": "s"},
    "modalities": {"modalities": ["text"]},
    "prediction": {"prediction": {"type": "content", "content": [{"type": "text", "text": "draft"}]}},
    "web_search_options": {"web_search_options": {}},
    "include_obfuscation": {"stream": True, "stream_options": {"include_obfuscation": True}},
    "legacy functions": {
        "messages": [
            {"role": "user", "content": "look it up"},
            {"role": "assistant", "content": None, "function_call": {"name": "lookup", "arguments": "{}"}},
            {"role": "function", "name": "lookup", "content": "found"},
        ],
        "functions": [{"name": "lookup", "parameters": {"type": "object", "properties": {}}}],
        "function_call": {"name": "lookup"},
    },
    "allowed_tools": {
        "tools": [WEATHER],
        "tool_choice": {
            "type": "allowed_tools",
            "allowed_tools": {"mode": "required", "tools": [{"type": "function", "function": {"name": "get_weather"}}]},
        },
    },
    "n": {"n": 1},
    "service_tier": {"service_tier": "auto"},
    "store": {"store": True},
    "metadata": {"metadata": {"k": "v"}},
    "max_completion_tokens": {"max_completion_tokens": 8},
    "audio": {"audio": {"format": "wav", "voice": {"id": "voice_1"}}},
}


@pytest.mark.parametrize("fields", PREVIOUSLY_REFUSED.values(), ids=PREVIOUSLY_REFUSED.keys())
def test_current_request_fields_are_accepted(client: openai.OpenAI, fields: dict[str, Any]) -> None:
    request = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 8} | fields
    if request.get("stream"):
        chunks = list(client.chat.completions.create(model=SIM, **request))
        assert any(c.choices and c.choices[0].finish_reason for c in chunks)
    else:
        completion = client.chat.completions.create(model=SIM, **request)
        assert completion.choices[0].finish_reason in ("length", "stop", "tool_calls")


@pytest.mark.parametrize(
    ("fields", "named"), [({"n": 2}, "n"), ({"modalities": ["text", "audio"]}, "modalities")], ids=["n", "audio"]
)
def test_what_cannot_be_honoured_is_refused_by_name(client: openai.OpenAI, fields: dict[str, Any], named: str) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model=SIM, messages=[{"role": "user", "content": "hi"}], **fields)
    assert named in str(refused.value)


class Location(BaseModel):
    city: str
    country: str | None


class CalendarEvent(BaseModel):
    name: str
    day: Literal["monday", "tuesday"]
    participants: list[str]
    location: Location
    minutes: int


def test_parse_gives_a_validated_object_from_the_sim(client: openai.OpenAI) -> None:
    completion = client.chat.completions.parse(
        model=SIM,
        messages=[{"role": "user", "content": "Alice and Bob meet on Monday."}],
        response_format=CalendarEvent,
    )
    message = completion.choices[0].message
    assert completion.choices[0].finish_reason == "stop"
    assert isinstance(message.parsed, CalendarEvent)
    assert message.parsed == CalendarEvent.model_validate_json(message.content or "")


def test_json_modes_and_stop_from_the_sim(client: openai.OpenAI) -> None:
    def ask(**fields: Any) -> Any:
        return client.chat.completions.create(
            model=SIM, messages=[{"role": "user", "content": "JSON please"}], **fields
        )

    as_object = ask(response_format={"type": "json_object"})
    assert isinstance(json.loads(as_object.choices[0].message.content or ""), dict)
    schema_format = {"type": "json_schema", "json_schema": {"name": "answer", "schema": ANSWER_SCHEMA, "strict": True}}
    streamed = ask(response_format=schema_format, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
    jsonschema.validate(json.loads(text), ANSWER_SCHEMA)
    full = ask(max_tokens=40, seed=5).choices[0].message.content or ""
    word = full.split()[3]
    stopped = ask(max_tokens=40, seed=5, stop=[word])
    assert stopped.choices[0].finish_reason == "stop"
    assert stopped.choices[0].message.content == full[: full.index(word)].rstrip()


def test_sim_reply_counts_image_parts_as_prompt_tokens(client: openai.OpenAI) -> None:
    text = [{"type": "text", "text": "see"}]
    plain = client.chat.completions.create(model=SIM, messages=[{"role": "user", "content": text}], max_tokens=2)
    pictured = client.chat.completions.create(
        model=SIM, messages=[{"role": "user", "content": [*text, IMAGE]}], max_tokens=2
    )
    assert plain.usage is not None
    assert pictured.usage is not None
    assert pictured.usage.prompt_tokens > plain.usage.prompt_tokens


def test_raw_requests_keep_unknown_fields_refused(base_url: str) -> None:
    url, key = base_url.split("|")
    response = httpx.post(
        f"{url}/chat/completions",
        json={"model": SIM, "messages": [{"role": "user", "content": "hi"}], "temprature": 0.5},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert response.status_code == 400
    assert "temprature" in response.text


def test_litellm_named_tool_message_and_structured_output(base_url: str, fake_upstream: Any) -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no internet here (see test_litellm.py)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import litellm

    litellm.telemetry = False
    url, key = base_url.split("|")
    messages = [
        {"role": "user", "content": "weather in Oslo?"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "sunny, 21 C"},
    ]
    schema_format = {"type": "json_schema", "json_schema": {"name": "answer", "schema": ANSWER_SCHEMA, "strict": True}}
    common = {
        "api_base": url,
        "api_key": key,
        "messages": messages,
        "tools": [WEATHER],
        "response_format": schema_format,
    }
    with openai.OpenAI(base_url=url, api_key=key, max_retries=0) as sdk:  # closed here, not cached by LiteLLM
        answer = litellm.completion(model=f"openai/{SIM}", client=sdk, **common)
        jsonschema.validate(json.loads(answer.choices[0].message.content), ANSWER_SCHEMA)
        chunks = litellm.completion(model=f"openai/{SIM}", client=sdk, stream=True, **common)
        assert "".join(c.choices[0].delta.content or "" for c in chunks) == answer.choices[0].message.content
        litellm.completion(model=f"openai/{RECORDED}", client=sdk, temperature=0.3, **common)
    received = fake_upstream.requests[-1]
    assert received["messages"][2]["name"] == "get_weather"
    assert received["response_format"] == schema_format
    assert received["temperature"] == 0.3


def test_a_response_reaches_an_upstream_with_every_field_it_maps_to(client: openai.OpenAI, fake_upstream: Any) -> None:
    """`/v1/responses` on an `openai-compatible` deployment: each model call is a chat completion carrying the
    response's instructions, input, tools, tool_choice, parallel_tool_calls, sampling parameters, output cap and
    text.format (as `response_format`)."""
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    before = len(fake_upstream.requests)
    client.responses.create(
        model=RECORDED,
        instructions="Be brief.",
        input=[{"role": "user", "content": [{"type": "input_text", "text": "Where?"}]}],
        tools=[{"type": "function", "name": "get_weather", "parameters": WEATHER["function"]["parameters"]}],  # type: ignore[index]
        tool_choice="auto",
        parallel_tool_calls=False,
        temperature=0.3,
        top_p=0.9,
        max_output_tokens=64,
        text={"format": {"type": "json_schema", "name": "place", "schema": schema, "strict": True}},
    )
    received = fake_upstream.requests[before]  # the response's first model call
    assert received["model"] == "real"
    assert received["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Where?"},
    ]
    assert [tool["function"]["name"] for tool in received["tools"]] == ["get_weather"]
    assert received["tools"][0]["function"]["parameters"] == WEATHER["function"]["parameters"]  # type: ignore[index]
    assert received["tool_choice"] == "auto"
    assert received["parallel_tool_calls"] is False
    assert (received["temperature"], received["top_p"], received["max_tokens"]) == (0.3, 0.9, 64)
    assert received["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "place", "schema": schema, "strict": True},
    }
