"""Run in instructor's own virtual environment (its openai pin clashes with ours): one extraction per mode against
the server named on the command line, each result (or the error
it ended in) printed as one JSON line for the test to check.

Usage: python instructor_modes.py BASE_URL API_KEY MODEL MODE [MODE ...]
(a MODE is DEFAULT, for the mode from_openai picks, or a name of instructor.Mode; ITERABLE_<name> extracts an
``Iterable[Task]`` in that mode instead of one CalendarEvent, and ITERABLE_<name>_STREAM streams it)
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any, Literal

import instructor
import openai
from pydantic import BaseModel


class Location(BaseModel):
    city: str
    country: str | None


class CalendarEvent(BaseModel):
    name: str
    day: Literal["monday", "tuesday"]
    participants: list[str]
    location: Location
    minutes: int


class Task(BaseModel):
    title: str
    hours: int


def _iterable(sdk: openai.OpenAI, model: str, name: str) -> None:
    """``ITERABLE_<mode>[_STREAM]``: a list of tasks (instructor's ``Iterable`` model, which requires no property)."""
    streamed = name.endswith("_STREAM")
    mode = name.removeprefix("ITERABLE_").removesuffix("_STREAM")
    client = instructor.from_openai(sdk, mode=instructor.Mode[mode])
    try:
        tasks = client.chat.completions.create(
            model=model,
            response_model=Iterable[Task],
            messages=[{"role": "user", "content": "Plan the week: write the report, review the budget."}],
            stream=streamed,
            max_retries=0,
        )
        found = [task.model_dump() for task in tasks]
    except Exception as error:  # reported for the test to show; the other modes still run
        print(json.dumps({"mode": name, "error": f"{type(error).__name__}: {error}"}), flush=True)
        return
    print(json.dumps({"mode": name, "tasks": found}), flush=True)


def main(base_url: str, api_key: str, model: str, modes: list[str]) -> None:
    with openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0) as sdk:
        for name in modes:
            if name.startswith("ITERABLE_"):
                _iterable(sdk, model, name)
                continue
            # DEFAULT: what from_openai does when no mode is named (tool calling)
            client = (
                instructor.from_openai(sdk)
                if name == "DEFAULT"
                else instructor.from_openai(sdk, mode=instructor.Mode[name])
            )
            try:
                event, completion = client.chat.completions.create_with_completion(
                    model=model,
                    response_model=CalendarEvent,
                    messages=[{"role": "user", "content": "Alice and Bob meet in Oslo on Monday for an hour."}],
                    max_retries=0,  # a first answer that does not validate fails here, not after quiet re-asks
                )
            except Exception as error:  # reported for the test to show; the other modes still run
                print(json.dumps({"mode": name, "error": f"{type(error).__name__}: {error}"}), flush=True)
                continue
            assert isinstance(event, CalendarEvent)
            print(json.dumps({"mode": name, "event": event.model_dump(), **_answer(completion)}), flush=True)


def _answer(completion: Any) -> dict[str, Any]:
    """What the server answered: a chat completion's choice, or a response's function calls (RESPONSES_* modes)."""
    if getattr(completion, "object", None) == "response":
        calls = [item for item in completion.output if item.type == "function_call"]
        return {
            "response_id": completion.id,
            "function_calls": [{"name": c.name, "arguments": c.arguments} for c in calls],
        }
    message = completion.choices[0].message
    return {
        "finish_reason": completion.choices[0].finish_reason,
        "content": message.content,
        "tool_calls": [c.model_dump() for c in message.tool_calls or []],
    }


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
