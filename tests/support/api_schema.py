"""The app's routes and OpenAPI document, for the tests generated from them (the isolation matrices, the cursors,
the document's rules, the SDK's models): built once per test process instead of once per module (an app is
~0.3 s of CPU to build and its document ~0.45 s more, in each of the run's workers)."""

from __future__ import annotations

import copy
import functools
import tempfile
from typing import Any

__all__ = ["openapi_document", "routes_app"]


@functools.cache
def routes_app() -> Any:
    """An app on the default settings (with a data directory of its own), to read its routes; never started."""
    from switchyard.platform.app import create_app
    from switchyard.platform.settings import Settings

    return create_app(Settings(data_dir=tempfile.mkdtemp()))


@functools.cache
def _document() -> dict[str, Any]:
    return dict(routes_app().openapi_schema.to_schema())


def openapi_document() -> dict[str, Any]:
    """The app's OpenAPI document, a copy of its own for each caller."""
    return copy.deepcopy(_document())
