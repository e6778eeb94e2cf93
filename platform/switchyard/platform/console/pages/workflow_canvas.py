"""The workflow canvas: a graph drawn as SVG on the server (no inline styles: positions are attributes, looks are
classes), nodes as labelled boxes in rows by their depth from the start, connections as arrows named by their branch.

The spec has no place for a node's position, so the layout is automatic: each node sits in the row of its first
reach from ``start`` (breadth first), in the order the list shows it; a connection to a node further down is a
straight arrow, one within a row a short one across, one back up (a loop) an arc along the right.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from switchyard.platform.console.pages.workflow_fields import NODE_TYPES

__all__ = ["Arrow", "Box", "Canvas", "draw"]

BOX_W, BOX_H, GAP_X, GAP_Y, MARGIN = 160, 48, 28, 56, 20
_LABEL_CHARS = 20


@dataclass(frozen=True, slots=True)
class Box:
    """A node: its place in the list (``index``), id, what it shows, and where it is drawn."""

    index: int
    node_id: str
    title: str
    kind: str
    x: int
    y: int
    start: bool
    state: str  # "", "active" (the run is there), "passed" (the run went through it)


@dataclass(frozen=True, slots=True)
class Arrow:
    """A connection's path, and its branch's name (empty for ``next``) with where it reads: ``anchor`` ``end``
    puts it left of its point, so two branches leaving one box side by side name themselves apart."""

    path: str
    label: str
    label_x: int
    label_y: int
    anchor: str = "start"


@dataclass(frozen=True, slots=True)
class Canvas:
    width: int
    height: int
    boxes: list[Box]
    arrows: list[Arrow]
    box_width: int = BOX_W
    box_height: int = BOX_H


def _short(text: str) -> str:
    return text if len(text) <= _LABEL_CHARS else text[: _LABEL_CHARS - 1] + "…"


def _depths(start: str, edges: Mapping[str, Sequence[tuple[str, str]]]) -> dict[str, int]:
    depth, frontier = {start: 0}, [start]
    while frontier:
        following = []
        for node_id in frontier:
            for _, target in edges.get(node_id, ()):
                if target in edges and target not in depth:
                    depth[target] = depth[node_id] + 1
                    following.append(target)
        frontier = following
    return depth


def draw(
    nodes: Sequence[Mapping[str, str]],
    start: str,
    *,
    active: str | None = None,
    passed: frozenset[str] = frozenset(),
) -> Canvas:
    """The canvas of ``nodes`` (the editor's rows: ``type``, ``id``, ``name`` and each connection's target id)
    entered at ``start``; ``active`` and ``passed`` mark where a run is and where it went."""
    edges: dict[str, list[tuple[str, str]]] = {}
    for row in nodes:
        kind = NODE_TYPES.get(row["type"])
        edges.setdefault(row["id"], []).extend(
            (key, row.get(key, "")) for key, _ in (kind.edges if kind else []) if row.get(key)
        )
    depth = _depths(start, edges)
    deepest = max(depth.values(), default=-1)
    rows: dict[int, list[int]] = {}
    for index, row in enumerate(nodes):
        rows.setdefault(depth.get(row["id"], deepest + 1), []).append(index)  # unreachable: a row of their own
    widest = max((len(r) for r in rows.values()), default=1)
    width = MARGIN * 2 + widest * BOX_W + (widest - 1) * GAP_X + 60  # room on the right for loops' arcs
    height = MARGIN * 2 + len(rows) * BOX_H + max(len(rows) - 1, 0) * GAP_Y
    places: dict[str, tuple[int, int]] = {}
    boxes: list[Box] = []
    for level, (_, indexes) in enumerate(sorted(rows.items())):
        row_width = len(indexes) * BOX_W + (len(indexes) - 1) * GAP_X
        left = MARGIN + (widest * BOX_W + (widest - 1) * GAP_X - row_width) // 2
        for position, index in enumerate(indexes):
            row = nodes[index]
            x, y = left + position * (BOX_W + GAP_X), MARGIN + level * (BOX_H + GAP_Y)
            places.setdefault(row["id"], (x, y))
            mark = "active" if row["id"] == active else "passed" if row["id"] in passed else ""
            label = NODE_TYPES[row["type"]].label if row["type"] in NODE_TYPES else row["type"]
            title = _short(row.get("name") or row["id"] or "(no id)")
            boxes.append(Box(index, row["id"], title, label, x, y, row["id"] == start, mark))
    arrows: list[Arrow] = []
    for source, targets in edges.items():
        drawn = [(key, places[target]) for key, target in targets if source in places and target in places]
        drawn.sort(key=lambda pair: pair[1][0])  # leave the box in the order the targets stand: no crossing
        arrows.extend(_arrow(places[source], place, key, len(drawn), n) for n, (key, place) in enumerate(drawn))
    right = max([b.x + BOX_W for b in boxes] + [a.label_x + 8 * len(a.label) for a in arrows], default=0)
    return Canvas(max(width, right + MARGIN), height, boxes, arrows)


def _arrow(source: tuple[int, int], target: tuple[int, int], key: str, count: int, n: int) -> Arrow:
    """An arrow from the box at ``source`` to the one at ``target`` (the ``n``-th of ``count`` leaving ``source``,
    spread along its edge): down to a lower row, across to a box of the same row, else an arc on the right."""
    label = "" if key == "next" else key
    (sx, sy), (tx, ty) = source, target
    if ty > sy:
        x0 = sx + BOX_W * (n + 1) // (count + 1)
        y0, x1, y1 = sy + BOX_H, tx + BOX_W // 2, ty - 2
        x, y = x0 + (x1 - x0) * 2 // 5, y0 + (y1 - y0) * 2 // 5  # nearer the box it leaves
        left = 2 * n < count - 1
        return Arrow(f"M{x0},{y0} L{x1},{y1}", label, x - 4 if left else x + 4, y, "end" if left else "start")
    if ty == sy and tx != sx:
        y0 = sy + BOX_H * (n + 1) // (count + 1)
        x0, x1 = (sx, tx + BOX_W + 2) if tx < sx else (sx + BOX_W, tx - 2)
        return Arrow(f"M{x0},{y0} L{x1},{y0}", label, min(x0, x1) + 4, y0 - 4)
    x0, y0 = sx + BOX_W, sy + BOX_H * (n + 1) // (count + 1)
    x1, y1 = tx + BOX_W + 2, ty + BOX_H // 2
    reach = max(x0, x1) + 40 + 10 * n
    return Arrow(f"M{x0},{y0} C{reach},{y0} {reach},{y1} {x1},{y1}", label, reach + 2, (y0 + y1) // 2)
