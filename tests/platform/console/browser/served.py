"""What the browser scenarios share besides fixtures: the served console, its models, and signing in."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.platform.console.factories import PASSWORD

CHROMIUM = Path("/usr/bin/chromium")  # Debian's package; the tests never download a browser
MODELS = ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.3-70B-Instruct")


@dataclass
class Console:
    url: str
    app: Any
    owner_key: str
    emails: dict[str, str]
    shots: Path
    mcp_url: str = ""
    """A real MCP server's URL (``find_customer``), which the console's runs may reach."""

    def api(self, key: str | None = None) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {key or self.owner_key}"})


def sign_in(page: Any, console: Console, who: str) -> None:
    """Sign in with the keyboard alone: the labels name the fields, Enter submits."""
    page.goto(f"{console.url}/console/")
    assert "/console/sign-in" in page.url  # no session: sent to the sign-in page
    page.get_by_label("Email").fill(console.emails[who])
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_label("Password").press("Enter")
    page.wait_for_url(re.compile(re.escape(console.url) + r"/console/?$"))
    page.get_by_role("heading", name="Overview").wait_for()
