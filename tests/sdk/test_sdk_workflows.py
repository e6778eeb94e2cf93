"""Workflows through the SDK on a real installation (API, Celery worker, fleet): defined, versioned, run on a
thread, approved by a person, answered."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from switchyard.sdk import Switchyard
from tests.sdk.conftest import MODEL, Installation
from tests.sdk.test_sdk_runs import new_tenant_key

pytestmark = pytest.mark.slow


@pytest.fixture
def client(installation: Installation) -> Iterator[Switchyard]:
    with Switchyard(api_key=new_tenant_key(installation), base_url=installation.base_url) as client:
        yield client


def test_a_workflow_is_defined_run_and_approved(client: Switchyard) -> None:
    writer = client.agents.create(name="writer", model=MODEL, instructions="You draft replies.")
    workflow = client.workflows.create(
        name="reply",
        start="draft",
        state={"draft": {"type": "string"}},
        nodes=[
            {"type": "agent", "id": "draft", "agent_id": writer.id, "output_to": "draft", "next": "review"},
            {"type": "user_approval", "id": "review", "message": "Send? {{ state.draft }}", "approved": "done",
             "rejected": "done"},
            {"type": "end", "id": "done", "output": "{{ state.draft }}"},
        ],
    )  # fmt: skip
    assert (workflow.object, workflow.version) == ("workflow", 1)
    renamed = client.workflows.update(workflow.id, name="replies")
    assert (renamed.name, renamed.version) == ("replies", 2)
    assert sorted(v.version for v in client.workflows.versions(workflow.id)) == [1, 2]
    thread = client.threads.create(messages=[{"content": "Where is my parcel?"}])
    run = client.threads.runs.create_and_wait(thread.id, agent_id=workflow.id)
    assert run.status == "requires_action"
    assert run.required_action is not None
    (call,) = run.required_action["approval"]["tool_calls"]
    client.threads.runs.submit_approvals(thread.id, run.id, [{"tool_call_id": call["id"], "approve": True}])
    done = client.threads.runs.wait(thread.id, run.id)
    assert done.status == "completed"
    steps = [s for s in client.threads.runs.steps(thread.id, run.id) if s.type == "tool_call"]
    (draft,) = steps
    assert draft.step_details["tool_call"]["function"]["name"] == "draft"
    assert draft.agent_id == workflow.id  # the node's call is the workflow's; its model step is the writer's
    answer = next(m for m in client.threads.messages.list(thread.id) if m.role == "assistant")
    assert answer.content == draft.step_details["output"]
