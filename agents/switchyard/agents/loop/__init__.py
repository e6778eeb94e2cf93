"""The run loop: a pure, synchronous, deterministic state machine (time passed in, no I/O).

Driving it (what a worker does; :func:`switchyard.agents.runner.drive_run` is a reference driver)::

    state = loop.new_run(run_id, now_ms=now())                 # persist state
    while True:
        state, action = loop.advance(state, thread=history, now_ms=now())   # persist state
        match action:
            case CallModel():    response = model(action.request)
                                 state = loop.record_model_response(state, action.step_id, response, now_ms=now())
            case ExecuteTools(): for each invocation: result = tool(...)
                                 state = loop.record_tool_result(state, inv.step_id, result, now_ms=now())
            case AwaitClient():  stop; later submit_tool_outputs / submit_approvals, then advance again
            case RunFinished():  stop
        # persist state after every record_* call

Every transition returns a new :class:`RunState`; persist it before performing the action it asks for.
A worker that dies at any point resumes by loading the last stored state and calling ``advance`` again:

* a model step recorded but not completed is asked for again (its compute is billed only when a response
  is recorded, so never twice);
* a tool step recorded but not completed is executed again if the call is ``idempotent``, and otherwise
  (``at_most_once``) completed with an error output saying the outcome is unknown — never executed twice.

A run may act as other agents (``members``, :mod:`switchyard.agents.team`): the model's ``transfer_to_<name>``
call makes the run go on as that agent (``RunState.active_agent``), on the same messages, at most
``limits.max_handoffs`` times; the run's own agent's limits hold for the whole run. Guardrails
(:mod:`switchyard.agents.guardrails`) check the run's input (the thread's last user message) before its first model
call, with the run's own agent's input guardrails, and its answer with the answering agent's output guardrails; a
trip fails the run with ``guardrail_tripped`` (a tripped answer is replaced by a notice).

An agent called as a tool (``AgentToolSpec``) runs in a frame (``RunState.frames``): a conversation of its own
that starts with the call's ``input`` as the user's message and sees nothing of the caller's; its steps are the
run's (billed to it), and its final answer (checked by its output guardrails) becomes the call's output in the
caller's conversation. Frames nest up to ``MAX_FRAMES`` deep.

A workflow (``AgentSpec.workflow``, :mod:`switchyard.agents.workflows`) makes the run follow its graph instead of
asking its own agent: each ``agent`` node is a call of that agent in a frame (a step named after the node, its
answer the step's output), an ``user_approval`` node waits in ``requires_action`` for an approval of a call named
``approve_<node>``, and the workflow's output is the run's answer (``RunState.workflow`` is where it stands).

The loop is built in layers: :mod:`~switchyard.agents.loop.parts` (what every part shares: the agents a run acts as,
recording steps and stops), :mod:`~switchyard.agents.loop.frames` (handoffs, agents called as tools, guardrail
judges), :mod:`~switchyard.agents.loop.workflow` (a workflow's nodes) and :mod:`~switchyard.agents.loop.run_loop`
(:class:`RunLoop`: stepping, model and tool calls, the client's actions).
"""

from switchyard.agents.loop.parts import INTERRUPTED_OUTPUT
from switchyard.agents.loop.run_loop import RunLoop

__all__ = ["INTERRUPTED_OUTPUT", "RunLoop"]
