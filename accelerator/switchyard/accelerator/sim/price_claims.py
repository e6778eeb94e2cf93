"""Published price-performance claims that compare two instance families (``data/price_claims.json``, copied with
their sources from the Neuron 2026 collection's ``price_claims.md``), for a configuration search to check."""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

__all__ = ["ClaimSide", "ClaimStanding", "PriceClaim", "aws_family", "load_price_claims"]


class ClaimStanding(enum.StrEnum):
    """Who makes a claim: AWS (or AWS-authored text), third parties reporting it, or a model contributor."""

    OFFICIAL = "official"
    SECONDARY = "secondary"
    CONTRIBUTOR = "contributor"


@dataclass(frozen=True, slots=True)
class ClaimSide:
    """One side of a comparison: a label as the claim words it and the AWS instance families it covers."""

    label: str
    families: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PriceClaim:
    """A published price-performance claim comparing two instance families (data/price_claims.json)."""

    claim: str
    scope: str
    source: str  # as the collection gives it: URLs and repository paths pinned to a commit, as text
    note: str
    standing: ClaimStanding
    compares: tuple[ClaimSide, ClaimSide]
    model: str | None  # the model the claim was measured on; None when it is not model-specific
    claim_prices: str  # the prices behind the claim's own figures, as its source states them


@cache
def load_price_claims() -> tuple[PriceClaim, ...]:
    """The repository's table of claims."""
    text = resources.files("switchyard.accelerator.sim").joinpath("data/price_claims.json").read_text("utf-8")
    return tuple(
        PriceClaim(
            claim=c["claim"],
            scope=c["scope"],
            source=c["source"],
            note=c["note"],
            standing=ClaimStanding(c["standing"]),
            compares=(_side(c["compares"][0]), _side(c["compares"][1])),
            model=c["model"],
            claim_prices=c["claim_prices"],
        )
        for c in json.loads(text)["claims"]
    )


def _side(d: dict[str, Any]) -> ClaimSide:
    return ClaimSide(d["label"], tuple(d["families"]))


def aws_family(instance: str) -> str:
    """The instance family as AWS names it: the name before its first '.' or '-' (p5en.48xlarge: p5en)."""
    return re.split(r"[.-]", instance, maxsplit=1)[0]
