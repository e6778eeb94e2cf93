"""A production installation built exactly as the README's "Production: PostgreSQL + Redis" section says.

The section's ``sh`` block is read: each variable it exports must be one this harness knows how to provide (and
only those, plus the two test knobs ``SWITCHYARD_TIME_SCALE`` and ``SWITCHYARD_AGENT_RUN_LEASE_SECONDS``, are
set), and each ``switchyard`` command it runs must be one the harness runs. PostgreSQL is a fresh database on the
configured server; Redis a ``redis-server`` of the test's own on a free port (broker on db 0, limits on db 1).
Commands are compared by name, not flags: every process binds 127.0.0.1, and each ``switchyard api`` is one
process (the README's ``--workers N`` runs several per host; the test kills and restarts them one by one).
"""

from __future__ import annotations

import re
import secrets
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.ports import free_port
from tests.system.layout import Layout, Proc, http_ok, log_says, process_env, redis_pings, switchyard_bin
from tests.system.pg import Pg

__all__ = ["Installation", "readme_production"]

REPO_ROOT = Path(__file__).resolve().parents[2]
HARNESS_COMMANDS = {"db upgrade", "api", "worker", "beat", "fleet"}
STOP_BOUND_S = 10.0


def readme_production() -> tuple[list[str], list[str]]:
    """(variables exported, ``switchyard`` commands run) by the README's production section."""
    text = (REPO_ROOT / "README.md").read_text()
    section = text.split("## Production", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block, "the README's production section has no sh block"
    variables = re.findall(r"^export (SWITCHYARD_\w+)=", block.group(1), re.MULTILINE)
    commands = re.findall(r"^switchyard ((?:db )?[a-z-]+)", block.group(1), re.MULTILINE)
    return variables, commands


@dataclass
class Installation:
    server_url: str  # the PostgreSQL server of the `postgres_url` fixture
    root: Path
    time_scale: float
    lease_s: float
    pg: Pg = field(init=False)
    redis_port: int = field(default_factory=free_port)
    api_ports: list[int] = field(default_factory=lambda: [free_port(), free_port()])
    fleet_port: int = field(default_factory=free_port)
    notes: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    layout: Layout = field(init=False)
    operator_key: str = ""
    owner_key: str = ""
    tenant_id: str = ""

    def __post_init__(self) -> None:
        self.pg = Pg(self.server_url)
        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        (self.root / "cwd").mkdir(exist_ok=True)

    # -- configuration -------------------------------------------------------------------------------------

    def configure(self) -> None:
        variables, commands = readme_production()
        unknown = sorted(set(commands) - HARNESS_COMMANDS)
        assert not unknown, f"the README's production section runs {unknown}, which the system test does not"
        assert "fleet" in commands, "the README's production section must run the fleet process"
        redis = f"redis://127.0.0.1:{self.redis_port}"
        provided = {
            "SWITCHYARD_DATABASE_URL": self.pg.url,
            "SWITCHYARD_BROKER_URL": f"{redis}/0",
            "SWITCHYARD_REDIS_URL": f"{redis}/1",
            "SWITCHYARD_FLEET_TOKEN": secrets.token_urlsafe(24),
            "SWITCHYARD_FLEET_URL": f"http://127.0.0.1:{self.fleet_port}",
            "SWITCHYARD_SECRETS_KEY": secrets.token_hex(32),
        }
        missing = sorted(set(variables) - set(provided))
        assert not missing, f"the README's production section sets {missing}, which the system test cannot provide"
        assert "SWITCHYARD_FLEET_URL" in variables, "the README's production section must set SWITCHYARD_FLEET_URL"
        settings = {name: provided[name] for name in sorted(variables)}
        settings |= {
            "SWITCHYARD_TIME_SCALE": str(self.time_scale),
            "SWITCHYARD_AGENT_RUN_LEASE_SECONDS": str(self.lease_s),
        }
        self.env = process_env(settings)
        self.layout = Layout(self.env, self.root / "cwd", self.root / "logs")
        shown = {k: v for k, v in settings.items() if "TOKEN" not in k and "SECRET" not in k}
        self.notes.append("process settings: " + ", ".join(f"{k}={v}" for k, v in shown.items()))

    # -- processes -----------------------------------------------------------------------------------------

    def cli(self, *args: str, timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
        """A ``switchyard`` command with the installation's settings (as an operator runs it)."""
        return subprocess.run(
            [switchyard_bin(), *args],
            env=self.env,
            cwd=self.root / "cwd",
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )

    def start(self) -> None:
        redis_server = shutil.which("redis-server")
        assert redis_server, "redis-server is not on PATH"
        sy = switchyard_bin()
        self.layout.add(
            "redis",
            [redis_server, "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            ready=redis_pings(self.redis_port),
        ).start()
        self.pg.create()
        upgraded = self.cli("db", "upgrade")
        assert upgraded.returncode == 0, f"switchyard db upgrade failed:\n{upgraded.stdout}{upgraded.stderr}"
        operator = self.cli("key", "create", "--operator", "--name", "system-test")
        assert operator.returncode == 0, operator.stderr
        self.operator_key = operator.stdout.strip().splitlines()[-1]
        tenant = self.cli("tenant", "create", "system-test", "--owner-email", "owner@system.example")
        assert tenant.returncode == 0, tenant.stderr
        self.tenant_id = re.search(r"tenant:\s+(\S+)", tenant.stdout).group(1)  # type: ignore[union-attr]
        self.owner_key = re.search(r"owner key:\s+(\S+)", tenant.stdout).group(1)  # type: ignore[union-attr]
        procs: list[Proc] = []
        fleet_argv = [sy, "fleet", "--host", "127.0.0.1", "--port", str(self.fleet_port)]
        procs.append(self.layout.add("fleet", fleet_argv, ready=http_ok(f"http://127.0.0.1:{self.fleet_port}/healthz")))
        for index, port in enumerate(self.api_ports):
            argv = [sy, "api", "--host", "127.0.0.1", "--port", str(port)]
            procs.append(self.layout.add(f"api-{index}", argv, ready=http_ok(f"http://127.0.0.1:{port}/healthz")))
        for index in range(2):
            procs.append(self.layout.add(f"worker-{index}", [sy, "worker"], ready=log_says(" ready.")))
        procs.append(self.layout.add("beat", [sy, "beat"], ready=log_says("beat: Starting...")))
        for proc in procs:  # the fleet first: the others reach it
            proc.start()

    def stop_all(self) -> dict[str, float | None]:
        """SIGTERM every switchyard process (API processes first, then workers and beat, then the fleet);
        returns each one's time to exit (``None``: not within the bound)."""
        groups = [["api-0", "api-1"], ["worker-0", "worker-1", "beat"], ["fleet"]]
        exits: dict[str, float | None] = {}
        with ThreadPoolExecutor(max_workers=3) as pool:
            for group in groups:
                names = [n for n in group if n in self.layout.procs]
                for name, took in zip(names, pool.map(self._terminate, names), strict=True):
                    exits[name] = took
        return exits

    def _terminate(self, name: str) -> float | None:
        return self.layout[name].terminate(STOP_BOUND_S)

    def cleanup(self) -> None:
        if hasattr(self, "layout"):
            self.layout.cleanup()
        try:
            self.pg.drop()
        except Exception as exc:  # reported, never masking the test's own failure
            print(f"could not drop {self.pg.name}: {exc}", file=sys.stderr)
