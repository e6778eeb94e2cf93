"""One app per test worker for the tests that take the default settings (``settings`` and ``client`` in
tests/conftest.py), each test still getting what an app of its own would give it.

Building the app is Litestar registering some 350 route handlers: ~0.2 s of CPU, more than most API tests spend on
their requests, and some 800 tests of the fast lane take it. So a worker builds it once, and for each test that
takes it:

- the settings are the worker's one ``Settings`` object, set to the values a new one would have, on the test's
  own database and data directory (a test's changes to them are undone; the app reads the database's address and
  the data directory when its lifespan starts, as it reads limits at each call);
- ``app.state`` holds what ``create_app`` put there (the loop's turns, empty), not what the last test's lifespan or
  the test itself added (its database, gateway, jobs, tool options);
- what ``create_app`` configures for the whole process (the password hasher, the tool secrets' key in the data
  directory) is configured again, as another test's ``create_app`` may have changed it.

The app's lifespan (database, gateway, pool, drains) runs around each test, as before. A test whose settings are
not these (its own ``settings`` fixture, or these changed before the client was made) gets a new app.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

__all__ = ["SharedApps"]

_PER_TEST = ("database_url", "data_dir", "broker_url", "result_backend")
"""The settings that differ from test to test (the embedded broker's and results' files are in the data directory),
which the app reads only when its lifespan starts or a job is sent, and through the process's configuration."""


class SharedApps:
    """A worker's default test settings and the app built on them."""

    def __init__(self) -> None:
        self._settings: Any = None
        self._made: dict[str, Any] = {}  # the values a new Settings has for the test being set up
        self._app: Any = None
        self._initial_state: dict[str, Any] = {}

    def settings(self, *, data_dir: Path, database_url: str) -> Any:
        """The default test settings (time scale 0) on ``database_url`` and ``data_dir``."""
        from switchyard.platform.settings import Settings

        made = Settings(data_dir=data_dir, database_url=database_url, time_scale=0)
        values = _values(made)
        if self._settings is None or _shared(values) != _shared(self._made):  # (the test's environment differs)
            self._settings, self._app = made, None
        else:
            for name, value in values.items():
                if getattr(self._settings, name) != value:
                    setattr(self._settings, name, copy.deepcopy(value))
        self._made = values
        return self._settings

    def app(self, settings: Any) -> Any:
        """The app for ``settings``: the shared one, reset, if they are the shared settings as made; else a new one."""
        from switchyard.platform.app import create_app

        if settings is not self._settings or _values(settings) != self._made:
            return create_app(settings)
        if self._app is None:
            self._app = create_app(settings)
            self._initial_state = {k: copy.deepcopy(v) for k, v in self._app.state.items() if k != "settings"}
            return self._app
        _configure_process(settings)
        state = self._app.state
        for key in [k for k in state if k != "settings"]:
            del state[key]
        for key, value in self._initial_state.items():
            state[key] = copy.deepcopy(value)
        return self._app


def _values(settings: Any) -> dict[str, Any]:
    return {name: getattr(settings, name) for name in type(settings).model_fields}


def _shared(values: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in values.items() if name not in _PER_TEST}


def _configure_process(settings: Any) -> None:
    """What ``create_app`` configures for the whole process, besides the app."""
    from switchyard.platform.identity.passwords import configure_password_hashing
    from switchyard.platform.settings import argon2_cost
    from switchyard.platform.tool_secrets import configure_secrets_key

    configure_password_hashing(*argon2_cost(settings.password_hash))
    configure_secrets_key(settings)
