"""Apps shared by the tests of a worker (``settings`` and ``client`` in tests/conftest.py), each test still getting
what an app of its own would give it.

Building the app is Litestar registering some 350 route handlers: ~0.2-0.5 s of CPU, more than most API tests spend
on their requests. So a worker keeps the apps it built, each with the settings object it was built on, and a test
whose settings are made by :meth:`SharedApps.settings` gets one of them again when nothing the app read while it was
built differs:

- ``create_app`` is watched as it builds the app: every setting it reads then (the body limits, the log level, the
  OTLP endpoint, ...) is part of the app; a test whose values of those settings differ gets another app;
- the shared settings object is set to the values a new one would have, on the test's own database and data
  directory (a test's changes to them are undone; the app reads the database's address, the data directory, the
  fleet file and the limiters' Redis when its lifespan starts, and limits at each call);
- ``app.state`` holds what ``create_app`` put there (the loop's turns, empty), not what the last test's lifespan or
  the test itself added (its database, gateway, jobs, tool options);
- what ``create_app`` configures for the whole process (the password hasher, the tool secrets' key in the data
  directory) is configured again, as another test's ``create_app`` may have changed it.

The app's lifespan (database, gateway, pool, drains) runs around each test, as before. A test's own ``Settings``
object (not made here), or settings changed before the client was made, get a new app.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["SharedApps"]

KEPT_APPS = 8
"""Apps a worker keeps (the least recently used goes): a module's tests share one, a few modules' tests alternate."""

_PER_TEST = ("database_url", "data_dir", "broker_url", "result_backend")
"""Settings that differ from test to test and that ``create_app`` reads only to configure the process (done again for
each test), never into the app: the embedded broker's and results' files are in the data directory."""


@dataclass
class _Shared:
    settings: Any
    app: Any = None
    built_on: dict[str, Any] = field(default_factory=dict)  # the settings create_app read, and their values
    initial_state: dict[str, Any] = field(default_factory=dict)
    made: dict[str, Any] = field(default_factory=dict)  # the values a new Settings had for the test being set up


class SharedApps:
    """A worker's test settings and the apps built on them."""

    def __init__(self) -> None:
        self._kept: OrderedDict[int, _Shared] = OrderedDict()  # apps built, by id of their settings object
        self._last_made: _Shared | None = None  # the settings made last, whose app is not built yet

    def settings(self, *, data_dir: Path, database_url: str, **overrides: Any) -> Any:
        """Settings with ``overrides`` (time scale 0 unless given) on ``database_url`` and ``data_dir``: the
        settings object of a kept app those values fit, reset to them, or else a new one."""
        from switchyard.platform.settings import Settings

        made = Settings(data_dir=data_dir, database_url=database_url, **{"time_scale": 0, **overrides})
        values = _values(made)
        for key, shared in self._kept.items():
            if all(values[name] == value for name, value in shared.built_on.items()):
                for name, value in values.items():
                    if getattr(shared.settings, name) != value:
                        setattr(shared.settings, name, copy.deepcopy(value))
                shared.made = values
                self._kept.move_to_end(key)
                return shared.settings
        self._last_made = _Shared(settings=made, made=values)
        return made

    def app(self, settings: Any) -> Any:
        """The app for ``settings``: a kept one, reset, if they are its settings as made; else a new one."""
        from switchyard.platform.app import create_app

        shared = self._kept.get(id(settings))
        if shared is None and self._last_made is not None and self._last_made.settings is settings:
            shared, self._last_made = self._last_made, None
            if _values(settings) != shared.made:
                return create_app(settings)
            with _reads(type(settings)) as read:
                shared.app = create_app(settings)
            shared.built_on = {name: copy.deepcopy(shared.made[name]) for name in read if name not in _PER_TEST}
            shared.initial_state = {k: copy.deepcopy(v) for k, v in shared.app.state.items() if k != "settings"}
            self._keep(shared)
            return shared.app
        if shared is None or shared.settings is not settings or _values(settings) != shared.made:
            return create_app(settings)
        _configure_process(settings)
        state = shared.app.state
        for key in [k for k in state if k != "settings"]:
            del state[key]
        for key, value in shared.initial_state.items():
            state[key] = copy.deepcopy(value)
        return shared.app

    def _keep(self, shared: _Shared) -> None:
        self._kept[id(shared.settings)] = shared
        while len(self._kept) > KEPT_APPS:
            self._kept.popitem(last=False)


@contextmanager
def _reads(settings_type: type) -> Iterator[set[str]]:
    """The names of the settings fields read on any ``settings_type`` object meanwhile (properties read theirs)."""
    fields = set(settings_type.model_fields)  # type: ignore[attr-defined]
    read: set[str] = set()
    original = settings_type.__getattribute__
    own = "__getattribute__" in vars(settings_type)

    def reading(self: Any, name: str) -> Any:
        if name in fields:
            read.add(name)
        return original(self, name)

    settings_type.__getattribute__ = reading  # type: ignore[method-assign]
    try:
        yield read
    finally:
        if own:
            settings_type.__getattribute__ = original  # type: ignore[method-assign]
        else:
            del settings_type.__getattribute__


def _values(settings: Any) -> dict[str, Any]:
    return {name: getattr(settings, name) for name in type(settings).model_fields}


def _configure_process(settings: Any) -> None:
    """What ``create_app`` configures for the whole process, besides the app."""
    from switchyard.platform.identity.passwords import configure_password_hashing
    from switchyard.platform.settings import argon2_cost
    from switchyard.platform.tool_secrets import configure_secrets_key

    configure_password_hashing(*argon2_cost(settings.password_hash))
    configure_secrets_key(settings)
