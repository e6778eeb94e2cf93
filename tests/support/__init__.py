"""What the tests share: serving an ASGI app on 127.0.0.1 in a thread (``served``), a free port (``free_port``).
One place for each, so a fix to how servers start and stop holds for every test."""
