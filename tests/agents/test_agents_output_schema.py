"""An agent's ``output_schema``: every model call of the agent asks for its JSON answer (tools still offered), a
caller's own format wins, and a schema that is no object schema is refused."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from switchyard.agents import AgentSpec, FunctionModel, Message, ModelRequest, RunLoop, ToolRegistry, drive_run
from switchyard.agents.tools import CalculatorTool

ORDER = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}


async def _asked(spec: AgentSpec, **options: object) -> list[ModelRequest]:
    asked: list[ModelRequest] = []

    def model(request: ModelRequest) -> Message:
        asked.append(request)
        return Message.assistant('{"order_id": "A-1"}')

    loop = RunLoop(spec, ToolRegistry([CalculatorTool()]), context_window_tokens=8192, call_options=options)
    await drive_run(loop, loop.new_run("run_1", now_ms=0), thread=[Message.user("hi")], model=FunctionModel(model))
    return asked


async def test_every_call_of_the_agent_asks_for_its_schema_with_its_tools_offered() -> None:
    spec = AgentSpec(
        name="orders", model="m", tools=[{"type": "calculator"}], output_schema={"name": "order", "schema": ORDER}
    )
    [request] = await _asked(spec)
    assert request.options["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "order", "schema": ORDER, "strict": True},
    }
    assert [t["function"]["name"] for t in request.tools] == ["calculator"]
    assert spec.model_dump(mode="json")["output_schema"] == {"name": "order", "schema": ORDER, "strict": True}


async def test_a_callers_format_wins_and_an_agent_without_a_schema_asks_none() -> None:
    spec = AgentSpec(name="orders", model="m", output_schema={"schema": ORDER})
    own = {"type": "json_object"}
    [request] = await _asked(spec, response_format=own)
    assert request.options["response_format"] == own
    [plain] = await _asked(AgentSpec(name="plain", model="m"))
    assert "response_format" not in plain.options


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ({"type": "string"}, "schema must be a JSON Schema with type 'object'"),
        ({"type": "object", "properties": {"a": {"type": 7}}}, "schema is not a valid JSON Schema"),
    ],
)
def test_a_schema_that_is_no_object_schema_is_refused_naming_it(schema: dict[str, object], says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        AgentSpec(name="orders", model="m", output_schema={"schema": schema})
