"""Structured logs: one JSON object a line, with the request, tenant, key, run and trace they belong to.

Context comes from where the work runs, not from each call site: the HTTP middleware binds the request's ASGI
scope (request id, and the tenant and key id once authentication has run), workers bind the run or job they
execute (:func:`log_context`), and the current span gives the trace id. A filter on the handler copies that
context onto each record in the thread that logs it (records may be formatted later, on a queue's thread).

Secrets never reach the output: API keys (``sy_<id>_<secret>`` keeps only ``sy_<id>_``), bearer tokens and
passwords in URLs are masked in every string the formatter writes, whatever logged them.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import re
import sys
import time
from collections.abc import Iterator, MutableMapping
from contextvars import ContextVar
from typing import Any

from litestar.logging import LoggingConfig
from litestar.logging.config import default_handlers

from switchyard.platform.observability.tracing import current_trace_id

__all__ = [
    "ContextFilter",
    "JsonFormatter",
    "bind_http_scope",
    "configure_process_logging",
    "log_context",
    "logging_config",
    "redact",
]

CONTEXT_FIELDS = ("request_id", "tenant_id", "key_id", "run_id", "job_id", "trace_id", "span_id")

_http_scope: ContextVar[MutableMapping[str, Any] | None] = ContextVar("switchyard_http_scope", default=None)
_fields: ContextVar[dict[str, str]] = ContextVar("switchyard_log_fields", default={})  # noqa: B039 (never mutated)

_KEY = re.compile(r"\b(sy_[A-Za-z0-9]{1,32}_)[A-Za-z0-9_\-]+")
_BEARER = re.compile(r"(?i)\b(bearer\s+)[^\s\"',;]+")
_URL_PASSWORD = re.compile(r"(://[^/\s:@]+:)[^@\s/]+@")
_ENCODER = json.JSONEncoder(default=str, ensure_ascii=False)
_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime", "taskName"}


def redact(text: str) -> str:
    """``text`` with API keys' secrets, bearer tokens and URL passwords masked."""
    if "sy_" in text:
        text = _KEY.sub(r"\1[redacted]", text)
    if "earer" in text or "EARER" in text:
        text = _BEARER.sub(r"\1[redacted]", text)
    if "@" in text:
        text = _URL_PASSWORD.sub(r"\1[redacted]@", text)
    return text


def bind_http_scope(scope: MutableMapping[str, Any]) -> Any:
    """Make ``scope`` the context of logs written while it is served; returns the token to unbind it."""
    return _http_scope.set(scope)


def unbind_http_scope(token: Any) -> None:
    _http_scope.reset(token)


@contextlib.contextmanager
def log_context(**fields: str | None) -> Iterator[None]:
    """Add ``fields`` (``run_id``, ``tenant_id``, ``job_id`` ...) to every record logged inside the block."""
    token = _fields.set({**_fields.get(), **{k: v for k, v in fields.items() if v}})
    try:
        yield
    finally:
        _fields.reset(token)


class ContextFilter(logging.Filter):
    """Copies the current context (request, tenant, key, run, trace) onto each record; never drops one."""

    def filter(self, record: logging.LogRecord) -> bool:
        values: dict[str, Any] = dict(_fields.get())
        scope = _http_scope.get()
        if scope is not None:
            request_id = (scope.get("state") or {}).get("request_id")
            if request_id:
                values["request_id"] = request_id
            principal = scope.get("user")
            key_id = getattr(principal, "key_id", None)
            if key_id:
                values["key_id"] = key_id
            tenant_id = getattr(getattr(principal, "scope", None), "tenant_id", None)
            if tenant_id:
                values["tenant_id"] = tenant_id
        trace_id = current_trace_id()
        if trace_id:
            values["trace_id"] = trace_id
        for name, value in values.items():
            if not hasattr(record, name):
                setattr(record, name, value)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC), level, logger, message, context fields, ``extra`` fields and the
    exception, every string redacted."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(record.created))}.{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, value in record.__dict__.items():
            if name not in _STANDARD and not name.startswith("_"):
                out[name] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exception"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return redact(_ENCODER.encode(out))


def logging_config(level_name: str) -> LoggingConfig:
    """Litestar's logging configuration for an API process: JSON records at ``level_name`` and above (httpx's line
    per upstream call only when debugging), formatted off the request path by Litestar's queue handler."""
    level = level_name.upper()
    quiet = "DEBUG" if level == "DEBUG" else "WARNING"
    handlers = copy.deepcopy(default_handlers)
    for handler in handlers.values():
        handler["filters"] = ["switchyard_context"]
    return LoggingConfig(
        root={"handlers": ["queue_listener"], "level": level},
        loggers={
            "httpx": {"level": quiet},
            "httpcore": {"level": quiet},
        },
        formatters={"standard": {"()": JsonFormatter}},
        filters={"switchyard_context": {"()": ContextFilter}},
        handlers=handlers,
    )


def configure_process_logging(level_name: str, *, stream: Any = None) -> logging.Handler:
    """JSON logs on stderr for a process that is not a Litestar app (workers, beat, the fleet process)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(ContextFilter())
    root = logging.getLogger()
    for existing in list(root.handlers):
        if isinstance(existing.formatter, JsonFormatter):
            root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level_name.upper())
    for name in ("httpx", "httpcore"):
        logging.getLogger(name).setLevel("DEBUG" if level_name.upper() == "DEBUG" else "WARNING")
    return handler
