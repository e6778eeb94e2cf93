"""A small real SMTP server on 127.0.0.1 for tests of the mail the platform sends: it speaks enough of RFC 5321
(EHLO/HELO, MAIL, RCPT, DATA, RSET, NOOP, QUIT; no STARTTLS, no AUTH) for Python's ``smtplib`` and keeps every
message it accepts. A message is kept before its ``250`` is sent, so once the sender's call returns the message
is in ``messages``."""

from __future__ import annotations

import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage

__all__ = ["ReceivedMail", "SmtpServer", "smtp_server"]


@dataclass
class ReceivedMail:
    sender: str
    recipients: list[str]
    message: EmailMessage

    @property
    def body(self) -> str:
        part = self.message.get_body(("plain",))
        return str(part.get_content()) if part is not None else ""


@dataclass
class SmtpServer:
    url: str
    messages: list[ReceivedMail] = field(default_factory=list)


class _Session(socketserver.StreamRequestHandler):
    server: _Server

    def _reply(self, line: str) -> None:
        self.wfile.write(f"{line}\r\n".encode())

    def handle(self) -> None:
        sender, recipients = "", list[str]()
        self._reply("220 127.0.0.1 test SMTP")
        while line := self.rfile.readline():
            verb, _, argument = line.decode().rstrip("\r\n").partition(" ")
            verb = verb.upper()
            if verb == "EHLO":
                self._reply("250-127.0.0.1")
                self._reply("250 8BITMIME")
            elif verb == "HELO" or verb == "NOOP":
                self._reply("250 OK")
            elif verb == "MAIL":
                sender, recipients = argument.partition(":")[2].strip().strip("<>"), []
                self._reply("250 OK")
            elif verb == "RCPT":
                recipients.append(argument.partition(":")[2].strip().strip("<>"))
                self._reply("250 OK")
            elif verb == "DATA":
                self._reply("354 End data with <CR><LF>.<CR><LF>")
                data = bytearray()
                while (chunk := self.rfile.readline()) not in (b".\r\n", b""):
                    data += chunk[1:] if chunk.startswith(b"..") else chunk  # dot-unstuffing
                message = message_from_bytes(bytes(data), policy=policy.default)
                assert isinstance(message, EmailMessage)
                self.server.mailbox.messages.append(ReceivedMail(sender, recipients, message))
                self._reply("250 OK: queued")
            elif verb == "RSET":
                sender, recipients = "", []
                self._reply("250 OK")
            elif verb == "QUIT":
                self._reply("221 Bye")
                return
            else:
                self._reply("502 Command not implemented")


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    mailbox: SmtpServer


@contextmanager
def smtp_server() -> Iterator[SmtpServer]:
    """An SMTP server on a free port of 127.0.0.1 while the block runs; ``url`` is its ``smtp://`` address."""
    with _Server(("127.0.0.1", 0), _Session) as server:
        server.mailbox = SmtpServer(f"smtp://127.0.0.1:{server.server_address[1]}")
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield server.mailbox
        finally:
            server.shutdown()
            thread.join()
