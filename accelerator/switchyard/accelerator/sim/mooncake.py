"""The Mooncake trace format: JSON lines of `timestamp` (ms), `input_length`, `output_length` and `hash_ids`
(hash-chain ids of the prompt's 512-token blocks), as Moonshot AI published its Kimi traces."""

from __future__ import annotations

import json
from pathlib import Path

from switchyard.accelerator.sim.requests import Request

__all__ = ["MOONCAKE_BLOCK_TOKENS", "load_mooncake_trace"]

MOONCAKE_BLOCK_TOKENS = 512


def _int(record: dict[str, object], key: str) -> int:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise ValueError(f"{key} must be a whole number, got {value!r}")
    return int(value)


def load_mooncake_trace(path: str | Path, limit: int | None = None) -> list[Request]:
    """Requests of a Mooncake JSON-lines trace, arriving at `timestamp` / 1000 seconds, in arrival order.

    Blank lines are skipped; any other line that is not such an object is an error naming the line. Zero-token
    outputs are served as one token.
    """
    out: list[Request] = []
    with Path(path).open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if limit is not None and len(out) >= limit:
                break
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise ValueError("a line must hold one JSON object")
                hashes = record.get("hash_ids")
                if not isinstance(hashes, list) or not all(isinstance(h, int) for h in hashes):
                    raise ValueError("hash_ids must be a list of integers")
                arrival_ms, prompt, output = (_int(record, k) for k in ("timestamp", "input_length", "output_length"))
                if arrival_ms < 0 or prompt < 1 or output < 0:
                    raise ValueError("timestamp and output_length must be >= 0 and input_length >= 1")
            except ValueError as exc:  # json.JSONDecodeError is a ValueError
                raise ValueError(f"{path}, line {number}: {exc}") from exc
            out.append(
                Request(
                    len(out),
                    arrival_ms / 1e3,
                    prompt,
                    max(1, output),
                    block_hashes=tuple(hashes),
                    hash_block_tokens=MOONCAKE_BLOCK_TOKENS,
                )
            )
    out.sort(key=lambda r: (r.arrival_s, r.request_id))
    return out
