"""Files through the SDK on a real installation, blocking and asyncio: uploaded from bytes, a path or an open file,
read back byte for byte, listed by purpose, deleted; a retried upload is stored once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from switchyard.sdk import AsyncSwitchyard, File, NotFoundError, Switchyard
from tests.sdk.conftest import Installation
from tests.sdk.test_sdk_runs import new_tenant_key

pytestmark = pytest.mark.slow


@pytest.fixture
def key(installation: Installation) -> str:
    return new_tenant_key(installation)


@pytest.fixture
def client(installation: Installation, key: str) -> Iterator[Switchyard]:
    with Switchyard(api_key=key, base_url=installation.base_url) as client:
        yield client


def test_a_file_is_uploaded_read_listed_and_deleted(client: Switchyard, tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_bytes(b"# Notes\n\nPier 4 at 07:15.\n")
    from_path = client.files.create(file=path, purpose="assistants")
    assert isinstance(from_path, File)
    assert (from_path.filename, from_path.bytes, from_path.status) == ("notes.md", path.stat().st_size, "processed")
    assert from_path.created_at.tzinfo is not None
    with path.open("rb") as opened:
        from_file = client.files.create(file=opened, purpose="user_data", expires_after_seconds=3600)
    assert from_file.expires_at is not None
    assert (from_file.expires_at - from_file.created_at).total_seconds() == 3600
    from_bytes = client.files.create(file=("data.csv", b"a,b\n1,2\n", "text/csv"), purpose="user_data")

    assert client.files.retrieve(from_path.id) == from_path
    assert client.files.content(from_bytes.id) == b"a,b\n1,2\n"
    assert [f.id for f in client.files.list(limit=1)] == [from_bytes.id, from_file.id, from_path.id]
    assert [f.id for f in client.files.list(purpose="user_data", order="asc")] == [from_file.id, from_bytes.id]
    assert client.files.delete(from_path.id).deleted is True
    with pytest.raises(NotFoundError):
        client.files.content(from_path.id)


def test_an_upload_retried_with_its_key_is_stored_once(client: Switchyard) -> None:
    first = client.files.create(file=b"once", purpose="assistants", idempotency_key="upload-once")
    again = client.files.create(file=b"once", purpose="assistants", idempotency_key="upload-once")
    assert again == first
    assert [f.id for f in client.files.list()] == [first.id]


async def test_the_async_client_uploads_and_reads_back(installation: Installation, key: str) -> None:
    async with AsyncSwitchyard(api_key=key, base_url=installation.base_url) as client:
        created = await client.files.create(file=("a.bin", bytes(range(256))), purpose="user_data")
        assert await client.files.content(created.id) == bytes(range(256))
        assert [f.id async for f in await client.files.list()] == [created.id]
        assert (await client.files.delete(created.id)).id == created.id
