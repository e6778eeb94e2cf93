"""instructor against a real Switchyard server, in its default (tools) mode, its JSON modes and its Responses mode,
and extracting an ``Iterable[...]`` of items (tools and JSON schema modes, streamed or not).

Not covered: ``Mode.MD_JSON``, which sends no ``response_format`` and asks for a fenced JSON block in words; the sim
model answers such a request with prose.

instructor pins an older openai than the rest of this suite (see clients/instructor.txt), so it runs in a virtual
environment of its own (``make compat-venvs``, part of ``make install``) and reports each extraction as a JSON line.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from tests.support.client_venvs import client_python, run_client

pytestmark = pytest.mark.slow  # each test reads what a client script run in instructor's own venv printed

CLIENT = Path(__file__).parent / "clients" / "instructor_modes.py"
ALIAS = "llama-3.1-8b-instruct"


class Location(BaseModel):
    city: str
    country: str | None


class CalendarEvent(BaseModel):
    name: str
    day: Literal["monday", "tuesday"]
    participants: list[str]
    location: Location
    minutes: int


ITERABLE_MODES = ("ITERABLE_TOOLS", "ITERABLE_TOOLS_STREAM", "ITERABLE_JSON_SCHEMA", "ITERABLE_JSON_SCHEMA_STREAM")
MODES = ("DEFAULT", "TOOLS", "TOOLS_STRICT", "JSON", "JSON_SCHEMA", "RESPONSES_TOOLS", *ITERABLE_MODES)


class Task(BaseModel):
    title: str
    hours: int


@pytest.fixture(scope="module")
def instructor_python() -> Path:
    return client_python("instructor")


@pytest.fixture(scope="module")
def extractions(instructor_python: Path, live_server: Any) -> dict[str, dict[str, Any]]:
    """One extraction per mode, all in one run of the client (instructor takes seconds to import), on a tenant of
    their own."""
    lines = run_client(instructor_python, CLIENT, live_server.base_url, live_server.new_tenant_key(), ALIAS, *MODES)
    return {line["mode"]: line for line in lines}


def extraction(extractions: dict[str, dict[str, Any]], mode: str) -> dict[str, Any]:
    result = extractions[mode]
    assert "error" not in result, result["error"]
    return result


def test_instructor_has_its_own_openai(instructor_python: Path) -> None:
    ran = subprocess.run(
        [str(instructor_python), "-c", "import instructor, openai; print(instructor.__version__, openai.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    instructor_version, _ = ran.stdout.split()
    assert tuple(int(p) for p in instructor_version.split(".")[:2]) >= (1, 17)


@pytest.mark.parametrize("mode", ["DEFAULT", "TOOLS", "TOOLS_STRICT"])
def test_tool_modes(extractions: dict[str, dict[str, Any]], mode: str) -> None:
    result = extraction(extractions, mode)
    assert result["finish_reason"] == "tool_calls"
    (call,) = result["tool_calls"]
    assert call["function"]["name"] == "CalendarEvent"
    event = CalendarEvent.model_validate(result["event"])
    assert event == CalendarEvent.model_validate_json(call["function"]["arguments"])


@pytest.mark.parametrize("mode", ["JSON", "JSON_SCHEMA"])
def test_json_modes(extractions: dict[str, dict[str, Any]], mode: str) -> None:
    result = extraction(extractions, mode)
    assert result["finish_reason"] == "stop"
    assert result["tool_calls"] == []
    event = CalendarEvent.model_validate(result["event"])
    assert event == CalendarEvent.model_validate_json(result["content"])


def test_responses_tools_mode(extractions: dict[str, dict[str, Any]]) -> None:
    """instructor's Responses mode: the model is a function tool it forces through ``/v1/responses``."""
    result = extraction(extractions, "RESPONSES_TOOLS")
    assert result["response_id"].startswith("resp_")
    (call,) = result["function_calls"]
    assert call["name"] == "CalendarEvent"
    assert CalendarEvent.model_validate(result["event"]) == CalendarEvent.model_validate_json(call["arguments"])


@pytest.mark.parametrize("mode", ITERABLE_MODES)
def test_iterable_extractions_find_items(extractions: dict[str, dict[str, Any]], mode: str) -> None:
    """instructor's ``Iterable[Task]`` model lists no required property: its one property, the list, is the answer,
    so the sim model fills it (it used to answer ``{}`` or ``[]``, and instructor found no task)."""
    tasks = extraction(extractions, mode)["tasks"]
    assert tasks
    assert all(Task.model_validate(task) for task in tasks)
