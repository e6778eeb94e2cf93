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


def test_calibration_keeps_its_names_after_the_split_into_rows_phase_and_group_fits() -> None:
    from switchyard.accelerator.sim import benchmark_rows, calibration, group_fit, phase_fit

    for module in (benchmark_rows, phase_fit, group_fit, calibration):
        for name in module.__all__:
            assert getattr(module, name) is not None, (module.__name__, name)
    # every public name calibration.py had before the split is still importable from it
    before = [
        "GPU_FIT_CHIPS", "GPU_STACK_SCOPED", "LOWER_BOUNDS", "MIN_ARCHITECTURES", "NEW_STACK_SOFTWARE",
        "NEW_STACK_TIED", "REPORT_GROUPS", "SERVING_FREE", "STACK_SCOPED", "BenchmarkRow", "CalibrationResult",
        "RowError", "architecture", "calibrate", "fit_coefficients", "fit_generation", "read_benchmarks",
        "write_result",
    ]  # fmt: skip
    assert set(before) <= set(calibration.__all__)
    assert calibration.BenchmarkRow is benchmark_rows.BenchmarkRow
    assert calibration.fit_coefficients is group_fit.fit_coefficients
