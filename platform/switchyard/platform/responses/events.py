"""A response's stream: OpenAI's semantic events, numbered, from the run loop's transitions and the model's tokens.

Transitions give every event a response has: ``response.in_progress``, each output item added, its text or
arguments, the item done, and ``response.completed`` / ``incomplete`` / ``failed`` (or ``cancelled``) with the
whole response. A foreground response also passes the model's tokens as they come (``delta``), so its message
text streams token by token; a background response's stored stream carries each message's text in one delta,
written with the checkpoint that holds it, so a client resuming with ``starting_after`` reads what happened, once.
When the model calls asked for logprobs, each message's tokens' logprobs are kept as they arrive (``record``) and
carried by its ``output_text`` (``annotate``), its delta events and its ``response.output_text.done``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from switchyard.accelerator.pool import PoolEvent, TextDelta, TokenLogprob
from switchyard.agents import RunState, RunStatus, StepStatus, StepType, ToolKind
from switchyard.platform.responses.items import output_items
from switchyard.platform.responses.objects import FINISHED, response_status

__all__ = ["Event", "ResponseStream", "stored_logprobs"]

Event = tuple[str, dict[str, Any]]
Render = Callable[[RunState, list[dict[str, Any]]], dict[str, Any]]


def _part(text: str, logprobs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs or []}


def _output_text_logprob(token: TokenLogprob) -> dict[str, Any]:
    """OpenAI's ``ResponseOutputText.Logprob``: the token, its UTF-8 bytes, logprob and alternatives."""

    def entry(t: TokenLogprob) -> dict[str, Any]:
        raw = t.bytes if t.bytes is not None else tuple(t.token.encode())
        return {"token": t.token, "bytes": list(raw), "logprob": t.logprob}

    return {**entry(token), "top_logprobs": [entry(top) for top in token.top_logprobs]}


def _event_logprobs(logprobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The logprobs of a text delta or done event, as OpenAI's events spell them (no ``bytes``)."""
    return [
        {
            "token": t["token"],
            "logprob": t["logprob"],
            "top_logprobs": [{"token": top["token"], "logprob": top["logprob"]} for top in t["top_logprobs"]],
        }
        for t in logprobs
    ]


def stored_logprobs(output: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The logprobs of the messages in a stored output (by item id): kept when a response resumes elsewhere."""
    return {
        item["id"]: list(item["content"][0].get("logprobs") or [])
        for item in output
        if item.get("type") == "message" and item.get("content") and item["content"][0].get("logprobs")
    }


class ResponseStream:
    def __init__(
        self,
        *,
        response_id: str,
        render: Render,
        kind_of: Callable[[str], ToolKind | None],
        seeded: int = 0,
        file_search_results: bool = False,
        done_items: set[str] | None = None,
        sequence: int = -1,
        listed: list[dict[str, Any]] | None = None,
        logprobs: dict[str, list[dict[str, Any]]] | None = None,
    ) -> None:
        self.listed = listed or []
        self.logprobs = dict(logprobs or {})
        """Each message's tokens' logprobs (``ResponseOutputText`` logprobs), by item id."""
        self.response_id = response_id
        self.render = render
        self.kind_of = kind_of
        self.seeded = seeded
        self.file_search_results = file_search_results
        self.done = set(done_items or ())
        self.sequence = sequence
        """The number of the last event sent: the first is 0."""
        self._model_step: str | None = None
        self._open: tuple[str, int] | None = None  # the message streaming live: item id, output index
        self._text: list[str] = []

    def _event(self, kind: str, /, **data: Any) -> Event:
        self.sequence += 1
        return kind, {"type": kind, "sequence_number": self.sequence, **data}

    def opening(self, state: RunState) -> list[Event]:
        return [self._event("response.created", response=self.render(state, []))]

    def record(self, event: PoolEvent) -> None:
        """Keep the logprobs of the model's tokens for the message they belong to (foreground or background)."""
        if isinstance(event, TextDelta) and event.logprobs and not event.refusal and self._model_step is not None:
            tokens = self.logprobs.setdefault(f"msg_{self._model_step}", [])
            tokens += [_output_text_logprob(token) for token in event.logprobs]

    def annotate(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``items`` with each message's ``output_text`` carrying its tokens' logprobs, when there are any."""
        annotated = []
        for item in items:
            logprobs = self.logprobs.get(item["id"]) if item.get("type") == "message" else None
            if logprobs and item.get("content"):
                item = {**item, "content": [{**item["content"][0], "logprobs": logprobs}, *item["content"][1:]]}
            annotated.append(item)
        return annotated

    def delta(self, event: PoolEvent) -> list[Event]:
        """The model's token, streamed live into the message it belongs to."""
        if not isinstance(event, TextDelta) or event.refusal or self._model_step is None:
            return []
        events: list[Event] = []
        if self._open is None:
            item_id = f"msg_{self._model_step}"
            index = len(self.done)
            self._open, self._text = (item_id, index), []
            item = {"id": item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}
            events.append(self._event("response.output_item.added", output_index=index, item=item))
            events.append(
                self._event(
                    "response.content_part.added", item_id=item_id, output_index=index, content_index=0, part=_part("")
                )
            )
        item_id, index = self._open
        self._text.append(event.text)
        events.append(
            self._event(
                "response.output_text.delta",
                item_id=item_id,
                output_index=index,
                content_index=0,
                delta=event.text,
                logprobs=_event_logprobs([_output_text_logprob(token) for token in event.logprobs]),
            )
        )
        return events

    def transition(self, before: RunState, after: RunState) -> list[Event]:
        events: list[Event] = []
        if before.status is RunStatus.QUEUED and after.status is not RunStatus.QUEUED:
            events.append(self._event("response.in_progress", response=self.render(after, [])))
        running = [s for s in after.steps if s.type is StepType.MODEL_CALL and s.status is StepStatus.IN_PROGRESS]
        self._model_step = running[-1].id if running else None
        items = self.annotate(
            output_items(
                after,
                self.kind_of,
                seeded=self.seeded,
                listed=self.listed,
                file_search_results=self.file_search_results,
            )
        )
        for index, item in enumerate(items):
            if item["id"] in self.done:
                continue
            self.done.add(item["id"])
            if self._open is not None and self._open[0] == item["id"]:
                events.extend(self._close_text(item, index, opened=True))
                self._open = None
            else:
                events.extend(self._item(item, index))
        status, _ = response_status(after)
        if status in FINISHED and after.status is not before.status:
            name = "response.cancelled" if status == "cancelled" else f"response.{status}"
            events.append(self._event(name, response=self.render(after, items)))
        return events

    def _close_text(self, item: dict[str, Any], index: int, *, opened: bool) -> list[Event]:
        if item["content"] and item["content"][0]["type"] == "refusal":
            return self._refusal(item, index)
        text = "".join(p["text"] for p in item["content"])
        logprobs = list(item["content"][0].get("logprobs") or []) if item["content"] else []
        where = {"item_id": item["id"], "output_index": index, "content_index": 0}
        events = []
        if not opened:
            events.append(self._event("response.content_part.added", **where, part=_part("")))
            events.append(
                self._event("response.output_text.delta", **where, delta=text, logprobs=_event_logprobs(logprobs))
            )
        events.append(self._event("response.output_text.done", **where, text=text, logprobs=_event_logprobs(logprobs)))
        events.append(self._event("response.content_part.done", **where, part=_part(text, logprobs)))
        events.append(self._event("response.output_item.done", output_index=index, item=item))
        return events

    def _refusal(self, item: dict[str, Any], index: int) -> list[Event]:
        """A message that is the model's refusal: its part and its text, then the item (a refusal is not streamed
        live, so the part opens here)."""
        part = item["content"][0]
        where = {"item_id": item["id"], "output_index": index, "content_index": 0}
        return [
            self._event("response.content_part.added", **where, part={"type": "refusal", "refusal": ""}),
            self._event("response.refusal.delta", **where, delta=part["refusal"]),
            self._event("response.refusal.done", **where, refusal=part["refusal"]),
            self._event("response.content_part.done", **where, part=part),
            self._event("response.output_item.done", output_index=index, item=item),
        ]

    def _item(self, item: dict[str, Any], index: int) -> list[Event]:
        if item["type"] == "message":
            added = {**item, "status": "in_progress", "content": []}
            return [
                self._event("response.output_item.added", output_index=index, item=added),
                *self._close_text(item, index, opened=False),
            ]
        if item["type"] == "function_call":
            where = {"item_id": item["id"], "output_index": index}
            added = {**item, "status": "in_progress", "arguments": ""}
            return [
                self._event("response.output_item.added", output_index=index, item=added),
                self._event("response.function_call_arguments.delta", **where, delta=item["arguments"]),
                self._event(
                    "response.function_call_arguments.done", **where, name=item["name"], arguments=item["arguments"]
                ),
                self._event("response.output_item.done", output_index=index, item=item),
            ]
        return [
            self._event("response.output_item.added", output_index=index, item=item),
            self._event("response.output_item.done", output_index=index, item=item),
        ]
