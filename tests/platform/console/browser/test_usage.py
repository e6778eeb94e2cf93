"""The usage page in a real browser, from the served console's real usage: grouped by model, the chart drawn with
its days inside their UTC day and a legend that names the models without hovering, money for an admin, and no
sideways scroll on a phone."""

from __future__ import annotations

from typing import Any

import pytest

from tests.platform.console.browser.served import MODELS, Console, sign_in

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 800}, {"width": 390, "height": 844}])
def test_an_admin_reads_usage_by_model_in_chip_hours_and_money(
    console: Console, page: Any, viewport: dict[str, int]
) -> None:
    page.set_viewport_size(viewport)
    sign_in(page, console, "admin")
    page.goto(f"{console.url}/console/usage?group=model")
    page.locator("#usage-chart canvas").first.wait_for()  # uPlot drew it
    legend = page.locator("#usage-chart .u-legend").inner_text()
    assert all(model in legend for model in MODELS), legend  # named at once, not "--" until hovered
    rows = page.locator("#usage-groups tbody tr")
    assert rows.count() == len(MODELS)
    assert float(page.locator("#usage-chip-hours").inner_text().replace(",", "")) > 0
    assert page.locator("#usage-cost").inner_text().endswith(" USD")
    widths = page.evaluate("({scroll: document.documentElement.scrollWidth, inner: window.innerWidth})")
    assert widths["scroll"] <= widths["inner"], widths
    suffix = "-phone" if viewport["width"] < 500 else ""
    page.screenshot(path=str(console.shots / f"usage{suffix}.png"), full_page=True)
    assert page.elsewhere == []  # type: ignore[attr-defined]
    assert page.errors == []  # type: ignore[attr-defined]
