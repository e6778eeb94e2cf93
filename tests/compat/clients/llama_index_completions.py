"""Run in llama-index's own virtual environment (its openai pin clashes with ours): ``OpenAILike`` with its default
flags (``is_chat_model=False``, so the legacy completions API) against the server named on the command line, each
result (or the error it ended in) printed as one JSON line for the test to check.

Usage: python llama_index_completions.py BASE_URL API_KEY MODEL
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from llama_index.llms.openai_like import OpenAILike


def _report(name: str, call: Callable[[], dict[str, Any]]) -> None:
    try:
        print(json.dumps({"call": name, **call()}), flush=True)
    except Exception as error:  # reported for the test to show; the other calls still run
        print(json.dumps({"call": name, "error": f"{type(error).__name__}: {error}"}), flush=True)


def main(base_url: str, api_key: str, model: str) -> None:
    llm = OpenAILike(model=model, api_base=base_url, api_key=api_key, max_retries=0)

    def complete() -> dict[str, Any]:
        answer = llm.complete("Say this is a test")
        raw = answer.raw  # the openai client's Completion
        return {"text": answer.text, "object": raw.object, "completion_tokens": raw.usage.completion_tokens}

    def stream_complete() -> dict[str, Any]:
        pieces = [piece.delta for piece in llm.stream_complete("Say this is a test")]
        return {"text": "".join(p or "" for p in pieces), "pieces": len(pieces)}

    def chat() -> dict[str, Any]:  # a chat message through a completion model: llama-index renders it as a prompt
        from llama_index.core.llms import ChatMessage

        answer = llm.chat([ChatMessage(role="user", content="Say this is a test")])
        return {"text": answer.message.content}

    _report("complete", complete)
    _report("stream_complete", stream_complete)
    _report("chat", chat)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
