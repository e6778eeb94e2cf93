"""The console's e-mail: invitation and password-reset links sent through ``SWITCHYARD_SMTP_URL``.

Without that setting there is no mailer (:func:`mailer_of` answers ``None``) and the pages show links to copy
instead. Sending uses the standard library's SMTP client on a thread (it blocks), with a timeout, so a slow mail
server holds one request, never the event loop; a failure is :class:`MailNotSent`, which the pages answer by
showing the link after all.
"""

from __future__ import annotations

import asyncio
import smtplib
import ssl
from dataclasses import dataclass
from email.message import EmailMessage
from urllib.parse import unquote, urlsplit

from switchyard.platform.settings import Settings

__all__ = ["SMTP_TIMEOUT_S", "MailNotSent", "Mailer", "mailer_of"]

SMTP_TIMEOUT_S = 10.0


class MailNotSent(Exception):
    """The mail server could not be reached or refused the message."""


@dataclass(frozen=True, slots=True)
class Mailer:
    """Where the console's mail goes: ``smtp://`` (STARTTLS when offered) or ``smtps://`` (TLS throughout)."""

    url: str
    sender: str

    async def send(self, *, to: str, subject: str, body: str) -> None:
        """Send one plain-text message to ``to``; raises :class:`MailNotSent`."""
        message = EmailMessage()
        message["From"], message["To"], message["Subject"] = self.sender, to, subject
        message.set_content(body)
        try:
            await asyncio.to_thread(self._deliver, message)
        except (smtplib.SMTPException, OSError) as error:
            raise MailNotSent(f"{type(error).__name__}: {error}") from error

    def _deliver(self, message: EmailMessage) -> None:
        parts = urlsplit(self.url)
        host = parts.hostname or "localhost"
        if parts.scheme == "smtps":
            client: smtplib.SMTP = smtplib.SMTP_SSL(
                host, parts.port or 465, timeout=SMTP_TIMEOUT_S, context=ssl.create_default_context()
            )
        else:
            client = smtplib.SMTP(host, parts.port or 25, timeout=SMTP_TIMEOUT_S)
        with client:
            client.ehlo()
            if parts.scheme != "smtps" and client.has_extn("starttls"):
                client.starttls(context=ssl.create_default_context())
                client.ehlo()
            if parts.username:
                client.login(unquote(parts.username), unquote(parts.password or ""))
            client.send_message(message)


def mailer_of(settings: Settings) -> Mailer | None:
    """The mailer ``SWITCHYARD_SMTP_URL`` configures, or ``None`` when it is unset."""
    if settings.smtp_url is None:
        return None
    return Mailer(settings.smtp_url.get_secret_value(), settings.mail_from)
