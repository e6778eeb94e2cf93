"""The run loop on the accelerator pool's simulator: real receipts become per-step compute."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from switchyard.accelerator.pool import DEFAULT_FLEET, AcceleratorPool, InferenceRequest, PoolEvent, TextDelta
from switchyard.agents import AgentSpec, Message, RunLoop, RunStatus, StepType, build_tools, drive_run
from switchyard.agents.model import ModelRequest
from switchyard.agents.pool_model import PoolModel, pool_token_counter

MODEL = DEFAULT_FLEET[0].name


@pytest.fixture
async def pool() -> AsyncIterator[AcceleratorPool]:
    pool = AcceleratorPool.from_specs(DEFAULT_FLEET[:1], time_scale=0)
    yield pool
    await pool.aclose()


async def test_agent_runs_on_the_simulated_fleet(pool: AcceleratorPool) -> None:
    spec = AgentSpec(
        name="calc",
        model=MODEL,
        instructions="Use tools.",
        tools=[{"type": "calculator"}],
        model_params={"max_tokens": 16},
    )
    loop = RunLoop(
        spec,
        await build_tools(spec),
        context_window_tokens=pool.backend(MODEL).context_window,
        token_counter=pool_token_counter,
    )
    seen: list[PoolEvent] = []
    model = PoolModel(pool, tenant="tenant-a", on_event=seen.append)
    thread = [Message.user("please use calculator expression=6*7")]
    state, _ = await drive_run(loop, loop.new_run("run_pool", now_ms=0), thread=thread, model=model)
    assert state.status is RunStatus.COMPLETED
    assert [s.type for s in state.steps] == [StepType.MODEL_CALL, StepType.TOOL_CALL, StepType.MODEL_CALL]
    assert state.steps[1].output == '{"result": 42}'
    assert state.final_message is not None
    assert state.final_message.content is not None
    assert state.final_message.content.startswith('Result of calculator: {"result": 42}')
    receipts = model.receipts
    assert [r.request_id for r in receipts] == ["run_pool_step_0", "run_pool_step_2"]
    assert all(r.tenant == "tenant-a" for r in receipts)
    model_steps = [s for s in state.steps if s.type is StepType.MODEL_CALL]
    assert [s.chip_us for s in model_steps] == [r.chip_us for r in receipts]
    assert all(s.chip_us > 0 for s in model_steps)
    assert [s.replica for s in model_steps] == [r.replica for r in receipts]  # who served each call, and when
    assert [s.ttft_ms for s in model_steps] == [round(r.ttft_ms, 3) for r in receipts]
    assert all(s.replica and s.replica.startswith(f"{MODEL}/") for s in model_steps)
    assert state.chip_us == sum(r.chip_us for r in receipts)
    assert state.usage.output_tokens == sum(r.completion_tokens for r in receipts)
    assert any(isinstance(e, TextDelta) for e in seen)


def test_a_step_stored_before_ttft_and_replica_were_recorded_still_loads() -> None:
    from switchyard.agents import Step

    old = {"id": "run_x_step_0", "index": 0, "type": "model_call", "status": "completed", "created_at_ms": 1}
    step = Step.model_validate(old)
    assert (step.ttft_ms, step.replica) == (None, None)


async def test_a_pool_without_receipt_is_an_error() -> None:
    class Broken:
        async def _events(self) -> AsyncIterator[PoolEvent]:
            yield TextDelta("hi")

        def submit(self, request: InferenceRequest) -> AsyncIterator[PoolEvent]:
            return self._events()

    with pytest.raises(RuntimeError, match="no compute receipt"):
        await PoolModel(Broken(), tenant="t").request(ModelRequest(model="m", messages=(Message.user("x"),)))


async def test_an_upstreams_refusal_is_the_agents_answer(fake_upstream: Any) -> None:
    from switchyard.accelerator.pool import DeploymentSpec
    from switchyard.accelerator.pool.echo_upstream import REFUSAL, REFUSAL_TRIGGER

    spec = DeploymentSpec(name="up", backend="openai-compatible", base_url=fake_upstream.base_url, chips=2)
    pool = AcceleratorPool.from_specs([spec])
    try:
        agent = AgentSpec(name="polite", model="up", instructions="Answer.")
        loop = RunLoop(agent, await build_tools(agent), context_window_tokens=8192, token_counter=pool_token_counter)
        seen: list[PoolEvent] = []
        model = PoolModel(pool, tenant="tenant-a", on_event=seen.append)
        thread = [Message.user(f"{REFUSAL_TRIGGER}, now")]
        state, _ = await drive_run(loop, loop.new_run("run_refused", now_ms=0), thread=thread, model=model)
    finally:
        await pool.aclose()
    assert state.status is RunStatus.COMPLETED
    assert state.final_message is not None
    assert state.final_message.content == REFUSAL  # not an empty answer
    assert state.final_message.refusal  # and marked as the model's refusal (Responses answer a refusal part)
    assert "".join(e.refusal for e in seen if isinstance(e, TextDelta)) == REFUSAL


async def test_model_params_ignore_eos_makes_each_answer_its_max_tokens_long(pool: AcceleratorPool) -> None:
    """vLLM's ``ignore_eos`` in an agent's ``model_params`` reaches the pool: the sim model writes the whole cap
    (without it, an answer drawn shorter than the cap ends on its own)."""
    from switchyard.agents.spec import ModelParams

    thread = (Message.user("write"),)
    exact = ModelRequest(model=MODEL, messages=thread, params=ModelParams(max_tokens=600, ignore_eos=True))
    drawn = ModelRequest(model=MODEL, messages=thread, params=ModelParams(max_tokens=600))
    forced = await PoolModel(pool, tenant="t").request(exact)
    stopped = await PoolModel(pool, tenant="t").request(drawn)
    assert (forced.finish_reason, forced.usage.output_tokens) == ("length", 600)
    assert stopped.finish_reason == "stop"
    assert stopped.usage.output_tokens < 600
