"""The docs page (``/schema``) works without the internet: Swagger UI comes from this server, not from a CDN."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from switchyard.platform.app import create_app
from switchyard.platform.http.openapi import VIEWER_ASSETS
from tests.platform.api.live import serve

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


CHROMIUM = Path("/usr/bin/chromium")  # Debian's package; the test never downloads a browser


@pytest.mark.slow
def test_the_docs_page_renders_in_a_browser_cut_off_from_other_hosts(settings: Any) -> None:
    if not CHROMIUM.exists():  # .ci/run installs it and sets SWITCHYARD_TEST_BROWSER=required: CI never skips
        message = "needs Debian's chromium (apt-get install chromium)"
        if os.environ.get("SWITCHYARD_TEST_BROWSER") == "required":
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import Route, sync_playwright

    app = create_app(settings)
    operations = sum(len(item) for item in app.openapi_schema.to_schema()["paths"].values())
    elsewhere: list[str] = []

    def only_this_server(route: Route) -> None:
        if urlsplit(route.request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    with serve(app) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.route("**/*", only_this_server)
            page.goto(f"{url}/schema", timeout=30_000)
            page.wait_for_selector(".swagger-ui .info .title", timeout=30_000)
            assert "Switchyard" in page.inner_text(".swagger-ui .info .title")
            page.wait_for_selector(".opblock", timeout=30_000)
            assert page.locator(".opblock").count() == operations  # every route, rendered from the document
        finally:
            browser.close()
    assert elsewhere == []  # nothing was even asked of another host
