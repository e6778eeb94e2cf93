"""The bounded mixed workload: chat completions (official ``openai`` client), agent runs and key/member operations
(``switchyard.sdk``), every attempt through the recording :class:`~tests.system.ledger.Balancer`.

Clients retry as real ones do: the ``openai`` client's and the SDK's own retries, plus re-sending a chat
completion whose connection failed (before or during its stream). What each operation finally got is written on
its :class:`~tests.system.ledger.Request`; nothing here asserts (the oracle does, afterwards).
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
import openai

from switchyard.sdk import AsyncSwitchyard
from switchyard.sdk.errors import APIConnectionError, APIStatusError, SwitchyardError
from tests.system.ledger import Balancer, Ledger, Request, current_request

__all__ = ["Clients", "Plan", "Workload"]

SMALL = "meta-llama/Llama-3.1-8B-Instruct"
BIG = "meta-llama/Llama-3.3-70B-Instruct"
CLIENT_TIMEOUT_S = 20.0  # per attempt; the oracle checks that no attempt took longer
# Prompts of different sizes: a usage event's prompt tokens tell which kind of request (and max_tokens) it was.
PLAIN_PROMPT = "Tell me about the fleet"
STREAM_PROMPT = "Stream me a long story about the simulated fleet and its busy replicas, please"
CREATE_PATIENCE_S = 30.0  # re-sending a run's create (same Idempotency-Key) before looking for it on its thread
T = TypeVar("T")


@dataclass(frozen=True)
class Plan:
    """Sizes of the workload (bounded in count; the fault schedule bounds it in time)."""

    chat_loops: int = 4
    max_chat: int = 600
    stream_max_tokens: int = 500
    plain_max_tokens: int = 150
    calculator_loops: int = 2
    function_loops: int = 1
    max_runs: int = 60
    max_admin_rounds: int = 20
    run_wait_s: float = 60.0  # how long a client waits for one run before giving up on it
    chat_resends: int = 3


@dataclass
class Clients:
    ledger: Ledger
    ports: list[int]
    owner_key: str
    operator_key: str
    openai: openai.AsyncOpenAI = field(init=False)
    sdk: AsyncSwitchyard = field(init=False)
    operator: AsyncSwitchyard = field(init=False)

    def __post_init__(self) -> None:
        base = f"http://127.0.0.1:{self.ports[0]}/v1"  # the balancer picks the port of each attempt
        self.openai = openai.AsyncOpenAI(
            base_url=base,
            api_key=self.owner_key,
            max_retries=2,
            timeout=CLIENT_TIMEOUT_S,
            http_client=httpx.AsyncClient(transport=Balancer(self.ports, self.ledger), timeout=CLIENT_TIMEOUT_S),
        )
        self.sdk = self.switchyard(self.owner_key)
        self.operator = self.switchyard(self.operator_key)

    def switchyard(self, key: str) -> AsyncSwitchyard:
        return AsyncSwitchyard(
            api_key=key,
            base_url=f"http://127.0.0.1:{self.ports[0]}/v1",
            timeout_s=CLIENT_TIMEOUT_S,
            max_retries=5,
            http_client=httpx.AsyncClient(transport=Balancer(self.ports, self.ledger)),
        )

    async def aclose(self) -> None:
        await self.openai.close()
        await self.sdk.close()
        await self.operator.close()


@dataclass
class Expectations:
    """What the key and member operations that succeeded imply about the tenant's final state."""

    members: dict[str, str | None] = field(default_factory=dict)  # email -> final role (None: deleted)
    unsure_members: set[str] = field(default_factory=set)  # an operation on them ended without an answer
    revoked_keys: list[str] = field(default_factory=list)  # secret values of keys revoked (answered)


class Workload:
    def __init__(self, clients: Clients, plan: Plan, rng: random.Random) -> None:
        self.c = clients
        self.plan = plan
        self.rng = rng
        self.stop = asyncio.Event()
        self.chat_count = 0
        self.run_count = 0
        self.runs: list[tuple[Request, str, str]] = []  # (request, thread id, run id) of every run created
        self.expect = Expectations()
        self.calc_agent = ""
        self.function_agent = ""

    # -- set-up --------------------------------------------------------------------------------------------

    async def setup(self) -> None:
        sdk = self.c.sdk
        await sdk.budgets.set(limit_minor=10**9)  # budgets hold and settle every call (the production path)
        calc = await sdk.agents.create(
            name="calc",
            model=SMALL,
            instructions="Use the calculator when asked, then answer.",
            tools=[{"type": "calculator"}],
            model_params={"max_tokens": 48},
        )
        lookup = await sdk.agents.create(
            name="lookup",
            model=SMALL,
            instructions="Use the lookup tool when asked, then answer.",
            tools=[
                {
                    "type": "function",
                    "name": "lookup",
                    "description": "Look a key up in the client's records",
                    "parameters": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
                }
            ],
            model_params={"max_tokens": 48},
        )
        self.calc_agent, self.function_agent = calc.id, lookup.id

    def tasks(self) -> list[Callable[[], Awaitable[None]]]:
        p = self.plan
        out: list[Callable[[], Awaitable[None]]] = []
        out += [lambda i=i: self._chat_loop(i) for i in range(p.chat_loops)]
        out += [lambda i=i: self._run_loop("calculator", i) for i in range(p.calculator_loops)]
        out += [lambda i=i: self._run_loop("function", i) for i in range(p.function_loops)]
        out.append(self._admin_loop)
        return out

    # -- chat completions ----------------------------------------------------------------------------------

    async def _chat_loop(self, index: int) -> None:
        i = 0
        while not self.stop.is_set() and self.chat_count < self.plan.max_chat:
            self.chat_count += 1
            stream = (i + index) % 2 == 0
            model = BIG if i % 5 == 4 else SMALL
            await self.chat(stream=stream, model=model, user=f"loop{index}")
            i += 1
            await asyncio.sleep(self.rng.uniform(0.05, 0.3))

    async def chat(self, *, stream: bool, model: str, user: str) -> Request:
        max_tokens = self.plan.stream_max_tokens if stream else self.plan.plain_max_tokens
        request = self.c.ledger.begin("chat", stream=stream, model=model, max_tokens=max_tokens)
        token = current_request.set(request)
        try:
            for resend in range(self.plan.chat_resends + 1):
                try:
                    if stream:
                        await self._stream_once(request, model, max_tokens, user)
                    else:
                        await self._plain_once(request, model, max_tokens, user)
                    return request
                except (openai.APIConnectionError, httpx.TransportError) as exc:  # incl. timeouts
                    request.outcome = f"connection: {type(exc).__name__}"
                    if resend < self.plan.chat_resends:
                        await asyncio.sleep(1.0)
                except openai.APIStatusError as exc:  # the client's own retries are spent
                    request.outcome = f"status {exc.status_code}: {_code(exc.body)}"
                    return request
                except openai.APIError as exc:  # an error event inside a stream
                    request.outcome = f"stream error: {exc.message}"
                    return request
            return request
        finally:
            request.ended = time.monotonic()
            current_request.reset(token)

    async def _plain_once(self, request: Request, model: str, max_tokens: int, user: str) -> None:
        completion = await self.c.openai.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": PLAIN_PROMPT}],
            max_tokens=max_tokens,
            extra_body={"ignore_eos": True},  # every answer is max_tokens long: fewer tokens mean a cut one
            user=user,
        )
        attempt = request.attempts[-1]
        if completion.choices and completion.choices[0].finish_reason and completion.id == attempt.completion_id:
            request.answered = attempt
            request.outcome = "answered"
            request.chip_us = _chip_us(completion.usage)
        else:
            request.outcome = f"incomplete answer: {completion.model_dump_json()[:200]}"

    async def _stream_once(self, request: Request, model: str, max_tokens: int, user: str) -> None:
        stream = await self.c.openai.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": STREAM_PROMPT}],
            max_tokens=max_tokens,
            extra_body={"ignore_eos": True},
            stream=True,
            stream_options={"include_usage": True},
            user=user,
        )
        finish, chip_us, ids = None, None, set()
        try:
            async for chunk in stream:
                ids.add(chunk.id)
                for choice in chunk.choices:
                    finish = choice.finish_reason or finish
                if chunk.usage is not None:
                    chip_us = _chip_us(chunk.usage)
        finally:
            await stream.close()
        attempt = request.attempts[-1]
        if finish is not None and attempt.done and ids == {attempt.completion_id}:
            request.answered = attempt
            request.outcome = "answered"
            request.chip_us = chip_us
        else:
            request.outcome = f"stream ended: finish_reason={finish} [DONE]={attempt.done} ids={sorted(ids)}"

    # -- agent runs ----------------------------------------------------------------------------------------

    async def _run_loop(self, kind: str, index: int) -> None:
        i = 0
        while not self.stop.is_set() and self.run_count < self.plan.max_runs:
            self.run_count += 1
            await self.agent_run(kind, f"{index}.{i}")
            i += 1

    async def agent_run(self, kind: str, label: str) -> Request:
        sdk = self.c.sdk
        a, b = self.rng.randint(2, 99), self.rng.randint(2, 99)
        if kind == "calculator":
            content, agent, expected = f"please use the calculator expression={a}*{b}", self.calc_agent, str(a * b)
        else:
            content, agent, expected = f"please use lookup key=k{label}", self.function_agent, f"value-k{label}"
        request = self.c.ledger.begin("run", tool=kind, expected=expected)
        token = current_request.set(request)
        deadline = time.monotonic() + self.plan.run_wait_s
        try:
            thread = await _persist(lambda: sdk.threads.create(messages=[{"content": content}]), deadline)
            key = f"sys-run-{self.c.ledger.tag}-{kind}-{label}"  # one key for every re-send: one run is created
            try:
                run = await _persist(
                    lambda: sdk.threads.runs.create(thread.id, agent_id=agent, idempotency_key=key),
                    min(deadline, time.monotonic() + CREATE_PATIENCE_S),
                )
            except SwitchyardError as exc:
                # the create's answer never came through: a client looks for the run on its thread
                request.detail["create_error"] = str(exc)[:200]
                page = await _persist(lambda: sdk.threads.runs.list(thread.id), deadline)
                if not page.data:
                    raise
                run = page.data[0]
            self.runs.append((request, thread.id, run.id))
            request.detail["run_id"] = run.id
            submitted: set[str] = set()
            while time.monotonic() < deadline:
                try:
                    run = await sdk.threads.runs.retrieve(thread.id, run.id)
                except SwitchyardError as exc:
                    request.outcome = f"polling: {type(exc).__name__}"
                    await asyncio.sleep(0.5)
                    continue
                if run.is_final:
                    request.outcome = run.status
                    return request
                if run.status == "requires_action" and run.required_action:
                    calls = run.required_action["submit_tool_outputs"]["tool_calls"]
                    ids = tuple(sorted(call["id"] for call in calls))
                    if not submitted.issuperset(ids):
                        outputs = [
                            {
                                "tool_call_id": call["id"],
                                "output": f"value-{json.loads(call['function']['arguments'])['key']}",
                            }
                            for call in calls
                        ]
                        try:
                            await sdk.threads.runs.submit_tool_outputs(thread.id, run.id, outputs)
                            submitted.update(ids)
                        except APIStatusError as exc:  # e.g. a re-send after the first was applied
                            request.detail.setdefault("submit_errors", []).append(f"{exc.status_code} {exc.code}")
                        except SwitchyardError as exc:
                            request.detail.setdefault("submit_errors", []).append(type(exc).__name__)
                await asyncio.sleep(0.3)
            request.outcome = f"client gave up waiting ({run.status})"
        except SwitchyardError as exc:
            request.outcome = f"could not create: {type(exc).__name__}: {exc}"
        finally:
            request.ended = time.monotonic()
            current_request.reset(token)
        return request

    # -- keys and members ----------------------------------------------------------------------------------

    async def _admin_loop(self) -> None:
        i = 0
        while not self.stop.is_set() and i < self.plan.max_admin_rounds:
            await self.admin_round(i)
            i += 1
            await asyncio.sleep(self.rng.uniform(0.5, 1.5))

    async def admin_round(self, i: int) -> None:
        sdk, email = self.c.sdk, f"member{i}@{self.c.ledger.tag}.example"
        member = await self._op("member.create", sdk.members.create(email=email, role="viewer"), email)
        if member is not None:
            self.expect.members[email] = "viewer"
            if await self._op("member.update", sdk.members.update(member.id, role="developer"), email) is not None:
                self.expect.members[email] = "developer"
            if i % 2 and await self._op("member.delete", sdk.members.delete(member.id), email) is not None:
                self.expect.members[email] = None
        created = await self._op("api_key.create", sdk.api_keys.create(name=f"sys-{i}", role="viewer"))
        if created is not None and await self._op("api_key.revoke", sdk.api_keys.revoke(created.id)) is not None:
            self.expect.revoked_keys.append(created.value)
        await self._op("admin.tenants.list", self.c.operator.admin.tenants.list(limit=5))

    async def _op(self, name: str, call: Awaitable[T], email: str | None = None) -> T | None:
        request = self.c.ledger.begin("admin", op=name)
        token = current_request.set(request)
        try:
            result = await call
            request.outcome = "answered"
            return result
        except SwitchyardError as exc:
            request.outcome = f"{type(exc).__name__}: {exc}"[:200]
            if email is not None:  # refused, or maybe applied without an answer: no claim on its final state
                self.expect.unsure_members.add(email)
            return None
        finally:
            request.ended = time.monotonic()
            current_request.reset(token)


async def _persist(make: Callable[[], Awaitable[T]], deadline: float) -> T:
    """Call ``make`` until it answers, re-sending after errors the SDK's own retries did not get past (as a
    client that must get its work in would), until ``deadline``."""
    while True:
        try:
            return await make()
        except (APIConnectionError, APIStatusError) as exc:
            if isinstance(exc, APIStatusError) and exc.status_code < 500 and exc.status_code not in (409, 429):
                raise
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(1.0)


def _chip_us(usage: Any) -> int | None:
    compute = (getattr(usage, "model_extra", None) or {}).get("compute") if usage is not None else None
    return int(compute["chip_us"]) if compute else None


def _code(body: object) -> str:
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            return str(error.get("code"))
    return "?"
