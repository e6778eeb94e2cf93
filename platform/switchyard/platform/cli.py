"""The ``switchyard`` command: run the platform's processes and administer an installation."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from switchyard.platform.settings import Settings, argon2_cost, load_settings

if TYPE_CHECKING:
    from switchyard.platform.simulation import CeleryWaves

__all__ = ["main"]

T = TypeVar("T")


def _run(make: Callable[[Any], Awaitable[T]], settings: Settings) -> T:
    from switchyard.platform.db import Database

    async def go() -> T:
        database = Database(settings.database_url)
        try:
            return await make(database)
        finally:
            await database.dispose()

    return asyncio.run(go())


def _unscoped(work: Callable[[Any], Awaitable[T]]) -> T:
    """Run ``work(session)`` in one unscoped transaction of the configured database; a refusal (``ApiError``) is a
    usage error naming the problem."""
    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.http.errors import ApiError

    async def go(database: Any) -> T:
        async with database.unit_of_work(UNSCOPED) as session:
            return await work(session)

    try:
        return _run(go, _settings())
    except ApiError as error:
        raise click.UsageError(str(error.detail)) from None


def _settings(**overrides: Any) -> Settings:
    settings = load_settings(**{k: v for k, v in overrides.items() if v is not None})
    if settings.uses_sqlite:
        settings.ensure_data_dir()
    from switchyard.platform.identity.passwords import configure_password_hashing

    configure_password_hashing(*argon2_cost(settings.password_hash))  # operator logins are made here too
    return settings


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Switchyard: multi-tenant agent hosting on a simulated AWS Trainium fleet, billed by compute used.

    Settings come from SWITCHYARD_* environment variables (see `switchyard config`).
    """


@main.command()
@click.option("--host", default=None, help="Interface to bind (default SWITCHYARD_HOST or 127.0.0.1).")
@click.option("--port", default=None, type=int, help="Port to bind (default SWITCHYARD_PORT or 8000).")
@click.option("--no-worker", is_flag=True, help="Do not start the embedded Celery worker.")
def up(host: str | None, port: int | None, no_worker: bool) -> None:
    """Start everything in one go: migrate, bootstrap on first start, API and an embedded worker."""
    from switchyard.platform.bootstrap import bootstrap
    from switchyard.platform.db.migrate import upgrade
    from switchyard.platform.worker.celery_app import create_celery, declare_queues

    settings = _settings(host=host, port=port)
    upgrade(settings.database_url)
    _seal_stored_credentials(settings)
    declare_queues(create_celery(settings))  # before the API and the worker both reach for them
    first = _run(bootstrap, settings)
    url = settings.public_url
    click.echo(f"Switchyard {'first start' if first else 'start'}: data in {settings.data_dir}")
    if first is not None:
        click.echo("\nThese keys are shown once; keep them.")
        click.echo(f"  operator key:           {first.operator_key}")
        click.echo(f"  demo tenant {first.tenant_id} owner key: {first.tenant_key}")
        click.echo(f"  console sign-in:        {first.owner_email}  password: {first.owner_password}")
        click.echo(f"  operator console:       {first.operator_email}  password: {first.operator_password}")
        click.echo("\nTry it:")
        click.echo(f"  curl -s -H 'Authorization: Bearer {first.tenant_key}' {url}/v1/members")
        body = '{"model": "meta-llama/Llama-3.1-8B-Instruct", "messages": [{"role": "user", "content": "Hello"}]}'
        click.echo(
            f"  curl -s -H 'Authorization: Bearer {first.tenant_key}' -H 'content-type: application/json' "
            f"-d '{body}' {url}/v1/chat/completions"
        )
    else:
        click.echo("Keys were printed at first start; make more with `switchyard key create`.")
    click.echo(f"\nAPI:      {url}\nAPI docs: {url}/schema\nConsole:  {url}/console\n")
    env = {**os.environ, "SWITCHYARD_DATA_DIR": str(settings.data_dir)}
    children: list[subprocess.Popen[bytes]] = []  # stopped in reverse order: worker, then fleet
    # uvicorn shuts down on SIGTERM or SIGINT, then raises it again with the previous handler in place: make that
    # handler unwind this function, so the fleet and the embedded worker are stopped rather than left without a
    # parent, and exit 0: a stop that was asked for is no failure (`make up` reported it as "Error 143").
    signal.signal(signal.SIGTERM, _stop_when_asked)
    signal.signal(signal.SIGINT, _stop_when_asked)
    try:
        if not settings.fleet_url:  # no fleet process configured: run one for this installation
            settings = settings.model_copy(update={"fleet_url": f"http://127.0.0.1:{_free_port()}"})
            env["SWITCHYARD_FLEET_URL"] = settings.fleet_url
            children.append(subprocess.Popen([sys.executable, "-m", "switchyard.platform.cli", "fleet"], env=env))
            _wait_for_fleet(settings.fleet_url, children[-1])
        if settings.embedded_worker and not no_worker:
            cmd = [sys.executable, "-m", "switchyard.platform.cli", "worker", "--concurrency", "1", "--beat"]
            children.append(subprocess.Popen(cmd, env=env))
        _serve(settings)
    finally:
        for child in reversed(children):
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(timeout=15)
            except subprocess.TimeoutExpired:
                child.kill()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_fleet(url: str, process: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    import time

    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise click.ClickException(f"the fleet process exited with status {process.returncode}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise click.ClickException(f"the fleet process did not answer at {url} within {timeout_s:.0f} s")


def _stop_when_asked(_signum: int, _frame: object) -> None:
    raise SystemExit(0)


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """How an API process's uvicorn is configured. Its proxy-header handling is off: uvicorn would believe
    ``X-Forwarded-For`` from any loopback peer by default, and the app reads that header itself, from the
    proxies ``SWITCHYARD_TRUSTED_PROXIES`` names only (``switchyard.platform.http.client_address``)."""
    return {
        "host": settings.host,
        "port": settings.port,
        "log_level": settings.log_level,
        "access_log": False,
        "timeout_graceful_shutdown": SHUTDOWN_GRACE_S,
        "proxy_headers": False,
    }


def _serve(settings: Settings, workers: int = 1) -> None:
    import uvicorn

    from switchyard.platform.app import create_app
    from switchyard.platform.observability import prepare_multiprocess_dir

    options = uvicorn_options(settings)
    if workers == 1:
        uvicorn.run(create_app(settings), **options)
    else:  # each worker process builds its app from the same SWITCHYARD_* environment
        prepare_multiprocess_dir()  # one /metrics for all of them: each writes its values there
        uvicorn.run("switchyard.platform.app:create_app", factory=True, workers=workers, **options)


def _refuse_in_process_fleet(settings: Settings) -> None:
    """Exit (status 2, naming SWITCHYARD_FLEET_URL) when this process would simulate a fleet of its own beside
    other processes: see ``inference.runtime.in_process_fleet_problem``."""
    from switchyard.platform.inference.runtime import in_process_fleet_problem

    if problem := in_process_fleet_problem(settings):
        raise click.UsageError(problem)


SHUTDOWN_GRACE_S = 5
"""Seconds an API process waits on SIGTERM for open responses before it closes them and exits."""


@main.command()
@click.option("--host", default=None, help="Interface to bind.")
@click.option("--port", default=None, type=int, help="Port to bind.")
@click.option(
    "--workers",
    default=1,
    type=click.IntRange(min=1),
    show_default=True,
    help="API processes sharing the port (several need SWITCHYARD_FLEET_URL when trainium-sim models are served).",
)
def api(host: str | None, port: int | None, workers: int) -> None:
    """Run the API server only (production: several of these behind a load balancer)."""
    settings = _settings(host=host, port=port)
    _refuse_in_process_fleet(settings)
    if workers > 1 and not settings.fleet_url:
        from switchyard.accelerator.pool import load_fleet

        if any(spec.backend == "trainium-sim" for spec in load_fleet(settings.fleet_file)):
            raise click.UsageError(
                "several API processes would each simulate their own copy of the trainium-sim fleet: "
                "run `switchyard fleet` and set SWITCHYARD_FLEET_URL"
            )
    _serve(settings, workers)


@main.command()
@click.option("--host", default=None, help="Interface to bind (default: the host of SWITCHYARD_FLEET_URL).")
@click.option("--port", default=None, type=int, help="Port to bind (default: the port of SWITCHYARD_FLEET_URL).")
def fleet(host: str | None, port: int | None) -> None:
    """Run the fleet process: it simulates every trainium-sim deployment for all API processes and workers
    (which reach it at SWITCHYARD_FLEET_URL) and records its replicas' busy time. Exactly one per installation."""
    from switchyard.platform.inference.fleet_process import fleet_address, serve_fleet

    settings = _settings()
    default_host, default_port = fleet_address(settings)
    serve_fleet(settings, host or default_host, port or default_port)


@main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option("--concurrency", "-c", default=None, type=int, help="Worker processes/threads.")
@click.option("--pool", default="threads", show_default=True, help="Celery pool: prefork, threads or solo.")
@click.option("--beat", is_flag=True, help="Also run the periodic jobs (one process per installation; `up` does).")
@click.option(
    "--queues",
    "-Q",
    default=None,
    help="Comma-separated queues to take jobs from; default all of switchyard.recovery, switchyard.maintenance, "
    "switchyard.runs and switchyard.simulate (configuration searches), in that order.",
)
@click.argument("celery_args", nargs=-1, type=click.UNPROCESSED)
def worker(concurrency: int | None, pool: str, beat: bool, queues: str | None, celery_args: tuple[str, ...]) -> None:
    """Run a Celery worker; extra arguments go to `celery worker`.

    A worker that stops without being asked to (kombu gives up on a Redis connection lost in the middle of an
    acknowledgement: "Unrecoverable error") is started again in this process after a second."""
    import time

    from celery.signals import worker_shutting_down

    from switchyard.platform.observability import prepare_multiprocess_dir
    from switchyard.platform.observability.jobs import observe_process
    from switchyard.platform.priority import lower_process_priority
    from switchyard.platform.tool_secrets import configure_secrets_key
    from switchyard.platform.worker import QUEUES, create_celery

    chosen = QUEUES if queues is None else tuple(q.strip() for q in queues.split(",") if q.strip())
    unknown = sorted(set(chosen) - set(QUEUES))
    if unknown or not chosen:
        raise click.BadParameter(f"choose among {', '.join(QUEUES)} (got {queues!r})", param_hint="--queues")
    settings = _settings()
    _refuse_in_process_fleet(settings)
    lower_process_priority(settings.worker_nice)  # before any thread starts: they all inherit it
    configure_secrets_key(settings)  # its runs open the MCP headers that API processes sealed
    if pool == "prefork" and settings.metrics_port:
        prepare_multiprocess_dir()  # the pool's processes write their values where the metrics port reads them
    observe_process(settings, service="switchyard-worker", metrics=True)
    argv = ["worker", "--loglevel", settings.log_level.upper(), "--pool", pool]
    argv += ["--queues", ",".join(q for q in QUEUES if q in chosen)]  # recovery first, new runs last
    if concurrency:
        argv += ["--concurrency", str(concurrency)]
    if beat:
        argv += ["--beat", "--schedule", str(settings.data_dir / "beat-schedule")]
    asked_to_stop: list[object] = []
    worker_shutting_down.connect(lambda **_: asked_to_stop.append(True), weak=False)  # SIGTERM, SIGINT, SIGQUIT
    while True:
        with contextlib.suppress(SystemExit):
            create_celery(settings).worker_main([*argv, *celery_args])
        if asked_to_stop:
            return
        click.echo("switchyard worker: the worker stopped without being asked to; starting it again", err=True)
        time.sleep(1.0)


@main.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("celery_args", nargs=-1, type=click.UNPROCESSED)
def beat(celery_args: tuple[str, ...]) -> None:
    """Run Celery beat (periodic jobs); exactly one per installation."""
    from switchyard.platform.observability.jobs import observe_process
    from switchyard.platform.worker import create_celery

    settings = _settings()
    observe_process(settings, service="switchyard-beat")
    schedule = str(settings.data_dir / "beat-schedule")
    settings.ensure_data_dir()
    create_celery(settings).start(["beat", "--loglevel", settings.log_level.upper(), "-s", schedule, *celery_args])


@main.group()
def db() -> None:
    """Database migrations (Alembic)."""


@db.command("upgrade")
@click.argument("revision", default="head")
def db_upgrade(revision: str) -> None:
    """Migrate the database up to REVISION (default: head)."""
    from switchyard.platform.db.migrate import upgrade

    settings = _settings()
    upgrade(settings.database_url, revision)
    click.echo(f"upgraded to {revision}")
    if revision == "head":
        sealed = _seal_stored_credentials(settings)
        if sealed:
            click.echo(f"sealed the MCP credentials stored in clear ({sealed} rows)")


def _seal_stored_credentials(settings: Settings) -> int:
    """Seal what was stored before tool credentials were sealed (with this installation's key)."""
    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.tool_secrets import configure_secrets_key, seal_stored_credentials

    configure_secrets_key(settings)

    async def go(database: Any) -> int:
        async with database.unit_of_work(UNSCOPED) as session:
            return await seal_stored_credentials(session)

    return _run(go, settings)


@db.command("downgrade")
@click.argument("revision", default="-1")
def db_downgrade(revision: str) -> None:
    """Migrate the database down to REVISION (default: one step; `base` empties it)."""
    from switchyard.platform.db.migrate import downgrade

    downgrade(_settings().database_url, revision)
    click.echo(f"downgraded to {revision}")


@db.command("current")
def db_current() -> None:
    """Print the database's current revision."""
    from switchyard.platform.db.migrate import current_revision

    click.echo(current_revision(_settings().database_url) or "(empty database: run `switchyard db upgrade`)")


@main.group()
def tenant() -> None:
    """Tenants."""


@tenant.command("create")
@click.argument("name")
@click.option("--owner-email", default=None, help="E-mail of the first owner.")
def tenant_create(name: str, owner_email: str | None) -> None:
    """Create tenant NAME and print its owner API key and the owner's console invitation link (each shown once;
    the link is on SWITCHYARD_PUBLIC_URL, works once and for 7 days)."""
    from switchyard.platform.bootstrap import CLI_ACTOR
    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.tenants.service import create_tenant

    settings = _settings()

    async def make(database: Any) -> Any:
        async with database.unit_of_work(UNSCOPED) as session:
            return await create_tenant(
                session, actor=CLI_ACTOR, name=name, owner_email=owner_email, invitation_base_url=settings.public_url
            )

    created = _run(make, settings)
    click.echo(f"tenant:    {created.id}\nowner key: {created.owner_key.value}")
    click.echo(f"console:   {created.owner_email} sets a password and signs in at {created.owner_invitation_url}")
    click.echo(f"           (one use, until {created.owner_invitation_expires_at:%Y-%m-%d %H:%M} UTC)")


@main.group()
def key() -> None:
    """API keys."""


@key.command("create")
@click.option("--tenant", "tenant_id", default=None, help="Tenant id (ten_...) for a tenant key.")
@click.option("--role", type=click.Choice(["owner", "admin", "developer", "viewer"]), default="developer")
@click.option("--operator", is_flag=True, help="Create an operator key instead of a tenant key.")
@click.option("--name", default="", help="A label for the key.")
@click.option(
    "--if-none",
    is_flag=True,
    help="With --operator: only if the installation has no operator key yet (its first start); print nothing "
    "otherwise.",
)
def key_create(tenant_id: str | None, role: str, operator: bool, name: str, if_none: bool) -> None:
    """Create an API key and print it (shown once)."""
    from switchyard.platform.api_keys.service import create_key
    from switchyard.platform.auth import Role
    from switchyard.platform.bootstrap import CLI_ACTOR
    from switchyard.platform.db import UNSCOPED, TenantScope
    from switchyard.platform.models import Tenant
    from switchyard.platform.tenants.service import create_operator_key, list_operator_keys

    if operator == (tenant_id is not None):
        raise click.UsageError("give exactly one of --tenant ID or --operator")
    if if_none and not operator:
        raise click.UsageError("--if-none goes with --operator")

    async def make(database: Any) -> str:
        async with database.unit_of_work(UNSCOPED) as session:
            if operator:
                if if_none and await list_operator_keys(session):
                    return ""
                return await create_operator_key(session, actor=CLI_ACTOR, name=name or "cli")
            if await session.get(Tenant, tenant_id) is None:
                raise click.ClickException(f"no tenant {tenant_id!r}")
            created = await create_key(
                session,
                scope=TenantScope(str(tenant_id)),
                actor=CLI_ACTOR,
                actor_role=Role.OWNER,
                role=Role(role),
                name=name,
            )
            return created.value

    created = _run(make, _settings())
    if created:
        click.echo(created)
    else:
        click.echo("an operator key exists already: none created (`switchyard key list --operator`)", err=True)


@key.command("list")
@click.option("--operator", is_flag=True, required=True, help="List operator keys (tenant keys: GET /v1/api-keys).")
def key_list(operator: bool) -> None:
    """List operator keys: id, the key's visible prefix, name, created, last used and revoked times (never a secret)."""
    from switchyard.platform.tenants.service import list_operator_keys

    for row in _unscoped(list_operator_keys):
        revoked = f"revoked {row.revoked_at:%Y-%m-%d %H:%M:%S}" if row.revoked_at else "active"
        used = f"last used {row.last_used_at:%Y-%m-%d %H:%M}" if row.last_used_at else "never used"
        click.echo(
            f"{row.id}  sy_{row.short_id}_…  {row.name or '-'}  created {row.created_at:%Y-%m-%d %H:%M:%S}  {used}"
            f"  {revoked}"
        )


@key.command("revoke")
@click.argument("key_id")
def key_revoke(key_id: str) -> None:
    """Revoke operator key KEY_ID (opk_...; tenant keys: DELETE /v1/api-keys/{id}). Each API process stops
    accepting it within SWITCHYARD_AUTH_CACHE_SECONDS."""
    from switchyard.platform.bootstrap import CLI_ACTOR
    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.http.errors import NotFound
    from switchyard.platform.tenants.service import revoke_operator_key

    async def revoke(database: Any) -> Any:
        async with database.unit_of_work(UNSCOPED) as session:
            return await revoke_operator_key(session, actor=CLI_ACTOR, key_id=key_id)

    try:
        row = _run(revoke, _settings())
    except NotFound as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"{row.id} revoked at {row.revoked_at:%Y-%m-%d %H:%M:%S} UTC")


@main.group()
def operator() -> None:
    """Operators: console accounts (operator API keys: `switchyard key create --operator`)."""


@operator.group("login")
def operator_login() -> None:
    """Operator console accounts: sign in at /console/operator/ with an email and password."""


@operator_login.command("create")
@click.option("--email", required=True, help="The operator's email: the console sign-in's name.")
def operator_login_create(email: str) -> None:
    """Create an operator console account and print its one-time password (shown once)."""
    from switchyard.platform.bootstrap import CLI_ACTOR
    from switchyard.platform.identity.operator_accounts import create_operator_account

    account, password = _unscoped(lambda session: create_operator_account(session, actor=CLI_ACTOR, email=email))
    settings = _settings()
    click.echo(f"operator:  {account.id}")
    click.echo(f"console:   {settings.public_url}/console/operator/ as {account.email}, one-time password {password}")


@operator_login.command("reset-password")
@click.option("--email", required=True, help="The operator account's email.")
def operator_login_reset_password(email: str) -> None:
    """Give an operator account a new one-time password (the old one stops working) and print it once."""
    from switchyard.platform.bootstrap import CLI_ACTOR
    from switchyard.platform.identity.operator_accounts import reset_operator_password

    password = _unscoped(lambda session: reset_operator_password(session, actor=CLI_ACTOR, email=email))
    click.echo(f"console:   {email.strip().lower()}, one-time password {password}")


@operator_login.command("disable")
@click.option("--email", required=True, help="The operator account's email.")
def operator_login_disable(email: str) -> None:
    """Disable an operator console account: it cannot sign in, and its sessions end at once."""
    from switchyard.platform.bootstrap import CLI_ACTOR
    from switchyard.platform.identity.operator_accounts import disable_operator_account

    account = _unscoped(lambda session: disable_operator_account(session, actor=CLI_ACTOR, email=email))
    click.echo(f"{account.id} {account.email} disabled at {account.disabled_at:%Y-%m-%d %H:%M:%S} UTC")


@operator_login.command("list")
def operator_login_list() -> None:
    """List operator console accounts: id, email, created, and whether disabled (never a password)."""
    from switchyard.platform.identity.operator_accounts import list_operator_accounts

    for row in _unscoped(list_operator_accounts):
        state = f"disabled {row.disabled_at:%Y-%m-%d %H:%M}" if row.disabled_at else "active"
        click.echo(f"{row.id}  {row.email}  created {row.created_at:%Y-%m-%d %H:%M:%S}  {state}")


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.option("--markdown", is_flag=True, help="Print the documented settings table (for the README).")
def config(as_json: bool, markdown: bool) -> None:
    """Print the effective settings, with secrets masked."""
    settings = load_settings()
    if markdown:
        click.echo(settings_table())
        return
    values = settings.masked()
    if as_json:
        click.echo(json.dumps(values, indent=2, default=str))
        return
    for name, value in values.items():
        click.echo(f"SWITCHYARD_{name.upper()}={'' if value is None else value}")


def settings_table() -> str:
    """The README's settings table, generated from the declarations in ``Settings``."""
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    for name, field in Settings.model_fields.items():
        default = field.default
        shown = "" if default in (None, "") else str(default)
        lines.append(f"| `SWITCHYARD_{name.upper()}` | {f'`{shown}`' if shown else '—'} | {field.description} |")
    return "\n".join(lines)


@main.group()
def billing() -> None:
    """Billing: reconciliation and rate cards."""


@billing.command("reconcile")
@click.option("--period", required=True, help="Calendar month (UTC) to check, as YYYY-MM.")
def billing_reconcile(period: str) -> None:
    """Check a month: attributed chip-us = fleet busy chip-us, each event billed once, totals = lines.

    Prints a report; exits with status 1 on any discrepancy.
    """
    from switchyard.platform.billing.periods import parse_period
    from switchyard.platform.billing.reconcile import reconcile
    from switchyard.platform.db import UNSCOPED

    try:
        start = parse_period(period)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="--period") from None

    async def check(database: Any) -> Any:
        async with database.unit_of_work(UNSCOPED) as session:
            return await reconcile(session, period_start=start)

    report = _run(check, _settings())
    click.echo(report.render())
    if not report.ok:
        sys.exit(1)


@billing.command("rate-cards")
@click.option("--seed", is_flag=True, help="First insert the hardware catalog's baseline cards that are missing.")
def billing_rate_cards(seed: bool) -> None:
    """List rate cards (price per chip-hour, exact), optionally seeding the catalog baselines."""
    from sqlalchemy import select
    from sqlmodel import col

    from switchyard.platform.billing.rates import ensure_default_rate_cards
    from switchyard.platform.db import UNSCOPED
    from switchyard.platform.models import RateCard

    async def cards(database: Any) -> list[Any]:
        async with database.unit_of_work(UNSCOPED) as session:
            if seed:
                await ensure_default_rate_cards(session)
            statement = select(RateCard).order_by(col(RateCard.instance_type), col(RateCard.effective_from))
            return list((await session.execute(statement)).scalars())

    for card in _run(cards, _settings()):
        click.echo(
            f"{card.id}  {card.instance_type:24} model={card.model} tier={card.tenant_tier} "
            f"{card.price_per_chip_hour} {card.currency}/chip-hour from {card.effective_from.isoformat()}"
        )


def _mount_simulator() -> None:
    try:
        from switchyard.accelerator.cli import register_search_workers, simulate
    except ImportError:  # the simulator's CLI is optional while it is being built
        return
    register_search_workers("celery", _celery_search_workers)  # `simulate search --workers celery`
    main.add_command(simulate, name="simulate")


def _celery_search_workers(idle_timeout_s: float | None) -> CeleryWaves:
    """The evaluator of `switchyard simulate search --workers celery`: each wave's configurations as jobs for the
    workers on the broker of this installation's settings (SWITCHYARD_BROKER_URL, SWITCHYARD_RESULT_BACKEND),
    failing after `--worker-timeout` (`idle_timeout_s`) seconds without a result."""
    from switchyard.platform.simulation import CeleryWaves
    from switchyard.platform.worker.celery_app import SIMULATE_QUEUE, create_celery, declare_queues

    app = create_celery(_settings())
    declare_queues(app)  # the SQLite broker makes a queue on first use; a worker starting now might too
    with app.connection_for_write() as connection:
        broker = connection.as_uri()  # without the password
    click.echo(f"evaluating on the workers that take {SIMULATE_QUEUE} on {broker}", err=True)
    return CeleryWaves(app, idle_timeout_s=idle_timeout_s)


_mount_simulator()

if __name__ == "__main__":
    main()
