"""The container files as an operator meets them (issue 17). Docker cannot run on these machines, so:

- the Dockerfile passes hadolint (every rule, no ignores) and `compose.yaml` validates against the compose-spec
  schema (check-jsonschema's vendored copy), both dev dependencies;
- the compose file's shape: PostgreSQL and Redis with health checks the others wait for, the one-shot `migrate`
  every Switchyard process waits on (`service_completed_successfully`), restart policies, two API replicas, one
  beat, the health check that fits each process, and only settings that exist and the README documents;
- the build context `.dockerignore` leaves holds what the Dockerfile copies and builds (the three wheels are built
  from a copy of exactly that context) and none of `.venv`, `.switchyard`, `.git`, tests or caches;
- each health check compose and the image declare is run, as written, against the real process it probes
  (`switchyard api`, `switchyard fleet`, `switchyard worker` on a Redis of the test's own): it fails while the
  process is not there and passes once it is.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from switchyard.platform.settings import Settings
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SWITCHYARD_PROCESSES = {"migrate", "fleet", "api", "worker", "beat"}
LONG_RUNNING = {"postgres", "redis", "fleet", "api", "worker", "beat", "proxy"}


def _compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
    return loaded


def _tool(name: str) -> str:
    path = BIN / name
    assert path.exists(), f"{name} is not installed in {BIN} (a dev dependency: make install)"
    return str(path)


# -- linters ----------------------------------------------------------------------------------------------------


def test_dockerfile_passes_hadolint() -> None:
    result = subprocess.run(
        [_tool("hadolint"), "--no-color", "--failure-threshold", "info", "Dockerfile"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow  # starts a process
def test_compose_file_validates_against_the_compose_spec() -> None:
    result = subprocess.run(
        [_tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", "compose.yaml"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow  # starts a process
def test_hadolint_and_the_schema_check_catch_what_they_should(tmp_path: Path) -> None:
    """The two checks above can fail: a root image with an unpinned apt-get, a service with an unknown key."""
    bad_dockerfile = tmp_path / "Dockerfile"
    bad_dockerfile.write_text("FROM python:3.11-slim\nRUN apt-get update && apt-get install -y curl\nCMD switchyard\n")
    linted = subprocess.run([_tool("hadolint"), "--no-color", str(bad_dockerfile)], capture_output=True, text=True)
    assert linted.returncode != 0
    assert "DL3008" in linted.stdout  # packages not pinned
    bad_compose = tmp_path / "compose.yaml"
    bad_compose.write_text("services:\n  api:\n    image: x\n    restart_policy: always\n")
    checked = subprocess.run(
        [_tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", str(bad_compose)],
        capture_output=True,
        text=True,
    )
    assert checked.returncode != 0


def test_the_final_stage_is_the_slim_base_plus_the_runtime_venv_as_a_user() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    stages = re.split(r"^FROM ", dockerfile, flags=re.MULTILINE)
    assert len(stages) == 3, "two stages: build, then the final image"
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.\d+-slim", stages[0], re.MULTILINE)
    assert stages[1].startswith("${PYTHON_IMAGE} AS build")
    assert "venv --without-pip /opt/switchyard" in stages[1]
    final = stages[2]
    assert final.startswith("${PYTHON_IMAGE}\n")
    copies = re.findall(r"^COPY (.*)$", final, re.MULTILINE)
    assert copies == ["--from=build /opt/switchyard /opt/switchyard"], "the final stage takes the venv only"
    assert not re.search(r"pip |apt-get|apk ", final), "nothing is installed in the final stage"
    user = re.search(r"^USER (\S+)$", final, re.MULTILINE)
    assert user
    assert re.fullmatch(r"[1-9]\d{3,}:[1-9]\d{3,}", user.group(1)), "a numeric, non-root user"


# -- the compose file's shape -----------------------------------------------------------------------------------


def test_services_wait_for_their_dependencies_and_restart() -> None:
    services = _compose()["services"]
    assert set(services) == SWITCHYARD_PROCESSES | {"postgres", "redis", "proxy"}
    for name in ("postgres", "redis"):
        assert services[name]["healthcheck"]["test"], f"{name} has no health check"
    assert services["migrate"]["restart"] == "no"
    assert services["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    for name in SWITCHYARD_PROCESSES - {"migrate"}:
        depends = services[name]["depends_on"]
        assert depends["migrate"] == {"condition": "service_completed_successfully"}, name
        assert depends["postgres"] == {"condition": "service_healthy"}, name
        assert depends["redis"] == {"condition": "service_healthy"}, name
    for name in ("api", "worker"):  # they call the fleet process for every simulated model
        assert services[name]["depends_on"]["fleet"] == {"condition": "service_healthy"}
    for name, service in services.items():
        for target, how in service.get("depends_on", {}).items():
            assert target in services, f"{name} depends on unknown {target}"
            if how["condition"] == "service_healthy":
                assert not services[target]["healthcheck"].get("disable"), f"{name} waits on {target}'s health"
    for name in LONG_RUNNING:
        assert services[name]["restart"] == "unless-stopped", name
    shared = _compose()["x-switchyard"]["environment"]
    for name in SWITCHYARD_PROCESSES:  # every process sees the same installation
        assert services[name]["environment"].items() >= shared.items(), name
    assert services["api"]["deploy"]["replicas"] == 2
    assert services["beat"]["deploy"]["replicas"] == 1
    assert "ports" not in services["api"]  # published once, by the proxy in front of the replicas
    assert services["proxy"]["ports"]


def test_the_api_believes_x_forwarded_for_from_the_proxy_s_fixed_address_only() -> None:
    import ipaddress

    compose = _compose()
    services = compose["services"]
    proxy_address = services["proxy"]["networks"]["default"]["ipv4_address"]
    subnet = compose["networks"]["default"]["ipam"]["config"][0]["subnet"]
    assert ipaddress.ip_address(proxy_address) in ipaddress.ip_network(subnet)
    assert services["api"]["environment"]["SWITCHYARD_TRUSTED_PROXIES"] == proxy_address
    assert "X-Forwarded-For $$proxy_add_x_forwarded_for" in compose["configs"]["proxy"]["content"]
    for name in SWITCHYARD_PROCESSES - {"api"}:  # nothing else reads a client address
        assert "SWITCHYARD_TRUSTED_PROXIES" not in services[name]["environment"], name


def test_migrate_runs_the_migrations_then_makes_the_first_operator_key_once() -> None:
    command = " ".join(_compose()["services"]["migrate"]["command"])
    assert "switchyard db upgrade && switchyard key create --operator --if-none" in command


def test_each_process_has_the_health_check_that_fits_it() -> None:
    services = _compose()["services"]
    assert "/healthz" in " ".join(services["api"]["healthcheck"]["test"])
    assert "/healthz" in " ".join(services["fleet"]["healthcheck"]["test"])
    worker = " ".join(services["worker"]["healthcheck"]["test"])
    assert "control.ping" in worker
    assert "http" not in worker  # a worker serves no HTTP: the image's check would keep it unhealthy
    assert services["beat"]["healthcheck"] == {"disable": True}
    assert services["migrate"]["healthcheck"] == {"disable": True}
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r'^CMD \["switchyard", "api"\]$', dockerfile, re.MULTILINE)  # the image's check is the API's


def test_every_switchyard_variable_is_a_setting_the_readme_documents() -> None:
    readme = (ROOT / "README.md").read_text()
    fields = {f"SWITCHYARD_{name.upper()}" for name in Settings.model_fields}
    used = set(re.findall(r"SWITCHYARD_[A-Z_]+\b", (ROOT / "compose.yaml").read_text()))
    used |= set(re.findall(r"SWITCHYARD_[A-Z_]+\b", (ROOT / "Dockerfile").read_text()))
    assert used, "compose.yaml sets no SWITCHYARD_ variable"
    assert used - fields == set(), "not settings (settings.py)"
    assert {name for name in used if f"`{name}`" not in readme} == set(), "not in the README's settings table"
    environment = _compose()["x-switchyard"]["environment"]
    production = re.search(r"## Production.*?```sh\n(.*?)```", readme, re.DOTALL)
    assert production
    exported = set(re.findall(r"^export (SWITCHYARD_\w+)=", production.group(1), re.MULTILINE))
    assert exported <= set(environment), "compose sets what the README's production section exports"


# -- the build context ------------------------------------------------------------------------------------------


def _pattern(text: str) -> re.Pattern[str]:
    """A .dockerignore pattern as Docker matches it (Go's filepath.Match per segment, `**` any segments)."""
    out, i = "", 0
    while i < len(text):
        if text.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif text.startswith("**", i):
            out, i = out + ".*", i + 2
        elif text[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif text[i] == "?":
            out, i = out + "[^/]", i + 1
        elif text[i] == "[":
            end = text.index("]", i)
            out, i = out + text[i : end + 1], end + 1
        else:
            out, i = out + re.escape(text[i]), i + 1
    return re.compile(out)


def _context(root: Path) -> Iterator[str]:
    """Relative paths of the files Docker sends as the build context: the last matching pattern decides, and a
    pattern that matches a directory decides for everything inside it. Like Docker, the walk skips an excluded
    directory no exception (`!`) reaches into, and a file or directory that goes while it walks (other tests write
    `.hypothesis`, `.switchyard` and caches under the root) is no error."""
    rules, exceptions = [], []
    for line in (root / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            negated = line.startswith("!")
            text = os.path.normpath(line.lstrip("!")).strip("/")
            rules.append((negated, _pattern(text)))
            if negated:
                exceptions.append(text)

    def excluded(rel: str) -> bool:
        parts = rel.split("/")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        out = False
        for negated, pattern in rules:
            if any(pattern.fullmatch(prefix) for prefix in prefixes):
                out = not negated
        return out

    for directory, subdirectories, files in os.walk(root):
        base = Path(directory).relative_to(root).as_posix()
        below = "" if base == "." else base + "/"
        subdirectories[:] = sorted(
            name
            for name in subdirectories
            if not excluded(below + name) or any(text.startswith(below + name + "/") for text in exceptions)
        )
        for name in sorted(files):
            if not excluded(below + name):
                yield below + name


@pytest.mark.slow  # starts a process
def test_the_build_context_holds_what_the_image_needs_and_nothing_else(tmp_path: Path) -> None:
    context = list(_context(ROOT))
    tops = {rel.split("/")[0] for rel in context}
    copied = set(re.findall(r"^COPY (\S+)/ ", (ROOT / "Dockerfile").read_text(), re.MULTILINE))
    assert copied == {"accelerator", "agents", "platform", "migrations"}
    assert tops == copied
    for rel in context:
        parts = set(rel.split("/"))
        assert not parts & {".venv", ".switchyard", ".git", "__pycache__", ".mypy_cache", ".pytest_cache"}, rel
        assert not rel.endswith(".pyc"), rel
    assert "platform/pyproject.toml" in context
    assert any(rel.startswith("migrations/versions/") for rel in context)
    # the stage `build` builds the three wheels from exactly this context
    copy = tmp_path / "context"
    for rel in context:
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, copy / rel)
    for part in ("accelerator", "agents", "platform"):
        built = subprocess.run(
            [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path / "wheels"), part],
            cwd=copy,
            capture_output=True,
            text=True,
        )
        assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (platform_wheel,) = (tmp_path / "wheels").glob("switchyard_platform-*.whl")
    listing = subprocess.run(
        [sys.executable, "-m", "zipfile", "-l", str(platform_wheel)], capture_output=True, text=True, check=True
    ).stdout
    assert "switchyard/platform/migrations/env.py" in listing


def test_dockerignore_rules_are_read_as_docker_reads_them(tmp_path: Path) -> None:
    """The evaluator above, on a tree of its own: last match wins, a directory's rule covers its files."""
    for rel in ("keep/a.py", "keep/__pycache__/a.pyc", "keep/sub/.venv/x", "drop/b.py", ".git/HEAD", "top.txt"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    (tmp_path / ".dockerignore").write_text("*\n!keep/\n**/__pycache__\n**/.venv\n")
    assert list(_context(tmp_path)) == ["keep/a.py"]


# -- health checks run against the real processes ---------------------------------------------------------------


def _probe(test: list[str], env: dict[str, str]) -> int:
    """Run a health check's `test` as Docker does (CMD: the argv; CMD-SHELL: through sh) with the image's PATH."""
    kind, *argv = test
    if kind == "CMD-SHELL":
        argv = ["sh", "-c", *argv]
    assert kind in ("CMD", "CMD-SHELL"), test
    environment = {**env, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(argv, env=environment, capture_output=True, timeout=60).returncode


def _image_healthcheck() -> list[str]:
    dockerfile = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    found = re.search(r"^HEALTHCHECK .*?CMD (\[.*\])\s*$", dockerfile, re.MULTILINE)
    assert found, "the Dockerfile has no HEALTHCHECK in exec form"
    return ["CMD", *json.loads(found.group(1))]


def _until(check: Any, what: str, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert proc.poll() is None, f"{what} exited with {proc.returncode}:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"{what}: its health check did not pass:\n{log.read_text()[-3000:]}"
        time.sleep(0.5)


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Any]:
    started: list[subprocess.Popen[bytes]] = []

    def start(name: str, argv: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[bytes], Path]:
        log = tmp_path / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT)
        started.append(proc)
        return proc, log

    yield start
    for proc in reversed(started):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.mark.slow
@pytest.mark.redis
def test_health_checks_pass_on_the_processes_they_probe_and_fail_without_them(processes: Any, tmp_path: Path) -> None:
    redis_server = shutil.which("redis-server")
    assert redis_server, "redis-server is not on PATH"
    services = _compose()["services"]
    redis_port, api_port, fleet_port = free_port(), free_port(), free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SWITCHYARD_")},
        "SWITCHYARD_DATA_DIR": str(tmp_path / "data"),
        "SWITCHYARD_BROKER_URL": f"redis://127.0.0.1:{redis_port}/0",
        "SWITCHYARD_REDIS_URL": f"redis://127.0.0.1:{redis_port}/1",
        "SWITCHYARD_FLEET_URL": f"http://127.0.0.1:{fleet_port}",
        "SWITCHYARD_PORT": str(api_port),
        "SWITCHYARD_TIME_SCALE": "0",
    }
    checks = {
        "fleet": services["fleet"]["healthcheck"]["test"],
        "api": services["api"]["healthcheck"]["test"],
        "image": _image_healthcheck(),
        "worker": services["worker"]["healthcheck"]["test"],
    }
    redis, redis_log = processes(
        "redis", [redis_server, "--port", str(redis_port), "--bind", "127.0.0.1", "--save", ""], env
    )
    sy = str(BIN / "switchyard")
    migrated = subprocess.run([sy, "db", "upgrade"], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert migrated.returncode == 0, migrated.stderr
    for name, test in checks.items():
        assert _probe(test, env) != 0, f"the {name} health check passes with no process to probe"

    fleet, fleet_log = processes("fleet", [sy, "fleet", "--host", "127.0.0.1"], env)
    _until(lambda: _probe(checks["fleet"], env) == 0, "switchyard fleet", fleet, fleet_log)
    api, api_log = processes("api", [sy, "api", "--host", "127.0.0.1"], env)
    _until(lambda: _probe(checks["api"], env) == 0, "switchyard api", api, api_log)
    assert _probe(checks["image"], env) == 0
    assert _probe(checks["worker"], env) != 0  # no worker yet: the API answering is not the worker's health
    worker, worker_log = processes("worker", [sy, "worker", "--concurrency", "2"], env)
    _until(lambda: _probe(checks["worker"], env) == 0, "switchyard worker", worker, worker_log)

    worker.send_signal(signal.SIGTERM)
    worker.wait(timeout=30)
    assert _probe(checks["worker"], env) != 0, "the worker health check passes after the worker stopped"
    assert redis.poll() is None, redis_log.read_text()


def _nginx() -> str | None:
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if Path(p).exists()), None)


@pytest.mark.slow
def test_the_proxy_streams_unbuffered_hides_metrics_and_lets_the_api_answer_413(tmp_path: Path) -> None:
    """compose's nginx configuration, as written but for its two addresses (the API process's instead of the
    `api` service, a free port instead of 8000), in front of a real `switchyard api` (Debian's nginx; .ci/run
    installs it)."""
    nginx = _nginx()
    if nginx is None:  # .ci/run installs it, and CI runs it as `CI=true bash .ci/run`: CI never skips
        message = "nginx is not installed (apt-get install nginx-light)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    import httpx

    api_port, proxy_port = free_port(), free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("SWITCHYARD_")},
        "SWITCHYARD_DATA_DIR": str(tmp_path / "data"),
        "SWITCHYARD_PORT": str(api_port),
        "SWITCHYARD_TIME_SCALE": "2",  # two wall seconds per simulated second: the stream outlasts a scrape
    }
    sy = str(BIN / "switchyard")
    assert subprocess.run([sy, "db", "upgrade"], env=env, cwd=tmp_path, capture_output=True).returncode == 0
    created = subprocess.run([sy, "tenant", "create", "proxy"], env=env, cwd=tmp_path, capture_output=True, text=True)
    key_match = re.search(r"owner key:\s+(\S+)", created.stdout)
    assert key_match, created.stderr
    key = key_match.group(1)

    content = _compose()["configs"]["proxy"]["content"].replace("$$", "$")
    assert "http://api:8000" in content
    assert "listen 8000;" in content
    content = content.replace("http://api:8000", f"http://127.0.0.1:{api_port}")
    content = content.replace("listen 8000;", f"listen 127.0.0.1:{proxy_port};")
    prefix = tmp_path / "nginx"
    (prefix / "logs").mkdir(parents=True)
    content = f"pid {prefix}/nginx.pid;\nerror_log {prefix}/logs/error.log;\n" + content
    content = content.replace("http {", f"http {{\n  access_log {prefix}/logs/access.log;", 1)
    (prefix / "nginx.conf").write_text(content)
    conf = ["-p", str(prefix), "-c", str(prefix / "nginx.conf")]
    api_log = tmp_path / "api.log"
    with open(api_log, "wb") as out:
        api = subprocess.Popen([sy, "api"], env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT)
    proxy = f"http://127.0.0.1:{proxy_port}"
    try:
        assert subprocess.run([nginx, *conf], capture_output=True).returncode == 0, prefix / "logs/error.log"
        _until(lambda: _probe(_image_healthcheck(), env) == 0, "switchyard api", api, api_log)
        assert httpx.get(f"{proxy}/healthz").status_code == 200
        assert httpx.get(f"{proxy}/metrics").status_code == 404
        assert httpx.get(f"http://127.0.0.1:{api_port}/metrics").status_code == 200

        too_big = httpx.post(
            f"{proxy}/v1/chat/completions",
            headers={"Authorization": f"Bearer {key}", "content-type": "application/json"},
            content=b'{"pad": "' + b"x" * 1_500_000 + b'"}',
        )
        assert too_big.status_code == 413
        assert "error" in too_big.json()  # the API's envelope, not nginx's page

        body = {
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "stream": True,
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "hello"}],
        }
        headers = {"Authorization": f"Bearer {key}"}
        running_at_first_chunk = None
        chunks = []
        with httpx.stream("POST", f"{proxy}/v1/chat/completions", json=body, headers=headers, timeout=60) as answer:
            assert answer.status_code == 200
            assert answer.headers["x-request-id"]
            for line in answer.iter_lines():
                if not line.startswith("data: "):
                    continue
                chunks.append(line)
                if running_at_first_chunk is None:  # live: the request still runs when its first chunk is out
                    scrape = httpx.get(f"http://127.0.0.1:{api_port}/metrics").text
                    running = re.search(
                        r"^switchyard_pool_running_requests\{[^}]*Llama-3\.1-8B[^}]*\} (\S+)$", scrape, re.M
                    )
                    running_at_first_chunk = float(running.group(1)) if running else 0.0
        assert chunks[-1] == "data: [DONE]"
        assert running_at_first_chunk == 1.0
    finally:
        subprocess.run([nginx, *conf, "-s", "quit"], capture_output=True)
        api.send_signal(signal.SIGTERM)
        try:
            api.wait(timeout=20)
        except subprocess.TimeoutExpired:
            api.kill()
            api.wait()
