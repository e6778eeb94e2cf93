"""``/v1/files`` through the official ``openai`` client: uploads kept whole and read back byte for byte, listed and
paged as OpenAI's are, bounded per file and per tenant, another tenant's files out of reach, and a deleted file
detached from its vector stores."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import openai
import pytest
from openai.types import FileDeleted, FileObject
from sqlalchemy import func, select, update

from switchyard.platform.db import UNSCOPED
from switchyard.platform.knowledge.files.service import erase_expired_files
from switchyard.platform.models import (
    AuditEvent,
    FileContent,
    KnowledgeChunk,
    StoredFile,
    VectorStore,
    VectorStoreFile,
    utc_now,
)

MiB = 1024 * 1024
MAX_FILE_BYTES = 2 * MiB  # above the app's 1 MiB request body limit: uploads are the exception
MAX_TENANT_FILE_BYTES = 5 * MiB


@pytest.fixture
def settings(settings: Any, shared_apps: Any) -> Any:
    return shared_apps.settings(
        data_dir=settings.data_dir,
        database_url=settings.database_url,
        max_file_bytes=MAX_FILE_BYTES,
        max_tenant_file_bytes=MAX_TENANT_FILE_BYTES,
    )


def _sdk(client: Any, tenant: Any, role: str = "developer") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url="http://switchyard.test/v1", api_key=tenant.keys[role], http_client=client, max_retries=0
    )


async def _stored(client: Any, table: Any) -> int:
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        return int((await session.execute(select(func.count()).select_from(table))).scalar_one())


async def test_a_file_is_uploaded_read_back_byte_for_byte_and_deleted(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    sdk = _sdk(client, tenant)
    data = "# Notes\n\nThe ferry leaves at 07:15 from pier 4. ✓\n".encode()
    created = await sdk.files.create(file=("notes.md", data, "text/markdown"), purpose="assistants")
    assert isinstance(created, FileObject)
    assert created.id.startswith("file-")
    assert created.id.removeprefix("file-").isalnum()
    assert (created.object, created.bytes, created.filename) == ("file", len(data), "notes.md")
    assert (created.purpose, created.status, created.expires_at) == ("assistants", "processed", None)
    assert abs(created.created_at - utc_now().timestamp()) < 60

    raw = await client.get(f"/v1/files/{created.id}", headers=tenant.headers("viewer"))
    assert raw.status_code == 200, raw.text
    assert set(raw.json()) <= set(FileObject.model_fields)  # nothing OpenAI's type does not have
    assert FileObject.model_validate(raw.json(), strict=True) == created

    retrieved = await _sdk(client, tenant, "viewer").files.retrieve(created.id)
    assert retrieved == created
    content = await sdk.files.content(created.id)
    assert content.content == data
    assert content.response.headers["content-type"] == "application/octet-stream"
    assert content.response.headers["content-disposition"] == "attachment; filename*=UTF-8''notes.md"

    deleted = await sdk.files.delete(created.id)
    assert deleted == FileDeleted(id=created.id, object="file", deleted=True)
    for read in (sdk.files.retrieve, sdk.files.content, sdk.files.delete):
        with pytest.raises(openai.NotFoundError) as missing:
            await read(created.id)
        assert missing.value.body == {  # type: ignore[comparison-overlap]
            "message": f"no file {created.id!r}",
            "type": "not_found_error",
            "param": "file_id",
            "code": "not_found",
        }
    assert [f.id async for f in sdk.files.list()] == []
    assert await _stored(client, FileContent) == 0  # the bytes are gone, not only hidden


async def test_files_are_listed_newest_first_paged_and_filtered_by_purpose(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    sdk = _sdk(client, tenant)
    purposes = ["assistants", "user_data", "assistants", "batch", "user_data"]
    ids = [
        (await sdk.files.create(file=(f"f{i}.txt", b"x" * i, "text/plain"), purpose=purpose)).id  # type: ignore[arg-type]
        for i, purpose in enumerate(purposes)
    ]

    first = await sdk.files.list(limit=2)
    assert [f.id for f in first.data] == ids[::-1][:2]
    assert first.has_more
    assert [f.id async for f in await sdk.files.list(limit=2)] == ids[::-1]  # the client follows `after`
    assert [f.id async for f in sdk.files.list(order="asc")] == ids
    assert [f.id async for f in sdk.files.list(purpose="user_data")] == [ids[4], ids[1]]
    assert [f.id async for f in sdk.files.list(after=ids[3])] == [ids[2], ids[1], ids[0]]
    assert [f.id async for f in sdk.files.list(purpose="fine-tune")] == []

    page = (await client.get("/v1/files?limit=2&order=asc", headers=tenant.headers("viewer"))).json()
    assert (page["object"], page["first_id"], page["last_id"], page["has_more"]) == ("list", ids[0], ids[1], True)
    bad = await client.get("/v1/files?after=file-nope", headers=tenant.headers("viewer"))
    assert (bad.status_code, bad.json()["error"]["param"]) == (400, "after")


def _form(parts: list[tuple[str, str | None, bytes]], boundary: str = "switchyard-test") -> tuple[bytes, str]:
    """A ``multipart/form-data`` body of ``(name, filename, value)`` parts, byte for byte as given (a retry sends
    the same bytes; a filename is not escaped), and its content type."""
    body = b""
    for name, filename, value in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename is not None else "")
        body += f"--{boundary}\r\ncontent-disposition: {disposition}\r\n\r\n".encode() + value + b"\r\n"
    return body + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


async def test_a_file_past_the_request_body_limit_uploads_while_other_routes_still_refuse_such_bodies(
    client: Any, make_tenant: Any
) -> None:
    tenant = await make_tenant()
    data = bytes(range(256)) * (6 * 1024)  # 1.5 MiB, past SWITCHYARD_MAX_REQUEST_BODY_BYTES
    created = await _sdk(client, tenant).files.create(file=("big.bin", data), purpose="user_data")
    assert created.bytes == len(data)
    assert (await _sdk(client, tenant).files.content(created.id)).content == data
    # an Idempotency-Key makes the idempotency layer read the body first: it takes the route's limit too
    form, content_type = _form([("purpose", None, b"user_data"), ("file", "again.bin", data)])
    headers = {**tenant.headers("developer"), "Idempotency-Key": "upload-1", "content-type": content_type}
    keyed = await client.post("/v1/files", content=form, headers=headers)
    assert keyed.status_code == 200, keyed.text
    replayed = await client.post("/v1/files", content=form, headers=headers)
    assert replayed.status_code == 200, replayed.text
    assert (replayed.json()["id"], replayed.headers["idempotent-replayed"]) == (keyed.json()["id"], "true")
    for key in ({}, {"Idempotency-Key": "thread-1"}):
        big_json = b'{"metadata": {"a": "' + b"x" * (3 * MiB // 2) + b'"}}'
        headers = {**tenant.headers("developer"), "content-type": "application/json", **key}
        refused = await client.post("/v1/threads", content=big_json, headers=headers)
        assert refused.status_code == 413, refused.text
        assert refused.json()["error"]["code"] == "request_too_large"


async def test_a_file_too_large_is_413_in_the_envelope_and_nothing_is_stored(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    sdk = _sdk(client, tenant)
    with pytest.raises(openai.APIStatusError) as refused:
        await sdk.files.create(file=("huge.bin", b"x" * (MAX_FILE_BYTES + 1)), purpose="user_data")
    assert refused.value.status_code == 413
    assert refused.value.body == {  # type: ignore[comparison-overlap]
        "message": f"the file is larger than the {MAX_FILE_BYTES:,} bytes a file may have (SWITCHYARD_MAX_FILE_BYTES)",
        "type": "invalid_request_error",
        "param": "file",
        "code": "file_too_large",
    }
    with pytest.raises(openai.APIStatusError) as body_refused:  # past the file and its form: refused as it arrives
        await sdk.files.create(file=("huger.bin", b"x" * (MAX_FILE_BYTES + 100 * 1024)), purpose="user_data")
    assert body_refused.value.status_code == 413
    assert body_refused.value.code == "request_too_large"
    assert (await _stored(client, StoredFile), await _stored(client, FileContent)) == (0, 0)
    assert [f async for f in sdk.files.list()] == []


async def test_the_tenants_files_are_held_to_their_quota_and_deleted_files_free_it(
    client: Any, make_tenant: Any
) -> None:
    tenant, other = await make_tenant(), await make_tenant()
    sdk = _sdk(client, tenant)
    two_mib = b"y" * MAX_FILE_BYTES
    first = await sdk.files.create(file=("a.bin", two_mib), purpose="user_data")
    await sdk.files.create(file=("b.bin", two_mib), purpose="user_data")
    with pytest.raises(openai.APIStatusError) as refused:
        await sdk.files.create(file=("c.bin", two_mib), purpose="user_data")
    assert (refused.value.status_code, refused.value.code) == (413, "file_storage_exceeded")
    assert "SWITCHYARD_MAX_TENANT_FILE_BYTES" in refused.value.message
    assert len([f async for f in sdk.files.list()]) == 2
    assert await _stored(client, FileContent) == 2  # the refused upload's bytes were not kept
    await _sdk(client, other).files.create(file=("c.bin", two_mib), purpose="user_data")  # a quota per tenant
    await sdk.files.delete(first.id)
    await sdk.files.create(file=("c.bin", two_mib), purpose="user_data")


async def test_another_tenants_file_is_404_on_every_route(client: Any, make_tenant: Any) -> None:
    mine, theirs = await make_tenant(), await make_tenant()
    created = await _sdk(client, mine).files.create(file=("secret.txt", b"mine"), purpose="assistants")
    sdk = _sdk(client, theirs)
    for call in (sdk.files.retrieve, sdk.files.content, sdk.files.delete):
        with pytest.raises(openai.NotFoundError):
            await call(created.id)
    assert [f async for f in sdk.files.list()] == []
    assert (await _sdk(client, mine).files.content(created.id)).content == b"mine"  # still there


async def test_a_viewer_reads_files_but_cannot_upload_or_delete(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    created = await _sdk(client, tenant).files.create(file=("a.txt", b"a"), purpose="assistants")
    viewer = _sdk(client, tenant, "viewer")
    with pytest.raises(openai.PermissionDeniedError):
        await viewer.files.create(file=("b.txt", b"b"), purpose="assistants")
    with pytest.raises(openai.PermissionDeniedError):
        await viewer.files.delete(created.id)
    assert [f.id async for f in viewer.files.list()] == [created.id]


async def test_uploads_and_deletions_are_audited(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    sdk = _sdk(client, tenant)
    created = await sdk.files.create(file=("a.txt", b"abc"), purpose="assistants")
    await sdk.files.delete(created.id)
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        events = (
            await session.execute(
                select(AuditEvent).where(AuditEvent.target_id == created.id).order_by(AuditEvent.id)  # type: ignore[arg-type]
            )
        ).scalars()
        recorded = [(e.action, e.tenant_id, e.details.get("bytes")) for e in events]
    assert recorded == [("file.create", tenant.id, 3), ("file.delete", tenant.id, 3)]


async def test_expiry_follows_openai_and_an_expired_file_is_gone(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    sdk = _sdk(client, tenant)
    hour = await sdk.files.create(
        file=("h.txt", b"h"), purpose="assistants", expires_after={"anchor": "created_at", "seconds": 3600}
    )
    assert hour.expires_at == hour.created_at + 3600
    batch = await sdk.files.create(file=("b.jsonl", b"{}\n"), purpose="batch")
    assert batch.expires_at == batch.created_at + 30 * 86_400  # OpenAI's default for batch files
    with pytest.raises(openai.BadRequestError) as refused:
        await sdk.files.create(
            file=("h.txt", b"h"), purpose="assistants", expires_after={"anchor": "created_at", "seconds": 60}
        )
    assert refused.value.param == "expires_after[seconds]"

    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        await session.execute(
            update(StoredFile).where(StoredFile.id == hour.id).values(expires_at=utc_now() - timedelta(seconds=1))  # type: ignore[arg-type]
        )
    with pytest.raises(openai.NotFoundError):
        await sdk.files.retrieve(hour.id)
    assert [f.id async for f in sdk.files.list()] == [batch.id]
    kept = await sdk.files.create(file=("next.txt", b"n"), purpose="assistants")  # the next upload removes its bytes
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        left = (await session.execute(select(FileContent.file_id))).scalars().all()
    assert sorted(left) == sorted([batch.id, kept.id])


_FILE = ("file", "a.txt", b"a")


@pytest.mark.parametrize(
    ("parts", "param"),
    [
        ([_FILE], "purpose"),
        ([_FILE, ("purpose", None, b"homework")], "purpose"),
        ([("purpose", None, b"assistants")], "file"),
        ([("file", None, b"not a file"), ("purpose", None, b"assistants")], "file"),
        ([("file", "a\x00.txt", b"a"), ("purpose", None, b"assistants")], "file"),
        ([_FILE, ("purpose", None, b"assistants"), ("expires_after[seconds]", None, b"3600")], None),
        (
            [_FILE, ("purpose", None, b"assistants"), ("expires_after[seconds]", None, b"soon")],
            "expires_after[seconds]",
        ),
        ([_FILE, ("purpose", None, b"assistants"), ("colour", None, b"red")], "colour"),
    ],
)
async def test_a_malformed_upload_is_400_naming_the_field(
    client: Any, make_tenant: Any, parts: list[tuple[str, str | None, bytes]], param: str | None
) -> None:
    tenant = await make_tenant()
    form, content_type = _form(parts)
    headers = {**tenant.headers("developer"), "content-type": content_type}
    answer = await client.post("/v1/files", content=form, headers=headers)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == param
    assert await _stored(client, StoredFile) == 0


async def test_an_upload_that_is_not_a_form_is_400(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    for body in ({"data": {"purpose": "assistants"}}, {"json": {"purpose": "assistants", "file": "a"}}):
        answer = await client.post("/v1/files", headers=tenant.headers("developer"), **body)
        assert answer.status_code == 400, answer.text
        assert set(answer.json()["error"]) == {"message", "type", "param", "code"}


async def _attached(client: Any, tenant_id: str, usage_by_file: dict[str, int]) -> str:
    """A completed store of the tenant holding each file with two chunks and ``usage`` bytes; its id."""
    store_id = f"vs_{tenant_id[-12:]}"
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        total = sum(usage_by_file.values())
        session.add(
            VectorStore(
                id=store_id, tenant_id=tenant_id, embedding_model="m", dimensions=4, usage_bytes=total, revision=2
            )
        )
        await session.flush()
        for file_id, usage in usage_by_file.items():
            session.add(
                VectorStoreFile(
                    row_id=f"vsf_{file_id}",
                    tenant_id=tenant_id,
                    vector_store_id=store_id,
                    file_id=file_id,
                    status="completed",
                    usage_bytes=usage,
                )
            )
            for position in range(2):
                session.add(
                    KnowledgeChunk(
                        id=f"chunk_{file_id}_{position}",
                        tenant_id=tenant_id,
                        vector_store_id=store_id,
                        file_id=file_id,
                        position=position,
                        text="t",
                        tokens=1,
                        char_start=0,
                        char_end=1,
                        embedding=b"\0" * 16,
                    )
                )
    return store_id


async def _left(client: Any) -> tuple[list[str], list[str], list[str], list[tuple[int, int]]]:
    """The attached files, the chunks' files, the files with bytes and each store's (usage_bytes, revision)."""
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        attached = (await session.execute(select(VectorStoreFile.file_id))).scalars().all()
        chunks = (await session.execute(select(KnowledgeChunk.file_id))).scalars().all()
        contents = (await session.execute(select(FileContent.file_id))).scalars().all()
        stores = (await session.execute(select(VectorStore).order_by(VectorStore.id))).scalars().all()  # type: ignore[arg-type]
    return sorted(attached), sorted(chunks), sorted(contents), [(s.usage_bytes, s.revision) for s in stores]


async def test_deleting_a_file_detaches_it_from_its_vector_stores(client: Any, make_tenant: Any) -> None:
    tenant = await make_tenant()
    sdk = _sdk(client, tenant)
    kept = await sdk.files.create(file=("kept.txt", b"kept"), purpose="assistants")
    gone = await sdk.files.create(file=("gone.txt", b"gone"), purpose="assistants")
    await _attached(client, tenant.id, {kept.id: 10, gone.id: 20})
    await sdk.files.delete(gone.id)
    attached, chunks, _, stores = await _left(client)
    assert attached == [kept.id]
    assert chunks == [kept.id, kept.id]
    assert stores == [(10, 3)]


async def test_the_expire_job_erases_every_tenants_expired_files_and_only_them(client: Any, make_tenant: Any) -> None:
    first, second = await make_tenant(), await make_tenant()
    kept = await _sdk(client, first).files.create(file=("kept.txt", b"kept"), purpose="assistants")
    expired = [
        await _sdk(client, tenant).files.create(
            file=("soon.txt", b"soon"), purpose="assistants", expires_after={"anchor": "created_at", "seconds": 3600}
        )
        for tenant in (first, second)
    ]
    await _attached(client, first.id, {kept.id: 10, expired[0].id: 20})
    await _attached(client, second.id, {expired[1].id: 5})
    async with client.app.state.database.unit_of_work(UNSCOPED) as session:
        await session.execute(
            update(StoredFile)
            .where(StoredFile.id.in_([f.id for f in expired]))  # type: ignore[attr-defined]
            .values(expires_at=utc_now() - timedelta(seconds=1))
        )

    assert await erase_expired_files(client.app.state.database) == 2
    attached, chunks, contents, stores = await _left(client)
    assert (attached, chunks, contents) == ([kept.id], [kept.id, kept.id], [kept.id])
    assert sorted(stores) == sorted([(10, 3), (0, 3)])
    assert await erase_expired_files(client.app.state.database) == 0  # a repeated job finds nothing
