"""An operator key made straight in a database, for tests that serve the API on a real server of its own."""

from __future__ import annotations

import asyncio


def operator_key(database_url: str) -> str:
    """A new operator key in the database at ``database_url`` (what ``switchyard operator-key create`` makes)."""
    from switchyard.platform.bootstrap import CLI_ACTOR
    from switchyard.platform.db import UNSCOPED, Database
    from switchyard.platform.tenants.service import create_operator_key

    async def make() -> str:
        database = Database(database_url)
        try:
            async with database.unit_of_work(UNSCOPED) as session:
                return await create_operator_key(session, actor=CLI_ACTOR, name="tests")
        finally:
            await database.dispose()

    return asyncio.run(make())
