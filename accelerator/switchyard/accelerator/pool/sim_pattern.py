"""Strings that match a JSON Schema ``pattern``: a small generator for the common subset of ECMA regular expressions.

The subset: literal characters and escapes (``\\.``, ``\\n``, ``\\t``, ``\\uXXXX``), classes (``[a-z0-9_]``,
``[^...]``), ``\\d \\w \\s`` (and ``\\D \\W \\S`` inside or outside classes), ``.``, quantifiers ``? * + {m} {m,}
{m,n}`` (lazy ones too), groups (``(...)``, ``(?:...)``, ``(?<name>...)``) with alternation ``|``, and the anchors
``^``/``$``. Anything else (look-arounds, back-references, ``\\b``, Unicode properties) is not generated: the
caller keeps its plain value. An unbounded quantifier repeats its minimum plus at most ``MAX_EXTRA_REPEATS``.

Generation is bounded (``MAX_PATTERN_CHARS`` of pattern, ``MAX_GROUP_DEPTH`` of nesting, ``MAX_MATCH_CHARS`` of
output, ``MAX_ATTEMPTS`` strings) and its strings are to be checked with ``matches`` (``re.search``): JSON
Schema's ``pattern`` is unanchored, so a string matches when the expression matches anywhere in it.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["MAX_MATCH_CHARS", "MAX_PATTERN_CHARS", "candidates", "matches"]

MAX_PATTERN_CHARS = 1_000  # longer patterns are not generated from
MAX_GROUP_DEPTH = 32
MAX_MATCH_CHARS = 10_000  # as sim_json's MAX_STRING_CHARS: no generated string is longer
MAX_EXTRA_REPEATS = 3
MAX_GENERATION_STEPS = 4 * MAX_MATCH_CHARS  # nodes visited writing one string
MAX_ATTEMPTS = 8  # strings tried against the length bounds before giving up

_DIGITS = string.digits
_WORD = string.ascii_letters + string.digits + "_"
_PRINTABLE = string.ascii_letters + string.digits + " -_.,"  # what ``.`` and negated classes pick from
_CLASS_ESCAPES = {"d": _DIGITS, "w": _WORD, "s": " "}
_NAMED_GROUP = re.compile(r"\(\?<(?![=!])")
_CHAR_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "0": "\0"}


class Unsupported(Exception):
    """The pattern uses a construct outside the subset (or is malformed): nothing is generated from it."""


@dataclass(frozen=True, slots=True)
class _Chars:
    """One character out of ``choices`` (a negated class or ``.``: printable ASCII it allows)."""

    choices: str


@dataclass(frozen=True, slots=True)
class _Repeat:
    node: _Node
    least: int
    most: int | None


@dataclass(frozen=True, slots=True)
class _Sequence:
    parts: tuple[_Node, ...]


@dataclass(frozen=True, slots=True)
class _Alternatives:
    options: tuple[_Node, ...]


_Node = _Chars | _Repeat | _Sequence | _Alternatives


class _Parser:
    def __init__(self, pattern: str) -> None:
        self.text = pattern
        self.at = 0

    def parse(self) -> _Node:
        node = self._alternatives(0)
        if self.at != len(self.text):
            raise Unsupported(f"unbalanced ) at {self.at}")
        return node

    def _peek(self) -> str:
        return self.text[self.at] if self.at < len(self.text) else ""

    def _take(self) -> str:
        if self.at >= len(self.text):
            raise Unsupported("the pattern ends too early")
        char = self.text[self.at]
        self.at += 1
        return char

    def _alternatives(self, depth: int) -> _Node:
        if depth > MAX_GROUP_DEPTH:
            raise Unsupported("groups nested too deep")
        options = [self._sequence(depth)]
        while self._peek() == "|":
            self.at += 1
            options.append(self._sequence(depth))
        return options[0] if len(options) == 1 else _Alternatives(tuple(options))

    def _sequence(self, depth: int) -> _Node:
        parts: list[_Node] = []
        while self._peek() not in ("", "|", ")"):
            atom = self._atom(depth)
            if atom is not None:
                parts.append(self._quantified(atom))
        return _Sequence(tuple(parts))

    def _atom(self, depth: int) -> _Node | None:
        char = self._take()
        if char in "^$":
            return None  # an anchor: the string is the match itself, so start and end hold
        if char == "(":
            if self._peek() == "?":
                self.at += 1
                kind = self._take()
                if kind == "<" and self._peek() not in "=!":
                    while self._take() != ">":
                        pass
                elif kind != ":":
                    raise Unsupported("look-arounds are not generated")
            node = self._alternatives(depth + 1)
            if self._take() != ")":
                raise Unsupported("unclosed group")
            return node
        if char == "[":
            return self._class()
        if char == ".":
            return _Chars(_PRINTABLE)
        if char == "\\":
            return _Chars(self._escape(in_class=False))
        if char in "*+?{":
            if char == "{" and not re.match(r"\d", self._peek()):
                return _Chars("{")  # a literal brace, as ECMA's Annex B reads it
            raise Unsupported("a quantifier with nothing to repeat")
        return _Chars(char)

    def _escape(self, *, in_class: bool) -> str:
        char = self._take()
        if char in _CLASS_ESCAPES:
            return _CLASS_ESCAPES[char]
        if char in "DWS":
            excluded = _CLASS_ESCAPES[char.lower()]
            return "".join(c for c in _PRINTABLE if c not in excluded)
        if char in _CHAR_ESCAPES:
            return _CHAR_ESCAPES[char]
        if char == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", self.text[self.at : self.at + 4]):
            self.at += 4
            return chr(int(self.text[self.at - 4 : self.at], 16))
        if char == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", self.text[self.at : self.at + 2]):
            self.at += 2
            return chr(int(self.text[self.at - 2 : self.at], 16))
        if char == "b" and in_class:
            return "\b"
        if char.isalnum():
            raise Unsupported(f"\\{char} is not generated")
        return char

    def _class(self) -> _Chars:
        negated = self._peek() == "^"
        if negated:
            self.at += 1
        chars: list[str] = []
        first = True
        while first or self._peek() != "]":
            first = False
            char = self._take()
            members = self._escape(in_class=True) if char == "\\" else char
            if len(members) == 1 and self._peek() == "-" and self.text[self.at + 1 : self.at + 2] not in ("]", ""):
                self.at += 1
                end = self._take()
                last = self._escape(in_class=True) if end == "\\" else end
                if len(last) != 1 or ord(last) < ord(members):
                    raise Unsupported("a bad range in a class")
                members = "".join(chr(c) for c in range(ord(members), min(ord(last), ord(members) + 256) + 1))
            chars.append(members)
        self.at += 1
        allowed = "".join(chars)
        if negated:
            allowed = "".join(c for c in _PRINTABLE if c not in allowed)
        if not allowed:
            raise Unsupported("a class no character matches")
        return _Chars(allowed)

    def _quantified(self, atom: _Node) -> _Node:
        char = self._peek()
        bounds: tuple[int, int | None] | None = None
        if char and char in "*+?":
            self.at += 1
            bounds = {"*": (0, None), "+": (1, None), "?": (0, 1)}[char]
        elif char == "{":
            found = re.compile(r"\{(\d+)(,(\d*))?\}").match(self.text, self.at)
            if found is not None:
                self.at = found.end()
                least = int(found.group(1))
                most = least if found.group(2) is None else int(found.group(3)) if found.group(3) else None
                if most is not None and most < least:
                    raise Unsupported("a quantifier whose bounds cross")
                bounds = (least, most)
        if bounds is None:
            return atom
        if self._peek() == "?":  # lazy: the same strings match
            self.at += 1
        if self._peek() in ("*", "+", "?") or (self._peek() == "{" and re.match(r"\{\d", self.text[self.at :])):
            raise Unsupported("a quantifier of a quantifier")
        return _Repeat(atom, *bounds)


class _Generator:
    """Writes one string of a parsed pattern, in at most ``MAX_GENERATION_STEPS`` steps and ``most_chars``
    characters (an empty group repeated a million times costs steps, not characters)."""

    def __init__(self, rng: random.Random, extra: int, most_chars: int) -> None:
        self.rng = rng
        self.extra = extra
        self.most_chars = most_chars
        self.steps_left = MAX_GENERATION_STEPS
        self.out: list[str] = []

    def write(self, node: _Node) -> None:
        self.steps_left -= 1
        if self.steps_left < 0 or len(self.out) > self.most_chars:
            return
        if isinstance(node, _Chars):
            self.out.append(self.rng.choice(node.choices))
        elif isinstance(node, _Sequence):
            for part in node.parts:
                self.write(part)
        elif isinstance(node, _Alternatives):
            self.write(self.rng.choice(node.options))
        else:
            most = node.least + self.extra if node.most is None else min(node.most, node.least + self.extra)
            for _ in range(self.rng.randint(node.least, most) if self.extra else node.least):
                self.write(node.node)
                if self.steps_left < 0 or len(self.out) > self.most_chars:
                    return


def matches(pattern: str, text: str) -> bool:
    """Whether ``text`` matches ``pattern`` as JSON Schema means it (anywhere in the text), read by Python's ``re``
    with ECMA's named groups (``(?<name>...)``) spelled as Python's; a pattern ``re`` cannot read matches nothing."""
    try:
        return re.search(_NAMED_GROUP.sub("(?P<", pattern), text) is not None
    except (re.error, RecursionError, OverflowError):
        return False


def candidates(
    pattern: str, rng: random.Random, *, shortest: int = 0, most_chars: int = MAX_MATCH_CHARS
) -> Iterator[str]:
    """Up to ``MAX_ATTEMPTS`` strings generated from ``pattern``, padded to ``shortest`` characters (still a match,
    the match being anywhere); none when the pattern is outside the subset. A string that would pass
    ``most_chars`` is cut one character past it (so the caller sees that it did not fit). The first ones repeat a
    little past each quantifier's minimum (readable values), the later ones its minimum only. The caller checks
    them (``matches``): an anchor inside the expression, or padding, can spoil one."""
    if len(pattern) > MAX_PATTERN_CHARS:
        return
    try:
        tree = _Parser(pattern).parse()
    except (Unsupported, RecursionError):
        return
    most_chars = max(0, min(most_chars, MAX_MATCH_CHARS))
    for attempt in range(MAX_ATTEMPTS):
        writer = _Generator(rng, MAX_EXTRA_REPEATS if attempt < MAX_ATTEMPTS // 2 else 0, most_chars)
        writer.write(tree)
        if writer.steps_left < 0:
            continue  # cut short: not a match
        text = "".join(writer.out)
        if len(text) < shortest:
            text += "x" * (min(shortest, most_chars + 1) - len(text))
        yield text[: most_chars + 1]
