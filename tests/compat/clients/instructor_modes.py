"""Run in instructor's own virtual environment (its openai pin clashes with ours): one extraction per mode against
the server named on the command line, each result printed as one JSON line for the test to check.

Usage: python instructor_modes.py BASE_URL API_KEY MODEL MODE [MODE ...]
(a MODE is DEFAULT, for the mode from_openai picks, or a name of instructor.Mode)
"""

from __future__ import annotations

import json
import sys
from typing import Literal

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


def main(base_url: str, api_key: str, model: str, modes: list[str]) -> None:
    with openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0) as sdk:
        for name in modes:
            # DEFAULT: what from_openai does when no mode is named (tool calling)
            client = (
                instructor.from_openai(sdk)
                if name == "DEFAULT"
                else instructor.from_openai(sdk, mode=instructor.Mode[name])
            )
            event, completion = client.chat.completions.create_with_completion(
                model=model,
                response_model=CalendarEvent,
                messages=[{"role": "user", "content": "Alice and Bob meet in Oslo on Monday for an hour."}],
                max_retries=0,  # a first answer that does not validate fails here, not after quiet re-asks
            )
            assert isinstance(event, CalendarEvent)
            message = completion.choices[0].message
            print(
                json.dumps(
                    {
                        "mode": name,
                        "event": event.model_dump(),
                        "finish_reason": completion.choices[0].finish_reason,
                        "content": message.content,
                        "tool_calls": [c.model_dump() for c in message.tool_calls or []],
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
