"""The live simulated fleet's prefix cache: prompts carry the block hashes of their actual tokens, a repeated prompt
reads them on the replica that served it (cached tokens on the receipt, less compute), the router's session hint
keeps a session together while nothing is cached, and the router's state stays bounded."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from switchyard.accelerator.pool import DEFAULT_FLEET, AcceleratorPool, ComputeReceipt, DeploymentSpec, InferenceRequest
from switchyard.accelerator.pool.echo_upstream import CACHED_PROMPT_TOKENS
from switchyard.accelerator.pool.prompt_blocks import PROMPT_BLOCK_TOKENS, prompt_block_hashes
from switchyard.accelerator.pool.sim_backend import SimulatedDeployment
from switchyard.accelerator.pool.tokens import count_prompt_tokens
from switchyard.accelerator.pool.upstream_backend import upstream_cache_key
from switchyard.accelerator.sim.cluster import Cluster
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.kv_router import KvAwareRouter
from switchyard.accelerator.sim.requests import Request

SPEC = DEFAULT_FLEET[0]  # Llama-3.1-8B, two replicas
INSTRUCTIONS = "You are the support desk's agent; quote the policy and the order number. " * 80
TOOLS = [{"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object"}}}]


def _request(request_id: str, messages: list[dict[str, Any]], **fields: Any) -> InferenceRequest:
    fields.setdefault("tenant", "ten_a")
    return InferenceRequest(request_id=request_id, model=SPEC.name, messages=messages, max_tokens=8, **fields)


async def _receipt(backend: SimulatedDeployment, request: InferenceRequest) -> ComputeReceipt:
    events = [event async for event in backend.generate(request)]
    assert isinstance(events[-1], ComputeReceipt)
    return events[-1]


def test_block_hashes_follow_the_prompts_tokens_and_its_tenant() -> None:
    history = [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": "Where is order 41?"}]
    turn = [*history, {"role": "assistant", "content": "On its way."}, {"role": "user", "content": "And 42?"}]
    first = prompt_block_hashes("ten_a", history, TOOLS)
    second = prompt_block_hashes("ten_a", turn, TOOLS)
    assert len(first) == count_prompt_tokens(history, TOOLS) // PROMPT_BLOCK_TOKENS  # full blocks only
    assert second[: len(first) - 1] == first[:-1]  # the next turn re-sends the history: its blocks are the same
    assert prompt_block_hashes("ten_a", history) != first[: len(prompt_block_hashes("ten_a", history))]  # no tools
    assert not set(prompt_block_hashes("ten_b", history, TOOLS)) & set(first)  # another tenant shares nothing


async def test_a_repeated_prompt_reads_its_prefix_on_the_replica_that_served_it() -> None:
    backend = SimulatedDeployment(SPEC, time_scale=0)
    messages = [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": "Where is order 41?"}]
    first = await _receipt(backend, _request("r1", messages, tools=TOOLS))
    again = await _receipt(backend, _request("r2", messages, tools=TOOLS))
    elsewhere = await _receipt(backend, _request("r3", messages, tools=TOOLS, tenant="ten_b"))
    assert backend.spec.policy == "kv_aware"
    assert first.cached_tokens == 0
    assert again.replica == first.replica
    assert first.prompt_tokens - PROMPT_BLOCK_TOKENS <= again.cached_tokens < again.prompt_tokens
    assert again.chip_us < first.chip_us
    assert again.ttft_ms < first.ttft_ms
    assert again.usage()["prompt_tokens_details"] == {"cached_tokens": again.cached_tokens}
    assert elsewhere.cached_tokens == 0
    # the budget hold's bound still covers an uncached prompt in the cache's block layout
    assert first.chip_us <= backend.max_chip_us(first.prompt_tokens, first.completion_tokens)


async def test_the_session_hint_keeps_a_session_on_its_replica_while_nothing_is_cached() -> None:
    backend = SimulatedDeployment(SPEC, time_scale=0)

    def ask(n: int, session: str) -> InferenceRequest:  # every prompt different: nothing is ever cached
        return _request(f"r{n}", [{"role": "user", "content": f"question {n} " * 400}], session=session)

    alpha, beta = await asyncio.gather(_receipt(backend, ask(1, "alpha")), _receipt(backend, ask(2, "beta")))
    assert alpha.replica != beta.replica  # arriving together, the second went to the idle replica
    # now beta's turn arrives first: by load alone it would take the first idle replica, alpha's
    beta_again, alpha_again = await asyncio.gather(
        _receipt(backend, ask(3, "beta")), _receipt(backend, ask(4, "alpha"))
    )
    assert (beta_again.replica, alpha_again.replica) == (beta.replica, alpha.replica)
    assert beta_again.cached_tokens == alpha_again.cached_tokens == 0


def test_the_router_forgets_the_least_recently_seen_session_past_its_bound() -> None:
    deployment = make_deployment(SPEC.model, SPEC.instance, SPEC.tp)
    busy, idle = Cluster(deployment, 2), Cluster(deployment, 2)
    busy.replicas[0].submit(Request(0, 0.0, 4000, 10))  # replica 0 has a prefill to run: sessions start on 1

    def followed(max_sessions: int) -> int:
        router = KvAwareRouter(max_sessions=max_sessions)
        assert router.choose(Request(1, 0.0, 100, 10, session="a"), busy.replicas) == 1
        assert router.choose(Request(2, 0.0, 100, 10, session="b"), busy.replicas) == 1
        return router.choose(Request(3, 0.0, 100, 10, session="a"), idle.replicas)

    assert followed(max_sessions=2) == 1  # remembered: back to its replica
    assert followed(max_sessions=1) == 0  # forgotten when "b" came: the idle tie goes to the first replica


def test_the_default_fleets_simulated_deployments_route_by_kv_cache() -> None:
    assert {spec.policy for spec in DEFAULT_FLEET} == {"kv_aware"}
    assert replace(SPEC, policy="least_load").policy == "least_load"  # still a choice per deployment


@pytest.mark.parametrize("stream", [True, False])
async def test_an_upstreams_own_cached_tokens_are_passed_through(fake_upstream: Any, stream: bool) -> None:
    spec = DeploymentSpec(name="up", backend="openai-compatible", base_url=fake_upstream.base_url, upstream_model="m")
    pool = AcceleratorPool.from_specs([spec])
    try:
        receipts = []
        for parameters in ({"max_tokens": 3, "prompt_cache_key": "k"}, {"max_tokens": 3}):
            request = InferenceRequest(
                request_id=f"u{len(receipts)}",
                tenant="ten_a",
                model="up",
                messages=[{"role": "user", "content": "hi"}],
                parameters=parameters,
                stream=stream,
            )
            events = [event async for event in pool.submit(request)]
            assert isinstance(events[-1], ComputeReceipt)
            receipts.append(events[-1])
        reported, silent = receipts
        assert reported.cached_tokens == CACHED_PROMPT_TOKENS  # the upstream said so
        assert silent.cached_tokens == 0  # an upstream that says nothing of a cache read none
    finally:
        await pool.aclose()


async def test_an_agents_session_reaches_an_upstream_as_an_opaque_prompt_cache_key_per_tenant(
    fake_upstream: Any,
) -> None:
    """Requests Switchyard composes (agent runs) carry their session to an ``openai-compatible`` upstream as
    ``prompt_cache_key``, hashed with the tenant: the same thread keeps one key, another tenant's gets another."""
    spec = DeploymentSpec(name="up", backend="openai-compatible", base_url=fake_upstream.base_url, upstream_model="m")
    pool = AcceleratorPool.from_specs([spec])
    try:
        for n, (tenant, session) in enumerate(
            [("ten_a", "thr_1"), ("ten_a", "thr_1"), ("ten_b", "thr_1"), ("ten_a", None)]
        ):
            request = InferenceRequest(
                request_id=f"s{n}", tenant=tenant, model="up", messages=[{"role": "user", "content": "hi"}],
                max_tokens=3, session=session,
            )  # fmt: skip
            [event async for event in pool.submit(request)]
    finally:
        await pool.aclose()
    keys = [body.get("prompt_cache_key") for body in fake_upstream.requests[-4:]]
    assert keys[0] == keys[1] == upstream_cache_key("ten_a", "thr_1")
    assert keys[2] not in (None, keys[0])
    assert keys[3] is None  # no session, no key
    assert "thr_1" not in keys[0]
    assert "ten_a" not in keys[0]
