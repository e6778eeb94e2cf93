"""KV-cache-aware routing, live: multi-turn agent runs through the API on a simulated fleet, round_robin vs kv_aware.

    .venv/bin/python benchmarks/kv_live.py [--conversations 32] [--turns 4] [--concurrency 16] [--agents 8]
        [--instruction-words 1400] [--think-s 1] [--time-scale 0.5] [--seed 7] [--policies round_robin,kv_aware]

For each routing policy, starts Switchyard as `switchyard up` lays it out, on the embedded defaults (a fresh SQLite
database and SQLite broker in a temporary directory): the fleet process with one simulated deployment (4 replicas
of Llama-3.1-8B at TP8 on trn2.48xlarge, the fleet of benchmarks/kv_routing.py, its `policy` set in the fleet
file), one API process and one worker (threads, `--concurrency` slots, beat), at `SWITCHYARD_TIME_SCALE`
`--time-scale` (wall seconds per simulated second). Then, through the public API with httpx: a tenant and its
owner key (`switchyard tenant create`), `--agents` agents with long instructions (`--instruction-words` words of
rules: ~3,500 tokens at the default) and the built-in `calculator` tool, and `--conversations` threads,
`--concurrency` at a time, each talking to one agent for `--turns` turns: a user message, a run streamed to its end
(`stream: true`), up to `--think-s` wall seconds of the user's thinking; every other turn asks for the calculator
(a tool call, then the answer that reads its result: two model calls). The same seed gives every policy the same
conversations, hence the same model calls and prompt tokens. Each policy takes about 1.5 minutes here (2 cores).

What it reports, per policy, from what the API answers: the runs' model steps (`GET .../runs/{id}/steps`:
`step_details.ttft_ms`, the simulated time to first token, and `usage.input_tokens_details.cached_tokens`) give
TTFT p50/p90; `/v1/usage` gives model calls, prompt tokens, `input_cached_tokens` (and their share of the prompt
tokens) and chip-µs per model call (what the tenant is billed by); the last row is kv_aware's ratio to
round_robin's. Below the table: the model calls each replica served, how many of a thread's later calls computed
its history again (read less than the previous call's prompt from cache), and any disagreement between the steps
and `/v1/usage` or run that did not complete (each would be a defect). Every turn re-sends the agent's
instructions, the tool's schema and the thread's history, so what round_robin loses is the history (and, until
every replica has seen an agent, its instructions), which kv_aware finds on the replica that served the thread's
previous turn. The simulated fleet is lightly loaded at this concurrency (this machine's cores, not the replicas,
bound the rate of calls), so TTFT here is mostly prefill, which cached prefixes shorten; queueing does not
dominate it as it does at the loads of kv_routing.py. tests/integration/test_kv_live_routing.py asserts what the
table rests on, on a tiny plan.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

MODEL = "sim-8b"
DEPLOYMENT = {"name": MODEL, "model": "meta-llama/Llama-3.1-8B", "instance": "trn2.48xlarge", "tp": 8, "replicas": 4}
POLICIES = ("round_robin", "kv_aware")
TIME_SCALE = 0.5  # wall seconds per simulated second: a conversation's turns take about half their real time
VOCABULARY = (
    "account adjustment approval audit balance billing carrier claim contract credit customer delivery "
    "discount dispute escalation exception freight invoice ledger manifest order package payment policy "
    "refund region remittance return route schedule settlement shipment statement supplier tariff tax "
    "ticket transfer warehouse"
)
WORDS = tuple(VOCABULARY.split())  # the words of the instructions and of the users' messages


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def switchyard() -> str:
    return str(Path(sys.executable).parent / "switchyard")


def wait_for(ready: str, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 90) -> None:
    """Until ``ready`` answers 200 (a URL) or appears in ``log``."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}:\n{log.read_text()[-2000:]}")
        if ready.startswith("http://"):
            try:
                if httpx.get(ready, timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
        elif ready in log.read_text(errors="replace"):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{proc.args!r} not ready after {timeout_s:.0f} s")


@contextmanager
def platform(policy: str, *, time_scale: float, worker_slots: int) -> Iterator[tuple[str, str]]:
    """Switchyard on 127.0.0.1 with the simulated deployment routed by ``policy``: yields (base URL, owner key)."""
    work = Path(tempfile.mkdtemp(prefix=f"sy-kv-live-{policy}-"))
    fleet = work / "fleet.json"
    fleet.write_text(json.dumps({"deployments": [DEPLOYMENT | {"policy": policy}]}))
    api_port, fleet_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHYARD_")} | {
        "SWITCHYARD_DATA_DIR": str(work / "data"),
        "SWITCHYARD_FLEET_FILE": str(fleet),
        "SWITCHYARD_FLEET_URL": f"http://127.0.0.1:{fleet_port}",
        "SWITCHYARD_TIME_SCALE": str(time_scale),
        "SWITCHYARD_TENANT_WORKER_SHARE": "1",  # one tenant here: let its runs fill the worker
        "SWITCHYARD_TENANT_TOKENS_PER_MINUTE": "1000000000",
        "SWITCHYARD_KEY_REQUESTS_PER_MINUTE": "1000000",
    }
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str, argv: list[str], log_level: str = "warning") -> Path:
        log = work / f"{name}.log"
        own = env | {"SWITCHYARD_LOG_LEVEL": log_level}
        with log.open("wb") as out:
            procs.append(subprocess.Popen(argv, env=own, cwd=work, stdout=out, stderr=subprocess.STDOUT))
        return log

    def cli(*args: str) -> str:
        done = subprocess.run([switchyard(), *args], env=env, cwd=work, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"switchyard {' '.join(args)}: {done.stderr}")
        return done.stdout

    try:
        # Each start costs seconds of imports on a small machine: the fleet starts while the database is made,
        # the API and the worker (which reach for the fleet) together once it answers.
        sy = switchyard()
        fleet_log = start("fleet", [sy, "fleet", "--port", str(fleet_port)])
        cli("db", "upgrade")
        created = cli("tenant", "create", "kv-live")
        key = re.search(r"owner key:\s+(\S+)", created)
        if key is None:
            raise RuntimeError(f"no owner key in: {created}")
        wait_for(f"http://127.0.0.1:{fleet_port}/healthz", procs[0], fleet_log)
        api_log = start("api", [sy, "api", "--port", str(api_port)])
        worker_log = start("worker", [sy, "worker", "--concurrency", str(worker_slots), "--beat"], "info")
        wait_for(f"http://127.0.0.1:{api_port}/healthz", procs[1], api_log)
        wait_for(" ready.", procs[2], worker_log)  # Celery's banner, at log level info
        yield f"http://127.0.0.1:{api_port}", key.group(1)
    finally:
        for proc in reversed(procs):
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work, ignore_errors=True)


def instructions(agent: int, words: int, rng: random.Random) -> str:
    """A long, agent-specific operating manual: numbered rules of plausible words."""
    rules = [f"You are desk {agent} of the operations team. Follow these rules in every answer."]
    count = 0
    while count < words:
        rule = " ".join(rng.choice(WORDS) for _ in range(rng.randint(12, 30)))
        rules.append(f"Rule {agent}.{len(rules)}: {rule}.")
        count += rule.count(" ") + 1
    return "\n".join(rules)


def user_turn(turn: int, rng: random.Random) -> str:
    """What the user says: a few sentences; every other turn asks for the calculator (a tool call)."""
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60)))
    if turn % 2 == 1:
        return f"{text}. Use the calculator to check the total."
    return f"{text}?"


@dataclass(frozen=True)
class Plan:
    """The conversations to hold: the same plan (and seed) gives every policy the same prompts."""

    conversations: int = 32
    turns: int = 4
    concurrency: int = 16
    agents: int = 8
    instruction_words: int = 1400
    think_s: float = 1.0
    seed: int = 7


@dataclass
class ModelStep:
    """One model call of a run, as ``GET .../runs/{id}/steps`` reports it."""

    thread: str
    turn: int
    index: int
    ttft_ms: float
    prompt_tokens: int
    cached_tokens: int
    chip_us: int
    replica: str


@dataclass
class Measured:
    """What one policy's conversations reported: every model step, the runs' ends and the tenant's usage."""

    steps: list[ModelStep] = field(default_factory=list)
    run_statuses: dict[str, int] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0


async def conversation(
    client: httpx.AsyncClient, agent_id: str, seed: int, turns: int, measured: Measured, think_s: float
) -> None:
    """One thread with ``agent_id``: ``turns`` user messages, each answered by a run streamed to its end."""
    rng = random.Random(seed)
    thread = (await client.post("/v1/threads", json={})).raise_for_status().json()
    for turn in range(turns):
        message = {"role": "user", "content": user_turn(turn, rng)}
        (await client.post(f"/v1/threads/{thread['id']}/messages", json=message)).raise_for_status()
        run_id = None
        async with client.stream(
            "POST", f"/v1/threads/{thread['id']}/runs", json={"agent_id": agent_id, "stream": True}
        ) as events:
            events.raise_for_status()
            async for line in events.aiter_lines():
                if run_id is None and line.startswith("data: {"):
                    data = json.loads(line[6:])
                    run_id = data.get("id") if data.get("object") == "thread.run" else data.get("run_id")
        if run_id is None:
            raise RuntimeError(f"thread {thread['id']}: the run's stream named no run")
        run = (await client.get(f"/v1/threads/{thread['id']}/runs/{run_id}")).raise_for_status().json()
        measured.run_statuses[run["status"]] = measured.run_statuses.get(run["status"], 0) + 1
        steps = await client.get(f"/v1/threads/{thread['id']}/runs/{run_id}/steps", params={"limit": 100})
        for step in steps.raise_for_status().json()["data"]:
            details = step["step_details"]
            if step["type"] != "model_call" or details.get("usage") is None:
                continue
            measured.steps.append(
                ModelStep(
                    thread=thread["id"],
                    turn=turn,
                    index=int(step["index"]),
                    ttft_ms=float(details["ttft_ms"]),
                    prompt_tokens=int(details["usage"]["input_tokens"]),
                    cached_tokens=int(details["usage"]["input_tokens_details"]["cached_tokens"]),
                    chip_us=int(details["chip_us"]),
                    replica=str(details.get("replica")),
                )
            )
        if run["status"] != "completed":
            return  # the thread's next turn would find it in a state this benchmark does not answer
        if turn + 1 < turns:
            await asyncio.sleep(rng.uniform(0, think_s))


async def usage_totals(client: httpx.AsyncClient, since: int) -> dict[str, int]:
    """The tenant's `/v1/usage` since ``since`` (Unix seconds), summed over buckets and models."""
    totals = {"num_model_requests": 0, "input_tokens": 0, "input_cached_tokens": 0, "chip_us": 0}
    params: dict[str, str | int] = {"start_time": since, "bucket_width": "1h", "limit": 168}
    page = (await client.get("/v1/usage", params=params)).raise_for_status().json()
    for bucket in page["data"]:
        for result in bucket["results"]:
            for name in totals:
                totals[name] += int(result.get(name) or 0)
    return totals


async def measure(base_url: str, key: str, plan: Plan) -> Measured:
    """Hold ``plan``'s conversations with agents made for them; what the API reported of every model call."""
    rng = random.Random(plan.seed)
    measured = Measured()
    since = int(time.time()) - 3600
    headers = {"authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=300) as client:
        agents = []
        for index in range(plan.agents):
            body = {
                "name": f"desk-{index}",
                "model": MODEL,
                "instructions": instructions(index, plan.instruction_words, rng),
                "tools": [{"type": "calculator"}],
            }
            agents.append((await client.post("/v1/agents", json=body)).raise_for_status().json()["id"])
        slots = asyncio.Semaphore(plan.concurrency)

        async def one(index: int) -> None:
            async with slots:
                agent = agents[index % len(agents)]
                await conversation(client, agent, plan.seed * 100_003 + index, plan.turns, measured, plan.think_s)

        started = time.monotonic()
        await asyncio.gather(*(one(i) for i in range(plan.conversations)))
        measured.wall_s = time.monotonic() - started
        measured.usage = await usage_totals(client, since)
    return measured


def discrepancies(m: Measured) -> list[str]:
    """Where the runs' steps and `/v1/usage` disagree, and runs that did not complete: each is a defect."""
    found = []
    sums = {
        "num_model_requests": len(m.steps),
        "input_tokens": sum(s.prompt_tokens for s in m.steps),
        "input_cached_tokens": sum(s.cached_tokens for s in m.steps),
        "chip_us": sum(s.chip_us for s in m.steps),
    }
    for name, steps_say in sums.items():
        if steps_say != m.usage[name]:
            found.append(f"{name}: the runs' steps sum to {steps_say:,}, /v1/usage says {m.usage[name]:,}")
    if set(m.run_statuses) != {"completed"}:
        found.append(f"runs by status: {m.run_statuses}")
    return found


def by_thread(m: Measured) -> dict[str, list[ModelStep]]:
    """Each thread's model calls in the order they were made."""
    threads: dict[str, list[ModelStep]] = {}
    for step in sorted(m.steps, key=lambda s: (s.thread, s.turn, s.index)):
        threads.setdefault(step.thread, []).append(step)
    return threads


def follow_up_misses(m: Measured, block_tokens: int = 32) -> list[tuple[ModelStep, ModelStep]]:
    """The (previous, next) calls of a thread where the next read less than the previous prompt's whole blocks
    from cache: its history, computed again."""
    misses = []
    for calls in by_thread(m).values():
        for previous, following in itertools.pairwise(calls):
            if following.cached_tokens < previous.prompt_tokens // block_tokens * block_tokens:
                misses.append((previous, following))
    return misses


def replica_calls(m: Measured) -> dict[str, int]:
    """Model calls per replica: how evenly the policy spread the load."""
    calls: dict[str, int] = {}
    for step in m.steps:
        calls[step.replica] = calls.get(step.replica, 0) + 1
    return dict(sorted(calls.items()))


def quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1] if len(values) > 1 else 0.0


@dataclass
class Row:
    policy: str
    runs: int
    calls: int
    ttft_p50_ms: float
    ttft_p90_ms: float
    prompt_tokens: int
    cached_tokens: int
    chip_us_per_call: float
    wall_s: float

    @property
    def cached_share(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @classmethod
    def of(cls, policy: str, m: Measured) -> Row:
        ttfts = [s.ttft_ms for s in m.steps]
        calls = m.usage["num_model_requests"]
        return cls(
            policy=policy,
            runs=sum(m.run_statuses.values()),
            calls=calls,
            ttft_p50_ms=quantile(ttfts, 0.5),
            ttft_p90_ms=quantile(ttfts, 0.9),
            prompt_tokens=m.usage["input_tokens"],
            cached_tokens=m.usage["input_cached_tokens"],
            chip_us_per_call=m.usage["chip_us"] / calls if calls else 0.0,
            wall_s=m.wall_s,
        )


def print_table(rows: list[Row]) -> None:
    header = (
        f"{'policy':<12} {'runs':>5} {'model calls':>11} {'TTFT p50':>9} {'TTFT p90':>9} {'prompt tokens':>13} "
        f"{'cached tokens':>13} {'cached':>7} {'chip-µs/call':>13} {'wall':>6}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r.policy:<12} {r.runs:>5} {r.calls:>11} {r.ttft_p50_ms:>7.1f}ms {r.ttft_p90_ms:>7.1f}ms "
            f"{r.prompt_tokens:>13,} {r.cached_tokens:>13,} {r.cached_share:>6.1%} {r.chip_us_per_call:>13,.0f} "
            f"{r.wall_s:>5.0f}s"
        )
    by = {r.policy: r for r in rows}
    if "round_robin" in by and "kv_aware" in by:
        rr, kv = by["round_robin"], by["kv_aware"]

        def ratio(a: float, b: float) -> str:
            return f"{a / b:.2f}x" if b else "-"

        print(
            f"{'kv_aware/rr':<12} {'':>5} {ratio(kv.calls, rr.calls):>11} {ratio(kv.ttft_p50_ms, rr.ttft_p50_ms):>9} "
            f"{ratio(kv.ttft_p90_ms, rr.ttft_p90_ms):>9} {ratio(kv.prompt_tokens, rr.prompt_tokens):>13} "
            f"{ratio(kv.cached_tokens, rr.cached_tokens):>13} {ratio(kv.cached_share, rr.cached_share):>7} "
            f"{ratio(kv.chip_us_per_call, rr.chip_us_per_call):>13}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=Plan.conversations, help="threads, one agent each")
    parser.add_argument("--turns", type=int, default=Plan.turns, help="user turns (runs) per thread")
    parser.add_argument("--concurrency", type=int, default=Plan.concurrency, help="threads talking at once")
    parser.add_argument("--agents", type=int, default=Plan.agents)
    parser.add_argument("--instruction-words", type=int, default=Plan.instruction_words, help="per agent")
    parser.add_argument("--think-s", type=float, default=Plan.think_s, help="most wall seconds between turns")
    parser.add_argument("--seed", type=int, default=Plan.seed)
    parser.add_argument("--time-scale", type=float, default=TIME_SCALE, help="wall seconds per simulated second")
    parser.add_argument("--policies", default=",".join(POLICIES), help="comma-separated routing policies")
    args = parser.parse_args()
    plan = Plan(
        conversations=args.conversations,
        turns=args.turns,
        concurrency=args.concurrency,
        agents=args.agents,
        instruction_words=args.instruction_words,
        think_s=args.think_s,
        seed=args.seed,
    )
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped: the processes still go down
    rows, notes = [], []
    for policy in policies:
        with platform(policy, time_scale=args.time_scale, worker_slots=plan.concurrency) as (url, key):
            measured = asyncio.run(measure(url, key, plan))
        notes += [f"{policy}: {problem}" for problem in discrepancies(measured)]
        split = "/".join(str(n) for n in replica_calls(measured).values())
        misses = len(follow_up_misses(measured))
        later = len(measured.steps) - len(by_thread(measured))
        notes.append(
            f"{policy}: calls per replica {split}; later calls of a thread that recomputed its history: "
            f"{misses} of {later}"
        )
        rows.append(Row.of(policy, measured))
    print(
        f"\n{plan.conversations} agent conversations x {plan.turns} turns ({plan.concurrency} at a time, "
        f"{plan.agents} agents with {plan.instruction_words}-word instructions and a calculator) on "
        f"{DEPLOYMENT['replicas']} x Llama-3.1-8B TP8 (trn2.48xlarge), time scale {args.time_scale}\n"
    )
    print_table(rows)
    print("\n" + "\n".join(notes))


if __name__ == "__main__":
    main()
