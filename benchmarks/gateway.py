"""Gateway overhead: Switchyard's /v1/chat/completions in front of an instant upstream, side by side with
calling the upstream directly, with a bare Litestar app forwarding to it (`gateway_floor.py`: the floor the framework
allows) and with the LiteLLM proxy in front of the same upstream; Switchyard with one and
with two API processes; and a simulated deployment (time scale 0) simulated inside the API process or by the
fleet process (`switchyard fleet`, one HTTP hop more), which is how several API processes share one fleet.

    .venv/bin/python benchmarks/gateway.py [--seconds 10] [--concurrency 16] [--api-processes 1,2] [--rounds 5]
        [--baseline /tmp/base]

The throughput phase runs in rounds, the targets taking turns, so that a slow spell of a shared machine falls on
all of them alike. `--baseline` names a checkout of another commit (`git worktree add /tmp/base <rev>`): its
`switchyard x1` runs beside today's, from that checkout's code (`PYTHONPATH`) on a database of its own, and the
script prints the ratio of the two.

Every server is a separate process on 127.0.0.1; the load generator (aiohttp) runs here. It
measures added latency at concurrency 1 and throughput at a fixed concurrency (with the latency at that concurrency:
p50, p99 and their ratio, the tail), with metering on (usage events, budget reservations), and each server's CPU
time per request in the throughput phase (its processes' user and
system time from /proc: what a request costs the server whatever else shares the cores), and prints ratios,
which are what is comparable on a shared, noisy machine. The LiteLLM
column appears when `litellm[proxy]` is installed here, or when `--litellm` names the `litellm` command of another
environment (`python -m venv /tmp/ll && /tmp/ll/bin/pip install 'litellm[proxy]'`: the proxy's extras pin versions
that clash with the project's own dev tools).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

MODEL = "echo"
SIM_MODEL = "sim-8b"
SIM_DEPLOYMENT = {"name": SIM_MODEL, "model": "meta-llama/Llama-3.1-8B", "instance": "trn2.48xlarge", "tp": 8}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_listening(port: int, proc: subprocess.Popen[bytes], timeout_s: float = 90) -> None:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"server on port {port} exited with {proc.returncode}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


@dataclass
class Target:
    name: str
    url: str
    key: str
    model: str = MODEL
    pid: int | None = None  # the server's process (with its children): its CPU time per request is reported

    @property
    def body(self) -> dict[str, object]:
        return {"model": self.model, "messages": [{"role": "user", "content": "Say hello"}], "max_tokens": 5}


@dataclass
class Result:
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int
    cpu_us: float | None = None  # CPU time of the server's processes per request in the throughput phase
    loaded_p50_ms: float = 0.0  # latency in the throughput phase, `--concurrency` requests in flight
    loaded_p99_ms: float = 0.0
    serial_cpu_us: float | None = None  # CPU time per request at concurrency 1
    stages: dict[str, Stage] = field(default_factory=dict)  # from Switchyard's server-timing, at concurrency 1


@dataclass
class Stage:
    """One stage of the server-timing header, summed over the requests at concurrency 1."""

    wall_ms: float = 0.0
    cpu_ms: float = 0.0

    def add(self, entry: str) -> None:
        values = dict(part.split("=", 1) for part in entry.split(";")[1:])
        self.wall_ms += float(values["dur"])
        self.cpu_ms += float(values["desc"].strip('"').removeprefix("cpu "))


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of process ``pid`` and of every process under it (uvicorn's workers)."""
    tick = os.sysconf("SC_CLK_TCK")
    total, pending = 0.0, [pid]
    while pending:
        current = pending.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            for task in Path(f"/proc/{current}/task").iterdir():
                pending += [int(child) for child in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue  # ended meanwhile
    return total


async def _one(session: aiohttp.ClientSession, target: Target, stages: dict[str, Stage] | None = None) -> float:
    started = time.perf_counter()
    async with session.post(
        target.url, json=target.body, headers={"Authorization": f"Bearer {target.key}"}
    ) as response:
        await response.read()
        if response.status != 200:
            raise RuntimeError(f"{target.name}: HTTP {response.status}")
        if stages is not None and "server-timing" in response.headers:
            for entry in response.headers["server-timing"].split(", "):
                stages.setdefault(entry.split(";", 1)[0], Stage()).add(entry)
    return (time.perf_counter() - started) * 1e3


@dataclass
class Loaded:
    """The throughput phase of one target, summed over its rounds."""

    done: int = 0
    errors: int = 0
    elapsed_s: float = 0.0
    cpu_s: float = 0.0
    latencies: list[float] = field(default_factory=list)


async def measure_serial(target: Target, serial_requests: int) -> Result:
    """Warm up, then the latency at concurrency 1 (and Switchyard's server-timing stages)."""
    async with aiohttp.ClientSession() as session:
        for _ in range(50):  # warm up connections and caches
            await _one(session, target)
        stages: dict[str, Stage] = {}
        serial_cpu_before = cpu_seconds(target.pid) if target.pid else 0.0
        latencies = [await _one(session, target, stages) for _ in range(serial_requests)]
        serial_cpu_us = (cpu_seconds(target.pid) - serial_cpu_before) * 1e6 / serial_requests if target.pid else None
    per_request = {name: Stage(s.wall_ms / serial_requests, s.cpu_ms / serial_requests) for name, s in stages.items()}
    return Result(
        0.0, statistics.median(latencies), _p99(latencies), 0, serial_cpu_us=serial_cpu_us, stages=per_request
    )


async def measure_loaded(target: Target, seconds: float, concurrency: int, into: Loaded) -> None:
    """One round of the throughput phase: ``concurrency`` requests in flight for ``seconds``."""
    connector = aiohttp.TCPConnector(limit=concurrency * 2)
    async with aiohttp.ClientSession(connector=connector) as session:
        deadline = time.perf_counter() + seconds

        async def worker() -> None:
            while time.perf_counter() < deadline:
                try:
                    into.latencies.append(await _one(session, target))
                    into.done += 1
                except Exception:
                    into.errors += 1

        cpu_before = cpu_seconds(target.pid) if target.pid else 0.0
        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        into.elapsed_s += time.perf_counter() - started
        into.cpu_s += cpu_seconds(target.pid) - cpu_before if target.pid else 0.0


def measure(
    targets: list[Target], seconds: float, concurrency: int, serial_requests: int, rounds: int
) -> dict[str, Result]:
    """Every target's latency at concurrency 1, then its throughput in ``rounds`` rounds taken in turn (each target
    ``seconds / rounds`` a round), so that a slow spell of a shared machine falls on all of them alike."""
    results = {t.name: asyncio.run(measure_serial(t, serial_requests)) for t in targets}
    loaded = {t.name: Loaded() for t in targets}
    for _ in range(rounds):
        for target in targets:
            asyncio.run(measure_loaded(target, seconds / rounds, concurrency, loaded[target.name]))
    for target in targets:
        phase, result = loaded[target.name], results[target.name]
        result.rps = phase.done / phase.elapsed_s
        result.errors = phase.errors
        result.cpu_us = phase.cpu_s * 1e6 / max(1, phase.done) if target.pid else None
        result.loaded_p50_ms, result.loaded_p99_ms = _loaded(phase.latencies)
    return results


def _p99(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[max(0, int(len(ordered) * 0.99) - 1)]


def _loaded(latencies: list[float]) -> tuple[float, float]:
    return (statistics.median(latencies), _p99(latencies)) if latencies else (0.0, 0.0)


def _local_litellm_proxy(bin_dir: Path) -> str | None:
    """This environment's `litellm` command, if its proxy extras are installed."""
    check = subprocess.run([sys.executable, "-c", "import litellm.proxy.proxy_server"], capture_output=True)
    return shutil.which("litellm", path=str(bin_dir)) if check.returncode == 0 else None


def bench_tenant(switchyard: str, env: dict[str, str]) -> str:
    """Migrate the database ``env`` names and create the benchmark's tenant there; its owner key."""
    subprocess.run([switchyard, "db", "upgrade"], env={**os.environ, **env}, check=True, capture_output=True)
    created = subprocess.run(
        [switchyard, "tenant", "create", "bench"], env={**os.environ, **env}, check=True, capture_output=True, text=True
    ).stdout
    return re.search(r"owner key:\s+(\S+)", created).group(1)  # type: ignore[union-attr]


def _revision(checkout: Path) -> str:
    command = ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()


def start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(cmd, env={**os.environ, **env}, stdout=log.open("wb"), stderr=subprocess.STDOUT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="throughput phase per target")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--serial", type=int, default=300, help="requests at concurrency 1 (latency)")
    parser.add_argument("--rounds", type=int, default=5, help="throughput rounds, the targets in turn")
    parser.add_argument(
        "--baseline",
        default="",
        help="a checkout of another commit (git worktree add /tmp/base <rev>): its switchyard x1 is measured beside",
    )
    parser.add_argument(
        "--database-url",
        default="",
        help="Switchyard's database (default: SQLite in a temporary directory); "
        "an empty PostgreSQL database, e.g. postgresql://postgres@127.0.0.1:5432/sy_bench",
    )
    parser.add_argument("--baseline-database-url", default="", help="with --database-url: the baseline's own database")
    parser.add_argument("--litellm", default="", help="the `litellm` command of an environment with litellm[proxy]")
    parser.add_argument("--api-processes", default="1,2", help="Switchyard API process counts to compare")
    parser.add_argument("--no-sim", action="store_true", help="leave out the simulated deployment's rows")
    args = parser.parse_args()
    if args.baseline and args.database_url and not args.baseline_database_url:
        parser.error("--baseline with --database-url needs --baseline-database-url (another empty database)")
    work = Path(tempfile.mkdtemp(prefix="sy-gateway-bench-"))
    procs: list[subprocess.Popen[bytes]] = []
    bin_dir = Path(sys.executable).parent
    try:
        up_port = free_port()
        procs.append(
            start(
                [
                    sys.executable,
                    "-m",
                    "uvicorn",
                    "switchyard.accelerator.pool.echo_upstream:app",
                    "--port",
                    str(up_port),
                    "--log-level",
                    "warning",
                    "--no-access-log",
                ],
                {},
                work / "upstream.log",
            )
        )
        wait_listening(up_port, procs[-1])
        upstream = f"http://127.0.0.1:{up_port}/v1"
        targets = [Target("upstream direct", f"{upstream}/chat/completions", "none", pid=procs[-1].pid)]
        floor_port = free_port()
        floor_cmd = [sys.executable, "-m", "uvicorn", "--app-dir", str(Path(__file__).parent), "gateway_floor:app"]
        floor_cmd += ["--port", str(floor_port), "--log-level", "warning", "--no-access-log"]
        procs.append(start(floor_cmd, {"GATEWAY_FLOOR_UPSTREAM": upstream}, work / "floor.log"))
        wait_listening(floor_port, procs[-1])
        floor_url = f"http://127.0.0.1:{floor_port}/v1/chat/completions"
        targets.append(Target("litestar pass-through", floor_url, "none", pid=procs[-1].pid))

        fleet = work / "fleet.json"
        upstream_deployment = {"name": MODEL, "backend": "openai-compatible", "base_url": upstream, "chips": 1}
        fleet.write_text(json.dumps({"deployments": [upstream_deployment, SIM_DEPLOYMENT]}))
        env = {
            "SWITCHYARD_DATA_DIR": str(work / "sy"),
            "SWITCHYARD_FLEET_FILE": str(fleet),
            "SWITCHYARD_TIME_SCALE": "0",
            "SWITCHYARD_LOG_LEVEL": "warning",
            "SWITCHYARD_KEY_REQUESTS_PER_MINUTE": "100000000",
            "SWITCHYARD_TENANT_TOKENS_PER_MINUTE": "1000000000",
            "SWITCHYARD_TENANT_MAX_CONCURRENCY": "10000",
        }
        if args.database_url:
            env["SWITCHYARD_DATABASE_URL"] = args.database_url
        switchyard = str(bin_dir / "switchyard")
        key = bench_tenant(switchyard, env)
        fleet_port = free_port()
        fleet_env = {**env, "SWITCHYARD_FLEET_URL": f"http://127.0.0.1:{fleet_port}"}
        if not args.no_sim:
            procs.append(start([switchyard, "fleet"], fleet_env, work / "fleet.log"))
            wait_listening(fleet_port, procs[-1])

        def api(name: str, workers: int, model: str, extra: dict[str, str], api_key: str = key) -> None:
            port = free_port()
            command = [switchyard, "api", "--port", str(port), "--workers", str(workers)]
            procs.append(start(command, {**extra, "SWITCHYARD_PORT": str(port)}, work / f"api-{port}.log"))
            wait_listening(port, procs[-1])
            targets.append(Target(name, f"http://127.0.0.1:{port}/v1/chat/completions", api_key, model, procs[-1].pid))

        counts = [int(n) for n in args.api_processes.split(",")]
        for n in counts:
            api(f"switchyard x{n}", n, MODEL, fleet_env)
        if args.baseline:  # the same, run from another checkout's code on a database of its own
            checkout = Path(args.baseline).resolve()
            packages = ":".join(str(checkout / part) for part in ("platform", "accelerator", "agents", "sdk"))
            base_env = {**fleet_env, "PYTHONPATH": packages, "SWITCHYARD_DATA_DIR": str(work / "baseline")}
            if args.database_url:
                base_env["SWITCHYARD_DATABASE_URL"] = args.baseline_database_url
            api(f"x1 at {_revision(checkout)}", 1, MODEL, base_env, bench_tenant(switchyard, base_env))
        if not args.no_sim:
            api("sim in-process", 1, SIM_MODEL, env)
            for n in counts:
                api(f"sim via fleet x{n}", n, SIM_MODEL, fleet_env)

        litellm = args.litellm or _local_litellm_proxy(bin_dir)
        if litellm:
            ll_port = free_port()
            config = work / "litellm.yaml"
            config.write_text(
                "model_list:\n"
                f"  - model_name: {MODEL}\n"
                "    litellm_params:\n"
                f"      model: openai/{MODEL}\n"
                f"      api_base: {upstream}\n"
                "      api_key: none\n"
            )
            master_key = "sk-" + secrets.token_hex(32)
            ll_env = {
                "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                "HF_HUB_OFFLINE": "1",
                "LITELLM_LOG": "ERROR",
                "LITELLM_MASTER_KEY": master_key,
            }
            procs.append(
                start(
                    [litellm, "--config", str(config), "--port", str(ll_port), "--num_workers", "1"],
                    ll_env,
                    work / "litellm.log",
                )
            )
            wait_listening(ll_port, procs[-1], timeout_s=180)
            url = f"http://127.0.0.1:{ll_port}/chat/completions"
            targets.append(Target("litellm proxy", url, master_key, pid=procs[-1].pid))
        else:
            print("litellm proxy: not installed (pip install 'litellm[proxy]'), column left out\n")

        results = measure(targets, args.seconds, args.concurrency, args.serial, args.rounds)
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work, ignore_errors=True)

    direct = results["upstream direct"]
    print(
        f"non-streaming chat completions, {args.concurrency} connections for {args.seconds:.0f} s; "
        f"latency at concurrency 1 over {args.serial} requests\n"
    )
    loaded = f"@{args.concurrency}"
    header = (
        f"{'target':<22} {'req/s':>9} {'x direct':>9} {'p50 ms':>8} {'p99 ms':>8} {'+p50 ms':>8} "
        f"{'p50' + loaded:>8} {'p99' + loaded:>8} {'p99/p50':>8} {'CPU us/req':>11} {'errors':>7}"
    )
    print(header)
    print("-" * len(header))
    for name, r in results.items():
        cpu = "" if r.cpu_us is None else f"{r.cpu_us:.0f}"
        print(
            f"{name:<22} {r.rps:>9.0f} {r.rps / direct.rps:>9.2f} {r.p50_ms:>8.2f} {r.p99_ms:>8.2f} "
            f"{r.p50_ms - direct.p50_ms:>8.2f} {r.loaded_p50_ms:>8.2f} {r.loaded_p99_ms:>8.2f} "
            f"{r.loaded_p99_ms / r.loaded_p50_ms if r.loaded_p50_ms else 0:>8.1f} {cpu:>11} {r.errors:>7}"
        )
    one, floor = results["switchyard x1"], results["litestar pass-through"]
    print(f"\nswitchyard x1 / litestar pass-through throughput: {one.rps / floor.rps:.2f}x")
    if one.cpu_us and floor.cpu_us:
        print(
            f"switchyard x1 spends {one.cpu_us:.0f} us of CPU per request, the bare framework {floor.cpu_us:.0f} "
            f"({one.cpu_us / floor.cpu_us:.1f}x): the gateway adds {one.cpu_us - floor.cpu_us:.0f} us"
        )
    print_budget(one, floor, args.serial)
    for name, r in results.items():
        if name.startswith("switchyard x") and name != "switchyard x1":
            print(f"\n{name} / switchyard x1 throughput: {r.rps / one.rps:.2f}x")
    if "sim in-process" in results:
        for name, r in results.items():
            if name.startswith("sim via fleet"):
                print(f"{name} / sim in-process throughput: {r.rps / results['sim in-process'].rps:.2f}x")
    for name, r in results.items():
        if name.startswith("x1 at ") and r.cpu_us and one.cpu_us:
            print(
                f"\nswitchyard x1 / {name} throughput: {one.rps / r.rps:.2f}x; CPU per request "
                f"{one.cpu_us:.0f} against {r.cpu_us:.0f} us ({one.cpu_us / r.cpu_us:.2f}x)"
            )
    if "litellm proxy" in results:
        ratio = one.rps / results["litellm proxy"].rps
        print(f"\nswitchyard x1 / litellm proxy throughput: {ratio:.1f}x")


def print_budget(one: Result, floor: Result, requests: int) -> None:
    """Where switchyard x1's CPU goes per request at concurrency 1: its server-timing stages, what lies outside
    them (the server's HTTP parsing, routing, sending), against the bare framework's whole request."""
    if not one.stages or one.serial_cpu_us is None:
        return
    print(f"\nthe overhead budget of switchyard x1: CPU us per request at concurrency 1, over {requests} requests")
    print(f"{'stage':<34} {'CPU us':>8} {'wall us':>8}")
    for name, stage in one.stages.items():
        print(f"{name:<34} {stage.cpu_ms * 1e3:>8.0f} {stage.wall_ms * 1e3:>8.0f}")
    in_stages = sum(stage.cpu_ms for stage in one.stages.values()) * 1e3
    print(f"{'outside the stages (server, routing)':<34} {one.serial_cpu_us - in_stages:>8.0f}")
    print(f"{'total (the process, from /proc)':<34} {one.serial_cpu_us:>8.0f}")
    if "metering" in one.stages:
        print(f"{'total without metering':<34} {one.serial_cpu_us - one.stages['metering'].cpu_ms * 1e3:>8.0f}")
    if floor.serial_cpu_us is not None:
        print(f"{'litestar pass-through, total':<34} {floor.serial_cpu_us:>8.0f}")


if __name__ == "__main__":
    main()
