"""A large prompt's tokens are counted off the event loop that serves every other tenant (issue 22).

Counting is a regex pass over the prompt's text and its tools' JSON: ~50 ms of CPU a megabyte, which ran on the
API's loop for every chat completion and response. A profile hook notes the thread of each count of a large
prompt and the thread the request's admission runs on (the loop's): they differ. No time is measured.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

import pytest

from switchyard.accelerator.pool.tokens import LARGE_PROMPT_CHARS, count_prompt_tokens, count_prompt_tokens_off_loop
from switchyard.platform.inference.gateway import InferenceGateway
from switchyard.platform.responses import service as responses_service

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
LARGE = "many words " * (LARGE_PROMPT_CHARS // 10 + 1)  # past the threshold, far below the context window


class Threads:
    """The threads that counted a large prompt, and those that admitted a request."""

    def __init__(self) -> None:
        self.counted: list[int] = []
        self.admitted: list[int] = []
        self.active = True

    def __call__(self, frame: FrameType, event: str, _arg: Any) -> None:
        if not self.active:
            sys.setprofile(None)
            return
        if event != "call":
            return
        if frame.f_code is count_prompt_tokens.__code__:
            if len(str(frame.f_locals.get("messages"))) > LARGE_PROMPT_CHARS:
                self.counted.append(threading.get_ident())
        elif frame.f_code in (InferenceGateway.admit.__code__, responses_service.prepare.__code__):
            self.admitted.append(threading.get_ident())


@pytest.fixture
def threads() -> Iterator[Threads]:
    """Watching from before the app's loop thread starts (ask for it before ``client``): a hook reaches only the
    threads started after it."""
    threads = Threads()
    threading.setprofile(threads)
    sys.setprofile(threads)
    try:
        yield threads
    finally:
        threads.active = False
        threading.setprofile(None)  # type: ignore[arg-type]
        sys.setprofile(None)


async def test_a_large_chat_prompt_is_counted_off_the_loop(threads: Threads, client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    body = {"model": MODEL, "messages": [{"role": "user", "content": LARGE}], "max_tokens": 4}
    answer = await client.post("/v1/chat/completions", json=body, headers=tenant.headers("developer"))
    assert answer.status_code == 200, answer.text
    assert threads.counted
    assert threads.admitted
    assert set(threads.counted).isdisjoint(threads.admitted)


async def test_a_large_response_input_is_counted_off_the_loop(threads: Threads, client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    body = {"model": MODEL, "input": LARGE, "max_output_tokens": 4}
    answer = await client.post("/v1/responses", json=body, headers=tenant.headers("developer"))
    assert answer.status_code == 200, answer.text
    assert threads.counted
    assert threads.admitted
    assert set(threads.counted).isdisjoint(threads.admitted)


async def test_counted_off_the_loop_or_not_the_count_is_the_same() -> None:
    small = [{"role": "user", "content": "hello there"}]
    large = [{"role": "user", "content": LARGE}]
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    assert await count_prompt_tokens_off_loop(small) == count_prompt_tokens(small)
    assert await count_prompt_tokens_off_loop(large) == count_prompt_tokens(large)
    assert await count_prompt_tokens_off_loop(small, [tool]) == count_prompt_tokens(small, [tool])
