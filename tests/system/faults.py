"""The bounded fault schedule, played against the layout while the workload runs.

Each fault waits (bounded) for the moment that makes it bite: a worker is killed or stopped while it holds a
run's lease, an API process while a chat completion streams through it. What happened is logged with the time
since the schedule started, for the report.
"""

from __future__ import annotations

import asyncio
import random
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from tests.system.layout import Layout
from tests.system.ledger import Ledger
from tests.system.pg import Pg

__all__ = ["FaultSchedule"]

REDIS_DOWN_S = 10.0
MOMENT_WAIT_S = 10.0  # how long a fault waits for its moment (a held lease, an open stream)


@dataclass
class FaultSchedule:
    layout: Layout
    ledger: Ledger
    pg: Pg
    api_ports: list[int]
    lease_s: float
    rng: random.Random
    rounds: int = 1
    log: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    crashed: dict[str, float] = field(default_factory=dict)  # attempt/run ids that died with a process -> unix time
    _t0: float = field(default_factory=time.monotonic)

    def note(self, text: str) -> None:
        self.log.append(f"t={time.monotonic() - self._t0:6.1f}s {text}")

    def _count(self, kind: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def plan(self) -> list[tuple[str, Callable[[], Awaitable[None]]]]:
        """One round: kill -9 a worker three times and each API process once (two API kills), stop Redis for
        10 s, SIGSTOP a worker past its lease, terminate the application's PostgreSQL connections."""
        return [
            ("worker-kill", lambda: self.kill_worker("worker-0")),
            ("api-kill", lambda: self.kill_api(0)),
            ("pg-terminate", self.terminate_pg_connections),
            ("worker-kill", lambda: self.kill_worker("worker-1")),
            ("worker-stop", lambda: self.stop_worker_past_lease("worker-0")),
            ("redis-outage", self.redis_outage),
            ("api-kill", lambda: self.kill_api(1)),
            ("worker-kill", lambda: self.kill_worker("worker-0")),
        ]

    async def run(self, only: set[str] | None = None) -> None:
        """Play ``rounds`` rounds of the plan (only the faults named in ``only``, when given)."""
        self._t0 = time.monotonic()
        for _round in range(self.rounds):
            for name, fault in self.plan():
                if only is not None and name not in only:
                    continue
                await asyncio.sleep(self.rng.uniform(2.0, 4.0))
                await self.restart_exited()
                await fault()
        await self.restart_exited()
        self.note("fault schedule done")

    async def restart_exited(self) -> None:
        """Start again, as a supervisor would (compose: ``restart: unless-stopped``), a switchyard process that
        exited on its own: a worker whose Redis connection dropped can exit on a kombu error. Counted, so the
        report says how often."""
        for name, proc in self.layout.procs.items():
            if name != "redis" and proc.popen is not None and not proc.alive:
                self._count("exited on its own (restarted)")
                self.note(f"{name} had exited on its own (status {proc.popen.returncode}): restarted")
                await asyncio.to_thread(proc.start)

    # -- faults --------------------------------------------------------------------------------------------

    def _owner(self, worker: str) -> str:
        return f"{socket.gethostname()}:{self.layout[worker].pid}"

    async def _leased_runs(self, worker: str) -> list[str]:
        """The runs the worker holds the lease of (waits for one, bounded)."""
        deadline = time.monotonic() + MOMENT_WAIT_S
        while time.monotonic() < deadline:
            runs = await asyncio.to_thread(self.pg.leased_runs, self._owner(worker))
            if runs:
                return runs
            await asyncio.sleep(0.1)
        return []

    async def kill_worker(self, name: str) -> None:
        await self._leased_runs(name)
        held = self.pg.leased_runs(self._owner(name))  # again, right before the kill
        self.layout[name].kill9()
        self.crashed |= dict.fromkeys(held, time.time())
        self._count("worker kill -9")
        self.note(f"kill -9 {name} (holding {held or 'no run'})")
        await asyncio.to_thread(self.layout[name].start)
        self.note(f"{name} restarted")

    async def kill_api(self, index: int) -> None:
        port, name = self.api_ports[index], f"api-{index}"
        deadline = time.monotonic() + MOMENT_WAIT_S
        while not self.ledger.open_streams(port) and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.02)
        streams = len(self.ledger.open_streams(port))
        self.layout[name].kill9()
        hit = self.ledger.mark_killed(port)
        self.crashed |= dict.fromkeys((a.id for a in hit), time.time())
        self._count("API kill -9")
        self.note(f"kill -9 {name} with {streams} streams mid-flight, {len(hit)} requests open")
        await asyncio.to_thread(self.layout[name].start)
        self.note(f"{name} restarted")

    async def terminate_pg_connections(self) -> None:
        terminated = await asyncio.to_thread(self.pg.terminate_backends)
        self._count("pg_terminate_backend")
        self.note(f"pg_terminate_backend: {terminated} connections of the application terminated")

    async def redis_outage(self) -> None:
        redis = self.layout["redis"]
        took = await asyncio.to_thread(redis.terminate, 10.0)
        self._count("Redis outage")
        self.note(f"Redis stopped (exit took {took}); down for {REDIS_DOWN_S:.0f} s")
        await asyncio.sleep(REDIS_DOWN_S)
        await asyncio.to_thread(redis.start)
        self.note("Redis restarted on the same port (empty: no persistence)")

    async def stop_worker_past_lease(self, name: str) -> None:
        held = await self._leased_runs(name)
        proc, owner = self.layout[name], self._owner(name)
        proc.sigstop()
        self._count("worker SIGSTOP")
        stopped = time.monotonic()
        self.note(f"SIGSTOP {name} (holding {held or 'no run'})")
        # past its lease at least; then until another worker has taken its runs over (bounded)
        await asyncio.sleep(self.lease_s + 1.0)
        blocked = await asyncio.to_thread(self.pg.blocked)
        self.note(f"while {name} is stopped, {len(blocked)} sessions wait or sit in a transaction: {blocked[:6]}")
        deadline = stopped + self.lease_s + 25.0
        moved = False
        while time.monotonic() < deadline:
            moved = all([await asyncio.to_thread(self.pg.run_moved_on, run_id, owner) for run_id in held])
            if moved:
                break
            await asyncio.sleep(0.5)
        proc.sigcont()
        self.note(
            f"SIGCONT {name} after {time.monotonic() - stopped:.1f} s "
            f"({'its runs were taken over' if moved else 'its runs were NOT taken over'})"
        )
