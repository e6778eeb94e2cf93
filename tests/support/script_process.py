"""A test file run as a script in a process of its own (a worker it defines), restarted and killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path


class ScriptProcess:
    """Runs `script` with this interpreter: `start` again after `kill` (each start logs to its own file)."""

    def __init__(self, script: str, env: dict[str, str], log_dir: Path) -> None:
        self.script = script
        self.env = {**os.environ, **env}
        self.log_dir = log_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0

    def start(self) -> None:
        log = open(self.log_dir / f"worker-{self.started}.log", "wb")  # noqa: SIM115 (the process owns it)
        self.proc = subprocess.Popen([sys.executable, self.script], env=self.env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.started += 1

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
