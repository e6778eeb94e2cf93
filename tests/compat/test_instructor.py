"""instructor against a real Switchyard server, in its default (tools) mode and its JSON modes.

Not covered: ``Mode.MD_JSON``, which sends no ``response_format`` and asks for a fenced JSON block in words; the sim
model answers such a request with prose.

instructor pins an older openai than the rest of this suite (see clients/instructor.txt), so it runs in a virtual
environment of its own (``make compat-venvs``, part of ``make install``) and reports each extraction as a JSON line.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

ROOT = Path(__file__).parents[2]
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


@pytest.fixture(scope="module")
def instructor_python() -> Path:
    """The interpreter of instructor's own virtual environment, built (or found up to date) by make."""
    subprocess.run(["make", "-s", "compat-venvs"], cwd=ROOT, check=True, capture_output=True)
    return ROOT / ".venv-compat" / "instructor" / "bin" / "python"


def extract(python: Path, live_server: Any, api_key: str, *modes: str) -> dict[str, dict[str, Any]]:
    ran = subprocess.run(
        [str(python), str(CLIENT), live_server.base_url, api_key, ALIAS, *modes],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},  # no OPENAI_API_KEY or proxy the client could pick up
        check=False,
        timeout=240,
    )
    assert ran.returncode == 0, ran.stderr
    lines = [json.loads(line) for line in ran.stdout.splitlines()]
    return {line["mode"]: line for line in lines}


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
def test_tool_modes(instructor_python: Path, live_server: Any, api_key: str, mode: str) -> None:
    result = extract(instructor_python, live_server, api_key, mode)[mode]
    assert result["finish_reason"] == "tool_calls"
    (call,) = result["tool_calls"]
    assert call["function"]["name"] == "CalendarEvent"
    event = CalendarEvent.model_validate(result["event"])
    assert event == CalendarEvent.model_validate_json(call["function"]["arguments"])


@pytest.mark.parametrize("mode", ["JSON", "JSON_SCHEMA"])
def test_json_modes(instructor_python: Path, live_server: Any, api_key: str, mode: str) -> None:
    result = extract(instructor_python, live_server, api_key, mode)[mode]
    assert result["finish_reason"] == "stop"
    assert result["tool_calls"] == []
    event = CalendarEvent.model_validate(result["event"])
    assert event == CalendarEvent.model_validate_json(result["content"])
