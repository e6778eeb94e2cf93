"""A function tool's parameters are checked as a JSON Schema on the API's event loop: the check is bounded in nodes
and made once per distinct schema (issue 22).

Measured before: a 107 KB ``allOf`` schema as a Responses function tool's ``parameters`` cost ~1.2 s of CPU to
check (jsonschema's metaschema check), twice a request (admission and the run), on the loop that serves every
tenant; a ten-array schema ~5 ms each time. No time is measured here: the refusal and the number of checks."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

import jsonschema
import pytest

from switchyard.agents.spec import MAX_TOOL_SCHEMA_NODES, MAX_TOOLS_SCHEMA_NODES, FunctionToolSpec

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def _bomb(parts: int) -> dict[str, Any]:
    return {"type": "object", "allOf": [{"$ref": "#"}, *({"properties": {f"p{i}": {}}} for i in range(parts))]}


async def test_a_tool_schema_past_the_node_limit_is_a_400_naming_it(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    tool = {"type": "function", "name": "record", "parameters": _bomb(400)}  # ~1,200 nodes
    body = {"model": MODEL, "input": "call it", "max_output_tokens": 16, "tools": [tool]}
    answer = await client.post("/v1/responses", json=body, headers=tenant.headers("developer"))
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert f"more than {MAX_TOOL_SCHEMA_NODES:,} nodes" in error["message"]
    assert error["param"] == "tools[0].parameters"


async def test_tool_schemas_past_the_limit_together_are_a_400_naming_it(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    tools = [{"type": "function", "name": f"t{i}", "parameters": _bomb(300)} for i in range(6)]  # ~900 nodes each
    body = {"model": MODEL, "input": "call it", "max_output_tokens": 16, "tools": tools}
    answer = await client.post("/v1/responses", json=body, headers=tenant.headers("developer"))
    assert answer.status_code == 400, answer.text
    assert f"more than {MAX_TOOLS_SCHEMA_NODES:,} nodes together" in answer.json()["error"]["message"]
    three = {**body, "tools": tools[:3]}  # within both limits: accepted
    assert (await client.post("/v1/responses", json=three, headers=tenant.headers("developer"))).status_code == 200


class Checks:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event == "call" and frame.f_code is jsonschema.Draft202012Validator.check_schema.__func__.__code__:
            self.count += 1


@pytest.fixture
def checks() -> Iterator[Checks]:
    checks = Checks()
    sys.setprofile(checks)
    try:
        yield checks
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


def test_a_schema_is_checked_once_however_often_it_is_given(checks: Checks) -> None:
    parameters = {"type": "object", "properties": {"only_here": {"type": "array", "minItems": 2000}}}
    for _ in range(5):
        FunctionToolSpec(name="record", parameters=dict(parameters))
    assert checks.count == 1
    with pytest.raises(ValueError, match="not a valid JSON Schema"):  # a bad schema is refused every time
        FunctionToolSpec(name="record", parameters={"type": "object", "properties": {"a": {"type": 7}}})
    with pytest.raises(ValueError, match="not a valid JSON Schema"):
        FunctionToolSpec(name="record", parameters={"type": "object", "properties": {"a": {"type": 7}}})


def test_a_schema_at_the_node_limit_is_accepted() -> None:
    properties = {f"p{i}": {"type": "string"} for i in range((MAX_TOOL_SCHEMA_NODES - 4) // 3)}
    FunctionToolSpec(name="record", parameters={"type": "object", "properties": properties})
