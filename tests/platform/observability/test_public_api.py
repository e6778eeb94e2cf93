"""The observability package's exported names exist, and wrapping a pool changes none of its events."""

from __future__ import annotations

import switchyard.platform.observability as observability
from switchyard.accelerator.pool import AcceleratorPool, ComputeReceipt, InferenceRequest, load_fleet
from switchyard.platform.observability import instrument_pool

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def test_every_exported_name_exists() -> None:
    for name in observability.__all__:
        assert hasattr(observability, name), name


async def test_an_instrumented_pool_streams_what_the_pool_streams() -> None:
    specs = [s for s in load_fleet("") if s.name == MODEL]
    plain = AcceleratorPool.from_specs(specs, time_scale=0)
    observed = instrument_pool(AcceleratorPool.from_specs(specs, time_scale=0))
    try:
        answers = []
        for pool in (plain, observed):
            request = InferenceRequest(
                request_id="req_1", tenant="ten_1", model=MODEL, messages=[{"role": "user", "content": "hi"}], seed=7
            )
            answers.append([event async for event in pool.submit(request)])
    finally:
        await plain.aclose()
        await observed.aclose()
    assert isinstance(answers[1][-1], ComputeReceipt)
    assert answers[0] == answers[1]
    assert type(observed).submit is AcceleratorPool.submit  # only the instance is wrapped
