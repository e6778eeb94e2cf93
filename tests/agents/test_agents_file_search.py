"""The ``file_search`` tool: the model's query goes to the platform's searcher with the tool's stores, result count,
filters and threshold; the hits come back as JSON the model reads and the Responses API renders."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from pydantic import ValidationError

from switchyard.agents import AgentSpec, FunctionModel, Message, RunLoop, RunStatus, ToolCall, drive_run
from switchyard.agents.errors import ToolExecutionError
from switchyard.agents.tools import FileSearchHit, build_tools
from switchyard.agents.tools.file_search import hits_of

HIT = FileSearchHit(file_id="file-1", filename="aurora.md", score=0.9, text="Aurora ships on Tuesdays.")


class Searcher:
    """Answers every query with ``HIT``, remembering how it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[tuple[str, ...], str, dict[str, Any]]] = []

    async def __call__(
        self,
        vector_store_ids: Sequence[str],
        query: str,
        *,
        max_num_results: int,
        filters: Mapping[str, Any] | None,
        score_threshold: float,
    ) -> list[FileSearchHit]:
        options = {"max_num_results": max_num_results, "filters": filters, "score_threshold": score_threshold}
        self.asked.append((tuple(vector_store_ids), query, options))
        return [HIT]


TOOL = {
    "type": "file_search",
    "vector_store_ids": ["vs_1", "vs_2"],
    "max_num_results": 3,
    "filters": {"type": "eq", "key": "team", "value": "ships"},
    "ranking_options": {"score_threshold": 0.25},
}


async def test_the_model_searches_the_stores_and_reads_the_hits() -> None:
    spec = AgentSpec.model_validate({"name": "a", "model": "m", "tools": [TOOL]})
    searcher = Searcher()
    tools = await build_tools(spec, file_searcher=searcher)
    loop = RunLoop(spec, tools, context_window_tokens=8192)

    def answer(request: Any) -> Message:
        last = request.messages[-1]
        if last.role == "tool":
            return Message.assistant(f"Found: {last.content}")
        return Message.assistant(None, [ToolCall(id="c1", name="file_search", arguments='{"query": "aurora"}')])

    state, _ = await drive_run(
        loop, loop.new_run("run_1", now_ms=0), thread=[Message.user("When?")], model=FunctionModel(answer)
    )
    assert state.status is RunStatus.COMPLETED
    assert searcher.asked == [
        (("vs_1", "vs_2"), "aurora", {"max_num_results": 3, "filters": TOOL["filters"], "score_threshold": 0.25})
    ]
    output = state.steps[1].output
    assert hits_of(output) == [HIT]
    assert json.loads(output or "")["results"][0]["text"] == "Aurora ships on Tuesdays."


async def test_without_the_platforms_stores_the_tool_cannot_be_built() -> None:
    spec = AgentSpec.model_validate({"name": "a", "model": "m", "tools": [TOOL]})
    with pytest.raises(ToolExecutionError, match="file_search needs the platform's vector stores"):
        await build_tools(spec)


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"vector_store_ids": []}, "at least 1 item"),
        ({"max_num_results": 51}, "less than or equal to 50"),
        ({"filters": {"type": "and", "filters": [{"type": "eq", "key": "k", "value": i} for i in range(400)]}},
         "filters has more than 1,000 JSON values"),
    ],
)  # fmt: skip
def test_a_file_search_tool_is_checked(change: dict[str, Any], error: str) -> None:
    with pytest.raises(ValidationError, match=error):
        AgentSpec.model_validate({"name": "a", "model": "m", "tools": [TOOL | change]})


def test_an_agent_has_one_file_search_tool() -> None:
    with pytest.raises(ValidationError, match="duplicate tool name 'file_search'"):
        AgentSpec.model_validate({"name": "a", "model": "m", "tools": [TOOL, TOOL]})


def test_an_output_that_holds_no_hits_is_none() -> None:
    assert hits_of("the search failed") is None
    assert hits_of('{"results": [{"unexpected": 1}]}') is None
