"""A client generated from the OpenAPI document (openapi-python-client) has every route, and the error envelope on
every error status: the generator finds nothing in the document to warn about."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from switchyard.platform.app import create_app
from switchyard.platform.settings import Settings

pytestmark = pytest.mark.slow


@pytest.mark.timeout(600)
def test_a_client_generates_from_the_document_without_warnings(tmp_path: Path) -> None:
    document = create_app(Settings(data_dir=tempfile.mkdtemp())).openapi_schema.to_schema()
    (tmp_path / "openapi.json").write_text(json.dumps(document))
    tools = Path(sys.executable).parent  # the generator formats its output with ruff, from the same environment
    generate = ["generate", "--path", "openapi.json", "--meta", "none", "--output-path", "client"]
    result = subprocess.run(
        [str(tools / "openapi-python-client"), *generate],
        cwd=tmp_path,
        env={**os.environ, "PATH": os.pathsep.join([str(tools), os.environ.get("PATH", "")])},
        capture_output=True,
        text=True,
        timeout=540,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-10_000:]
    assert "warning" not in output.lower(), output[-10_000:]  # was 47 warnings, every error answer dropped

    operations = [op for item in document["paths"].values() for op in item.values()]
    modules = list((tmp_path / "client" / "api").rglob("*.py"))
    assert len([m for m in modules if m.name != "__init__.py"]) == len(operations)
    create_thread = next(m for m in modules if m.name == "v1_threads_create_thread.py").read_text()
    for status in (400, 401, 403, 409, 422, 503):
        assert f"response_{status} = ErrorEnvelope.from_dict(response.json())" in create_thread, status
