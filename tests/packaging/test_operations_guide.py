"""docs/operations.md as an operator follows it, without containers: its backup and restore of PostgreSQL (the same
`pg_dump`/`pg_restore` flags, on the test's PostgreSQL server) bring back a working installation, row-level
security included, and the restarted `migrate` step makes no second operator key; the README links the guide and
its first screen says how to get `switchyard` on the PATH."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from litestar.testing import TestClient

from switchyard.platform.app import create_app
from switchyard.platform.settings import Settings
from tests.system.pg import Pg

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "operations.md"
SWITCHYARD = str(Path(sys.executable).parent / "switchyard")


def _switchyard(url: str, data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"SWITCHYARD_DATABASE_URL": url, "SWITCHYARD_DATA_DIR": str(data), "PATH": "/usr/bin:/bin"}
    return subprocess.run([SWITCHYARD, *args], env=env, capture_output=True, text=True, timeout=120)


def test_readme_first_screen_puts_switchyard_on_the_path_and_links_the_guide() -> None:
    readme = (ROOT / "README.md").read_text()
    first_screen = "\n".join(readme.splitlines()[:40])
    assert ". .venv/bin/activate" in first_screen
    assert "docs/operations.md" in readme
    assert GUIDE.exists()
    assert "placeholder" not in GUIDE.read_text().lower()


@pytest.mark.postgres
@pytest.mark.slow
def test_documented_backup_and_restore_bring_back_a_working_installation(postgres_url: str, tmp_path: Path) -> None:
    guide = GUIDE.read_text()
    dump_line = re.search(r"^.*\bpg_dump (.*)$", guide, re.MULTILINE)
    restore_line = re.search(r"^.*\bpg_restore (.*)$", guide, re.MULTILINE)
    assert dump_line
    assert restore_line
    assert "-Fc" in dump_line.group(1)
    assert "--exit-on-error" in restore_line.group(1)
    pg_dump, pg_restore = shutil.which("pg_dump"), shutil.which("pg_restore")
    assert pg_dump
    assert pg_restore

    source, target = Pg(postgres_url), Pg(postgres_url)
    source.create()
    target.create()
    try:
        data = tmp_path / "data"
        assert _switchyard(source.url, data, "db", "upgrade").returncode == 0
        operator = _switchyard(source.url, data, "key", "create", "--operator", "--if-none").stdout.strip()
        tenant = _switchyard(source.url, data, "tenant", "create", "Acme", "--owner-email", "boss@acme.io").stdout
        owner = re.search(r"owner key:\s+(\S+)", tenant)
        assert operator.startswith("sy_op")
        assert owner

        dump = tmp_path / "switchyard.dump"
        with open(dump, "wb") as out:
            subprocess.run([pg_dump, "-Fc", "-d", source.url], stdout=out, check=True, timeout=120)
        restored = subprocess.run(
            [pg_restore, "-d", target.url, "--exit-on-error", str(dump)], capture_output=True, text=True, timeout=120
        )
        assert restored.returncode == 0, restored.stderr
        source.drop()  # the restored database stands alone

        migrate = _switchyard(target.url, data, "db", "upgrade")
        assert migrate.returncode == 0, migrate.stderr
        again = _switchyard(target.url, data, "key", "create", "--operator", "--if-none")
        assert again.returncode == 0, again.stderr
        assert again.stdout == ""  # the restored operator key counts: no new one
        settings = Settings(data_dir=data, database_url=target.url, time_scale=0)
        with TestClient(app=create_app(settings)) as http:
            tenants = http.get("/v1/admin/tenants", headers={"Authorization": f"Bearer {operator}"})
            assert tenants.status_code == 200, tenants.text
            assert [t["name"] for t in tenants.json()["data"]] == ["Acme"]
            members = http.get("/v1/members", headers={"Authorization": f"Bearer {owner.group(1)}"})
            assert members.status_code == 200, members.text  # tenant sessions run as switchyard_tenant (RLS)
            assert [m["email"] for m in members.json()["data"]] == ["boss@acme.io"]
        current = _switchyard(target.url, data, "billing", "reconcile", "--period", "2026-12")
        assert current.returncode == 0, current.stdout + current.stderr
    finally:
        source.drop()
        target.drop()


def _shell_command(guide: str, starts: str) -> list[str]:
    """The guide's `sh` command that starts with ``starts``, joined across its backslash continuations."""
    found = re.search(rf"^({re.escape(starts)}.*?)(?<!\\)\n", guide.replace("\\\n", " "), re.MULTILINE)
    assert found, f"the guide has no `{starts}` command"
    return found.group(1).split()


@pytest.mark.slow
def test_capacity_planning_example_says_what_the_simulator_answers() -> None:
    """The guide's `simulate compare` run as written: its table has the guide's columns and what the prose reads
    from it holds at the rate it plays the trace (one replica falls behind, two miss the objective for many
    requests, four meet it for nearly all, two TP-16 replicas answer sooner than four TP-8 ones on the same chips)."""
    guide = GUIDE.read_text()
    argv = _shell_command(guide, "switchyard simulate compare")
    result = subprocess.run([SWITCHYARD, *argv[1:]], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    header = next(line for line in result.stdout.splitlines() if line.startswith("fleet "))
    assert header in guide  # the guide shows the table as the command prints it
    rows = {}
    for line in result.stdout.splitlines():
        if line.startswith("trn2.48xlarge:"):
            name, chips, _toks, ttft_p50, _ttft_p99, _tpot_p50, _tpot_p99, goodput, *_ = line.split()
            rows[name] = {"chips": int(chips), "ttft_p50": float(ttft_p50), "goodput": float(goodput)}
    one, two, four = (rows[f"trn2.48xlarge:tp=8:replicas={n}"] for n in (1, 2, 4))
    wide = rows["trn2.48xlarge:tp=16:replicas=2"]
    rate_scale = float(argv[argv.index("--rate-scale") + 1]) if "--rate-scale" in argv else 1.0
    offered = 19_366 / 3_600 * rate_scale  # the trace's requests per second, as played
    assert one["goodput"] < 0.1 * offered
    assert one["ttft_p50"] > 60_000  # minutes in the queue
    assert two["goodput"] < 0.8 * offered
    assert four["goodput"] > 0.97 * offered
    assert wide["chips"] == four["chips"]
    assert wide["ttft_p50"] < four["ttft_p50"]
    run = _shell_command(guide, "switchyard simulate run")
    assert run[1] == "simulate"


def test_every_switchyard_command_the_guide_shows_exists_with_its_options() -> None:
    """Each `switchyard …` command line of the guide names a command of the CLI and only options it takes."""
    import click

    from switchyard.platform.cli import main

    text = GUIDE.read_text().replace("\\\n", " ")
    checked = 0
    for found in re.finditer(r"(?<![\w/.-])switchyard((?: [a-z][a-z-]*)+)((?: [^`\n#|]*)?)", text):
        words = found.group(1).split()
        command: click.Command = main
        while words and isinstance(command, click.Group) and words[0] in command.commands:
            command = command.commands[words.pop(0)]
        if command is main:
            continue  # prose ("switchyard processes"), not a command line
        options = {opt for param in command.params for opt in param.opts}
        used = re.findall(r"(?<!\S)(--[a-z][a-z-]*)", found.group(2))
        assert set(used) <= options, f"`{found.group(0).strip()}`: {sorted(set(used) - options)} unknown"
        checked += 1
    assert checked >= 15


def test_every_metric_the_guide_names_is_one_the_processes_serve() -> None:
    source = (ROOT / "platform/switchyard/platform/observability/metrics.py").read_text()
    served = set(re.findall(r'"(switchyard_[a-z_]+)"', source))
    named = set(re.findall(r"\b(switchyard_[a-z_]+?)(?:_bucket|_count|_sum|_total)?\b", GUIDE.read_text()))
    named -= {"switchyard_tenant"}  # the PostgreSQL role, not a metric
    assert len(named) >= 10
    assert named <= served, sorted(named - served)
