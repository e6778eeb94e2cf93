"""``switchyard fleet``: the one process that simulates the installation's ``trainium-sim`` deployments.

API processes and workers reach it at ``SWITCHYARD_FLEET_URL`` (``RemoteSimulatedDeployment``); it records
its replicas' busy time and every receipt it issues in the database every second (``FleetBusyRecorder``), so
reconciliation can name the compute of requests whose gateway died before it committed their usage. On SIGTERM
it stops taking requests and cancels those still running, so each gateway receives the receipt of what its
request used, then records the last busy time.

It fails closed: without ``SWITCHYARD_FLEET_TOKEN`` it listens on loopback addresses only (anything that reaches
it gets completions nobody meters and can reload the fleet), and ``serve_fleet`` exits naming the variable.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from typing import Any

from switchyard.accelerator.pool import AcceleratorPool, FleetServer, load_fleet
from switchyard.platform.db import Database
from switchyard.platform.inference.busy import FleetBusyRecorder
from switchyard.platform.settings import Settings

__all__ = ["FleetProcess", "exposed_without_token", "fleet_address", "serve_fleet"]

log = logging.getLogger(__name__)
DEFAULT_FLEET_URL = "http://127.0.0.1:8001"
CANCEL_GRACE_S = 5


def fleet_address(settings: Settings) -> tuple[str, int]:
    """Host and port ``switchyard fleet`` binds to by default: those of ``SWITCHYARD_FLEET_URL``."""
    import httpx

    url = httpx.URL(settings.fleet_url or DEFAULT_FLEET_URL)
    return url.host, url.port or 80


def exposed_without_token(host: str, token: str) -> str | None:
    """Why the fleet process must not listen on ``host`` with ``token`` (empty: none), or ``None``: it may. Only a
    loopback address (or ``localhost``) goes without a token; a host name could resolve to anything."""
    if token or host == "localhost":
        return None
    try:
        if ipaddress.ip_address(host.strip("[]")).is_loopback:
            return None
    except ValueError:
        pass
    return (
        f"switchyard fleet: refusing to listen on {host or 'every interface'!r} without SWITCHYARD_FLEET_TOKEN: "
        "anything that reaches the fleet process would get completions nobody meters and could reload the fleet. "
        "Set SWITCHYARD_FLEET_TOKEN to the same secret on every process (e.g. `openssl rand -hex 24`), or listen "
        "on 127.0.0.1."
    )


class FleetProcess:
    """The fleet server with its busy-time recorder, as one ASGI app."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.pool = self._load()
        self.server = FleetServer(self.pool, token=settings.fleet_token_value, reload=self.reload)
        self.database = Database(settings.database_url)
        self.recorder = FleetBusyRecorder(self.database)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await self.server(scope, receive, send)
            return
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                # busy time from the replicas; receipts from the server, under the callers' request ids
                self.recorder.watch(self.pool, busy=self.pool.busy_chip_us)
                self.recorder.watch(self.server, receipts=self.server.take_receipts)
                self.recorder.start()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _load(self) -> AcceleratorPool:
        specs = [s for s in load_fleet(self.settings.fleet_file) if s.backend == "trainium-sim"]
        return AcceleratorPool.from_specs(specs, time_scale=self.settings.time_scale)

    async def reload(self) -> None:
        """Re-read the fleet file (a bad file raises and changes nothing); the old replicas' last busy time is
        recorded once their running requests have finished."""
        pool = self._load()
        self.recorder.watch(pool, busy=pool.busy_chip_us)
        self.pool = pool
        await self.recorder.retire(await self.server.replace_pool(pool))

    async def shutdown(self) -> None:
        try:
            await self.recorder.stop()
        except Exception:
            log.exception("could not record the fleet's last busy time")
        await self.pool.aclose()
        await self.database.dispose()


def serve_fleet(settings: Settings, host: str, port: int) -> None:
    """Serve the fleet process until SIGTERM/SIGINT; exits with status 1 when ``host`` is not loopback and no
    ``SWITCHYARD_FLEET_TOKEN`` is set (``exposed_without_token``)."""
    refusal = exposed_without_token(host, settings.fleet_token_value)
    if refusal is not None:
        raise SystemExit(refusal)
    import uvicorn

    from switchyard.platform.observability import observe_fleet

    app = FleetProcess(settings)

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            # cancel what runs so streams end (with their receipts) before uvicorn waits for connections to close
            loop = asyncio.get_event_loop()
            loop.call_soon_threadsafe(app.server.close)
            super().handle_exit(sig, frame)

    config = uvicorn.Config(
        observe_fleet(app, otlp_endpoint=settings.otlp_endpoint, log_level=settings.log_level),  # /metrics too
        host=host,
        port=port,
        log_level=settings.log_level,
        access_log=False,
        timeout_graceful_shutdown=CANCEL_GRACE_S,
    )
    Server(config).run()
