"""`switchyard simulate search --workers celery` on a real `switchyard worker` process (the embedded SQLite broker):
the worker, taking only the switchyard.simulate queue, evaluates every configuration sent, and the search finds the
Pareto front and the cheapest per instance that the local search finds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from switchyard.accelerator.sim.search import SearchSettings, Slo, search
from switchyard.accelerator.sim.search_space import configuration_space
from switchyard.accelerator.sim.workloads import parse_workload
from switchyard.platform.settings import Settings
from switchyard.platform.worker.celery_app import SIMULATE_QUEUE, create_celery, declare_queues

pytestmark = pytest.mark.slow

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
WORKLOAD = "poisson:n=100,rate=2,prompt=512,output=128,seed=1"
INSTANCES = ["trn2.48xlarge", "inf2.48xlarge"]


def test_a_search_on_a_real_worker_answers_what_the_local_search_answers(tmp_path: Path, start_process: Any) -> None:
    env = {"SWITCHYARD_DATA_DIR": str(tmp_path / "data"), "SWITCHYARD_SIMULATE_IN_PROCESS": "1"}
    declare_queues(create_celery(Settings(data_dir=tmp_path / "data")))  # before two processes reach for them
    start_process("worker", "--pool", "solo", "--queues", SIMULATE_QUEUE, env=env)
    out = tmp_path / "search.json"
    command = [sys.executable, "-m", "switchyard.platform.cli", "simulate", "search", "--model", MODEL]
    command += ["--workload", WORKLOAD, "--slo-ttft-ms", "1000", "--slo-tpot-ms", "60", "--requests", "100"]
    command += ["--instances", ",".join(INSTANCES), "--tp", "4,8", "--max-batch", "4,64"]
    command += ["--workers", "celery", "--wave-size", "3", "--progress", "--json", str(out)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr

    space, _ = configuration_space(MODEL, INSTANCES, tps=[4, 8], max_batches=[4, 64])
    local = search(space, parse_workload(WORKLOAD), Slo(1000.0, 60.0), SearchSettings(requests=100)).to_dict()
    remote = json.loads(out.read_text())
    assert remote["pareto"] == local["pareto"]
    assert remote["best_per_instance"] == local["best_per_instance"]
    assert remote["simulated"] == remote["configurations_evaluated"] > 0  # all by the worker: no cache here
    assert f"{len(space)}/{len(space)} configurations done" in done.stderr
    assert "(wave 1)" in done.stderr
    assert f"workers that take {SIMULATE_QUEUE}" in done.stderr


def test_a_search_with_no_worker_on_the_queue_fails_after_its_worker_timeout(tmp_path: Path) -> None:
    env = {"SWITCHYARD_DATA_DIR": str(tmp_path / "data")}
    command = [sys.executable, "-m", "switchyard.platform.cli", "simulate", "search", "--model", MODEL]
    command += ["--workload", WORKLOAD, "--slo-ttft-ms", "1000", "--slo-tpot-ms", "60", "--requests", "100"]
    command += ["--instances", "trn2.48xlarge", "--tp", "8", "--workers", "celery", "--worker-timeout", "2"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1, done.stderr
    assert "no result from the workers for 2 s" in done.stderr
    assert SIMULATE_QUEUE in done.stderr
