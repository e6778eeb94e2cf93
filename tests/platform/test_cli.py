"""The `switchyard` command: administration commands share one database through the settings."""

from __future__ import annotations

import inspect
import re
import sqlite3
from contextlib import closing
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from switchyard.platform.cli import main


@pytest.fixture
def runner(tmp_path: Path) -> CliRunner:
    return CliRunner(env={"SWITCHYARD_DATA_DIR": str(tmp_path / "data"), "SWITCHYARD_DATABASE_URL": ""})


def test_db_tenant_and_key_commands_share_one_database(runner: CliRunner, tmp_path: Path) -> None:
    empty = runner.invoke(main, ["db", "current"])
    assert empty.exit_code == 0, empty.output
    assert "empty database" in empty.output
    assert runner.invoke(main, ["db", "upgrade"]).exit_code == 0
    assert "(head)" in runner.invoke(main, ["db", "current"]).output

    created = runner.invoke(main, ["tenant", "create", "Acme", "--owner-email", "boss@acme.io"])
    assert created.exit_code == 0, created.output
    tenant_id = re.search(r"tenant:\s+(ten_\w+)", created.output)
    assert tenant_id
    assert re.search(r"owner key:\s+sy_[0-9a-f]{12}_\S{43}", created.output)
    # the owner's one-time invitation link, on SWITCHYARD_PUBLIC_URL (by default http://host:port)
    assert re.search(
        r"console:\s+boss@acme\.io sets a password and signs in at http://127\.0\.0\.1:8000/console/invitations/[\w-]{43}\n",
        created.output,
    ), created.output

    key = runner.invoke(main, ["key", "create", "--tenant", tenant_id.group(1), "--role", "viewer"])
    assert key.exit_code == 0, key.output
    assert key.output.startswith("sy_")
    operator = runner.invoke(main, ["key", "create", "--operator"])
    assert operator.exit_code == 0
    assert operator.output.startswith("sy_op")
    with closing(sqlite3.connect(tmp_path / "data" / "switchyard.db")) as db:
        audited = db.execute("SELECT action, actor FROM operator_audit_events ORDER BY id").fetchall()
    assert sorted(audited) == [("operator_key.create", "cli"), ("tenant.create", "cli")]

    unknown = runner.invoke(main, ["key", "create", "--tenant", "ten_nope"])
    assert unknown.exit_code != 0
    assert "no tenant" in unknown.output
    both = runner.invoke(main, ["key", "create", "--tenant", tenant_id.group(1), "--operator"])
    assert both.exit_code == 2

    assert runner.invoke(main, ["db", "downgrade", "base"]).exit_code == 0
    assert "empty database" in runner.invoke(main, ["db", "current"]).output


def test_config_masks_secrets(runner: CliRunner) -> None:
    env = {
        "SWITCHYARD_DATABASE_URL": "postgresql://app:hunter2@db.internal/switchyard",
        "SWITCHYARD_REDIS_URL": "redis://:sesame@cache:6379/0",
        "SWITCHYARD_PORT": "9001",
    }
    result = runner.invoke(main, ["config"], env=env)
    assert result.exit_code == 0, result.output
    assert "hunter2" not in result.output
    assert "sesame" not in result.output
    assert "SWITCHYARD_DATABASE_URL=postgresql://app:***@db.internal/switchyard" in result.output
    assert "SWITCHYARD_PORT=9001" in result.output


def _command_paths(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and subcommand under `group`, found from the group itself so a new one is covered."""
    paths = [path]
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            paths += _command_paths(command, (*path, name))
        else:
            paths.append((*path, name))
    return paths


@pytest.mark.parametrize("path", _command_paths(main), ids=lambda path: " ".join(path) or "switchyard")
def test_every_command_has_help(runner: CliRunner, path: tuple[str, ...]) -> None:
    """`switchyard ... --help` answers with a description for every command, including any added later."""
    command: click.Command = main
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    description = inspect.cleandoc(command.help or "")
    assert description, f"`switchyard {' '.join(path)}` has no help text (docstring or help=)"
    result = runner.invoke(main, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Usage: ")
    summary = description.split("\n\n")[0]
    # click rewraps the paragraph (and breaks at hyphens): compare the text without its whitespace
    assert "".join(summary.split()) in "".join(result.output.split()), result.output


@pytest.mark.parametrize("command", ["api", "worker"])
@pytest.mark.parametrize(
    ("variables", "shared"),
    [
        ({"SWITCHYARD_DATABASE_URL": "postgresql://app@127.0.0.1:1/switchyard"}, "PostgreSQL database"),
        ({"SWITCHYARD_BROKER_URL": "redis://127.0.0.1:1/0"}, "Redis broker"),
    ],
)
def test_api_and_worker_beside_other_processes_refuse_to_simulate_their_own_fleet(
    runner: CliRunner, command: str, variables: dict[str, str], shared: str
) -> None:
    """Each would simulate a fleet of its own, and reconcile would then fail for good: they exit naming
    SWITCHYARD_FLEET_URL before serving anything (the ports and hosts above answer nothing)."""
    refused = runner.invoke(main, [command], env={**variables, "SWITCHYARD_FLEET_URL": ""})
    assert refused.exit_code != 0, refused.output
    assert "SWITCHYARD_FLEET_URL" in refused.output
    assert shared in refused.output


def test_in_process_simulation_is_refused_only_beside_other_processes(tmp_path: Path) -> None:
    """`switchyard up`'s embedded layout (SQLite, its SQLite broker) may simulate in-process; so may a process with a
    fleet process, a fleet with no trainium-sim deployment, or one that says SWITCHYARD_SIMULATE_IN_PROCESS."""
    from switchyard.platform.inference.runtime import in_process_fleet_problem
    from switchyard.platform.settings import Settings

    postgres = "postgresql://app@127.0.0.1:1/switchyard"
    upstreams = tmp_path / "fleet.json"
    upstreams.write_text(
        '{"deployments": [{"name": "gpt", "backend": "openai-compatible", "base_url": "http://127.0.0.1:1/v1"}]}'
    )
    assert in_process_fleet_problem(Settings(data_dir=tmp_path)) is None
    assert in_process_fleet_problem(Settings(data_dir=tmp_path, database_url=postgres))
    assert in_process_fleet_problem(Settings(data_dir=tmp_path, broker_url="amqp://127.0.0.1:1//"))
    for fine in (
        {"fleet_url": "http://127.0.0.1:1"},
        {"fleet_file": str(upstreams)},
        {"simulate_in_process": True},
    ):
        assert in_process_fleet_problem(Settings(data_dir=tmp_path, database_url=postgres, **fine)) is None, fine
