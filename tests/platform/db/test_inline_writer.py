"""The gateway's inline SQLite writer keeps its WAL bounded while requests keep writing."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

import pytest
from sqlalchemy import text

from switchyard.platform.db import inline
from switchyard.platform.db.inline import InlineWriter

ROW = "x" * 2_000  # about a receipt's pages: each commit adds a WAL frame or two
COMMITS = 4_000


def wal_frames(path: Path) -> int:
    """The frames the WAL holds now: ``mxFrame`` of the WAL-index header, a native 32-bit integer at offset 16 of
    the ``-shm`` file (https://www.sqlite.org/walformat.html)."""
    header = path.with_name(path.name + "-shm").read_bytes()[:48]
    return int(struct.unpack_from("=I", header, 16)[0])


async def test_the_wal_is_restarted_under_steady_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inline, "CHECKPOINT_EVERY", 100)
    path = tmp_path / "db.sqlite"
    writer = InlineWriter(f"sqlite:///{path}")
    assert writer.write(lambda c: c.execute(text("CREATE TABLE receipts (id INTEGER PRIMARY KEY, body TEXT)")))
    written = 0
    try:
        while written < COMMITS:  # no pause for a checkpoint to catch up in: one write per turn of the loop
            if writer.write(lambda c: c.execute(text("INSERT INTO receipts (body) VALUES (:b)"), {"b": ROW})):
                written += 1
            await asyncio.sleep(0)
        frames = wal_frames(path)
    finally:
        await asyncio.sleep(0.2)  # the last checkpoint's thread
        writer.close()
    # never restarted, the WAL would hold every commit's frames (4,000 or more); restarted, the last few hundred's
    assert frames < COMMITS // 2
