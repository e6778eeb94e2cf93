"""Members and keys in a real browser: an invitation link followed in another browser profile, a key's last
use appearing on the keys page once the API has seen it, revoking a key after a confirmation page, a tenant's
owner made by `switchyard tenant create` signing in through the printed link, and a forgotten password reset
through a mailed link (a real SMTP server on 127.0.0.1)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from tests.platform.console.browser.served import Console, sign_in
from tests.support.smtp import smtp_server

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


def _fits(page: Any) -> bool:
    """No horizontal overflow of the page itself (wide tables scroll inside their .scroll box)."""
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))


def test_revoking_a_key_asks_for_confirmation_first(console: Any, page: Any, browser: Any) -> None:
    sign_in(page, console, "admin")
    page.get_by_role("link", name="API keys").click()
    page.get_by_label("Name").fill("to-be-revoked")
    page.get_by_label("Role").select_option("viewer")
    page.get_by_role("button", name="Create key").click()
    secret = page.get_by_label("Key", exact=True).input_value()
    page.goto(f"{console.url}/console/keys")
    page.get_by_role("link", name="Revoke key to-be-revoked").click()
    page.get_by_role("heading", name="Revoke key “to-be-revoked”?").wait_for()
    page.screenshot(path=str(console.shots / "keys-revoke-confirm.png"), full_page=True)
    page.get_by_role("link", name="Cancel").click()  # cancelling changes nothing
    page.get_by_role("heading", name="API keys").wait_for()
    with console.api(secret) as api:
        assert api.get("/v1/agents").status_code == 200
    page.get_by_role("link", name="Revoke key to-be-revoked").click()
    page.get_by_role("button", name="Revoke “to-be-revoked”").click()
    page.get_by_text("Key “to-be-revoked” is revoked.").wait_for()  # the flash, on the keys page
    with console.api(secret) as api:
        assert api.get("/v1/agents").status_code == 401
    page.reload()
    assert page.get_by_text("is revoked.").count() == 0  # shown once
    page.locator("tr", has_text="to-be-revoked").get_by_text("revoked").first.wait_for()
    assert page.errors == []  # type: ignore[attr-defined]

    phone = browser.new_context(viewport={"width": 390, "height": 844}, color_scheme="dark")
    try:
        small = phone.new_page()
        sign_in(small, console, "owner")
        small.goto(f"{console.url}/console/keys")
        prefix = small.locator("code.key-prefix").first
        assert prefix.evaluate("el => el.getClientRects().length") == 1  # one line: the prefix does not wrap
        assert _fits(small)
        dark = small.evaluate("getComputedStyle(document.body).backgroundColor")
        assert dark == "rgb(13, 17, 23)"  # prefers-color-scheme: dark
        small.screenshot(path=str(console.shots / "keys-phone-dark.png"), full_page=True)
        small.locator("tr", has_text="owner").get_by_role("link", name="Revoke key owner").first.click()
        small.get_by_text("This is an owner key").wait_for()  # the owner key made with the tenant says so
        assert _fits(small)
        small.screenshot(path=str(console.shots / "keys-revoke-owner-phone.png"), full_page=True)
    finally:
        phone.close()


def test_an_owner_made_with_the_cli_follows_the_printed_link_and_signs_in(console: Any, page: Any) -> None:
    settings = console.app.state.settings
    env = {
        **os.environ,
        "SWITCHYARD_DATA_DIR": str(settings.data_dir),
        "SWITCHYARD_DATABASE_URL": settings.database_url,
        "SWITCHYARD_PUBLIC_URL": console.url,
    }
    switchyard = Path(sys.executable).parent / "switchyard"
    made = subprocess.run(
        [str(switchyard), "tenant", "create", "Globex"], env=env, capture_output=True, text=True, check=True
    )
    found = re.search(r"console:\s+(\S+) sets a password and signs in at (\S+)", made.stdout)
    assert found, made.stdout
    email, link = found.groups()
    assert link.startswith(f"{console.url}/console/invitations/")
    page.goto(link)
    page.get_by_role("heading", name="Join Globex").wait_for()
    page.get_by_label("New password").fill(CHOSEN_PASSWORD)
    page.get_by_role("button", name="Set password and sign in").click()
    page.get_by_text(f"{email} · owner · Globex").wait_for()
    page.get_by_role("button", name="Sign out").click()
    page.get_by_label("Email").fill(email)  # the placeholder address is one the e-mail field accepts
    page.get_by_label("Password").fill(CHOSEN_PASSWORD)
    page.get_by_label("Password").press("Enter")
    page.get_by_text(f"{email} · owner · Globex").wait_for()
    assert page.locator("#email:invalid").count() == 0
    page.screenshot(path=str(console.shots / "cli-owner-signed-in.png"), full_page=True)
    assert page.errors == []  # type: ignore[attr-defined]


def test_a_member_who_forgot_the_password_gets_a_mailed_link_and_chooses_a_new_one(
    console: Any, page: Any, browser: Any
) -> None:
    settings = console.app.state.settings
    sign_in(page, console, "admin")  # an admin invites a member, who joins ...
    link = _invite(page, console, "forgetful@acme.example", "viewer")
    member = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        them = member.new_page()
        them.goto(link)
        them.get_by_label("New password").fill("a password soon forgotten")
        them.get_by_role("button", name="Set password and sign in").click()
        them.get_by_role("button", name="Sign out").click()
        # ... and forgets the password
        with smtp_server() as mail:
            settings.smtp_url = SecretStr(mail.url)
            try:
                them.get_by_role("link", name="Forgot your password?").click()
                them.get_by_label("Email").fill("forgetful@acme.example")
                them.get_by_role("button", name="Send me a reset link").click()
                them.get_by_text("is on its way").wait_for()
                assert _fits(them)
                them.screenshot(path=str(console.shots / "password-forgot-phone.png"), full_page=True)
            finally:
                settings.smtp_url = None
        (sent,) = mail.messages
        assert sent.recipients == ["forgetful@acme.example"]
        reset = re.search(r"(http://127\.0\.0\.1:\d+/console/password-reset/\S+)", sent.body)
        assert reset, sent.body
        them.goto(reset.group(1))
        them.get_by_role("heading", name="Choose a new password").wait_for()
        them.get_by_label("New password").fill("the password I keep now")
        them.get_by_role("button", name="Set password and sign in").click()
        them.get_by_text("forgetful@acme.example · viewer · Acme Robotics").wait_for()
        assert _fits(them)
        assert them.goto(reset.group(1)).status == 410  # type: ignore[union-attr]
    finally:
        member.close()

    page.goto(f"{console.url}/console/members")  # an admin's link, for a member without mail
    page.get_by_role("button", name="Issue a password-reset link for forgetful@acme.example").click()
    admin_link = page.get_by_label("Password-reset link", exact=True).input_value()
    assert admin_link.startswith(f"{console.url}/console/password-reset/")
    page.screenshot(path=str(console.shots / "members-reset-link.png"), full_page=True)
    assert page.errors == []  # type: ignore[attr-defined]
