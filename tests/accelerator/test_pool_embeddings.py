"""Embedding models on the simulated fleet: catalog numbers, prefill-only passes priced by the cost model,
deterministic unit vectors, and the fleet process serving them over HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from switchyard.accelerator.errors import ConfigurationError
from switchyard.accelerator.pool import (
    EMBEDDING_SHAPES,
    AcceleratorPool,
    ComputeReceipt,
    DeploymentSpec,
    EmbeddingRequest,
    Embeddings,
    FleetServer,
)
from switchyard.accelerator.pool.sim_backend import max_chip_us
from switchyard.accelerator.sim.calibration_data import coefficients_for
from switchyard.accelerator.sim.deployment import make_deployment
from switchyard.accelerator.sim.models import get_model
from switchyard.accelerator.sim.stepcost import StepCost
from tests.support.served import served

BGE = "BAAI/bge-large-en-v1.5"
QWEN = "Qwen/Qwen3-Embedding-8B"
EMBEDDERS = [
    DeploymentSpec(name=BGE, model=BGE, task="embeddings", tp=1),
    DeploymentSpec(name=QWEN, model=QWEN, task="embeddings", tp=4),
]


def test_catalog_embedding_models_match_their_model_cards() -> None:
    bge, qwen = get_model(BGE), get_model(QWEN)
    # BGE-large: 335M parameters (card); ours leaves out biases, norms and position/type embeddings (~2M)
    assert bge.encoder
    assert bge.pooling == "cls"
    assert bge.lm_head_params() == 0
    assert abs(bge.total_params() - 335e6) / 335e6 < 0.01
    # Qwen3-Embedding-8B: the 8B decoder without its LM head, 7.57B parameters in its safetensors
    assert not qwen.encoder
    assert qwen.pooling == "last_token"
    assert qwen.lm_head_params() == 0
    assert abs(qwen.total_params() - 7.57e9) / 7.57e9 < 0.01
    assert (EMBEDDING_SHAPES[BGE].dimensions, EMBEDDING_SHAPES[BGE].max_input_tokens) == (1024, 512)
    assert (EMBEDDING_SHAPES[QWEN].dimensions, EMBEDDING_SHAPES[QWEN].max_input_tokens) == (4096, 32_768)


def test_a_deployment_says_whether_it_serves_embeddings() -> None:
    with pytest.raises(ConfigurationError, match="is an embedding model"):
        DeploymentSpec(name="e", model=BGE, tp=1)
    with pytest.raises(ConfigurationError, match="is not an embedding model"):
        DeploymentSpec(name="c", model="meta-llama/Llama-3.1-8B", task="embeddings")
    with pytest.raises(ConfigurationError, match="task is 'chat' or 'embeddings'"):
        DeploymentSpec(name="x", model=BGE, task="rerank")


async def _embed(pool: AcceleratorPool, request: EmbeddingRequest) -> tuple[Embeddings, ComputeReceipt]:
    events = [event async for event in pool.embed(request)]
    assert len(events) == 2
    vectors, receipt = events
    assert isinstance(vectors, Embeddings)
    assert isinstance(receipt, ComputeReceipt)
    return vectors, receipt


def _request(model: str, *inputs: str | tuple[int, ...], request_id: str = "emb-1", **extra: Any) -> EmbeddingRequest:
    return EmbeddingRequest(request_id=request_id, tenant="t", model=model, inputs=inputs, **extra)


async def test_an_input_alone_costs_one_prefill_pass_of_the_cost_model() -> None:
    spec = EMBEDDERS[0]
    pool = AcceleratorPool.from_specs([spec], time_scale=0)
    tokens = tuple(range(300))
    _vectors, receipt = await _embed(pool, _request(spec.name, tokens))

    deployment = make_deployment(spec.model, spec.instance, spec.tp, spec.weights)
    cost = StepCost(deployment, coefficients_for(deployment.instance)[1])
    # one prefill iteration: the engine pads 300 tokens to Neuron's 512 bucket; attention is the full square
    seconds = cost.iteration_s(300, float(300 * 300), 0.0, [], 1)
    assert abs(receipt.chip_us - seconds * deployment.chips * 1e6) <= 1
    assert (receipt.prompt_tokens, receipt.completion_tokens, receipt.decode_ms) == (300, 0, 0.0)
    assert receipt.finish_reason == "stop"
    assert receipt.replica == f"{spec.name}/0"


async def test_an_embedding_is_cheaper_than_generating_from_the_same_prompt() -> None:
    """No decode: the same prompt on the same deployment, answered with 16 tokens, costs more."""
    spec = EMBEDDERS[1]
    pool = AcceleratorPool.from_specs([spec], time_scale=0)
    text = "the quick brown fox jumps over the lazy dog " * 20
    _vectors, embedded = await _embed(pool, _request(spec.name, text))
    deployment = make_deployment(spec.model, spec.instance, spec.tp, spec.weights)
    assert 0 < embedded.chip_us < max_chip_us(deployment, spec, embedded.prompt_tokens, 16)


async def test_vectors_are_deterministic_unit_length_and_cut_to_the_asked_dimensions() -> None:
    spec = EMBEDDERS[1]
    pool = AcceleratorPool.from_specs([spec], time_scale=0)
    first, receipt = await _embed(pool, _request(spec.name, "alpha", "beta", (1, 2, 3)))
    again, _ = await _embed(pool, _request(spec.name, "alpha", "beta", (1, 2, 3), request_id="emb-2"))
    short, _ = await _embed(pool, _request(spec.name, "alpha", dimensions=64, request_id="emb-3"))

    assert first.vectors == again.vectors
    assert [len(v) for v in first.vectors] == [4096] * 3
    assert all(abs(np.linalg.norm(v) - 1) < 1e-5 for v in first.vectors)
    assert first.vectors[0] != first.vectors[1]
    assert len(short.vectors[0]) == 64
    assert abs(np.linalg.norm(short.vectors[0]) - 1) < 1e-5
    # a shorter vector is the start of the longer one, renormalised (as a Matryoshka model's is)
    head = np.array(first.vectors[0][:64])
    assert np.allclose(head / np.linalg.norm(head), short.vectors[0], atol=1e-5)
    assert receipt.prompt_tokens == 2 + 1 + 3  # "alph" "a", "beta", three token ids
    assert receipt.completion_tokens == 0


async def test_the_inputs_of_one_call_are_batched_and_their_compute_split_exactly() -> None:
    spec = DeploymentSpec(name="bge", model=BGE, task="embeddings", instance="trn2.48xlarge", tp=1, replicas=2)
    pool = AcceleratorPool.from_specs([spec], time_scale=0)
    calls = [_request("bge", *(f"doc {n} {i}" for i in range(8)), request_id=f"c{n}") for n in range(3)]
    receipts = [receipt for _v, receipt in await asyncio.gather(*(_embed(pool, c) for c in calls))]
    busy = sum(chip_us for _instance, chip_us in pool.busy_chip_us().values())
    assert sum(r.chip_us for r in receipts) == busy
    assert {r.replica for r in receipts} <= {"bge/0", "bge/1", "bge/0+1"}


async def test_cancelling_a_queued_call_computes_nothing_and_sends_no_vectors() -> None:
    spec = DeploymentSpec(name="bge", model=BGE, task="embeddings", tp=1, max_batch=1)
    pool = AcceleratorPool.from_specs([spec], time_scale=0)
    backend = pool.backend("bge")
    running = asyncio.ensure_future(_embed(pool, _request("bge", "first")))
    queued = [event async for event in _cancelled(pool, backend)]
    await running
    assert len(queued) == 1
    assert isinstance(queued[0], ComputeReceipt)
    assert queued[0].finish_reason == "cancelled"
    assert queued[0].chip_us == 0


async def _cancelled(pool: AcceleratorPool, backend: Any) -> Any:
    stream = pool.embed(_request("bge", "second", request_id="queued"))
    first = asyncio.ensure_future(anext(stream))
    await asyncio.sleep(0)  # the job is offered and waits for the one batch slot
    backend.cancel("queued")
    yield await first
    async for event in stream:
        yield event


@pytest.fixture
def fleet() -> Iterator[str]:
    app = FleetServer(AcceleratorPool.from_specs(EMBEDDERS, time_scale=0), token="tok")
    with served(app) as url:
        yield url


async def test_the_fleet_process_serves_embeddings_with_their_receipts(fleet: str) -> None:
    local = AcceleratorPool.from_specs(EMBEDDERS, time_scale=0)
    remote = AcceleratorPool.from_specs(EMBEDDERS, fleet_url=fleet, fleet_token="tok")
    try:
        request = _request(BGE, "hello world", (7, 8, 9), user="end-user-1")
        here, here_receipt = await _embed(local, request)
        there, there_receipt = await _embed(remote, request)
    finally:
        await remote.aclose()
    assert there.vectors == here.vectors  # float32 values survive JSON exactly
    assert there_receipt.chip_us == here_receipt.chip_us > 0
    assert there_receipt.request_id == request.request_id
    assert there_receipt.completion_tokens == 0
    assert remote.backend(BGE).busy_chip_us() == {}  # the fleet process records its replicas' time
