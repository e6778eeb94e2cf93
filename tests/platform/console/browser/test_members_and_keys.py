"""Members and keys in a real browser: an invitation link followed in another browser profile, and a key's last
use appearing on the keys page once the API has seen it."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from tests.platform.console.browser.served import Console, sign_in

pytestmark = pytest.mark.slow

CHOSEN_PASSWORD = "the invitee's own password"


def _invite(page: Any, console: Console, email: str, role: str) -> str:
    page.get_by_role("link", name="Members").click()
    page.get_by_label("Email").fill(email)
    page.get_by_label("Role", exact=True).select_option(role)
    page.get_by_role("button", name="Invite", exact=True).click()
    link = page.get_by_label("Invitation link").input_value()
    assert re.fullmatch(re.escape(console.url) + r"/console/invitations/[\w-]{43}", link)
    return str(link)


def test_an_invitation_link_opened_in_another_browser_sets_a_password_and_signs_in(
    console: Console, page: Any, browser: Any
) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=console.url)
    sign_in(page, console, "admin")
    link = _invite(page, console, "lin@acme.example", "developer")
    page.get_by_role("button", name="Copy").click()
    assert page.evaluate("navigator.clipboard.readText()") == link  # the key page's copy button, reused
    page.screenshot(path=str(console.shots / "members-invited.png"), full_page=True)
    page.goto(f"{console.url}/console/members")
    assert link not in page.content()  # shown once
    pending = page.locator("tr", has_text="lin@acme.example").last
    pending.get_by_text("valid until").wait_for()

    invitee = browser.new_context(viewport={"width": 390, "height": 844})  # another person's phone: no session
    try:
        them = invitee.new_page()
        them.goto(link)
        them.get_by_role("heading", name="Join Acme Robotics").wait_for()
        them.get_by_text("lin@acme.example").wait_for()
        them.get_by_label("New password").fill("too short")
        them.get_by_role("button", name="Set password and sign in").click()
        assert them.locator("#new_password:invalid").count() == 1  # the browser holds it back (minlength) ...
        assert "/console/invitations/" in them.url
        too_short = them.request.post(  # ... and the server refuses it anyway, the link still unused
            link, form={"new_password": "too short", "csrf_token": them.locator("input[name=csrf_token]").input_value()}
        )
        assert too_short.status == 400
        assert "12 to 1024 characters" in too_short.text()
        them.get_by_label("New password").fill(CHOSEN_PASSWORD)
        them.get_by_label("New password").press("Enter")
        them.get_by_text("lin@acme.example · developer · Acme Robotics").wait_for()  # signed in, as a developer
        them.get_by_role("heading", name="Overview").wait_for()
        them.screenshot(path=str(console.shots / "invitation-accepted.png"), full_page=True)
        assert them.goto(f"{console.url}/console/keys").status == 403  # type: ignore[union-attr]
        used = them.goto(link)
        assert used is not None
        assert used.status == 410
        them.get_by_role("heading", name="Invitation link not valid").wait_for()
    finally:
        invitee.close()

    page.reload()
    assert page.locator("#pending-h").count() == 0  # nothing pending any more
    page.locator("tr", has_text="lin@acme.example").get_by_text("developer").first.wait_for()
    assert page.errors == []  # type: ignore[attr-defined]


def test_re_invite_replaces_the_link_and_revoke_withdraws_it(console: Console, page: Any, browser: Any) -> None:
    sign_in(page, console, "owner")
    first = _invite(page, console, "max@acme.example", "viewer")
    page.goto(f"{console.url}/console/members")
    page.get_by_role("button", name="Invite max@acme.example again with a new link").click()
    second = page.get_by_label("Invitation link").input_value()
    assert second != first
    revoke = page.get_by_role("button", name="Revoke the invitation of max@acme.example")
    revoke.click()
    revoke.wait_for(state="detached")
    assert "max@acme.example" not in page.content()
    other = browser.new_context()
    try:
        them = other.new_page()
        for link in (first, second):
            answer = them.goto(link)
            assert answer is not None
            assert answer.status == 404
            them.get_by_text("This invitation link is not known.").wait_for()
    finally:
        other.close()
    assert page.errors == []  # type: ignore[attr-defined]


def test_the_keys_page_shows_when_a_key_was_last_used(console: Console, page: Any) -> None:
    sign_in(page, console, "admin")
    page.get_by_role("link", name="API keys").click()
    page.get_by_label("Name").fill("nightly-batch")
    page.get_by_label("Role").select_option("viewer")
    page.get_by_role("button", name="Create key").click()
    secret = page.get_by_label("Key", exact=True).input_value()
    page.goto(f"{console.url}/console/keys")
    row = page.locator("tr", has_text="nightly-batch")
    headers = page.locator("thead th").all_inner_texts()
    last_used = headers.index("Last used")
    assert row.locator("td").nth(last_used).inner_text() == "never"
    with console.api(secret) as api:
        assert api.get("/v1/agents").status_code == 200
    deadline = time.monotonic() + 10  # the write happens after the request, in the server
    while True:
        page.reload()
        shown = page.locator("tr", has_text="nightly-batch").locator("td").nth(last_used).inner_text()
        if shown != "never" or time.monotonic() > deadline:
            break
        page.wait_for_timeout(200)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", shown), shown
    page.screenshot(path=str(console.shots / "keys-last-used.png"), full_page=True)
    assert page.errors == []  # type: ignore[attr-defined]
