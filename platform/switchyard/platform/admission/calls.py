"""What admission admits: one call to a model, sized in tokens before it runs.

A call counts its prompt tokens and the most output tokens it may produce: its ``max_tokens``, else as many as
``SWITCHYARD_MAX_OUTPUT_TOKENS`` and the model's context window leave room for. That sum is what the tenant's
token rate is charged and what a budget hold is priced on; the most output tokens are also the call's output
ceiling (``InferenceRequest.output_ceiling``), where every backend cuts its answer, so no call produces more than
its hold covers.
"""

from __future__ import annotations

from dataclasses import dataclass

from switchyard.accelerator.pool import Backend
from switchyard.platform.db import TenantScope
from switchyard.platform.http.errors import InvalidRequest

__all__ = ["ModelCall", "most_output_tokens", "refuse_oversized"]


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One call to a model as admission sees it: who asks, which deployment, how many tokens at most."""

    scope: TenantScope
    api_key_id: str | None  # the key whose request rate it takes (None: a run started without one)
    agent_id: str | None  # for the agent's budgets
    backend: Backend
    prompt_tokens: int
    output_tokens: int  # the most it may produce: its hold covers them and its answer is cut there
    holder: str  # holds the tenant's request slot: unique to the call (a repeated run step reuses its step id)
    workflow_id: str | None = None  # the workflow whose run makes the call, for the workflow's budgets

    @property
    def tokens(self) -> int:
        """What the tenant's token rate is charged: the prompt and the most output."""
        return self.prompt_tokens + self.output_tokens


def most_output_tokens(backend: Backend, prompt_tokens: int, max_tokens: int | None, *, max_output_tokens: int) -> int:
    """The most output tokens a call may produce (at least 1)."""
    room = max(1, backend.context_window - prompt_tokens)
    return min(max_tokens or max_output_tokens, room)


def refuse_oversized(
    backend: Backend,
    prompt_tokens: int,
    max_tokens: int | None,
    *,
    max_output_tokens: int,
    names: tuple[str, str] = ("max_tokens", "messages"),
) -> None:
    """400 for a request that asks for more than a model call may: ``max_tokens`` above the platform's cap
    (``invalid_value``), or a prompt and ``max_tokens`` past the context window (``context_length_exceeded``).
    ``names`` are the request's fields for the two (a Responses request's are ``max_output_tokens`` and ``input``).

    For requests a client sends as is; an agent run fits its context to the window itself.
    """
    limit_name, prompt_name = names
    if max_tokens is not None and max_tokens > max_output_tokens:
        raise InvalidRequest(
            f"{limit_name} is {max_tokens}; at most {max_output_tokens} is allowed",
            param=limit_name,
            code="invalid_value",
        )
    window = backend.context_window
    if prompt_tokens + (max_tokens or 1) > window:
        raise InvalidRequest(
            f"this model's context window is {window} tokens; the {prompt_name} use {prompt_tokens}"
            + (f" and {limit_name} asks for {max_tokens} more" if max_tokens else ""),
            param=prompt_name,
            code="context_length_exceeded",
        )
