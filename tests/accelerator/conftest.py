from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


@pytest.fixture(scope="session")
def benchmarks_csv() -> Path:
    path = SHARED_DATA / "neuron_benchmarks.csv"
    if not path.exists():
        pytest.skip(f"calibration data not found at {path}")
    return path


@pytest.fixture(scope="session")
def conv_trace() -> Path:
    path = SHARED_DATA / "traces" / "azure_llm_2023_conv.csv"
    if not path.exists():
        pytest.skip(f"trace not found at {path}")
    return path
