"""A noisy neighbour and its victim: tenant A's attacks on shared resources and tenant B's ordinary traffic, timed
in alternating windows (B alone, then B beside one of A's attacks) against a running installation.

Shared by ``tests/system/test_noisy_neighbour.py`` (which asserts) and ``benchmarks/noisy_neighbour.py`` (which
prints); it starts nothing and asserts nothing. Tenant B (:class:`Ordinary`) runs chat completions and embeddings
through the official ``openai`` client and agent runs through ``switchyard.sdk``, each loop on a key of its own
and paced under the per-key request rate, and records every call (:class:`Sample`): its latency, whether it
succeeded, and the tokens, chip-µs and model requests its answer reports. Tenant A (:data:`ATTACKS`) runs the
attacks of issue 22 one at a time: schema bombs (Responses ``text.format``, a function tool with
``tool_choice: "required"``, a chat completion's tool), huge embeddings, a flood of background responses past its
key's request rate, and console sign-in floods with wrong passwords and varied ``X-Forwarded-For``.

A is another client, in a process of its own (:class:`AttackProcess`), as tenants are: run in B's event loop, A's
hundreds of requests would delay B's calls inside the load generator itself, and B's latency would count that as
the installation's. While B measures, the heap its process held before is set aside from the garbage collector's
full passes (``gc.freeze``): in a test run that process is pytest's, holding every collected test (~650,000
objects, a full pass ~0.3 s on a quiet machine and over 1 s on a busy one), and such a pass stops B's event loop
with every one of its calls in flight, which read as the installation answering them all late at once.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import multiprocessing
import re
import secrets
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import httpx
import openai

from switchyard.sdk import AsyncSwitchyard

__all__ = [
    "ATTACKS",
    "CHAT_MODEL",
    "AttackProcess",
    "Attacker",
    "Ordinary",
    "Row",
    "Sample",
    "Tenant",
    "WindowPlan",
    "api_key",
    "p50",
    "p99",
    "rows",
    "run_windows",
    "worker_backlog",
]

CHAT_MODEL = "meta-llama/Llama-3.1-8B-Instruct"
EMBEDDING_MODEL = "qwen3-embedding-8b"
B_TIMEOUT_S = 30.0  # B waits this long for one call (a run: until it ends); a call that takes longer is a failure
A_TIMEOUT_S = 120.0  # A waits this long for its answers (the server works on them until then, or longer)
# Each of B's loops starts a call at most this often: under the test's 60 model calls per key per minute (a
# calculator run makes two).
PACE_S = {"chat": 1.5, "embeddings": 1.5, "run": 3.0}
KINDS = ("chat", "embeddings", "run")
IDLE_POLL_S = 0.5  # how often A's leftover work is looked for
DRAIN_POLL_S = 0.05  # how often B's calls in flight are counted between windows
LAG_TICK_S = 0.01  # how often B's client checks that its own event loop runs on time
LAG_NOTED_S = 0.1  # a tick this late is noted (``Ordinary.stalls``): B's client, not the installation, was slow


@dataclass
class Tenant:
    """A tenant as its users hold it: the owner key and the owner's invitation link (``switchyard tenant create``)."""

    id: str
    owner_key: str
    email: str
    invitation_url: str
    ports: list[int]

    def base_url(self, index: int = 0) -> str:
        return f"http://127.0.0.1:{self.ports[index % len(self.ports)]}"

    @classmethod
    def from_cli(cls, output: str, ports: list[int]) -> Tenant:
        """Parse what ``switchyard tenant create NAME --owner-email E`` prints."""
        found = re.search(
            r"tenant:\s+(\S+)\nowner key:\s+(\S+)\nconsole:\s+(\S+) sets a password and signs in at (\S+)",
            output,
        )
        assert found, f"unexpected `switchyard tenant create` output:\n{output}"
        return cls(found[1], found[2], found[3], found[4], ports)


async def api_key(tenant: Tenant, name: str) -> str:
    """A new developer key of ``tenant`` (its secret)."""
    async with httpx.AsyncClient(base_url=tenant.base_url(), timeout=30) as client:
        answer = await client.post(
            "/v1/api-keys",
            json={"name": name, "role": "developer"},
            headers={"authorization": f"Bearer {tenant.owner_key}"},
        )
        answer.raise_for_status()
        return str(answer.json()["value"])


@dataclass
class Sample:
    """One call of tenant B: when (which window it started in), how long, and what its answer says it used."""

    kind: str
    window: str  # "alone" or the attack's name
    window_index: int  # which of the windows it started in (``Ordinary.windows``)
    latency_s: float
    error: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    chip_us: int = 0
    model_requests: int = 0
    run: tuple[str, str] | None = None  # (thread id, run id) of an agent run, once created
    timeline: tuple[datetime, datetime, datetime] | None = None  # an agent run's created, started, completed at
    simulated_ms: float | None = None  # a chat completion's queue, first token and decode in the fleet (simulated)


def p99(values: list[float]) -> float:
    """The 99th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[max(0, -(-99 * len(ordered) // 100) - 1)]


def p50(values: list[float]) -> float:
    return statistics.median(values)


class Ordinary:
    """Tenant B's ordinary traffic: paced loops of chat completions, embeddings and agent runs, each on its own key.

    :meth:`start` makes the keys and the agent; the loops run until :meth:`stop`; every call is a :class:`Sample`
    labelled with the window it ran in.
    """

    def __init__(self, tenant: Tenant, *, chat_loops: int = 6, embedding_loops: int = 3, run_loops: int = 4) -> None:
        self.tenant = tenant
        self.loops = {"chat": chat_loops, "embeddings": embedding_loops, "run": run_loops}
        self.windows = ["warm-up"]  # every window so far, in order: the current one last
        self.samples: list[Sample] = []
        self._stop = asyncio.Event()
        self._open = asyncio.Event()  # loops start calls only while it is set
        self._open.set()
        self._in_flight = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._closers: list[Callable[[], Awaitable[None]]] = []
        self._agent_id = ""
        self.stalls: list[tuple[str, float]] = []  # (window, seconds) the client's own event loop was late

    async def start(self) -> None:
        sdk = self._sdk(self.tenant.owner_key, 0)
        agent = await sdk.agents.create(
            name="calculator",
            model=CHAT_MODEL,
            instructions="Use the calculator when asked, then answer.",
            tools=[{"type": "calculator"}],
            model_params={"max_tokens": 32},
        )
        self._agent_id = agent.id
        index = itertools.count()
        for kind, count in self.loops.items():
            for n in range(count):
                key = await api_key(self.tenant, f"b-{kind}-{n}")
                loop = {"chat": self._chat_loop, "embeddings": self._embedding_loop, "run": self._run_loop}[kind]
                self._tasks.append(asyncio.create_task(loop(key, next(index))))
        self._tasks.append(asyncio.create_task(self._watch_own_loop()))

    async def _watch_own_loop(self) -> None:
        """Note when this client's event loop runs late: a stall of B's own would look like the attack's."""
        while not self._stop.is_set():
            started = time.perf_counter()
            await asyncio.sleep(LAG_TICK_S)
            late = time.perf_counter() - started - LAG_TICK_S
            if late >= LAG_NOTED_S:
                self.stalls.append((self.window, late))

    def describe(self, index: int) -> str:
        """B's calls started in window ``index``: how many, p50 and p99 per kind."""
        index %= len(self.windows)
        parts = []
        for kind in KINDS:
            times = [s.latency_s * 1e3 for s in self.samples if s.window_index == index and s.kind == kind]
            if times:
                parts.append(f"{kind} {len(times)} calls p50 {p50(times):.0f} ms p99 {p99(times):.0f} ms")
        return f"window {index} ({self.windows[index]}): " + ", ".join(parts)

    async def switch(self, window: str) -> None:
        """Calls started from now on belong to ``window`` (``alone`` or an attack's name). The calls in flight end
        first (none is started meanwhile): no call spans two windows, and every window starts alike, with each
        loop's call at once."""
        self._open.clear()
        for _ in range(int(B_TIMEOUT_S / DRAIN_POLL_S) + 1):
            if not self._in_flight:
                break
            await asyncio.sleep(DRAIN_POLL_S)
        self.windows.append(window)
        self._open.set()

    @property
    def window(self) -> str:
        return self.windows[-1]

    async def stop(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)
        for close in self._closers:
            await close()

    def _openai(self, key: str, index: int) -> openai.AsyncOpenAI:
        client = openai.AsyncOpenAI(
            base_url=f"{self.tenant.base_url(index)}/v1", api_key=key, timeout=B_TIMEOUT_S, max_retries=0
        )
        self._closers.append(client.close)
        return client

    def _sdk(self, key: str, index: int) -> AsyncSwitchyard:
        client = AsyncSwitchyard(
            api_key=key, base_url=f"{self.tenant.base_url(index)}/v1", timeout_s=B_TIMEOUT_S, max_retries=0
        )
        self._closers.append(client.close)
        return client

    async def _paced(self, kind: str, call: Callable[[Sample], Awaitable[None]]) -> None:
        """Call ``call`` every ``PACE_S[kind]`` (or as soon as the previous one ended) until stopped."""
        while not self._stop.is_set():
            await self._open.wait()
            sample = Sample(kind, self.window, len(self.windows) - 1, 0.0)
            self._in_flight += 1
            started = time.perf_counter()
            try:
                await asyncio.wait_for(call(sample), B_TIMEOUT_S)
            except Exception as exc:  # a failure of B's is a finding, recorded with what it said
                sample.error = f"{type(exc).__name__}: {exc}"[:300]
            finally:
                self._in_flight -= 1
            sample.latency_s = time.perf_counter() - started
            self.samples.append(sample)
            await asyncio.sleep(max(0.0, PACE_S[kind] - sample.latency_s))

    async def _chat_loop(self, key: str, index: int) -> None:
        client = self._openai(key, index)

        async def call(sample: Sample) -> None:
            completion = await client.chat.completions.create(
                model=CHAT_MODEL, messages=[{"role": "user", "content": "Say hello"}], max_tokens=8
            )
            assert completion.usage is not None
            sample.input_tokens, sample.output_tokens = (
                completion.usage.prompt_tokens,
                completion.usage.completion_tokens,
            )
            sample.chip_us, sample.model_requests = _chip_us(completion.usage), 1
            compute = _compute(completion.usage)
            sample.simulated_ms = sum(float(compute.get(part, 0.0)) for part in ("queue_ms", "ttft_ms", "decode_ms"))

        await self._paced("chat", call)

    async def _embedding_loop(self, key: str, index: int) -> None:
        client = self._openai(key, index)

        async def call(sample: Sample) -> None:
            answer = await client.embeddings.create(model=EMBEDDING_MODEL, input=["a short sentence", "another one"])
            sample.input_tokens, sample.chip_us, sample.model_requests = (
                answer.usage.prompt_tokens,
                _chip_us(answer.usage),
                1,
            )

        await self._paced("embeddings", call)

    async def _run_loop(self, key: str, index: int) -> None:
        sdk = self._sdk(key, index)
        numbers = itertools.count(12)

        async def call(sample: Sample) -> None:
            a = next(numbers)
            thread = await sdk.threads.create(messages=[{"content": f"please use the calculator expression={a}*7"}])
            run = await sdk.threads.runs.create(thread.id, agent_id=self._agent_id)
            sample.run = (thread.id, run.id)
            async with sdk.threads.runs.events(thread.id, run.id) as events:  # closed when the wait is cut short
                async for _ in events:
                    pass
            run = await sdk.threads.runs.retrieve(thread.id, run.id)
            if run.status != "completed":
                raise RuntimeError(f"run {run.id} ended {run.status}: {run.last_error}")
            await self.read_run_usage(sample, sdk)

        await self._paced("run", call)

    async def read_run_usage(self, sample: Sample, sdk: AsyncSwitchyard | None = None) -> None:
        """Fill ``sample`` with what its run used (its tokens, chip-µs and model calls) as the run reports it."""
        assert sample.run is not None
        if sdk is None:
            async with AsyncSwitchyard(api_key=self.tenant.owner_key, base_url=f"{self.tenant.base_url()}/v1") as own:
                return await self.read_run_usage(sample, own)
        thread_id, run_id = sample.run
        run = await sdk.threads.runs.retrieve(thread_id, run_id)
        steps = await sdk.threads.runs.steps(thread_id, run_id, limit=100)
        sample.input_tokens, sample.output_tokens = run.usage.prompt_tokens, run.usage.completion_tokens
        sample.chip_us = run.chip_us
        sample.model_requests = sum(1 for step in steps.data if step.type == "model_call")
        if run.started_at and run.completed_at:
            sample.timeline = (run.created_at, run.started_at, run.completed_at)


def _compute(usage: Any) -> dict[str, Any]:
    """Switchyard's ``usage.compute`` of an answer the ``openai`` client parsed."""
    return dict((getattr(usage, "model_extra", None) or {}).get("compute") or {})


def _chip_us(usage: Any) -> int:
    return int(_compute(usage).get("chip_us", 0))


# -- tenant A's attacks -----------------------------------------------------------------------------------------


def all_of_bomb(parts: int = 3500) -> dict[str, Any]:
    """~107 KB: each ``allOf`` level merges the properties again and ``$ref: "#"`` re-enters the root."""
    return {"allOf": [{"$ref": "#"}, *({"properties": {f"p{i}": {}}} for i in range(parts))]}


def long_strings(min_items: int = 5000) -> dict[str, Any]:
    """222 bytes asking for ``min_items`` strings of 100,000 characters."""
    return {"type": "array", "minItems": min_items, "items": {"type": "string", "minLength": 100_000}}


def many_arrays(properties: int = 10, min_items: int = 2000) -> dict[str, Any]:
    """A tool's parameters: ``properties`` arrays of ``min_items`` strings each, all required."""
    names = [f"a{i}" for i in range(properties)]
    return {
        "type": "object",
        "properties": {n: {"type": "array", "minItems": min_items, "items": {"type": "string"}} for n in names},
        "required": names,
    }


def schema_bomb_bodies() -> Iterator[tuple[str, dict[str, Any]]]:
    """(path, body) of each schema bomb, round and round: small ``max_*tokens``, huge or slow answers."""
    tool = {"type": "function", "name": "record", "parameters": many_arrays()}
    bodies = [
        (
            "/v1/responses",
            {
                "model": CHAT_MODEL,
                "input": "fill it",
                "max_output_tokens": 16,
                "text": {"format": {"type": "json_schema", "name": "bomb", "schema": all_of_bomb()}},
            },
        ),
        (
            "/v1/responses",
            {
                "model": CHAT_MODEL,
                "input": "fill it",
                "max_output_tokens": 16,
                "text": {"format": {"type": "json_schema", "name": "big", "schema": long_strings()}},
            },
        ),
        (
            "/v1/responses",
            {
                "model": CHAT_MODEL,
                "input": "call it",
                "max_output_tokens": 16,
                "tools": [tool],
                "tool_choice": "required",
            },
        ),
        (
            "/v1/chat/completions",
            {
                "model": CHAT_MODEL,
                "messages": [{"role": "user", "content": "call it"}],
                "max_tokens": 1,
                "tool_choice": "required",
                "tools": [{"type": "function", "function": {"name": "record", "parameters": many_arrays()}}],
            },
        ),
    ]
    return itertools.cycle(bodies)


@dataclass
class Attacker:
    """Tenant A: a key per attack (a hostile tenant makes as many as it likes) and what its attacks got back."""

    tenant: Tenant
    concurrency: int = 2
    pace_s: float = 0.5  # the attacks are about what one request costs, not about how many are sent
    outcomes: dict[str, dict[str, int]] = field(default_factory=dict)

    def count(self, attack: str, outcome: str, times: int = 1) -> None:
        tally = self.outcomes.setdefault(attack, {})
        tally[outcome] = tally.get(outcome, 0) + times

    async def _post(self, client: httpx.AsyncClient, attack: str, path: str, **kwargs: Any) -> httpx.Response | None:
        try:
            answer = await client.post(path, **kwargs)
        except httpx.HTTPError as exc:
            self.count(attack, type(exc).__name__)
            return None
        self.count(attack, str(answer.status_code))
        return answer

    async def _until(self, stop: asyncio.Event, work: Callable[[int], Awaitable[None]]) -> None:
        """``work`` in ``concurrency`` loops until ``stop``, each starting at most one call per ``pace_s``."""

        async def worker(index: int) -> None:
            while not stop.is_set():
                started = time.monotonic()
                await work(index)
                await asyncio.sleep(max(0.0, self.pace_s - (time.monotonic() - started)))

        await asyncio.gather(*(worker(i) for i in range(self.concurrency)))

    def _client(self, key: str, index: int) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.tenant.base_url(index), headers={"authorization": f"Bearer {key}"}, timeout=A_TIMEOUT_S
        )

    async def schema_bombs(self, stop: asyncio.Event) -> None:
        key = await api_key(self.tenant, "a-schema-bombs")
        bodies = schema_bomb_bodies()
        clients = [self._client(key, i) for i in range(self.concurrency)]

        async def work(index: int) -> None:
            path, body = next(bodies)
            await self._post(clients[index], "schema bombs", path, json=body)

        try:
            await self._until(stop, work)
        finally:
            for client in clients:
                await client.aclose()

    async def huge_embeddings(self, stop: asyncio.Event) -> None:
        key = await api_key(self.tenant, "a-embeddings")
        clients = [self._client(key, i) for i in range(self.concurrency)]
        body = {"model": EMBEDDING_MODEL, "input": [[0]] * 2048}

        async def work(index: int) -> None:
            await self._post(clients[index], "huge embeddings", "/v1/embeddings", json=body)

        try:
            await self._until(stop, work)
        finally:
            for client in clients:
                await client.aclose()

    async def background_flood(self, stop: asyncio.Event, *, flood: int) -> None:
        """``flood`` small background responses at once from one key, more than its requests per minute, left to
        run (a backlog, not cancelled)."""
        key = await api_key(self.tenant, "a-background")
        clients = [self._client(key, i) for i in range(2)]
        body = {"model": CHAT_MODEL, "input": "Say hello", "max_output_tokens": 16, "background": True}
        gate = asyncio.Semaphore(8)

        async def one(index: int) -> None:
            async with gate:
                await self._post(clients[index % 2], "background flood", "/v1/responses", json=body)

        try:
            await asyncio.gather(*(one(i) for i in range(flood)))
            await stop.wait()
        finally:
            for client in clients:
                await client.aclose()

    async def sign_in_flood(self, stop: asyncio.Event) -> None:
        """Wrong passwords for A's own owner and for unknown emails, each from a different ``X-Forwarded-For``."""
        clients = [httpx.AsyncClient(base_url=self.tenant.base_url(i), timeout=A_TIMEOUT_S) for i in range(2)]
        forms = [await _sign_in_form(client) for client in clients]
        counter = itertools.count()

        async def work(index: int) -> None:
            n = next(counter)
            csrf = forms[index % 2]
            email = self.tenant.email if n % 2 else f"nobody{n}@{self.tenant.id}.example"
            await self._post(
                clients[index % 2],
                "sign-in flood",
                "/console/sign-in",
                data={"email": email, "password": secrets.token_urlsafe(12), "csrf_token": csrf},
                headers={"cookie": f"switchyard_console_csrf={csrf}", "x-forwarded-for": f"203.0.113.{n % 250 + 1}"},
            )

        try:
            await self._until(stop, work)
        finally:
            for client in clients:
                await client.aclose()


async def _sign_in_form(client: httpx.AsyncClient) -> str:
    """The CSRF token of the sign-in form (its cookie is Secure: httpx keeps it only over https, so it is sent
    by hand)."""
    page = await client.get("/console/sign-in")
    found = re.search(r"switchyard_console_csrf=([^;]+)", page.headers.get("set-cookie", ""))
    assert found, f"the sign-in page set no CSRF cookie ({page.status_code})"
    return found[1]


AttackRun = Callable[[Attacker, asyncio.Event], Awaitable[None]]
ATTACKS: dict[str, AttackRun] = {
    "schema bombs": lambda a, stop: a.schema_bombs(stop),
    "huge embeddings": lambda a, stop: a.huge_embeddings(stop),
    "sign-in flood": lambda a, stop: a.sign_in_flood(stop),
    "background flood": lambda a, stop: a.background_flood(stop, flood=90),
}
"""Each attack, in the order run: the background flood last, since what it queues outlives its window."""


class AttackProcess:
    """One of A's attacks in a process of its own: started and ready (imported, waiting) before B's window beside
    it begins, run from :meth:`go` until :meth:`halt`, which returns when A's requests have all been answered and
    adds what they got to the attacker's outcomes."""

    def __init__(self, attacker: Attacker, name: str) -> None:
        context = multiprocessing.get_context("spawn")  # a fresh interpreter: no copy of this one's event loop
        self.attacker, self.name = attacker, name
        self._ready, self._go, self._halt = context.Event(), context.Event(), context.Event()
        self._outcomes: multiprocessing.Queue[dict[str, dict[str, int]]] = context.Queue()
        self._process = context.Process(
            target=_attack_in_process,
            args=(replace(attacker, outcomes={}), name, self._ready, self._go, self._halt, self._outcomes),
            name=f"tenant A: {name}",
            daemon=True,  # ends with the load generator, whatever happens to it
        )

    async def start(self) -> None:
        self._process.start()
        if not await asyncio.to_thread(self._ready.wait, A_TIMEOUT_S):
            raise RuntimeError(f"tenant A's process for {self.name!r} did not start")

    def go(self) -> None:
        self._go.set()

    async def halt(self) -> None:
        self._halt.set()
        outcomes = await asyncio.to_thread(self._outcomes.get, True, A_TIMEOUT_S + 30)
        await asyncio.to_thread(self._process.join, 30)
        for attack, tally in outcomes.items():
            for outcome, times in tally.items():
                self.attacker.count(attack, outcome, times)


def _attack_in_process(attacker: Attacker, name: str, ready: Any, go: Any, halt: Any, outcomes: Any) -> None:
    async def attack() -> None:
        stop = asyncio.Event()
        ready.set()
        await asyncio.to_thread(go.wait)
        running = asyncio.create_task(ATTACKS[name](attacker, stop))
        await asyncio.to_thread(halt.wait)
        stop.set()
        await running
        outcomes.put(attacker.outcomes)

    asyncio.run(attack())


A_BUSY_SQL = (
    "SELECT (SELECT count(*) FROM responses WHERE tenant_id = %s AND status IN ('queued', 'in_progress'))"
    " + (SELECT count(*) FROM runs WHERE tenant_id = %s AND status IN ('queued', 'in_progress', 'cancelling'))"
)
"""Work of tenant A's still queued or running on the installation (parameters: A's id, twice)."""


@dataclass(frozen=True)
class Row:
    """B's latencies of one kind of call alone and beside one attack (``all``: beside any)."""

    attack: str
    kind: str
    alone: list[float]
    beside: list[float]

    @property
    def ratio(self) -> float:
        """p99 beside the attack over p99 alone."""
        return p99(self.beside) / p99(self.alone)


def rows(b: Ordinary) -> list[Row]:
    """Per attack and kind, B's latencies in the attack's windows against those in the windows of B alone just
    before them; then per kind (``all``) every window beside an attack against every window alone. Calls that
    failed count beside an attack (at their latency) and are left out alone."""
    measured = [s for s in b.samples if s.window != "warm-up"]
    attacks = list(dict.fromkeys(w for w in b.windows if w not in ("warm-up", "alone")))
    out = []
    for attack in [*attacks, "all"]:
        for kind in KINDS:
            of_kind = [s for s in measured if s.kind == kind]
            if attack == "all":
                beside = [s.latency_s for s in of_kind if s.window != "alone"]
                alone = [s.latency_s for s in of_kind if s.window == "alone" and not s.error]
            else:
                windows = {i for i, w in enumerate(b.windows) if w == attack}
                beside = [s.latency_s for s in of_kind if s.window == attack]
                alone = [
                    s.latency_s
                    for s in of_kind
                    if s.window == "alone" and s.window_index + 1 in windows and not s.error
                ]
            if alone and beside:
                out.append(Row(attack, kind, alone, beside))
    return out


RUNS_QUEUE = "switchyard.runs"  # where workers take agent runs and background responses from


def worker_backlog(broker: Any) -> int:
    """Jobs of agent runs and background responses waiting in the Redis broker ``broker`` (a ``redis.Redis``):
    queued, or taken by a worker and not yet done (a job deferred with a countdown waits there too)."""
    queued = sum(int(broker.llen(key)) for key in broker.scan_iter(match=f"{RUNS_QUEUE}*", _type="list"))
    unacked = broker.hvals("unacked")
    taken = sum(1 for raw in unacked if json.loads(raw)[-1] == RUNS_QUEUE)
    return queued + taken


SLOW_REQUEST_S = "1.0"  # a bucket bound of the HTTP duration histogram (``observability.metrics``)


def slow_requests(exposition: str, over_s: str = SLOW_REQUEST_S, routes: tuple[str, ...] = ()) -> int:
    """Requests a process's ``GET /metrics`` counts as longer than ``over_s`` seconds (of ``routes``, or all)."""
    total = within = 0.0
    for line in exposition.splitlines():
        if routes and not any(f'route="{route}"' in line for route in routes):
            continue
        if line.startswith("switchyard_http_request_duration_seconds_count"):
            total += float(line.rsplit(" ", 1)[1])
        elif line.startswith("switchyard_http_request_duration_seconds_bucket") and f'le="{over_s}"' in line:
            within += float(line.rsplit(" ", 1)[1])
    return int(total - within)


async def slow_requests_by_process(ports: dict[str, int], routes: tuple[str, ...] = ()) -> dict[str, int]:
    """``slow_requests`` of each process named in ``ports`` (name: port on 127.0.0.1); -1 where unreadable."""
    found = {}
    async with httpx.AsyncClient(timeout=10) as client:
        for name, port in ports.items():
            try:
                found[name] = slow_requests((await client.get(f"http://127.0.0.1:{port}/metrics")).text, routes=routes)
            except httpx.HTTPError:
                found[name] = -1
    return found


@dataclass(frozen=True)
class WindowPlan:
    """How long B runs alone and beside each attack, in how many alternating rounds per attack, and how long an
    attack's aftermath may last before B's next window starts anyway (counted beside that attack)."""

    window_s: float = 6.0
    rounds: int = 2
    warm_up_s: float = 5.0
    aftermath_s: float = 30.0
    grace_s: float = 1.0
    max_s: float = 300.0  # no round starts past this (from the first window): a broken installation ends too


async def run_windows(
    b: Ordinary,
    a: Attacker,
    plan: WindowPlan,
    a_busy: Callable[[], Awaitable[int]],
    *,
    attacks: list[str] | None = None,
    log: list[str] | None = None,
) -> list[str]:
    """B's traffic throughout; for each attack, ``plan.rounds`` times: a window of B alone, then one beside it.
    Returns the attacks of the rounds not run because ``plan.max_s`` had passed.

    An attack's window lasts until A's requests have all been answered and ``a_busy`` (A's queued or running
    work) reads 0, then ``plan.grace_s``: what A left behind is measured as beside A, and every window of B alone
    starts with A idle (when A is still busy ``plan.aftermath_s`` after its attack, B's next window counts as
    beside that attack too). Between windows B's calls in flight end before any other starts (:meth:`Ordinary.switch`).
    """
    gc.freeze()  # full passes then walk only what B's windows allocate (see the module)
    await b.start()
    skipped: list[str] = []
    try:
        await asyncio.sleep(plan.warm_up_s)
        first = time.monotonic()
        busy_after: str | None = None  # the attack whose work was still there when its aftermath ran out
        for name in attacks or list(ATTACKS):
            for _ in range(plan.rounds):
                if time.monotonic() - first > plan.max_s:
                    skipped.append(name)
                    continue
                attack = AttackProcess(a, name)
                await attack.start()  # before B's window alone: its start-up is no part of either window
                await b.switch(busy_after or "alone")
                await asyncio.sleep(plan.window_s)
                await b.switch(name)
                started = time.monotonic()
                attack.go()
                await asyncio.sleep(plan.window_s)
                await attack.halt()
                answered = time.monotonic()
                busy_after = name
                for _ in range(int(plan.aftermath_s / IDLE_POLL_S)):  # A's queued work runs
                    if not await a_busy():
                        busy_after = None
                        break
                    await asyncio.sleep(IDLE_POLL_S)
                await asyncio.sleep(plan.grace_s)
                if log is not None:
                    log.append(b.describe(len(b.windows) - 2))
                    log.append(
                        f"{name}: A's window {answered - started:.1f} s, its aftermath "
                        f"{time.monotonic() - answered:.1f} s{' (A still busy)' if busy_after else ''}; "
                        f"A got {a.outcomes.get(name)}; " + b.describe(-1)
                    )
        await b.switch(busy_after or "alone")
        await asyncio.sleep(plan.window_s)
    finally:
        await b.stop()
        gc.unfreeze()
    return skipped
