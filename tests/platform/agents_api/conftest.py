"""Fixtures of the agents API tests: tenants from tests/platform/conftest.py, runs executed inline."""

from __future__ import annotations

from typing import Any

import pytest

from tests.platform.agents_api.factories import run_inline


@pytest.fixture
async def tenant(make_tenant: Any) -> Any:
    return await make_tenant()


@pytest.fixture
def inline_runs(client: Any) -> Any:
    """Runs execute in the test's event loop on the app's simulated pool."""
    return run_inline(client)
