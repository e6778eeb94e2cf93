"""A configuration search's waves leave as ``simulate.evaluate`` jobs on the ``switchyard.simulate`` queue, the last
one a worker takes; the job answers what ``evaluate`` answers here. Read back from the real (SQLite) broker."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from switchyard.accelerator.errors import SimulatorError
from switchyard.accelerator.sim.search import SearchSettings, Slo, evaluate
from switchyard.accelerator.sim.search_space import Configuration
from switchyard.accelerator.sim.workloads import poisson_workload
from switchyard.platform.cli import main
from switchyard.platform.settings import Settings
from switchyard.platform.simulation import EVALUATE_TASK, CeleryWaves
from switchyard.platform.simulation.tasks import evaluate_configuration
from switchyard.platform.worker import QUEUES, create_celery
from switchyard.platform.worker.celery_app import MAINTENANCE_QUEUE, RUNS_QUEUE, SIMULATE_QUEUE
from tests.platform.test_jobs import sent

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
SLO = Slo(ttft_ms=1000.0, tpot_ms=60.0)
SETTINGS = SearchSettings(requests=40)


def test_the_package_names_what_it_exports() -> None:
    from switchyard.platform import simulation

    assert simulation.__all__ == ["EVALUATE_TASK", "CeleryWaves"]
    assert all(hasattr(simulation, name) for name in simulation.__all__)


def test_workers_take_the_simulate_queue_by_default_and_after_every_other() -> None:
    assert QUEUES[-1] == SIMULATE_QUEUE
    assert QUEUES.index(SIMULATE_QUEUE) > QUEUES.index(RUNS_QUEUE)


def test_a_wave_leaves_as_evaluate_jobs_on_the_simulate_queue(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    app = create_celery(settings)
    assert EVALUATE_TASK in app.tasks  # the worker knows the job
    configs = [
        Configuration(MODEL, "trn2.48xlarge", 8, 1, 64, "least_load", "bf16"),
        Configuration(MODEL, "inf2.48xlarge", 8, 2, 16, "round_robin", "bf16"),
    ]
    workload = poisson_workload(60, 2.0, 512, 128, seed=1)
    # No worker takes the queue here: the wave waits for its results until the idle timeout.
    with pytest.raises(SimulatorError, match=r"switchyard\.simulate"):
        list(CeleryWaves(app, idle_timeout_s=0.5)(configs, workload, SLO, SETTINGS))
    jobs = sent(settings, SIMULATE_QUEUE)
    assert [name for name, _ in jobs] == [EVALUATE_TASK, EVALUATE_TASK]
    assert sent(settings, MAINTENANCE_QUEUE) == sent(settings, RUNS_QUEUE) == []
    for (_, args), config in zip(jobs, configs, strict=True):
        assert len(args[1]) == SETTINGS.requests  # the workload cut to what the search simulates
        assert evaluate_configuration(*args) == evaluate(config, workload, SLO, SETTINGS).to_dict()


def test_the_platform_command_offers_celery_workers_to_the_search(tmp_path: Path) -> None:
    args = ["simulate", "search", "--model", MODEL, "--workload", "poisson:n=10,rate=1", "--slo-ttft-ms", "1"]
    args += ["--slo-tpot-ms", "1", "--instances", "trn2.48xlarge", "--workers", "elsewhere"]
    result = CliRunner().invoke(main, args, env={"SWITCHYARD_DATA_DIR": str(tmp_path / "data")})
    assert result.exit_code == 2
    assert "choose from local, celery" in result.output
