from __future__ import annotations

import subprocess
import sys

import switchyard.accelerator as acc


def test_all_names_exist_and_are_sorted() -> None:
    assert acc.__all__ == sorted(acc.__all__)
    for name in acc.__all__:
        assert getattr(acc, name) is not None


def test_package_imports_on_its_own_without_platform_parts() -> None:
    code = (
        "import sys, switchyard.accelerator as a; "
        "bad = [m for m in sys.modules if m.startswith(('switchyard.platform', 'switchyard.agents', "
        "'sqlalchemy', 'litestar'))]; "
        "assert not bad, bad; print(len(a.__all__))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(out.stdout) == len(acc.__all__)
