"""Errors raised by the simulator: unknown catalog names and impossible configurations."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["ConfigurationError", "DoesNotFitError", "SimulatorError", "UnknownNameError"]


class SimulatorError(Exception):
    """Base class of every error the simulator raises on purpose."""


class UnknownNameError(SimulatorError, KeyError):
    """A model, chip or instance name that is not in the catalog."""

    def __init__(self, kind: str, name: str, known: Iterable[str]) -> None:
        known_list = sorted(known)
        lowered = {k.lower(): k for k in known_list}
        close = [lowered[m] for m in difflib.get_close_matches(name.lower(), list(lowered), n=5, cutoff=0.4)]
        # Substring hits ("70b" -> every 70B model) help more than edit distance for short queries.
        close += [k for k in known_list if name.lower() in k.lower() and k not in close][:5]
        hint = f" Did you mean: {', '.join(close)}?" if close else f" Known: {', '.join(known_list)}."
        self.kind = kind
        self.name = name
        self.close_matches = close
        super().__init__(f"unknown {kind} {name!r}.{hint}")

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0])


class ConfigurationError(SimulatorError, ValueError):
    """A deployment that cannot run as asked (e.g. a TP degree the model cannot be split by)."""


class DoesNotFitError(ConfigurationError):
    """Weights or KV cache do not fit in the replica's device memory."""
