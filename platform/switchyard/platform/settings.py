"""Typed settings, read from environment variables with the ``SWITCHYARD_`` prefix.

Every field is documented where it is declared; ``switchyard config --markdown`` renders the README's table
from these declarations.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings", "argon2_cost", "load_settings", "proxy_networks"]

# OWASP's argon2id minimums (Password Storage Cheat Sheet): (memory KiB, passes) pairs of equal strength
_OWASP_ARGON2_MINIMUMS = ((47_104, 1), (19_456, 2), (12_288, 3), (9_216, 4), (7_168, 5))


class Settings(BaseSettings):
    """Effective configuration of one Switchyard process."""

    model_config = SettingsConfigDict(env_prefix="SWITCHYARD_", extra="ignore", validate_default=True)

    data_dir: Path = Field(
        default=Path(".switchyard"),
        description="Directory for the embedded defaults: SQLite database, Celery broker and results.",
    )
    database_url: str = Field(
        default="",
        description="SQLAlchemy URL of the database; empty means `<data_dir>/switchyard.db` (SQLite). "
        "`postgresql://...` URLs use psycopg 3.",
    )
    broker_url: str = Field(
        default="",
        description="Celery broker URL; empty means a SQLite-backed broker in `<data_dir>/broker.db`. "
        "`redis://...` or `amqp://...` in production.",
    )
    result_backend: str = Field(
        default="",
        description="Celery result backend; empty means `<data_dir>/results.db` (SQLite), "
        "or the broker itself when it is Redis.",
    )
    redis_url: SecretStr | None = Field(
        default=None,
        description="Redis URL for rate limits and event fan-out across processes; unset keeps them in-process.",
    )
    host: str = Field(default="127.0.0.1", description="Interface the API binds to.")
    port: int = Field(default=8000, ge=1, le=65535, description="TCP port of the API.")
    public_url: str = Field(
        default="",
        description="URL clients use to reach the API (printed by `switchyard up`), and the base of the console "
        "links made outside a browser (the invitation link of a tenant made by `switchyard tenant create` or "
        "`POST /v1/admin/tenants`); empty means http://host:port.",
    )
    smtp_url: SecretStr | None = Field(
        default=None,
        description="SMTP server that e-mails the console's invitation and password-reset links "
        "(`smtp://user:password@host:587` with STARTTLS when the server offers it, `smtps://...:465` for TLS from "
        "the start); unset: the links are shown to copy, and *Forgot your password?* says to ask an admin.",
    )
    mail_from: str = Field(
        default="Switchyard <switchyard@localhost>",
        description="The `From` of the console's e-mails (with `smtp_url`).",
    )
    max_request_body_bytes: int = Field(
        default=1_048_576, ge=1024, description="Largest accepted request body; larger bodies get 413."
    )
    request_body_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        description="How long a client may take to send a request's whole body once its headers are in; a slower "
        "request gets 408 `request_timeout` and its connection is closed.",
    )
    idempotency_ttl_seconds: int = Field(
        default=86_400, ge=60, description="How long an `Idempotency-Key` and its stored response are kept."
    )
    embedded_worker: bool = Field(
        default=True, description="Whether `switchyard up` starts a Celery worker process beside the API."
    )
    log_level: str = Field(default="info", description="Log level of the API and worker processes.")
    otlp_endpoint: str = Field(
        default="",
        description="OTLP/HTTP collector that receives every process's traces (`http://collector:4318`: `/v1/traces` "
        "is added; credentials in `OTEL_EXPORTER_OTLP_HEADERS`); empty: no tracing.",
    )
    metrics_port: int = Field(
        default=0,
        ge=0,
        le=65535,
        description="Port on which `switchyard worker` serves Prometheus metrics at `/metrics` (0: none); API "
        "processes and the fleet process serve `/metrics` on their own port.",
    )
    auth_cache_seconds: float = Field(
        default=1.0,
        ge=0,
        description="How long a verified API key is cached in each API process; a key revoked through another "
        "process stops working within this time (0: no cache).",
    )
    fleet_file: str = Field(
        default="",
        description='JSON fleet file (`{"deployments": [...]}`: served models, backends, instances, replicas); '
        "empty serves the default simulated fleet.",
    )
    fleet_url: str = Field(
        default="",
        description="URL of the fleet process (`switchyard fleet`) that simulates every `trainium-sim` deployment "
        "for all API processes and workers, and the address `switchyard fleet` binds to; empty simulates them "
        "in-process (`switchyard up` starts a fleet process and sets it).",
    )
    simulate_in_process: bool = Field(
        default=False,
        description="Let `switchyard api` and `switchyard worker` on a shared database or broker (PostgreSQL, Redis, "
        "RabbitMQ) simulate `trainium-sim` deployments in-process when `fleet_url` is empty. Off, they refuse to "
        "start: each would simulate a fleet of its own beside the others and reconciliation would fail. For tests "
        "that run such a process alone; never in production.",
    )
    fleet_token: SecretStr | None = Field(
        default=None,
        description="Shared secret the fleet process requires from API processes and workers (`Authorization: "
        "Bearer`). Required when the fleet process listens on any but a loopback address (`switchyard fleet` "
        "refuses to start without it); unset: none, on loopback only.",
    )
    time_scale: float = Field(
        default=1.0,
        ge=0,
        description="Wall seconds per simulated second for `trainium-sim` deployments; 0 answers at once "
        "while still reporting simulated timings.",
    )
    tenant_max_concurrency: int = Field(default=64, ge=1, description="Inference requests in flight per tenant.")
    tenant_loop_turns: int = Field(
        default=4,
        ge=1,
        description="Requests of one tenant working at once on one API process's event loop; the tenant's others "
        "wait in its own line, so that one tenant's burst does not slow another's requests (a request gives its "
        "turn back once its model call is handed to the fleet, its response starts or 0.25 s have passed).",
    )
    tenant_tokens_per_minute: int = Field(
        default=2_000_000, ge=1, description="Prompt + requested output tokens per tenant per minute."
    )
    key_requests_per_minute: int = Field(default=6_000, ge=1, description="Inference requests per API key per minute.")
    max_output_tokens: int = Field(
        default=16_384,
        ge=1,
        description="Largest `max_tokens` a request may ask for, and the `max_tokens` of a request that sets none: "
        "its budget hold covers that many output tokens and the answer is cut there.",
    )
    max_embeddings_answer_bytes: int = Field(
        default=16 * 1024 * 1024,
        ge=1024,
        description="Largest answer one `/v1/embeddings` call may have, counted as inputs x dimensions x 24 bytes "
        "a value (`float`) or x 16/3 (`base64`); a call past it is refused with 400 naming `input`.",
    )
    max_file_bytes: int = Field(
        default=32 * 1024 * 1024,
        ge=1024,
        description="Largest file one `/v1/files` upload may carry (its body may be this plus 64 KiB of form; "
        "`SWITCHYARD_MAX_REQUEST_BODY_BYTES` still bounds every other route); a larger file gets 413 "
        "`file_too_large` and nothing is stored.",
    )
    max_tenant_file_bytes: int = Field(
        default=1024 * 1024 * 1024,
        ge=1024,
        description="Total bytes of the files a tenant may keep (deleted and expired files do not count); an upload "
        "that would pass it gets 413 `file_storage_exceeded` and nothing is stored.",
    )
    vector_store_embedding_model: str = Field(
        default="BAAI/bge-large-en-v1.5",
        description="Embedding model of a vector store created without `embedding_model` (a deployment with task "
        "`embeddings`); empty, or not served to the tenant: the first such deployment the tenant may use. "
        "BGE-large encodes 512 tokens an input, so its stores' `auto` chunks are 512 tokens overlapping by 256.",
    )
    vector_store_ingest_lease_seconds: float = Field(
        default=60.0,
        gt=0,
        description="How long a worker holds a file it ingests into a vector store without storing a batch of "
        "chunks; past it `vector_stores.recover` (every 2 s) sends the file to another worker, which resumes "
        "after the chunks stored.",
    )
    agent_run_lease_seconds: float = Field(
        default=120.0,
        gt=0,
        description="How long a worker holds an agent run without checkpointing; past it `runs.recover` "
        "(every 2 s) re-enqueues the run for another worker, ahead of every queued run.",
    )

    tenant_worker_share: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="The share of each worker's slots that one tenant's agent runs and background responses may "
        "hold at once (rounded down, at least one slot); the tenant's other jobs wait in turn, holding no slot. "
        "A ceiling even when no other tenant waits: a backlog's jobs load the fleet and the database that every "
        "tenant's calls share. 1 lets one tenant fill a worker.",
    )
    worker_nice: int = Field(
        default=10,
        ge=0,
        le=19,
        description="How much lower `switchyard worker`'s CPU priority is than the API's and the fleet's (a Unix nice "
        "increment): background jobs take the cores no waiting request wants, so one tenant's backlog does not "
        "slow other tenants' calls on a shared host. 0 keeps them equal (a host of workers alone).",
    )

    password_hash: str = Field(
        default="m=65536,t=3,p=4",
        description="argon2id cost of console passwords: memory in KiB, passes, lanes (the default is RFC 9106's "
        "second recommendation); weaker than OWASP's minimums (m=19456,t=2 or an equivalent pair) is refused. "
        "A password hashed at another cost is re-hashed at this one when its owner next signs in.",
    )

    trusted_proxies: str = Field(
        default="",
        description="Comma-separated addresses or CIDR networks of the reverse proxies in front of the API "
        "(`10.0.0.5, 172.28.0.0/24`); only a request from one of them has its client address taken from "
        "`X-Forwarded-For` (the right-most address that is not itself a trusted proxy). Empty: none, the "
        "client is the connection's peer, whatever headers it sends.",
    )

    secrets_key: SecretStr | None = Field(
        default=None,
        description="Key (at least 32 characters: `openssl rand -hex 32`) that seals the credentials tenants put in "
        "tool definitions (MCP `headers`) in the database; every API process and worker needs the same one. "
        "Unset: `<data_dir>/secrets.key`, made at first start, which is right only for processes that share the "
        "data directory (`switchyard up`).",
    )

    @field_validator("password_hash")
    @classmethod
    def _known_hash_cost(cls, value: str) -> str:
        memory, passes, lanes = argon2_cost(value)
        return f"m={memory},t={passes},p={lanes}"

    @field_validator("secrets_key")
    @classmethod
    def _long_secrets_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 32:
            raise ValueError("the secrets key has at least 32 characters (openssl rand -hex 32)")
        return value

    @field_validator("smtp_url")
    @classmethod
    def _smtp_scheme(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().startswith(("smtp://", "smtps://")):
            raise ValueError("the SMTP URL starts with smtp:// or smtps:// (e.g. smtp://user:password@host:587)")
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _proxy_networks(cls, value: str) -> str:
        return ",".join(str(network) for network in proxy_networks(value))

    @model_validator(mode="after")
    def _fill_embedded_defaults(self) -> Settings:
        data_dir = self.data_dir.expanduser().absolute()
        self.data_dir = data_dir
        if not self.database_url:
            self.database_url = f"sqlite+aiosqlite:///{data_dir / 'switchyard.db'}"
        if not self.broker_url:
            self.broker_url = f"sqla+sqlite:///{data_dir / 'broker.db'}"
        if not self.result_backend:
            if self.broker_url.startswith(("redis://", "rediss://")):
                self.result_backend = self.broker_url
            else:
                self.result_backend = f"db+sqlite:///{data_dir / 'results.db'}"
        if not self.public_url:
            self.public_url = f"http://{self.host}:{self.port}"
        return self

    @property
    def uses_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @property
    def redis_url_value(self) -> str | None:
        """``redis_url`` unwrapped, for the clients that connect with it (None when unset)."""
        return self.redis_url.get_secret_value() if self.redis_url else None

    @property
    def fleet_token_value(self) -> str:
        """``fleet_token`` unwrapped ("" when unset)."""
        return self.fleet_token.get_secret_value() if self.fleet_token else ""

    def ensure_data_dir(self) -> None:
        """Create the data directory when any embedded default points into it."""
        self.data_dir.mkdir(parents=True, exist_ok=True)

    def masked(self) -> dict[str, Any]:
        """The effective settings with secrets (passwords in URLs, secret fields) masked."""
        out: dict[str, Any] = {}
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, SecretStr):
                value = _mask_url(value.get_secret_value())
            elif isinstance(value, str) and "://" in value:
                value = _mask_url(value)
            elif isinstance(value, Path):
                value = str(value)
            out[name] = value
        return out


def _mask_url(url: str) -> str:
    """Replace the password part of a URL's userinfo with ``***``."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    userinfo, _, hostpart = rest.rpartition("@")
    user, has_password, _ = userinfo.partition(":")
    return f"{scheme}://{user}{':***' if has_password else ''}@{hostpart}"


def proxy_networks(text: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """``SWITCHYARD_TRUSTED_PROXIES`` as networks (an address is its /32 or /128); ValueError naming a bad entry."""
    networks = []
    for entry in (part.strip() for part in text.split(",")):
        if entry:
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                raise ValueError(
                    f"{entry!r} is not an IP address or CIDR network (e.g. 10.0.0.5 or 172.28.0.0/24)"
                ) from None
    return tuple(networks)


def argon2_cost(text: str) -> tuple[int, int, int]:
    """``m=<KiB>,t=<passes>,p=<lanes>`` as ``(memory, passes, lanes)``; ValueError naming what is wrong."""
    parts = dict(part.strip().partition("=")[::2] for part in text.split(","))
    if set(parts) != {"m", "t", "p"} or not all(v.strip().isdigit() for v in parts.values()):
        raise ValueError(f"{text!r} is not m=<memory KiB>,t=<passes>,p=<lanes> (e.g. m=65536,t=3,p=4)")
    memory, passes, lanes = (int(parts[k]) for k in "mtp")
    if not 1 <= lanes <= 64:
        raise ValueError(f"p={lanes}: lanes are 1 to 64")
    if not any(memory >= m and passes >= t for m, t in _OWASP_ARGON2_MINIMUMS):
        raise ValueError(f"m={memory},t={passes} is weaker than OWASP's argon2id minimums (m=19456,t=2 or equivalent)")
    if memory < 8 * lanes:
        raise ValueError(f"m={memory}: argon2 needs at least 8 KiB per lane")
    return memory, passes, lanes


def load_settings(**overrides: Any) -> Settings:
    """Read settings from the environment, with explicit overrides taking precedence."""
    return Settings(**overrides)
