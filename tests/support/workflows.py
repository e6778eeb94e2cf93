"""A workflow the workflow tests share: triage, a bounded drafting loop, a person's approval."""

from __future__ import annotations

from typing import Any


def support_workflow() -> dict[str, Any]:
    """Triage, then (for billing) draft a reply up to three times until it mentions a refund, then ask a person."""
    return {
        "name": "support",
        "start": "triage",
        "state": {
            "triage": {"type": "object"},
            "draft": {"type": "string", "default": ""},
            "rounds": {"type": "integer", "default": 0},
            "good": {"type": "boolean", "default": False},
        },
        "nodes": [
            {"type": "agent", "id": "triage", "agent_id": "agent_triage", "output_to": "triage", "next": "route"},
            {"type": "if_else", "id": "route", "condition": "output.category == 'billing'", "then": "drafting",
             "else": "general"},
            {"type": "while", "id": "drafting", "condition": "not state.good", "body": "draft", "max_iterations": 3,
             "next": "review"},
            {"type": "agent", "id": "draft", "agent_id": "agent_writer", "version": 2,
             "input": "Write a reply to: {{ input }} (round {{ state.rounds + 1 }})", "output_to": "draft",
             "next": "check"},
            {"type": "set_state", "id": "check", "assignments": {"rounds": "state.rounds + 1",
             "good": "contains(lower(last_output), 'refund')"}, "next": "drafting"},
            {"type": "user_approval", "id": "review", "message": "Send this reply?\n{{ state.draft }}",
             "approved": "done", "rejected": "general"},
            {"type": "agent", "id": "general", "agent_id": "agent_general", "next": "done"},
            {"type": "end", "id": "done", "output": "{{ state.draft or last_output }}"},
        ],
    }  # fmt: skip
