"""The layout's promises: no shadowing of stdlib `platform`, one namespace, public names exported."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PARTS = ["accelerator", "agents", "platform", "sdk"]


def test_no_package_shadows_the_standard_library() -> None:
    assert not (ROOT / "platform" / "__init__.py").exists()
    assert not (ROOT / "agents" / "__init__.py").exists()
    for part in PARTS:
        assert not (ROOT / part / "switchyard" / "__init__.py").exists(), "switchyard/ must stay a namespace"


@pytest.mark.slow  # starts a process
def test_stdlib_platform_imports_from_the_repository_root() -> None:
    """From the repository root, `platform` is the standard library's and the `agents/` folder is no package: an
    installed `agents` (openai-agents, a dev dependency) is the one imported, as it would be anywhere else."""
    code = (
        "import pathlib, sys, platform, agents; platform.system(); "
        "here = pathlib.Path(sys.argv[1]) / 'agents'; "
        "assert agents.__file__ is None or not pathlib.Path(agents.__file__).resolve().is_relative_to(here), "
        "agents.__file__"
    )
    result = subprocess.run([sys.executable, "-c", code, str(ROOT)], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.slow
def test_pytest_collects_from_the_repository_root() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "tests collected" in result.stdout


@pytest.mark.parametrize("part", PARTS)
def test_public_names_exist(part: str) -> None:
    module = importlib.import_module(f"switchyard.{part}")
    assert isinstance(module.__all__, list)
    for name in module.__all__:
        assert hasattr(module, name), f"switchyard.{part}.__all__ names missing {name!r}"
