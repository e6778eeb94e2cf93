"""The HTML report of a configuration search: one self-contained page, the front plotted and labelled, the tables
matching the result, the SLO sensitivity, published claims checked where both families were searched, text
escaped."""

from __future__ import annotations

import dataclasses
import re
from html.parser import HTMLParser

import pytest

from switchyard.accelerator.sim.price_claims import ClaimSide, ClaimStanding, PriceClaim, load_price_claims
from switchyard.accelerator.sim.search import SearchResult, SearchSettings, Slo, search
from switchyard.accelerator.sim.search_report import front_label, report_family, search_html
from switchyard.accelerator.sim.search_space import Skipped, configuration_space
from switchyard.accelerator.sim.workloads import poisson_workload

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
SLO = Slo(ttft_ms=1000.0, tpot_ms=60.0)
SETTINGS = SearchSettings(requests=40, max_steps=6)
# trn3 has no price (skipped), inf2 at TP1 does not fit (skipped); p5en and trn2 let the Trn2 vs P5e/P5en claim check.
INSTANCES = ["trn2.48xlarge", "inf2.48xlarge", "p5en.48xlarge", "trn3-gen1-ultraserver"]


def run(slo: Slo, tps: list[int]) -> SearchResult:
    space, skipped = configuration_space(MODEL, INSTANCES, tps=tps)
    workload = poisson_workload(40, 2.0, 512, 128, seed=1)
    return search(
        space, workload, slo, SETTINGS, skipped=skipped, workload_description={"spec": "poisson"}, prune=False
    )


@pytest.fixture(scope="module")
def result() -> SearchResult:
    return run(SLO, [1, 4, 8])


class Page(HTMLParser):
    """The tags, attributes, text and table rows (by table id) of a page."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str]] = []
        self.tables: dict[str, list[list[str]]] = {}
        self.svg_texts: list[str] = []
        self._table: str | None = None
        self._cell: list[str] | None = None
        self._in: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self._in.append(tag)
        self.attrs += [(k, v or "") for k, v in attrs]
        if tag == "table":
            self._table = dict(attrs)["id"] or ""
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        self._in.pop()
        if tag == "table":
            self._table = None
        elif tag in ("td", "th") and self._cell is not None and self._table is not None:
            self.tables[self._table][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._in and self._in[-1] == "text" and "svg" in self._in:
            self.svg_texts.append(data)

    def rows(self, table_id: str) -> list[list[str]]:
        return self.tables[table_id][1:]  # without the header


def test_the_page_is_one_html_document_that_loads_nothing(result: SearchResult) -> None:
    text = search_html(result)
    page = Page(text)
    assert text.startswith("<!doctype html>")
    assert text.count("<html") == 1
    assert text.rstrip().endswith("</html>")
    assert page.tags.count("svg") == 1
    assert not {"script", "link", "img", "iframe", "object", "embed", "a"} & set(page.tags)
    assert not [k for k, _ in page.attrs if k in ("src", "href", "xlink:href", "srcset", "action")]
    svg_namespace = "http://www.w3.org/2000/svg"  # a name (the plot saved alone is a valid SVG file), never fetched
    assert not [v for _, v in page.attrs if ("http" in v and v != svg_namespace) or "url(" in v]
    assert "url(" not in text
    assert "@import" not in text
    # The only addresses on the page are the claims' sources, shown as text.
    sources = " ".join(c.source for c in load_price_claims())
    addresses = re.findall(r"https?://[^\s<\"'()]+", text.replace(f'xmlns="{svg_namespace}"', ""))
    assert addresses
    assert all(a in sources for a in addresses)


def test_every_evaluated_configuration_that_meets_the_slo_is_a_point_and_the_front_is_labelled(
    result: SearchResult,
) -> None:
    text = search_html(result)
    feasible = [r for r in result.evaluated if r.feasible]
    assert len(result.pareto) > 1
    assert len(feasible) > len(result.pareto)
    assert len(re.findall(r"<circle [^>]*><title>", text)) == len(feasible)  # legend dots have no title
    assert len(re.findall(r"<circle [^>]*stroke=\"black\"[^>]*><title>", text)) == len(result.pareto)
    labels = Page(text).svg_texts
    for r in result.pareto:
        assert front_label(r) in labels
    assert '<path d="M' in text  # the step line


def test_the_tables_of_cheapest_configurations_match_the_result(result: SearchResult) -> None:
    page = Page(search_html(result))
    rows = page.rows("best-per-instance")
    assert [(row[0], row[1], row[7]) for row in rows] == [
        (name, str(r.configuration.tp), str(r.cost_per_million_tokens_usd))
        for name, r in result.best_per_instance.items()
    ]
    assert set(result.best_per_instance) == {"trn2.48xlarge", "inf2.48xlarge", "p5en.48xlarge"}
    families = {row[0]: row[8] for row in page.rows("best-per-family")}
    assert families.keys() == {"trn2", "inf2", "GPU"}
    for family, cost in families.items():
        assert cost == str(
            min(
                r.cost_per_million_tokens_usd or 0
                for name, r in result.best_per_instance.items()
                if report_family(name) == family
            )
        )


def test_the_sensitivity_section_lists_each_slo_given(result: SearchResult) -> None:
    assert "No other SLO was searched" in search_html(result)
    tighter, looser = Slo(ttft_ms=150.0, tpot_ms=60.0), Slo(ttft_ms=2000.0, tpot_ms=60.0)
    pairs = [(tighter, run(tighter, [8])), (looser, run(looser, [8]))]
    page = Page(search_html(result, sensitivity=pairs))
    rows = page.rows("sensitivity")
    assert [row[0] for row in rows] == [
        "p90 TTFT <= 1000 ms and TPOT <= 60 ms (this search)",
        "p90 TTFT <= 150 ms and TPOT <= 60 ms",
        "p90 TTFT <= 2000 ms and TPOT <= 60 ms",
    ]
    head = page.tables["sensitivity"][0]
    gpu = pairs[1][1].best_per_instance["p5en.48xlarge"]
    assert rows[2][head.index("GPU")] == f"${gpu.cost_per_million_tokens_usd} ({front_label(gpu)})"


def claim_check(text: str, claim_start: str) -> str:
    (row,) = [row for row in Page(text).rows("claims") if row[0].startswith(claim_start)]
    return row[-1]


def test_a_claim_is_checked_when_both_its_families_were_searched_and_says_why_not_otherwise(
    result: SearchResult,
) -> None:
    text = search_html(result)
    trn2, p5en = result.best_per_instance["trn2.48xlarge"], result.best_per_instance["p5en.48xlarge"]
    assert trn2.cost_per_million_tokens_usd is not None
    assert p5en.cost_per_million_tokens_usd is not None
    ratio = float(trn2.cost_per_million_tokens_usd) / float(p5en.cost_per_million_tokens_usd)
    found = claim_check(text, 'Trn2 "30-40%')
    assert f"simulated ${trn2.cost_per_million_tokens_usd}" in found
    assert f"vs ${p5en.cost_per_million_tokens_usd}" in found
    assert found.endswith(f"ratio Trn2/P5e/P5en {ratio:.2f}")
    assert claim_check(text, '"Inf2 offers') == "not checked: Inf1 not in this search"
    assert claim_check(text, "Mistral-7B").startswith("not checked: the claim is for Mistral-7B-Instruct-v0.3")


def test_a_side_whose_instances_have_no_price_is_marked_skipped(result: SearchResult) -> None:
    claim = PriceClaim(
        claim="Trn3 is cheaper than Trn2",
        scope="test",
        source="none",
        note="",
        standing=ClaimStanding.SECONDARY,
        compares=(ClaimSide("Trn3", ("trn3",)), ClaimSide("Trn2", ("trn2",))),
        model=None,
        claim_prices="not stated",
    )
    text = search_html(result, claims=[claim])
    assert claim_check(text, "Trn3 is cheaper") == "no price: skipped (Trn3)"
    prices = {row[0]: (row[1], row[2]) for row in Page(text).rows("prices")}
    assert prices["trn3-gen1-ultraserver"] == ("no price: skipped", "not published")
    assert prices["trn2.48xlarge"] == ("$46.98/h", "assumed (estimate)")
    assert prices["inf2.48xlarge"] == ("$12.9813/h", "published")


def test_the_repository_claims_name_their_source_standing_and_two_sides() -> None:
    claims = load_price_claims()
    assert len(claims) >= 4
    for c in claims:
        assert c.claim
        assert c.scope
        assert c.source
        assert c.claim_prices
        assert all(side.label and side.families for side in c.compares)
    assert {c.standing for c in claims} == set(ClaimStanding)


def test_configurations_that_meet_the_slo_at_no_rate_are_listed_not_plotted() -> None:
    impossible = run(Slo(ttft_ms=1.0, tpot_ms=60.0), [8])
    assert impossible.evaluated
    assert not any(r.feasible for r in impossible.evaluated)
    text = search_html(impossible)
    assert "<svg" not in text
    assert "nothing to plot" in text
    rows = Page(text).rows("infeasible")
    assert [(row[0], row[1]) for row in rows] == [(r.configuration.instance, "8") for r in impossible.evaluated]


def test_text_from_the_user_is_escaped(result: SearchResult) -> None:
    hostile = dataclasses.replace(
        result,
        model="<script>alert(1)</script>",
        workload={"spec": "<img src=x onerror=alert(1)>"},
        skipped=[Skipped("trn3-gen1-ultraserver", 1, "bf16", "<b onclick=alert(1)>no</b>")],
    )
    text = search_html(hostile)
    page = Page(text)
    assert not {"script", "img", "b"} & set(page.tags)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "&lt;img src=x onerror=alert(1)&gt;" in text
    assert "&lt;b onclick=alert(1)&gt;no&lt;/b&gt;" in text
