"""No API key secret is ever written down: not in any column of any table, not in any log line.

A real server (uvicorn on 127.0.0.1, logging at DEBUG, access log on) is given keys of every kind, made by the CLI
and by the API with and without ``Idempotency-Key``, and is used with them (replays, refusals, a revoked key, a
wrong secret). Then every value of every table and everything logged is searched for each secret, as text, in
base64 and in hex, and as its raw bytes.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from click.testing import CliRunner
from sqlalchemy import create_engine, inspect, text

from switchyard.platform.app import create_app
from switchyard.platform.auth.keys import hash_secret, parse_key
from switchyard.platform.cli import main as cli
from switchyard.platform.db import sync_url
from switchyard.platform.settings import Settings
from tests.support.ports import free_port

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


@dataclass(frozen=True)
class Server:
    base_url: str
    settings: Settings


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[Server]:
    settings = Settings(
        data_dir=tmp_path / "data", database_url=database_url, time_scale=0, port=free_port(), log_level="debug"
    )
    # log_config=None: uvicorn's loggers (access log included) propagate to the root logger, where caplog is.
    config = uvicorn.Config(
        create_app(settings), host="127.0.0.1", port=settings.port, log_level="debug", log_config=None
    )
    running = uvicorn.Server(config)
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    for _ in range(500):
        if running.started:
            break
        time.sleep(0.02)
    assert running.started, "the API server did not start"
    yield Server(f"http://127.0.0.1:{settings.port}", settings)
    running.should_exit = True
    thread.join(timeout=20)


def _cli(settings: Settings, *args: str) -> str:
    env = {"SWITCHYARD_DATABASE_URL": settings.database_url, "SWITCHYARD_DATA_DIR": str(settings.data_dir)}
    result = CliRunner(env=env).invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def _bearer(key: str, idempotency_key: str | None = None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {key}"}
    return headers if idempotency_key is None else {**headers, "Idempotency-Key": idempotency_key}


def _exercise(server: Server) -> list[str]:
    """Make keys of every kind every way, use them; the plaintext of every key made (or tried) along the way."""
    operator = _cli(server.settings, "key", "create", "--operator").strip()
    made = _cli(server.settings, "tenant", "create", "cli-tenant").split()
    cli_tenant, cli_owner = made[1], next(word for word in made if word.startswith("sy_"))
    cli_developer = _cli(server.settings, "key", "create", "--tenant", cli_tenant).strip()
    keys = [operator, cli_owner, cli_developer]
    with httpx.Client(base_url=server.base_url) as http:
        tenant = http.post("/v1/admin/tenants", json={"name": "plain"}, headers=_bearer(operator)).json()
        once = str(uuid.uuid4())
        retried = [
            http.post("/v1/admin/tenants", json={"name": "retried"}, headers=_bearer(operator, once)) for _ in range(2)
        ]
        assert retried[1].headers["idempotent-replayed"] == "true"
        owner = tenant["owner_key"]["value"]
        keys += [owner, retried[0].json()["owner_key"]["value"]]
        for role in ("admin", "developer", "viewer"):
            keys.append(http.post("/v1/api-keys", json={"role": role}, headers=_bearer(owner)).json()["value"])
        once = str(uuid.uuid4())
        created = [
            http.post("/v1/api-keys", json={"role": "developer"}, headers=_bearer(owner, once)) for _ in range(2)
        ]
        assert created[1].headers["idempotent-replayed"] == "true"
        keys.append(created[0].json()["value"])
        admin, developer, viewer, retried_key = keys[-4:]

        once = str(uuid.uuid4())
        for key in (developer, developer, retried_key, cli_developer):
            assert http.post("/v1/chat/completions", json=CHAT, headers=_bearer(key, once)).status_code == 200
        assert http.post("/v1/members", json={"email": "a@x.io"}, headers=_bearer(admin, "member")).status_code == 201
        assert http.get("/v1/members", headers=_bearer(viewer)).status_code == 200
        assert http.get("/v1/api-keys", headers=_bearer(admin)).status_code == 200
        assert http.post("/v1/api-keys", json={}, headers=_bearer(viewer, "refused")).status_code == 403
        assert http.get("/v1/admin/audit-log", headers=_bearer(operator)).status_code == 200
        revoked = http.post("/v1/api-keys", json={"role": "viewer"}, headers=_bearer(owner)).json()
        assert http.delete(f"/v1/api-keys/{revoked['id']}", headers=_bearer(owner)).status_code == 200
        assert http.get("/v1/members", headers=_bearer(revoked["value"])).status_code == 401
        keys.append(revoked["value"])
        wrong = f"sy_{owner.split('_')[1]}_{'x' * 43}"  # the right key id with a wrong secret
        assert http.get("/v1/members", headers=_bearer(wrong)).status_code == 401
        keys.append(wrong)
    return keys


def _forms(plaintext: str) -> dict[str, bytes]:
    """Every way a key's secret could be written: as text, base64, hex, and the secret's raw bytes."""
    parsed = parse_key(plaintext)
    assert parsed is not None
    raw = base64.urlsafe_b64decode(parsed.secret + "=" * (-len(parsed.secret) % 4))
    forms = {"raw secret bytes": raw, "hex of the raw secret": raw.hex().encode()}
    for name, value in (("key", plaintext.encode()), ("secret", parsed.secret.encode())):
        forms[name] = value
        forms[f"base64 of the {name}"] = base64.b64encode(value).rstrip(b"=")
        forms[f"urlsafe base64 of the {name}"] = base64.urlsafe_b64encode(value).rstrip(b"=")
        forms[f"hex of the {name}"] = value.hex().encode()
        forms[f"HEX of the {name}"] = value.hex().upper().encode()
    return forms


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, dict | list):
        return json.dumps(value).encode()
    return str(value).encode()


def _database_dump(database_url: str) -> dict[str, list[bytes]]:
    """Every value of every row of every table, as bytes, by table."""
    engine = create_engine(sync_url(database_url))
    try:
        with engine.connect() as connection:
            tables = inspect(connection).get_table_names()
            return {
                table: [_as_bytes(v) for row in connection.execute(text(f'SELECT * FROM "{table}"')) for v in row]
                for table in tables
            }
    finally:
        engine.dispose()


def _logged(caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]) -> bytes:
    lines = []
    for record in caplog.records:
        lines += [record.name, record.getMessage(), repr(record.args), record.exc_text or ""]
    out, err = capfd.readouterr()
    return "\n".join([*lines, out, err]).encode()


def test_no_secret_is_stored_or_logged(
    server: Server, database_url: str, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.DEBUG)
    keys = _exercise(server)
    dump = _database_dump(database_url)
    logged = _logged(caplog, capfd)

    # The search sees what it should: every real key's hash is in the database, sealed answers were stored,
    # and the log holds the server's own lines (the access log among them).
    everything = b"\n".join(value for values in dump.values() for value in values)
    for key in keys[:-1]:  # all but the wrong secret
        parsed = parse_key(key)
        assert parsed is not None
        assert hash_secret(parsed.secret).encode() in everything
    assert dump["idempotency_records"]
    assert b'"POST /v1/api-keys HTTP/1.1" 201' in logged

    found = [
        f"{form} of key {n} in {where}"
        for n, key in enumerate(keys)
        for form, needle in _forms(key).items()
        for where, haystack in [*((f"table {t}", b"\n".join(v)) for t, v in dump.items()), ("the logs", logged)]
        if needle in haystack
    ]
    assert found == []
