"""Errors raised by the agents library; the platform maps them to HTTP answers."""

from __future__ import annotations

__all__ = [
    "AgentsError",
    "ContextOverflowError",
    "InvalidTransitionError",
    "ModelCallInterrupted",
    "ModelCallRefused",
    "SSRFBlockedError",
    "ToolExecutionError",
    "ToolOutputsError",
]


class AgentsError(Exception):
    """Base class of every error raised by ``switchyard.agents``."""


class SSRFBlockedError(AgentsError):
    """A URL or a resolved address was refused by the SSRF guard.

    ``reason`` is a short machine-readable phrase (``"private address"``, ``"scheme not allowed"`` ...);
    ``target`` is the URL, host or address that was refused.
    """

    def __init__(self, reason: str, target: str) -> None:
        super().__init__(f"blocked by SSRF guard: {reason} ({target})")
        self.reason = reason
        self.target = target


class ToolExecutionError(AgentsError):
    """A tool failed in a way the model should be told about (the message becomes the tool output)."""


class ToolOutputsError(AgentsError):
    """Submitted tool outputs or approvals do not match the pending calls (the platform answers 400).

    ``code`` is ``"unknown_tool_call"``, ``"missing_tool_outputs"`` or ``"no_pending_action"``.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class InvalidTransitionError(AgentsError):
    """The run loop was asked to record something that does not fit the run's state."""


class ContextOverflowError(AgentsError):
    """Even the newest turn of the conversation does not fit the model's context window."""


class ModelCallInterrupted(AgentsError):
    """A model call could not be made for a reason outside the run (the platform's database or broker went away):
    the run is not failed; driving it stops here, and it resumes from its last checkpoint."""


class ModelCallRefused(AgentsError):
    """A model call was refused before any work (e.g. a budget); the run fails with ``code``, not ``model_error``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
