"""The heap a serving process holds once it has started is set aside from the garbage collector's full passes.

An API or fleet process holds about 300,000 objects once its modules, schemas and pools are built, and none of
them become garbage. A request that allocates many containers (a 107 KB JSON schema decoded, validated, stored
and read back is some 90,000 dicts) makes CPython run full collections, each walking every one of those objects:
about 175 ms a pass on the loop that serves every tenant (0.6 passes per such request, measured). Frozen, a full
pass walks only what was allocated since startup (about 12 ms).
"""

from __future__ import annotations

import gc

__all__ = ["freeze_startup_heap"]


def freeze_startup_heap() -> int:
    """Collect startup's garbage, then move every object alive now out of the collector's generations, for good
    (they are never freed, which is what a process's startup objects are anyway). Returns how many are frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
