"""Built wheels hold every module; the SDK and the accelerator install and import on their own."""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PARTS = ["accelerator", "agents", "platform", "sdk"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("wheels")
    built = {}
    for part in PARTS:
        result = subprocess.run(
            [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out / part), str(ROOT / part)],
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        (wheel,) = (out / part).glob("*.whl")
        built[part] = wheel
    return built


@pytest.mark.parametrize("part", PARTS)
def test_wheel_contains_every_module_and_data_file(wheels: dict[str, Path], part: str) -> None:
    source = ROOT / part
    expected = {
        str(path.relative_to(source))
        for path in (source / "switchyard").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    names = set(zipfile.ZipFile(wheels[part]).namelist())
    assert expected - names == set()
    assert not any(name.startswith("switchyard/__init__") for name in names)
    if part == "platform":
        migrations = {
            f"switchyard/platform/migrations/{p.relative_to(ROOT / 'migrations')}"
            for p in (ROOT / "migrations").rglob("*.py")
        }
        assert migrations - names == set()


def _fresh_venv(path: Path) -> Path:
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    return path / "bin" / "python"


@pytest.mark.parametrize(
    ("part", "allowed"), [("sdk", {"httpx", "pydantic"}), ("accelerator", {"click", "numpy", "httpx", "httpx-aiohttp"})]
)
def test_part_installs_and_imports_alone(wheels: dict[str, Path], tmp_path: Path, part: str, allowed: set[str]) -> None:
    python = _fresh_venv(tmp_path / "venv")
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(wheels[part])], capture_output=True, text=True
    )
    assert install.returncode == 0, install.stderr[-3000:]
    check = (
        f"import importlib.util, switchyard.{part}; "
        "others = [p for p in ('platform', 'agents', 'accelerator', 'sdk') "
        f"if p != '{part}' and importlib.util.find_spec('switchyard.' + p)]; "
        "assert not others, others"
    )
    result = subprocess.run([str(python), "-c", check], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    requires = subprocess.run(
        [str(python), "-m", "pip", "show", f"switchyard-{part}"], capture_output=True, text=True
    ).stdout
    direct = {
        r.strip()
        for line in requires.splitlines()
        if line.startswith("Requires:")
        for r in line.split(":", 1)[1].split(",")
        if r.strip()
    }
    assert direct <= allowed, direct
