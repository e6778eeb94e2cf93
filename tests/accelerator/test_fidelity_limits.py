"""The simulator's fidelity on the published 2026 Neuron rows, per group, holds to the limits docs/simulator.md states
("Fidelity on the 2026 rows"): benchmarks/bench_fidelity.py's computation on the committed coefficients, whose
median and p90 of |error| in TTFT and TPOT must stay at or under each group's limits, and whose figures are the
ones the table shows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks.bench_fidelity import FidelityRow, errors_by_group, evaluate, median_p90, read_rows

DOCS = Path(__file__).resolve().parents[2] / "docs" / "simulator.md"
HEADER = "| group | rows | TTFT | TPOT | output tok/s | TTFT limit | TPOT limit |"
MEASUREMENTS = {"TTFT": "ttft", "TPOT": "tpot", "output tok/s": "tok_s"}

Table = dict[str, dict[str, tuple[int, int]]]  # group -> column -> (median, p90) in %


def _pair(cell: str) -> tuple[int, int]:
    found = re.fullmatch(r"(\d+) / (\d+)", cell.strip())
    assert found, f"not 'median / p90': {cell!r}"
    return int(found.group(1)), int(found.group(2))


def documented_table() -> Table:
    """The fidelity table of docs/simulator.md: each group's measured median / p90 and its limits."""
    lines = DOCS.read_text().splitlines()
    assert lines.count(HEADER) == 1, "docs/simulator.md has one fidelity table with limits"
    start = lines.index(HEADER) + 2  # past the header's |---| line
    columns = [c.strip() for c in HEADER.strip("|").split("|")]
    table: Table = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = dict(zip(columns, (c.strip() for c in line.strip("|").split("|")), strict=True))
        table[cells["group"]] = {name: _pair(cells[name]) for name in columns[2:]}
    return table


@pytest.fixture(scope="module")
def measured() -> dict[str, dict[str, list[float]]]:
    """Signed errors per group and measurement, every usable row run on the committed coefficients."""
    usable, _ = read_rows()
    done: list[tuple[FidelityRow, dict[str, float | None]]]
    done, _ = evaluate(usable)
    return errors_by_group(done)


def test_every_group_stays_within_the_documented_ttft_and_tpot_limits(
    measured: dict[str, dict[str, list[float]]],
) -> None:
    table = documented_table()
    assert set(table) == set(measured)
    over = []
    for group, errors in measured.items():
        for name, key in (("TTFT", "ttft"), ("TPOT", "tpot")):
            median, p90 = median_p90(errors[key])
            median_limit, p90_limit = table[group][f"{name} limit"]
            if median > median_limit or p90 > p90_limit:
                over.append(f"{group} {name}: {median:.1f} / {p90:.1f} % > {median_limit} / {p90_limit} %")
    assert not over, over


def test_the_table_shows_the_figures_bench_fidelity_prints(measured: dict[str, dict[str, list[float]]]) -> None:
    table = documented_table()
    for group, errors in measured.items():
        for name, key in MEASUREMENTS.items():
            median, p90 = median_p90(errors[key])
            assert table[group][name] == (round(median), round(p90)), (group, name)
