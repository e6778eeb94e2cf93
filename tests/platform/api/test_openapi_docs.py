"""The docs page (``/schema``) works without the internet: Swagger UI comes from this server, not from a CDN."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from switchyard.platform.http.openapi import VIEWER_ASSETS

_LINKS = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']""")
_EXPECTED_TYPES = {".js": "text/javascript", ".css": "text/css", ".png": "image/png"}


async def test_the_docs_page_loads_only_assets_this_server_serves(client: Any) -> None:
    for page in ("/schema", "/schema/swagger"):
        answer = await client.get(page)
        assert answer.status_code == 200, answer.text
        assets = _LINKS.findall(answer.text)
        assert {urlsplit(url).netloc for url in assets} == {""}, assets  # no other host (was a CDN)
        assert {url.rsplit("/", 1)[0] for url in assets} == {VIEWER_ASSETS}
        assert "SwaggerUIBundle(" in answer.text  # the viewer starts with the document inlined: no fetch either
        for url in assets:
            asset = await client.get(url)
            assert asset.status_code == 200, url
            assert asset.headers["content-type"].startswith(_EXPECTED_TYPES[url[url.rindex(".") :]]), url
            assert len(asset.content) > 1_000, url


async def test_the_viewer_understands_the_documents_openapi_version(client: Any) -> None:
    document = (await client.get("/schema/openapi.json")).json()
    bundle = (await client.get(f"{VIEWER_ASSETS}/swagger-ui-bundle.js")).text
    assert document["openapi"].startswith("3.1")
    version = re.search(r'PACKAGE_VERSION:"(\d+)\.', bundle)
    assert version is not None
    assert int(version.group(1)) >= 5  # Swagger UI renders OpenAPI 3.1 from version 5 on (4 shows an error)


async def test_the_viewer_assets_need_no_key(client: Any) -> None:
    answer = await client.get(f"{VIEWER_ASSETS}/swagger-ui.css")
    assert answer.status_code == 200
