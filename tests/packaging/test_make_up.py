"""`make up` stops cleanly (issue 17): a normal stop is not reported by make as ``make: *** ... Error 143``.

Each case runs the README's `make up` (with the running interpreter's venv, not reinstalled) on a fresh data
directory and port, waits for the API, stops it the way an operator does and reads make's output and status:
- SIGTERM to the `switchyard up` process (`kill PID`, a supervisor): make exits 0;
- SIGTERM to make (make passes it to its job) and SIGINT to the whole foreground group (Ctrl-C in a terminal):
  make ends by the signal it got, as make does, but names no failed recipe.
In every case no process of the installation (API, fleet process, embedded worker) is left running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.ports import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(sys.executable).parent.parent


def _children(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(each) for each in found]


def _descendants(pid: int) -> list[int]:
    out: list[int] = []
    for child in _children(pid):
        out += [child, *_descendants(child)]
    return out


def _default_signals() -> None:  # a terminal's foreground job: SIGINT not ignored, whatever started the tests
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("stop", ["sigterm-switchyard", "sigterm-make", "sigint-group"])
def test_make_up_stops_cleanly(stop: str, tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "SWITCHYARD_DATA_DIR": str(tmp_path / "data"),
        "SWITCHYARD_PORT": str(port),
        "SWITCHYARD_TIME_SCALE": "0",
    }
    env.pop("MAKEFLAGS", None)
    log = tmp_path / "make.log"
    argv = ["make", "--no-print-directory", "-C", str(ROOT), f"VENV={VENV}", "-o", f"{VENV}/.installed", "up"]
    with open(log, "wb") as out:
        make = subprocess.Popen(
            argv, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_default_signals
        )
    try:
        deadline = time.monotonic() + 120
        while True:
            assert make.poll() is None, f"make up exited with {make.returncode}:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"the API did not answer within 120 s:\n{log.read_text()}"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        (switchyard,) = _children(make.pid)
        installation = [switchyard, *_descendants(switchyard)]
        assert len(installation) >= 2, "switchyard up started no fleet process or worker"
        if stop == "sigterm-switchyard":
            os.kill(switchyard, signal.SIGTERM)
        elif stop == "sigterm-make":
            os.kill(make.pid, signal.SIGTERM)
        else:
            os.killpg(make.pid, signal.SIGINT)
        status = make.wait(timeout=60)
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGKILL)
            make.wait()
    output = log.read_text()
    assert "make: ***" not in output, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    expected = {"sigterm-switchyard": 0, "sigterm-make": -signal.SIGTERM, "sigint-group": -signal.SIGINT}[stop]
    assert status == expected, output[-3000:]
    left = [pid for pid in installation if Path(f"/proc/{pid}").exists() and _alive(pid)]
    assert not left, f"processes left running after make up stopped: {left}"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
