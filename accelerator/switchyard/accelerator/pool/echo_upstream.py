"""A tiny OpenAI-compatible upstream that answers instantly: for tests, benchmarks and local demos.

Serve it with any ASGI server (``uvicorn switchyard.accelerator.pool.echo_upstream:app``). Chat completions
answer ``words`` words (or one tool call when tools are offered) in OpenAI's JSON or SSE shape; when the last
message's text contains ``REFUSAL_TRIGGER`` the answer is a refusal (``refusal``, no ``content``) instead. With
``logprobs: true`` every token of the text or refusal has a logprob (``-(i + 1) / 7`` for the i-th) and
``top_logprobs`` alternatives (the token itself, then ``alt1``, ``alt2``, ... less likely). A request with a
``prompt_cache_key`` is told ``CACHED_PROMPT_TOKENS`` of its 7 prompt tokens were cached
(``usage.prompt_tokens_details``, as OpenAI reports a cache hit); others are told nothing of a cache. A path containing
``/fail/`` answers 500, one containing ``/stall/`` sends headers and then nothing. Every request body is kept in
``requests`` (up to ``keep`` of them).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["CACHED_PROMPT_TOKENS", "REFUSAL", "REFUSAL_TRIGGER", "EchoUpstream", "app"]

Scope = dict[str, Any]
REFUSAL_TRIGGER = "please refuse"
REFUSAL = "I can't help with that."
CACHED_PROMPT_TOKENS = 4


class EchoUpstream:
    def __init__(self, words: int = 5, keep: int = 1000) -> None:
        self.words = words
        self.keep = keep
        self.requests: list[dict[str, Any]] = []

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        request: dict[str, Any] = json.loads(body or b"{}")
        if len(self.requests) < self.keep:
            self.requests.append(request)
        if "/fail/" in scope["path"]:
            await _send(send, 500, b'{"error": {"message": "upstream failure on purpose"}}', b"application/json")
        elif "/stall/" in scope["path"]:  # headers, then nothing: a client's read timeout must fire
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"100")]})
            await receive()  # returns when the client goes away
        elif request.get("stream"):
            await _send(send, 200, self._stream(request), b"text/event-stream")
        else:
            await _send(send, 200, json.dumps(self._completion(request)).encode(), b"application/json")

    def _tool_calls(self, request: dict[str, Any]) -> list[dict[str, Any]] | None:
        if not request.get("tools"):
            return None
        name = request["tools"][0]["function"]["name"]
        return [{"index": 0, "id": "call_echo_1", "type": "function", "function": {"name": name, "arguments": "{}"}}]

    def _usage(self, request: dict[str, Any]) -> dict[str, Any]:
        usage: dict[str, Any] = {"prompt_tokens": 7, "completion_tokens": self.words, "total_tokens": 7 + self.words}
        if request.get("prompt_cache_key"):
            usage["prompt_tokens_details"] = {"cached_tokens": CACHED_PROMPT_TOKENS}
        return usage

    def _completion(self, request: dict[str, Any]) -> dict[str, Any]:
        calls = self._tool_calls(request)
        refusing = not calls and _refuses(request)
        text = None if calls else "".join(self._tokens(request))
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None if refusing else text,
            "refusal": text if refusing else None,
        }
        if calls:
            message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in calls]
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "tool_calls" if calls else "stop"}
        if request.get("logprobs") is True and not calls:
            logprobs = [_logprob(t, i, request) for i, t in enumerate(self._tokens(request))]
            choice["logprobs"] = {"content": None if refusing else logprobs, "refusal": logprobs if refusing else None}
        base = {"id": "echo-1", "object": "chat.completion", "created": 0, "model": request.get("model")}
        return {**base, "choices": [choice], "usage": self._usage(request)}

    def _tokens(self, request: dict[str, Any]) -> list[str]:
        """The answer's tokens (the refusal's when it refuses), each with the space before it."""
        words = REFUSAL.split(" ") if _refuses(request) else [f"w{i}" for i in range(self.words)]
        return [w if i == 0 else " " + w for i, w in enumerate(words)]

    def _stream(self, request: dict[str, Any]) -> bytes:
        base = {"id": "echo-1", "object": "chat.completion.chunk", "created": 0, "model": request.get("model")}
        calls = self._tool_calls(request)
        part = "refusal" if _refuses(request) else "content"
        choices: list[dict[str, Any]] = []
        if calls:
            choices.append({"index": 0, "delta": {"role": "assistant", "tool_calls": calls}, "finish_reason": None})
        else:
            for i, token in enumerate(self._tokens(request)):
                choice: dict[str, Any] = {"index": 0, "delta": {part: token}, "finish_reason": None}
                if request.get("logprobs") is True:
                    logprobs = [_logprob(token, i, request)]
                    choice["logprobs"] = {"content": None, "refusal": None, part: logprobs}
                choices.append(choice)
        chunks = [{**base, "choices": [c]} for c in choices]
        finish = "tool_calls" if calls else "stop"
        chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        chunks.append({**base, "choices": [], "usage": self._usage(request)})
        return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


def _refuses(request: dict[str, Any]) -> bool:
    messages = request.get("messages") or [{}]
    return REFUSAL_TRIGGER in json.dumps(messages[-1].get("content"))


def _logprob(token: str, index: int, request: dict[str, Any]) -> dict[str, Any]:
    logprob = -(index + 1) / 7
    tops = [token] + [f"{token[: len(token) - len(token.lstrip())]}alt{k}" for k in range(1, 20)]
    top_logprobs = [
        {"token": t, "logprob": logprob - k, "bytes": list(t.encode())}
        for k, t in enumerate(tops[: int(request.get("top_logprobs") or 0)])
    ]
    return {"token": token, "logprob": logprob, "bytes": list(token.encode()), "top_logprobs": top_logprobs}


async def _send(send: Any, status: int, payload: bytes, content_type: bytes) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


app = EchoUpstream()
