"""Noisy neighbour: how much tenant A's attacks on shared resources slow tenant B's ordinary calls.

    .venv/bin/python benchmarks/noisy_neighbour.py [--postgres-url URL] [--window 6] [--rounds 2]
        [--attacks "schema bombs,huge embeddings,sign-in flood,background flood"]

Starts the production layout as separate processes (a Redis of its own, a fresh PostgreSQL database on the server
of ``--postgres-url``, migrated, the fleet process, two API processes, two workers, beat; time scale 0.05, 60 model
calls per key per minute), makes tenants A and B with ``switchyard tenant create`` (A with a hard budget of
$1.00) and runs ``neighbours.py``'s windows: B's paced chat completions, embeddings and agent runs throughout,
alone and beside each of A's attacks in turn, alternating. Prints, per attack and kind of call, B's p50 and p99
alone (the windows just before that attack's), beside the attack (its windows and their aftermath) and the p99
ratio; ``all`` compares every window beside an attack with every window alone, which is what
``tests/system/test_noisy_neighbour.py`` asserts (under 3x; the goal is 2x). Ratios, not absolute times, are what
compare across machines and runs; every process, and the load generator, share this machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psycopg
import redis
from neighbours import (
    A_BUSY_SQL,
    ATTACKS,
    Attacker,
    Ordinary,
    Tenant,
    WindowPlan,
    p50,
    p99,
    rows,
    run_windows,
    worker_backlog,
)
from sqlalchemy.engine import make_url

TIME_SCALE = "0.05"
KEY_REQUESTS_PER_MINUTE = "60"
A_BUDGET_MINOR = 100


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(ready: str, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 90) -> None:
    """Until ``ready`` answers 200 (a URL) or appears in ``log``."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited with {proc.returncode}:\n{log.read_text()[-2000:]}")
        if ready.startswith("http://"):
            try:
                if httpx.get(ready, timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
        elif ready in log.read_text(errors="replace"):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{proc.args} not ready after {timeout_s:.0f} s")


class Layout:
    """The processes of the README's production section on 127.0.0.1, each with its log in ``work``."""

    def __init__(self, work: Path, server_url: str) -> None:
        self.work = work
        self.database = f"sy_noisy_{secrets.token_hex(4)}"
        self.server_url = server_url
        self.url = make_url(server_url).set(database=self.database).render_as_string(hide_password=False)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.api_ports = [free_port(), free_port()]
        redis_port, fleet_port = free_port(), free_port()
        self.redis_port = redis_port
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHYARD_")} | {
            "SWITCHYARD_DATABASE_URL": self.url,
            "SWITCHYARD_BROKER_URL": f"redis://127.0.0.1:{redis_port}/0",
            "SWITCHYARD_REDIS_URL": f"redis://127.0.0.1:{redis_port}/1",
            "SWITCHYARD_FLEET_URL": f"http://127.0.0.1:{fleet_port}",
            "SWITCHYARD_FLEET_TOKEN": secrets.token_urlsafe(24),
            "SWITCHYARD_SECRETS_KEY": secrets.token_hex(32),
            "SWITCHYARD_TIME_SCALE": TIME_SCALE,
            "SWITCHYARD_KEY_REQUESTS_PER_MINUTE": KEY_REQUESTS_PER_MINUTE,
        }
        self.fleet_port = fleet_port

    def start(self, name: str, argv: list[str], ready: str) -> None:
        log = self.work / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(argv, env=self.env, cwd=self.work, stdout=out, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        wait_for(ready, proc, log)

    def cli(self, *args: str) -> str:
        done = subprocess.run([switchyard(), *args], env=self.env, cwd=self.work, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"switchyard {' '.join(args)}: {done.stderr}")
        return done.stdout

    def up(self) -> None:
        redis_server = shutil.which("redis-server")
        if redis_server is None:
            raise SystemExit("redis-server is not on PATH")
        with psycopg.connect(self.server_url, autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{self.database}"')
        self.start(
            "redis",
            [redis_server, "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            "Ready to accept connections",
        )
        self.cli("db", "upgrade")
        sy = switchyard()
        self.start(
            "fleet", [sy, "fleet", "--port", str(self.fleet_port)], f"http://127.0.0.1:{self.fleet_port}/healthz"
        )
        for index, port in enumerate(self.api_ports):
            self.start(f"api-{index}", [sy, "api", "--port", str(port)], f"http://127.0.0.1:{port}/healthz")
        for index in range(2):
            self.start(f"worker-{index}", [sy, "worker"], " ready.")
        self.start("beat", [sy, "beat"], "beat: Starting...")

    def down(self) -> None:
        for proc in reversed(self.procs):
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        with psycopg.connect(self.server_url, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')

    def tenant(self, name: str) -> Tenant:
        return Tenant.from_cli(
            self.cli("tenant", "create", name, "--owner-email", f"owner@{name}.example"), self.api_ports
        )


def switchyard() -> str:
    return str(Path(sys.executable).parent / "switchyard")


async def measure(layout: Layout, plan: WindowPlan, attacks: list[str]) -> Ordinary:
    a, b = layout.tenant("noisy"), layout.tenant("ordinary")
    async with httpx.AsyncClient(base_url=a.base_url(), timeout=30) as client:
        budget = await client.post(
            "/v1/budgets",
            json={"limit_minor": A_BUDGET_MINOR, "hard": True},
            headers={"authorization": f"Bearer {a.owner_key}"},
        )
        budget.raise_for_status()

    broker = redis.Redis(host="127.0.0.1", port=layout.redis_port, db=0)

    async def a_busy() -> int:
        def count() -> int:
            with psycopg.connect(layout.url) as connection:
                in_progress = int(connection.execute(A_BUSY_SQL, (a.id, a.id)).fetchone()[0])  # type: ignore[index]
            return in_progress + worker_backlog(broker)

        return await asyncio.to_thread(count)

    ordinary, attacker = Ordinary(b), Attacker(a)
    log: list[str] = []
    skipped = await run_windows(ordinary, attacker, plan, a_busy, attacks=attacks, log=log)
    print("\n".join(line for line in log if not line.startswith("window")), file=sys.stderr)
    if skipped:
        print(f"rounds not run, {plan.max_s:.0f} s having passed: {skipped}", file=sys.stderr)
    return ordinary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("SWITCHYARD_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
        help="a PostgreSQL server (its database is used to create and drop a fresh one)",
    )
    parser.add_argument("--window", type=float, default=6.0, help="seconds of each window, alone or beside A")
    parser.add_argument("--rounds", type=int, default=2, help="alone/beside rounds per attack")
    parser.add_argument("--attacks", default=",".join(ATTACKS), help="comma-separated, in order")
    args = parser.parse_args()
    attacks = [name.strip() for name in args.attacks.split(",") if name.strip()]
    unknown = sorted(set(attacks) - set(ATTACKS))
    if unknown:
        raise SystemExit(f"unknown attacks {unknown}; choose among {list(ATTACKS)}")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped: the layout still goes down, its database too
    work = Path(tempfile.mkdtemp(prefix="sy-noisy-bench-"))
    layout = Layout(work, args.postgres_url)
    try:
        layout.up()
        ordinary = asyncio.run(measure(layout, WindowPlan(window_s=args.window, rounds=args.rounds), attacks))
    finally:
        layout.down()
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"tenant B's latency alone and beside each of tenant A's attacks ({args.rounds} rounds of {args.window:.0f} s "
        "windows each; alone: the windows just before that attack's; all: every window)\n"
    )
    header = (
        f"{'attack':<17} {'B call':<11} {'n alone':>7} {'p50 alone':>10} {'p99 alone':>10} {'n beside':>8} "
        f"{'p50 beside':>11} {'p99 beside':>11} {'p99 ratio':>10}"
    )
    print(header)
    print("-" * len(header))
    for row in rows(ordinary):
        print(
            f"{row.attack:<17} {row.kind:<11} {len(row.alone):>7} {p50(row.alone) * 1e3:>8.0f}ms "
            f"{p99(row.alone) * 1e3:>8.0f}ms {len(row.beside):>8} {p50(row.beside) * 1e3:>9.0f}ms "
            f"{p99(row.beside) * 1e3:>9.0f}ms {row.ratio:>9.2f}x"
        )
    failed = [s for s in ordinary.samples if s.error]
    print(f"\nB's calls that failed: {len(failed)} of {len(ordinary.samples)}")
    for sample in failed[:10]:
        print(f"  {sample.kind} beside {sample.window}: {sample.error}")


if __name__ == "__main__":
    main()
