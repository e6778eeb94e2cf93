from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"  # published measurements and traces, in the repo


@pytest.fixture(scope="session")
def benchmarks_csv() -> Path:
    return DATA / "neuron_benchmarks.csv"


@pytest.fixture(scope="session")
def conv_trace() -> Path:
    return DATA / "traces" / "azure_llm_2023_conv.csv"
