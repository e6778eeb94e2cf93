"""The legacy completions API (``POST /v1/completions``) through the clients still on it, against a real Switchyard
server: the ``openai`` client (plain and streamed), LangChain's ``OpenAI`` LLM, LiteLLM's ``text_completion`` and
llama-index's ``OpenAILike`` with its default flags (in a virtual environment of its own: clients/llama_index.txt)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from langchain_openai import OpenAI

from tests.support.client_venvs import client_python, run_client

ALIAS = "llama-3.1-8b-instruct"


@pytest.fixture
def sdk(live_server: Any, api_key: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=live_server.base_url, api_key=api_key, max_retries=0) as client:
        yield client


def test_completions_create_answers_a_text_completion(sdk: openai.OpenAI) -> None:
    completion = sdk.completions.create(model=ALIAS, prompt="Say this is a test", seed=4)
    assert completion.object == "text_completion"
    (choice,) = completion.choices
    assert choice.text
    assert choice.finish_reason in ("stop", "length")
    assert completion.usage is not None
    assert 1 <= completion.usage.completion_tokens <= 16
    listed = sdk.completions.create(model=ALIAS, prompt=["first", "second"], max_tokens=3, n=2)
    assert [c.index for c in listed.choices] == [0, 1, 2, 3]
    token_ids = sdk.completions.create(model=ALIAS, prompt=[[1, 2, 3], [4, 5]], max_tokens=3)
    assert len(token_ids.choices) == 2


def test_streamed_completion_matches_the_whole_one(sdk: openai.OpenAI) -> None:
    whole = sdk.completions.create(model=ALIAS, prompt="Say this is a test", seed=9, max_tokens=8)
    chunks = list(
        sdk.completions.create(
            model=ALIAS,
            prompt="Say this is a test",
            seed=9,
            max_tokens=8,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert "".join(c.choices[0].text for c in chunks if c.choices) == whole.choices[0].text
    assert chunks[-1].usage is not None
    assert whole.usage is not None
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens


def test_unserved_parameters_surface_as_bad_request_naming_them(sdk: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        sdk.completions.create(model=ALIAS, prompt="hi", echo=True)
    assert refused.value.param == "echo"


@pytest.fixture
def langchain_llm(live_server: Any, api_key: str) -> Iterator[OpenAI]:
    # A connection pool of the test's own, closed after it (LangChain's default one is shared and never closed).
    with httpx2.Client() as http:
        yield OpenAI(model=ALIAS, base_url=live_server.base_url, api_key=api_key, max_retries=0, http_client=http)


def test_langchain_openai_llm_invokes_batches_and_streams(langchain_llm: OpenAI) -> None:
    assert langchain_llm.invoke("Say this is a test")
    assert all(langchain_llm.batch(["one", "two", "three"]))  # one request with a list of prompts
    assert "".join(langchain_llm.stream("Say this is a test"))


def test_litellm_text_completion(live_server: Any, api_key: str) -> None:
    # No internet here: LiteLLM must use its bundled cost map and must not fetch a tokenizer from the hub.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import litellm

    litellm.telemetry = False
    response = litellm.text_completion(
        model=f"text-completion-openai/{ALIAS}",
        prompt="Say this is a test",
        api_base=live_server.base_url,
        api_key=api_key,
        max_tokens=6,
    )
    assert response.object == "text_completion"
    assert response.choices[0].text
    assert response.usage.completion_tokens <= 6


@pytest.fixture(scope="module")
def llama_index_python() -> Path:
    return client_python("llama_index")


@pytest.mark.slow  # starts a process
def test_llama_index_openai_like_with_default_flags(llama_index_python: Path, live_server: Any, api_key: str) -> None:
    client = Path(__file__).parent / "clients" / "llama_index_completions.py"
    results = {
        line["call"]: line for line in run_client(llama_index_python, client, live_server.base_url, api_key, ALIAS)
    }
    assert set(results) == {"complete", "stream_complete", "chat"}
    assert all("error" not in result for result in results.values()), results
    assert results["complete"]["object"] == "text_completion"
    assert results["complete"]["text"]
    assert 1 <= results["complete"]["completion_tokens"] <= 16  # it sends no max_tokens: OpenAI's default
    assert results["stream_complete"]["text"]
    assert results["stream_complete"]["pieces"] > 1
    assert results["chat"]["text"]
