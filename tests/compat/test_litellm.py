"""LiteLLM's `openai/` provider pointed at Switchyard completes a chat (streamed and not)."""

from __future__ import annotations

import os
from typing import Any

import pytest

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.fixture(scope="module")
def litellm() -> Any:
    # No internet here: LiteLLM must use its bundled cost map, and must not try to fetch a Llama tokenizer from
    # the Hugging Face hub (it does for model names with "llama" in them, retrying for ~25 s).
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import litellm

    litellm.telemetry = False
    return litellm


def test_litellm_openai_provider(litellm: Any, live_server: Any) -> None:
    kwargs = {
        "model": f"openai/{MODEL}",
        "api_base": live_server.base_url,
        "api_key": live_server.tenant_key,
        "messages": [{"role": "user", "content": "hello from litellm"}],
        "max_tokens": 6,
        "seed": 11,
    }
    response = litellm.completion(**kwargs)
    assert response.choices[0].finish_reason == "length"
    assert response.usage.completion_tokens == 6
    streamed = "".join(c.choices[0].delta.content or "" for c in litellm.completion(stream=True, **kwargs))
    assert streamed == response.choices[0].message.content
