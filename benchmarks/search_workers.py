"""A configuration search on 1 and 2 Celery worker processes, beside the same search in the searching process.

    .venv/bin/python benchmarks/search_workers.py [--wave-sizes 8,16] [--workers 1,2] [--worker-nice 0]

Runs docs/simulator.md's command (Llama-3.1-8B-Instruct, 1,000 Poisson requests per rate tried, four instance types
x TP 1-8 x 1-2 replicas x max batch 16/64) with ``--workers local``, then, for each wave size, with ``--workers
celery`` on 1 and 2 ``switchyard worker --pool solo --queues switchyard.simulate`` processes (one process each)
started before the search on a fresh data directory (the embedded SQLite broker and result backend). Each row gives
the command's wall time, its start-up included, beside the 1-worker run of the same wave size, and the CPU time of
the searching process and of the workers (their start-up included). Every run's Pareto front and cheapest per
instance must be the local run's. The workers run at `--worker-nice` (SWITCHYARD_WORKER_NICE; 0 by default here, as
on a host of search workers alone, and as the searching process runs: at the platform's default of 10 any other
process wanting the cores starves them, so on a shared machine their wall time measures the other work). Wall time
on a machine shared with other work still moves with that work: each row also gives the cores the machine's other
processes used on average while it ran (/proc/stat's busy time less the search's and the workers'), and the load
average; compare ratios only between rows where other work left the same cores free.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
SEARCH = [
    "simulate",
    "search",
    "--model",
    "meta-llama/Llama-3.1-8B-Instruct",
    "--workload",
    "poisson:n=1000,rate=2,prompt=512,output=128,seed=1",
    "--requests",
    "1000",
    "--slo-ttft-ms",
    "1000",
    "--slo-tpot-ms",
    "60",
    "--instances",
    "trn2.48xlarge,inf2.48xlarge,trn1.32xlarge,trn3-gen1-ultraserver",
    "--tp",
    "1,2,4,8",
    "--replicas",
    "1,2",
    "--max-batch",
    "16,64",
    "--no-progress",
]
READY_S = 120.0


def start_workers(count: int, env: dict[str, str], logs: Path) -> list[subprocess.Popen[bytes]]:
    """`count` solo worker processes on the simulate queue, returned once each has said it is ready."""
    procs = []
    for i in range(count):
        log = (logs / f"worker{i}.log").open("wb")
        cmd = [str(BIN / "switchyard"), "worker", "--pool", "solo", "--queues", "switchyard.simulate"]
        procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT))
    deadline = time.monotonic() + READY_S
    while not all(b"ready." in (logs / f"worker{i}.log").read_bytes() for i in range(count)):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            stop(procs)
            raise SystemExit(f"the workers did not start: see {logs}")
        time.sleep(0.2)
    return procs


def process_cpu_s(pid: int) -> float:
    """CPU seconds a running process has used so far (/proc/PID/stat, Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def machine_busy_s() -> float:
    """CPU seconds every process of the machine has used so far (all cores; /proc/stat, Linux)."""
    fields = Path("/proc/stat").read_text(encoding="utf-8").split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def children_cpu_s() -> float:
    """CPU time of every child process waited for so far (the searches and the stopped workers)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_search(extra: list[str], env: dict[str, str], out: Path) -> tuple[float, float, dict[str, object]]:
    """The search's wall time, the searching process's CPU time and its JSON."""
    cmd = [str(BIN / "switchyard"), *SEARCH, *extra, "--json", str(out)]
    wall, cpu = time.perf_counter(), children_cpu_s()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    answer: dict[str, object] = json.loads(out.read_text(encoding="utf-8"))
    return time.perf_counter() - wall, children_cpu_s() - cpu, answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wave-sizes", default="8,16", help="--wave-size values to run on the workers")
    parser.add_argument("--workers", default="1,2", help="worker process counts")
    parser.add_argument("--worker-nice", type=int, default=0, help="the workers' nice increment (platform default 10)")
    args = parser.parse_args()
    counts = [int(n) for n in args.workers.split(",")]
    with tempfile.TemporaryDirectory(prefix="search-workers-") as tmp:
        root = Path(tmp)
        local_env = os.environ | {"SWITCHYARD_DATA_DIR": str(root / "local")}
        busy = machine_busy_s()
        local_wall, local_cpu, local = run_search(["--workers", "local"], local_env, root / "local.json")
        local_others = (machine_busy_s() - busy - local_cpu) / local_wall
        print(
            f"{'evaluated by':<24} {'wave':>4} {'evaluated':>9} {'pruned':>6} {'wall s':>7} {'vs 1':>6} "
            f"{'search CPU s':>12} {'workers CPU s':>13} {'other work, cores':>17}  load"
        )
        print(
            f"{'--workers local':<24} {'-':>4} {local['configurations_evaluated']!s:>9} "
            f"{local['pruned']!s:>6} {local_wall:7.1f} {'-':>6} {local_cpu:12.1f} {'-':>13} {local_others:17.2f}  "
            f"{os.getloadavg()[0]:.1f}"
        )
        for wave in args.wave_sizes.split(","):
            base = None
            for count in counts:
                data = root / f"w{wave}-{count}"
                data.mkdir()
                env = os.environ | {"SWITCHYARD_DATA_DIR": str(data), "SWITCHYARD_WORKER_NICE": str(args.worker_nice)}
                before = children_cpu_s()
                procs = start_workers(count, env, data)
                busy = machine_busy_s()
                try:
                    wall, search_cpu, answer = run_search(
                        ["--workers", "celery", "--wave-size", wave, "--worker-timeout", "120"], env, data / "out.json"
                    )
                    busy = machine_busy_s() - busy
                    during = sum(process_cpu_s(p.pid) for p in procs)  # the workers' CPU while the search ran
                finally:
                    stop(procs)
                workers_cpu = children_cpu_s() - before - search_cpu
                others = (busy - search_cpu - during) / wall
                base = base or wall
                same = answer["pareto"] == local["pareto"] and answer["best_per_instance"] == local["best_per_instance"]
                label = f"{count} worker process{'es' if count > 1 else ''}"
                print(
                    f"{label:<24} {wave:>4} {answer['configurations_evaluated']!s:>9} "
                    f"{answer['pruned']!s:>6} {wall:7.1f} {base / wall:5.2f}x {search_cpu:12.1f} {workers_cpu:13.1f} "
                    f"{others:17.2f}  "
                    f"{os.getloadavg()[0]:.1f}{'' if same else '  DIFFERENT ANSWER'}"
                )


if __name__ == "__main__":
    main()
