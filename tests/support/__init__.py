"""What the tests share: serving an ASGI app on 127.0.0.1 in a thread (``served``), a free port (``free_port``), a
small SMTP server that keeps the mail it is sent (``smtp``).
One place for each, so a fix to how servers start and stop holds for every test."""
