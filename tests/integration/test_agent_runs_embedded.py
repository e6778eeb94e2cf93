"""`switchyard up` (one process, SQLite, the embedded worker on the SQLite broker) runs an agent end to end,
streamed over a real HTTP connection, with the run continuing after the client hangs up."""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.health import wait_healthy
from tests.support.ports import free_port

pytestmark = pytest.mark.slow


def _banner(proc: Any) -> str:
    lines = []
    end = time.monotonic() + 60
    while time.monotonic() < end:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("API docs:"):
            return "".join(lines)
    raise AssertionError("no banner:\n" + "".join(lines))


def _events(lines: Any) -> list[tuple[str, dict[str, Any] | str]]:
    out: list[tuple[str, dict[str, Any] | str]] = []
    name = ""
    for line in lines:
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            raw = line.removeprefix("data: ")
            out.append((name, raw if raw == "[DONE]" else json.loads(raw)))
    return out


def test_embedded_worker_runs_an_agent(tmp_path: Path, start_process: Any) -> None:
    port = free_port()
    env = {"SWITCHYARD_DATA_DIR": str(tmp_path / "data"), "SWITCHYARD_PORT": str(port), "SWITCHYARD_TIME_SCALE": "0"}
    proc = start_process("up", env=env)
    key = re.search(r"owner key:\s+(sy_\S+)", _banner(proc))
    assert key
    url = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {key.group(1)}"}
    wait_healthy(url)
    with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
        agent = http.post(
            "/v1/agents",
            json={"name": "maths", "model": "meta-llama/Llama-3.1-8B-Instruct", "tools": [{"type": "calculator"}]},
        )
        assert agent.status_code == 201, agent.text
        body = {
            "agent_id": agent.json()["id"],
            "stream": True,
            "thread": {"messages": [{"content": "use the calculator expression=6*7"}]},
        }
        with http.stream("POST", "/v1/runs", json=body) as response:
            assert response.status_code == 200
            events = _events(response.iter_lines())
        assert events[-1] == ("done", "[DONE]")
        name, run = events[-2]
        assert name == "thread.run.completed"
        assert isinstance(run, dict)
        assert run["chip_us"] > 0
        tool_results = [d for n, d in events if n == "thread.message.completed" and isinstance(d, dict)]
        assert any(d["role"] == "tool" and d["content"] == '{"result": 42}' for d in tool_results)

        # a client that hangs up after the first event: the run still finishes on the worker
        body["thread"] = {"messages": [{"content": "use the calculator expression=2*3"}]}
        with http.stream("POST", "/v1/runs", json=body) as response:
            lines = response.iter_lines()
            assert next(lines) == "id: 1"
            assert next(lines) == "event: thread.run.created"
            created = json.loads(next(lines).removeprefix("data: "))
        path = f"/v1/threads/{created['thread_id']}/runs/{created['id']}"
        status = created["status"]
        for _ in range(300):
            status = http.get(path).json()["status"]
            if status == "completed":
                break
            time.sleep(0.1)
        assert status == "completed"
    workers = _children(proc.pid)
    assert workers, "the embedded worker should be a child of `switchyard up`"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) is not None
    assert _gone(workers), "the embedded worker outlived `switchyard up`"


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _gone(pids: list[int], timeout_s: float = 20.0) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if not any(Path(f"/proc/{p}").exists() and "Z" not in _state(p) for p in pids):
            return True
        time.sleep(0.1)
    return False


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"
