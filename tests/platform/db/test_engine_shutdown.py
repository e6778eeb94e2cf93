"""A database closed while work still holds its connections says so: those connections are dropped unclosed, and
the work that held them (a task outliving its process's shutdown) is what to look for."""

from __future__ import annotations

import logging

import pytest

from switchyard.platform.db import Database


async def test_closing_with_a_connection_in_use_is_logged(database_url: str, caplog: pytest.LogCaptureFixture) -> None:
    database = Database(database_url)
    connection = await database.engine.connect()
    try:
        with caplog.at_level(logging.WARNING, logger="switchyard.platform.db.engine"):
            await database.dispose()
        assert "database closed with 1 connection(s) still in use" in caplog.text
    finally:  # returned to a disposed pool it would stay open until collected: closed here
        await connection.invalidate()
        await connection.close()


async def test_closing_an_idle_database_logs_nothing(database_url: str, caplog: pytest.LogCaptureFixture) -> None:
    database = Database(database_url)
    async with database.engine.connect() as connection:
        await connection.exec_driver_sql("SELECT 1")
    with caplog.at_level(logging.WARNING, logger="switchyard.platform.db.engine"):
        await database.dispose()
    assert "still in use" not in caplog.text
