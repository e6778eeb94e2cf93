"""Operator keys from the command line: the first one made once (compose's `migrate`), listed, rotated, revoked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from litestar.testing import TestClient

from switchyard.platform.app import create_app
from switchyard.platform.cli import main
from switchyard.platform.settings import Settings


@pytest.fixture
def cli(database_url: str, tmp_path: Path) -> CliRunner:
    return CliRunner(env={"SWITCHYARD_DATABASE_URL": database_url, "SWITCHYARD_DATA_DIR": str(tmp_path / "data")})


def test_first_operator_key_once_then_rotated_and_revoked(database_url: str, cli: CliRunner, tmp_path: Path) -> None:
    first = cli.invoke(main, ["key", "create", "--operator", "--if-none", "--name", "first-operator"])
    assert first.exit_code == 0, first.output
    first_key = first.stdout.strip()
    assert re.fullmatch(r"sy_op[0-9a-f]{12}_\S{43}", first_key)

    again = cli.invoke(main, ["key", "create", "--operator", "--if-none", "--name", "first-operator"])
    assert again.exit_code == 0, again.output
    assert again.stdout == ""  # every restart of `migrate` runs it: no second key, nothing to leak into logs
    assert "an operator key exists already" in again.stderr
    assert cli.invoke(main, ["key", "create", "--tenant", "ten_x", "--if-none"]).exit_code == 2

    second_key = cli.invoke(main, ["key", "create", "--operator", "--name", "rotated"]).stdout.strip()
    listed = cli.invoke(main, ["key", "list", "--operator"])
    assert listed.exit_code == 0, listed.output
    lines = listed.stdout.strip().splitlines()
    assert len(lines) == 2
    assert first_key not in listed.stdout  # no secret, only the visible prefix
    assert lines[0].split()[1] == f"{'_'.join(first_key.split('_')[:2])}_…"  # the secret may hold '_' too
    assert "first-operator" in lines[0]
    assert "rotated" in lines[1]
    assert all(line.endswith("active") for line in lines)
    first_id = lines[0].split()[0]

    settings = Settings(data_dir=tmp_path / "data", database_url=database_url, time_scale=0, auth_cache_seconds=0)
    with TestClient(app=create_app(settings)) as http:

        def tenants_with(key: str) -> int:
            return http.get("/v1/admin/tenants", headers={"Authorization": f"Bearer {key}"}).status_code

        assert (tenants_with(first_key), tenants_with(second_key)) == (200, 200)
        revoked = cli.invoke(main, ["key", "revoke", first_id])
        assert revoked.exit_code == 0, revoked.output
        assert f"{first_id} revoked at" in revoked.stdout
        assert (tenants_with(first_key), tenants_with(second_key)) == (401, 200)
        audit = http.get("/v1/admin/audit-log", headers={"Authorization": f"Bearer {second_key}"}).json()["data"]
        assert [e["action"] for e in audit if e["target_id"] == first_id] == [
            "operator_key.revoke",
            "operator_key.create",
        ]

    listed = cli.invoke(main, ["key", "list", "--operator"]).stdout.strip().splitlines()
    assert "revoked" in listed[0]
    assert listed[1].endswith("active")
    assert cli.invoke(main, ["key", "revoke", first_id]).exit_code == 0  # revoking twice changes nothing
    unknown = cli.invoke(main, ["key", "revoke", "opk_nope"])
    assert unknown.exit_code == 1
    assert "no operator key 'opk_nope'" in unknown.output
