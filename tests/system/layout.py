"""The production layout as OS processes: start, kill -9, SIGSTOP/SIGCONT, stop with SIGTERM (timed), log tails.

Every process is started the way an operator would start it (the ``switchyard`` console script, or
``redis-server``), with its output in a log file of its own per incarnation; nothing is started in-process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

__all__ = ["Layout", "Proc", "switchyard_bin"]

TAIL_LINES = 40


def switchyard_bin() -> str:
    """The ``switchyard`` console script of the interpreter running the tests (the venv's)."""
    path = Path(sys.executable).parent / "switchyard"
    assert path.exists(), f"no switchyard console script next to {sys.executable}"
    return str(path)


@dataclass
class Proc:
    """One role of the layout (``api-0``, ``worker-1``, ``redis``...); each start is a new incarnation."""

    name: str
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    log_dir: Path
    ready: Callable[[Proc], bool] = field(default=lambda proc: True)
    popen: subprocess.Popen[bytes] | None = None
    logs: list[Path] = field(default_factory=list)
    kills: int = 0

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    @property
    def log(self) -> Path:
        return self.logs[-1]

    def start(self, ready_timeout_s: float = 60.0) -> None:
        assert not self.alive, f"{self.name} is already running"
        path = self.log_dir / f"{self.name}.{len(self.logs)}.log"
        self.logs.append(path)
        with open(path, "wb") as log:
            self.popen = subprocess.Popen(self.argv, env=self.env, cwd=self.cwd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + ready_timeout_s
        while not self.ready(self):
            if not self.alive:
                raise AssertionError(f"{self.name} exited with {self.popen.returncode} while starting\n{self.tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} was not ready after {ready_timeout_s:.0f} s\n{self.tail()}")
            time.sleep(0.1)

    def kill9(self) -> None:
        assert self.popen is not None
        assert self.alive, f"{self.name} is not running"
        self.popen.send_signal(signal.SIGKILL)
        self.popen.wait()
        self.kills += 1

    def sigstop(self) -> None:
        assert self.popen is not None
        self.popen.send_signal(signal.SIGSTOP)

    def sigcont(self) -> None:
        assert self.popen is not None
        self.popen.send_signal(signal.SIGCONT)

    def terminate(self, bound_s: float) -> float | None:
        """SIGTERM, then wait up to ``bound_s`` (and a grace beyond it, then SIGKILL). Returns the seconds the
        process took to exit, or ``None`` if it outlived ``bound_s``."""
        assert self.popen is not None
        if not self.alive:
            return 0.0
        self.popen.send_signal(signal.SIGCONT)  # a stopped process cannot act on SIGTERM
        started = time.monotonic()
        self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout=bound_s)
        except subprocess.TimeoutExpired:
            try:
                self.popen.wait(timeout=bound_s)  # for the report: how long it really takes
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
            return None
        return time.monotonic() - started

    def kill_if_alive(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.send_signal(signal.SIGCONT)
            self.popen.kill()
            self.popen.wait()

    def tail(self, lines: int = TAIL_LINES) -> str:
        out = []
        for path in self.logs:
            text = path.read_text(errors="replace").splitlines() if path.exists() else []
            out.append(f"----- {path.name} (last {min(lines, len(text))} of {len(text)} lines) -----")
            out.extend(text[-lines:])
        return "\n".join(out)


class Layout:
    """The processes of one system-test installation; :meth:`cleanup` leaves none running."""

    def __init__(self, env: dict[str, str], cwd: Path, log_dir: Path) -> None:
        self.env = env
        self.cwd = cwd
        self.log_dir = log_dir
        self.procs: dict[str, Proc] = {}

    def add(
        self, name: str, argv: list[str], *, ready: Callable[[Proc], bool], env: dict[str, str] | None = None
    ) -> Proc:
        proc = Proc(name, argv, env or self.env, self.cwd, self.log_dir, ready)
        self.procs[name] = proc
        return proc

    def __getitem__(self, name: str) -> Proc:
        return self.procs[name]

    def tails(self, lines: int = TAIL_LINES) -> str:
        return "\n".join(f"===== {name} =====\n{proc.tail(lines)}" for name, proc in self.procs.items())

    def cleanup(self) -> None:
        for proc in self.procs.values():
            proc.kill_if_alive()


def http_ok(url: str) -> Callable[[Proc], bool]:
    def ready(_proc: Proc) -> bool:
        try:
            return httpx.get(url, timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    return ready


def log_says(marker: str) -> Callable[[Proc], bool]:
    def ready(proc: Proc) -> bool:
        return marker in proc.log.read_text(errors="replace")

    return ready


def redis_pings(port: int) -> Callable[[Proc], bool]:
    def ready(_proc: Proc) -> bool:
        import redis

        try:
            return bool(redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=0.5).ping())
        except redis.RedisError:
            return False

    return ready


def process_env(settings: dict[str, str]) -> dict[str, str]:
    """The environment of every layout process: this one without any ``SWITCHYARD_*`` variable, plus ``settings``."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHYARD_")}
    return base | settings
