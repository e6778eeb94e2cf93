"""Model aliases without ``/``: every route that takes a model accepts them, answers and usage name the served model,
and a fleet whose aliases would name two models is refused when it is loaded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest
from sqlalchemy import select

from switchyard.accelerator.errors import ConfigurationError
from switchyard.accelerator.pool import DEFAULT_FLEET, AcceleratorPool, DeploymentSpec, model_aliases, parse_fleet
from switchyard.agents import Message
from switchyard.agents.model import ModelRequest
from switchyard.agents.pool_model import PoolModel
from switchyard.platform.admission import ModelNotFound, model_backend
from switchyard.platform.db import UNSCOPED
from switchyard.platform.models import UsageEvent

CHAT = "meta-llama/Llama-3.1-8B-Instruct"
ALIAS = "llama-3.1-8b-instruct"


def _sdk(client: Any, key: str) -> openai.AsyncOpenAI:
    """The official client, over the app's in-process transport."""
    return openai.AsyncOpenAI(base_url="http://switchyard.test/v1", api_key=key, http_client=client, max_retries=0)


def test_the_default_fleet_answers_to_each_names_last_segment_lower_cased() -> None:
    assert model_aliases(DEFAULT_FLEET) == {
        "llama-3.1-8b-instruct": "meta-llama/Llama-3.1-8B-Instruct",
        "llama-3.3-70b-instruct": "meta-llama/Llama-3.3-70B-Instruct",
        "bge-large-en-v1.5": "BAAI/bge-large-en-v1.5",
        "qwen3-embedding-8b": "Qwen/Qwen3-Embedding-8B",
    }


async def test_the_openai_client_chats_with_an_alias_and_usage_keeps_the_served_name(
    client: Any, make_tenant: Any
) -> None:
    tenant = await make_tenant()
    sdk = _sdk(client, tenant.keys["developer"])

    completion = await sdk.chat.completions.create(
        model=ALIAS, messages=[{"role": "user", "content": "Say something"}], max_tokens=5, seed=3
    )
    retrieved = await sdk.models.retrieve(ALIAS)
    listed = [m.id async for m in sdk.models.list()]
    embedded = await sdk.embeddings.create(model="bge-large-en-v1.5", input="hi", encoding_format="float")

    # the answer names the model that served it, as OpenAI answers gpt-4o with its dated snapshot
    assert completion.model == CHAT
    assert completion.choices[0].message.content
    assert embedded.model == "BAAI/bge-large-en-v1.5"
    assert retrieved.id == ALIAS  # the entry asked for, like OpenAI's /v1/models/gpt-4o
    assert listed.index(ALIAS) == listed.index(CHAT) + 1  # each alias listed after its model, as its own entry
    assert {"bge-large-en-v1.5", "qwen3-embedding-8b", "llama-3.3-70b-instruct"} <= set(listed)
    await client.app.state.gateway.drain()
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        events = list((await session.execute(select(UsageEvent))).scalars())
    assert sorted(e.model for e in events) == ["BAAI/bge-large-en-v1.5", CHAT]


async def test_an_unknown_alias_is_404_model_not_found(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    sdk = _sdk(client, tenant.keys["developer"])
    with pytest.raises(openai.NotFoundError) as chat:
        await sdk.chat.completions.create(model="llama-3.1-8b", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.NotFoundError) as get:
        await sdk.models.retrieve("llama-9-instruct")

    for refused in (chat.value, get.value):
        assert isinstance(refused.body, dict)
        assert (refused.body["code"], refused.body["param"]) == ("model_not_found", "model")
    assert isinstance(chat.value.body, dict)
    assert CHAT in chat.value.body["message"]  # the served name is suggested


async def test_an_agent_may_name_its_model_by_alias(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    created = await client.post("/v1/agents", json={"name": "a", "model": ALIAS}, headers=tenant.headers("developer"))
    refused = await client.post(
        "/v1/agents", json={"name": "b", "model": "qwen3-embedding-8b"}, headers=tenant.headers("developer")
    )
    assert created.status_code == 201, created.text
    assert refused.status_code == 400, refused.text  # the alias of an embedding model is an embedding model
    assert refused.json()["error"]["code"] == "model_not_supported"


async def test_an_agent_runs_model_calls_on_its_alias_and_its_receipts_name_the_served_model() -> None:
    pool = AcceleratorPool.from_specs(DEFAULT_FLEET[:1], time_scale=0)
    model = PoolModel(pool, tenant="tenant-a")
    try:
        answer = await model.request(
            ModelRequest(model=ALIAS, messages=(Message.user("hi"),), request_id="run_step_0", params={"max_tokens": 4})
        )
    finally:
        await pool.aclose()
    assert answer.message.content
    assert [r.model for r in model.receipts] == [CHAT]


def _fleet(*deployments: dict[str, Any]) -> dict[str, Any]:
    return {"deployments": [{"model": "meta-llama/Llama-3.1-8B", **d} for d in deployments]}


@pytest.mark.parametrize(
    ("fleet", "message"),
    [
        (
            _fleet({"name": "a/Chat"}, {"name": "b", "aliases": ["a/Chat"]}),
            "alias 'a/Chat' already names the model 'a/Chat'",
        ),
        (
            _fleet({"name": "a/Chat"}, {"name": "b", "aliases": ["chat"]}),
            "alias 'chat' already names the model 'a/Chat'",
        ),
        (
            _fleet({"name": "a", "aliases": ["x"]}, {"name": "b", "aliases": ["x"]}),
            "alias 'x' already names the model 'a'",
        ),
        (_fleet({"name": "a", "aliases": "x"}), "`aliases` is a list of strings"),
        (_fleet({"name": "a", "aliases": [""]}), "aliases are non-empty strings"),
    ],
)
def test_a_fleet_whose_aliases_name_two_models_is_refused_when_loaded(fleet: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parse_fleet(fleet)


def test_a_derived_alias_two_models_would_share_or_that_is_a_name_goes_to_neither() -> None:
    specs = parse_fleet(
        _fleet(
            {"name": "org/Llama"}, {"name": "other/llama"}, {"name": "team/Chat"}, {"name": "chat", "aliases": ["c"]}
        )
    )
    assert model_aliases(specs) == {"c": "chat"}


def test_listing_a_models_own_derived_alias_is_allowed() -> None:
    specs = parse_fleet(_fleet({"name": "org/Chat", "aliases": ["chat", "assistant"]}))
    assert model_aliases(specs) == {"chat": "org/Chat", "assistant": "org/Chat"}


def test_an_alias_of_another_tenants_model_is_not_found_like_its_name() -> None:
    pool = AcceleratorPool.from_specs(
        [DeploymentSpec(name="acme/Private", model="meta-llama/Llama-3.1-8B", tenants=("acme",))], time_scale=0
    )
    assert model_backend(pool, "private", "acme").name == "acme/Private"
    for model in ("private", "acme/Private"):
        with pytest.raises(ModelNotFound) as refused:
            model_backend(pool, model, "globex")
        assert "acme" not in refused.value.message.replace(model, "")  # the hint names nothing of acme's


@pytest.fixture
def listed_aliases(tmp_path: Path) -> str:
    """A fleet file whose one deployment lists two aliases besides its derived one."""
    path = tmp_path / "fleet.json"
    path.write_text(json.dumps(_fleet({"name": CHAT, "aliases": ["default", "gpt-4o-mini"]})))
    return str(path)


@pytest.fixture
def settings(database_url: str, tmp_path: Path, request: pytest.FixtureRequest, shared_apps: Any) -> Any:
    fleet_file = request.getfixturevalue("listed_aliases") if "listed_aliases" in request.fixturenames else ""
    return shared_apps.settings(data_dir=tmp_path / "data", database_url=database_url, fleet_file=fleet_file)


async def test_listed_aliases_of_a_fleet_file_are_served_and_listed(
    client: Any, make_tenant: Any, listed_aliases: str
) -> None:
    tenant = await make_tenant()
    sdk = _sdk(client, tenant.keys["developer"])
    completion = await sdk.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], max_tokens=3
    )
    assert completion.model == CHAT
    assert [m.id async for m in sdk.models.list()] == [CHAT, ALIAS, "default", "gpt-4o-mini"]
