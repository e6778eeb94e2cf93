"""The SDK types a run's cached prompt tokens: an agent's long instructions, run twice on a real installation, are
read from the replica's prefix cache the second time, and ``run.usage.prompt_tokens_details.cached_tokens`` says how
many."""

from __future__ import annotations

import pytest

from switchyard.sdk import RunPromptTokensDetails, Switchyard
from tests.sdk.conftest import MODEL, Installation

pytestmark = pytest.mark.slow

INSTRUCTIONS = "You answer for the ferry office: crossings, fares, vehicles and the timetable's exceptions. " * 60


def test_a_runs_usage_types_its_cached_prompt_tokens(installation: Installation) -> None:
    with Switchyard(api_key=installation.operator_key, base_url=installation.base_url) as operator:
        key = operator.admin.tenants.create(name="sdk-cache").owner_key.value
    with Switchyard(api_key=key, base_url=installation.base_url) as client:
        agent = client.agents.create(
            name="ferry", model=MODEL, instructions=INSTRUCTIONS, model_params={"max_tokens": 8}
        )
        runs = []
        for _ in range(2):
            thread = client.threads.create(messages=[{"content": "Can I take a van across tonight?"}])
            runs.append(client.threads.runs.create_and_wait(thread.id, agent_id=agent.id))

    first, second = (run.usage for run in runs)
    assert isinstance(second.prompt_tokens_details, RunPromptTokensDetails)
    assert first.prompt_tokens_details.cached_tokens == 0
    assert first.prompt_tokens * 0.9 < second.prompt_tokens_details.cached_tokens < second.prompt_tokens
