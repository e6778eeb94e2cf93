"""Speculative decoding in the fleet file: a trainium-sim deployment's ``draft_model``, ``num_speculative_tokens``
and ``acceptance_rate`` are checked at load (make_deployment's refusals, naming the field) and served: the pool's
simulated decode of a request is faster with a draft the target mostly accepts."""

from __future__ import annotations

from typing import Any

import pytest

from switchyard.accelerator.errors import ConfigurationError
from switchyard.accelerator.pool import AcceleratorPool, ComputeReceipt, InferenceRequest, parse_fleet
from switchyard.accelerator.pool.fleet import simulated_deployment
from switchyard.accelerator.sim.deployment import make_deployment

TARGET, DRAFT = "Qwen/Qwen3-32B", "Qwen/Qwen3-1.7B"
PAIR = "Qwen/Qwen3-32B (target) + Qwen/Qwen3-1.7B (draft)"
PLAIN = {"name": "plain", "model": TARGET, "instance": "trn2.3xlarge", "tp": 4, "replicas": 1}
DRAFTED = PLAIN | {"name": "drafted", "draft_model": DRAFT, "num_speculative_tokens": 7, "acceptance_rate": 0.9}


async def _decode_ms(pool: AcceleratorPool, model: str) -> float:
    messages = [{"role": "user", "content": "tell me a long story " * 10}]
    request = InferenceRequest(
        request_id=f"r-{model}", tenant="t", model=model, messages=messages, max_tokens=64, ignore_eos=True, seed=1
    )
    events = [event async for event in pool.submit(request)]
    receipt = events[-1]
    assert isinstance(receipt, ComputeReceipt)
    assert receipt.completion_tokens == 64
    return receipt.decode_ms


async def test_a_draft_the_target_mostly_accepts_decodes_faster_than_the_target_alone() -> None:
    specs = parse_fleet({"deployments": [PLAIN, DRAFTED]})
    pool = AcceleratorPool.from_specs(specs, time_scale=0)
    try:
        drafted: Any = pool.backend("drafted")
        speculation = drafted.deployment.speculation
        assert speculation is not None
        assert (speculation.draft.model.name, speculation.tokens, speculation.acceptance_rate) == (
            DRAFT,
            7,
            0.9,
        )
        assert pool.backend("plain").deployment.speculation is None  # type: ignore[attr-defined]
        plain_ms, drafted_ms = await _decode_ms(pool, "plain"), await _decode_ms(pool, "drafted")
    finally:
        await pool.aclose()
    assert drafted_ms < plain_ms * 0.6  # 13.4 against 32.6 ms a token at batch 1 (docs/simulator.md)


def test_the_served_deployment_is_make_deployment_s_with_the_fields() -> None:
    (spec,) = parse_fleet({"deployments": [DRAFTED]})
    stated = make_deployment(
        TARGET, "trn2.3xlarge", 4, draft_model=DRAFT, num_speculative_tokens=7, acceptance_rate=0.9
    )
    assert simulated_deployment(spec) == stated
    # a catalog pair keeps its own draft and tokens; the fields replace what they state
    (pair,) = parse_fleet({"deployments": [PLAIN | {"model": PAIR, "acceptance_rate": 0.5}]})
    assert simulated_deployment(pair) == make_deployment(PAIR, "trn2.3xlarge", 4, acceptance_rate=0.5)
    assert simulated_deployment(pair).speculation.tokens == 7  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"draft_model": "no-such-draft", "num_speculative_tokens": 3}, "`draft_model`.*no-such-draft"),
        ({"draft_model": 7, "num_speculative_tokens": 3}, "`draft_model` is a catalog model"),
        ({"draft_model": DRAFT}, "`draft_model`.*num_speculative_tokens"),
        ({"draft_model": DRAFT, "num_speculative_tokens": 0}, "`num_speculative_tokens` is an integer >= 1"),
        ({"draft_model": DRAFT, "num_speculative_tokens": 2.5}, "`num_speculative_tokens` is an integer >= 1"),
        ({"draft_model": DRAFT, "num_speculative_tokens": 3, "acceptance_rate": 1.5}, "`acceptance_rate` is a number"),
        ({"draft_model": DRAFT, "num_speculative_tokens": 3, "acceptance_rate": "high"}, "`acceptance_rate` is a"),
        ({"num_speculative_tokens": 3}, "`num_speculative_tokens`.*has no draft model"),
        ({"acceptance_rate": 0.8}, "`acceptance_rate`.*has no draft model"),
        ({"draft_model": "meta-llama/Llama-3.1-8B", "num_speculative_tokens": 3}, "`draft_model`.*vocabulary"),
    ],
)
def test_a_bad_speculation_field_is_refused_at_load_naming_it(fields: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigurationError, match=f"deployment 'plain'.*{named}"):
        parse_fleet({"deployments": [PLAIN | fields]})


def test_speculation_fields_belong_to_a_simulated_chat_deployment() -> None:
    upstream = {"name": "up", "backend": "openai-compatible", "base_url": "http://127.0.0.1:9/v1", "draft_model": DRAFT}
    with pytest.raises(ConfigurationError, match="deployment 'up': `draft_model` apply to a trainium-sim chat"):
        parse_fleet({"deployments": [upstream]})
    embeddings = {"name": "e", "model": "BAAI/bge-large-en-v1.5", "task": "embeddings", "tp": 1}
    with pytest.raises(ConfigurationError, match="deployment 'e': `acceptance_rate` apply"):
        parse_fleet({"deployments": [embeddings | {"acceptance_rate": 0.5}]})
