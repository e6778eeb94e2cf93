"""Workflow expressions: a small, safe language evaluated over a workflow's state (never ``eval``); the JSON
templates that embed them are in :mod:`.templates`.

Grammar (lowest precedence first; :mod:`.syntax` parses it)::

    expression  := or
    or          := and ("or" and)*                      short-circuit; gives the deciding operand
    and         := not ("and" not)*
    not         := "not" not | comparison
    comparison  := sum [("==" | "!=" | "<" | "<=" | ">" | ">=" | "in" | "not in") sum]   no chaining
    sum         := product (("+" | "-") product)*
    product     := unary (("*" | "/" | "%") unary)*
    unary       := "-" unary | postfix
    postfix     := primary ("." NAME | "[" expression "]")*
    primary     := NUMBER | STRING | true | false | null | "[" [expression ("," expression)*] "]"
                 | "(" expression ")" | FUNCTION "(" arguments ")" | state | input | last_output | output

Values are JSON values. ``state`` is the workflow's variables, ``input`` the workflow's input text,
``last_output`` the last agent's answer and ``output`` that answer parsed as JSON (``null`` when it is not JSON).
Member access and indexing never fail: a missing key, an index out of range or a value of another type gives
``null``. Operators are typed: ``+`` adds numbers or joins two strings or two lists, ``- * / %`` take numbers,
``< <= > >=`` compare two numbers or two strings, ``in`` looks for a substring, a list item or an object key;
anything else is an :class:`ExpressionError` naming the operator and the types. ``==`` compares any two values
(``1 == true`` is false). Functions: ``len lower upper contains startswith endswith number string json``.

Every string or list a step produces has at most ``MAX_VALUE_SIZE`` characters or items, and integers stay within
64 bits, so no expression, however often a loop repeats it, grows a value without bound; and the evaluations that
share a :class:`WorkBudget` (the machine gives one to each step) do at most ``MAX_WORK_UNITS`` units of work.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from switchyard.agents.workflows.syntax import (
    MAX_INTEGER,
    Binary,
    Call,
    ExpressionError,
    Index,
    ListDisplay,
    Literal,
    Logical,
    Member,
    Name,
    Node,
    Unary,
    parse_tree,
)

__all__ = [
    "MAX_VALUE_SIZE",
    "MAX_WORK_UNITS",
    "Expression",
    "ExpressionError",
    "Scope",
    "WorkBudget",
    "json_size",
    "parse",
    "parse_json",
    "to_text",
    "truthy",
    "type_name",
]

MAX_VALUE_SIZE = 100_000  # characters of a string, items of a list
# ~0.2 s of one core at worst: a unit is about a character or item copied or compared at C speed, an expression node;
# a Python-speed walk over a list costs 2 units an item, a nested comparison 4
MAX_WORK_UNITS = 1_000_000
_NUMBER_TEXT = re.compile(r"\s*-?\d+(\.\d+)?([eE][+-]?\d+)?\s*")


class WorkBudget:
    """The work that evaluations may still do: shared by every evaluation of one step of a workflow, so that no
    step (however many nodes and loop iterations it runs) holds a shared worker's core for long."""

    def __init__(self, units: int = MAX_WORK_UNITS) -> None:
        self.units = units
        self.remaining = units

    def spend(self, units: int) -> None:
        """Take ``units``; raises :class:`ExpressionError` once more than the budget was taken."""
        self.remaining -= units
        if self.remaining < 0:
            raise ExpressionError(f"the expressions did more than {self.units:,} units of work in one step")


@dataclass(frozen=True)
class Scope:
    """What an expression can see: the workflow's variables, its input text and the last agent's answer.

    ``budget`` bounds the work of every evaluation in this scope together (a fresh one by default)."""

    state: Mapping[str, Any]
    input: str
    last_output: str | None = None
    budget: WorkBudget = field(default_factory=WorkBudget, compare=False, repr=False)

    @functools.cached_property
    def output(self) -> Any:
        """The last agent's answer parsed as JSON, or ``None`` when there is none or it is not JSON (parsed once, on
        first use, at the cost of its length)."""
        if self.last_output is None:
            return None
        self.budget.spend(len(self.last_output))
        return parse_json(self.last_output)


@dataclass(frozen=True)
class Expression:
    """A parsed expression, ready to be evaluated any number of times (see :func:`parse`)."""

    text: str
    tree: Node

    def evaluate(self, scope: Scope) -> Any:
        """The expression's value in ``scope``; raises :class:`ExpressionError` when evaluation fails."""
        try:
            return _evaluate(self.tree, scope)
        except RecursionError:
            raise ExpressionError("a value is nested too deeply") from None


@functools.lru_cache(maxsize=1024)
def parse(text: str) -> Expression:
    """Parse ``text``; raises :class:`ExpressionError` (with the position) when it is no valid expression."""
    return Expression(text, parse_tree(text))


def truthy(value: Any) -> bool:
    """Whether a value counts as true: everything but ``null``, ``false``, ``0``, ``""``, ``[]`` and ``{}``."""
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, int | float):
        return value != 0
    if isinstance(value, str | list | Mapping):
        return len(value) > 0
    return True


def to_text(value: Any) -> str:
    """A value as text (the ``string`` function): strings as they are, ``null`` as ``""``, ``true``/``false``,
    numbers and lists and objects as JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if json_size(value, past=MAX_VALUE_SIZE) > MAX_VALUE_SIZE:  # refused before any of it is written
        raise ExpressionError(f"a string would be longer than {MAX_VALUE_SIZE:,} characters")
    return _bounded(json.dumps(value, ensure_ascii=False, default=_unknown))


def json_size(value: Any, *, past: int) -> int:
    """A lower bound of the length of ``value`` as JSON text (its strings' and keys' lengths, a character a value
    or separator), counting stopped once past ``past``: checked before a large value is written out."""
    size, pending = 0, [value]
    while pending and size <= past:
        item = pending.pop()
        size += 1
        if isinstance(item, str):
            size += len(item)
        elif isinstance(item, list):
            size += len(item)
            pending.extend(item)
        elif isinstance(item, Mapping):
            size += sum(len(key) + 2 for key in item)
            pending.extend(item.values())
    return size


def parse_json(text: str, default: Any = None) -> Any:
    """``text`` parsed as JSON, or ``default`` when it is not JSON (``NaN`` and ``Infinity`` are not JSON)."""
    try:
        return json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return default


def type_name(value: Any) -> str:
    """A value's type as the language names it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _unknown(value: Any) -> Any:
    raise ExpressionError(f"a {type(value).__name__} is no JSON value")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _bounded(text: str) -> str:
    if len(text) > MAX_VALUE_SIZE:
        raise ExpressionError(f"a string would be longer than {MAX_VALUE_SIZE:,} characters")
    return text


def _in_range(value: int | float, position: int) -> int | float:
    if isinstance(value, int) and abs(value) > MAX_INTEGER:
        raise ExpressionError(f"integer result is out of range (at most {MAX_INTEGER} in magnitude)", position)
    if isinstance(value, float) and not math.isfinite(value):
        raise ExpressionError("number result is out of range", position)
    return value


def _evaluate(node: Node, scope: Scope) -> Any:
    budget = scope.budget
    budget.spend(1)
    match node:
        case Literal(value):
            return value
        case Name("state"):
            return dict(scope.state)
        case Name("input"):
            return scope.input
        case Name("last_output"):
            return scope.last_output
        case Name(_):
            return scope.output
        case Member(target, key):
            return _lookup(_evaluate(target, scope), key)
        case Index(target, index):
            return _lookup(_evaluate(target, scope), _evaluate(index, scope))
        case ListDisplay(items):
            return [_evaluate(item, scope) for item in items]
        case Logical(op, left, right):
            value = _evaluate(left, scope)
            decided = truthy(value) if op == "or" else not truthy(value)
            return value if decided else _evaluate(right, scope)
        case Unary("not", operand, _):
            return not truthy(_evaluate(operand, scope))
        case Unary(_, operand, position):
            value = _evaluate(operand, scope)
            if not _is_number(value):
                raise ExpressionError(f"unary - needs a number, got {type_name(value)}", position)
            return _in_range(-value, position)
        case Binary(op, left, right, position):
            return _binary(op, _evaluate(left, scope), _evaluate(right, scope), position, budget)
        case Call(function, args, position):
            values = [_evaluate(arg, scope) for arg in args]
            try:
                if function not in _SELF_CHARGING:
                    budget.spend(sum(len(v) if isinstance(v, str | list | Mapping) else 1 for v in values))
                return _FUNCTIONS[function](budget, *values)
            except ExpressionError as exc:
                raise ExpressionError(f"{function}(): {exc.message}", position) from None
    raise AssertionError(f"unknown node {node!r}")  # pragma: no cover


def _lookup(container: Any, key: Any) -> Any:
    """``container[key]`` for JSON objects (string keys), lists and strings (integer indices); else ``None``."""
    if isinstance(container, Mapping):
        return container.get(key) if isinstance(key, str) else None
    if isinstance(container, list | str) and isinstance(key, int) and not isinstance(key, bool):
        return container[key] if -len(container) <= key < len(container) else None
    return None


def _binary(op: str, left: Any, right: Any, position: int, budget: WorkBudget) -> Any:
    if op == "==":
        return _equal(left, right, budget)
    if op == "!=":
        return not _equal(left, right, budget)
    if op in ("in", "not in"):
        return _contains(right, left, op, position, budget) == (op == "in")
    if op == "+" and isinstance(left, str | list) and type(left) is type(right):
        size = len(left) + len(right)
        if size > MAX_VALUE_SIZE:
            what, unit = ("string", "characters") if isinstance(left, str) else ("list", "items")
            raise ExpressionError(f"a {what} would be longer than {MAX_VALUE_SIZE:,} {unit}", position)
        budget.spend(size)
        return _ARITHMETIC["+"](left, right)
    if op in ("<", "<=", ">", ">=") and (
        (_is_number(left) and _is_number(right)) or (isinstance(left, str) and isinstance(right, str))
    ):
        budget.spend(min(len(left), len(right)) if isinstance(left, str) else 1)
        return _COMPARE[op](left, right)
    if op in _ARITHMETIC and _is_number(left) and _is_number(right):
        if op in ("/", "%") and right == 0:
            raise ExpressionError(f"division by zero ({op})", position)
        return _in_range(_ARITHMETIC[op](left, right), position)
    raise ExpressionError(f"cannot apply {op} to {type_name(left)} and {type_name(right)}", position)


def _equal(left: Any, right: Any, budget: WorkBudget) -> bool:
    """Equality by JSON type: numbers by value, booleans only with booleans, lists and objects member by member.

    Python's own ``==`` (at C speed) is looser (``1 == True``), so where it finds two values unequal they are;
    only where it finds them equal are the members' types checked, a Python-speed walk that costs more."""
    budget.spend(4)
    if left is right:
        return True
    if type(left) is not type(right):
        return _is_number(left) and _is_number(right) and bool(left == right)
    if isinstance(left, list):
        budget.spend(len(left))
        if left != right:
            return False
        budget.spend(2 * len(left))
        return all(_same(a, b, budget) for a, b in zip(left, right, strict=True))
    if isinstance(left, dict):
        budget.spend(len(left))
        if left != right:
            return False
        budget.spend(2 * len(left))
        return all(_same(left[k], right[k], budget) for k in left)
    if isinstance(left, str):
        budget.spend(min(len(left), len(right)))
    return bool(left == right)


def _same(left: Any, right: Any, budget: WorkBudget) -> bool:
    """Whether two members that Python finds equal are equal by JSON type (a quick path for flat values)."""
    kind = type(left)
    return (kind is type(right) and kind in _FLAT) or _equal(left, right, budget)


_FLAT = frozenset({str, int, float, bool, type(None)})


def _contains(container: Any, item: Any, op: str, position: int, budget: WorkBudget) -> bool:
    if isinstance(container, str) and isinstance(item, str):
        budget.spend(len(container))
        return item in container
    if isinstance(container, list):
        budget.spend(len(container))
        if isinstance(item, str) or item is None:
            return item in container  # only a string equals a string, only null equals null
        if isinstance(item, bool):
            return any(member is item for member in container)
        if item not in container:  # Python's equality is looser than ours
            return False
        budget.spend(2 * len(container))
        if _is_number(item):
            return any(_is_number(member) and member == item for member in container)
        return any(_equal(member, item, budget) for member in container)
    if isinstance(container, Mapping) and isinstance(item, str):
        return item in container
    if container is None:
        return False
    raise ExpressionError(f"cannot apply {op} to {type_name(item)} and {type_name(container)}", position)


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}
_ARITHMETIC: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
    "%": lambda a, b: a % b,
}


# -- functions (each is given the work budget first) -----------------------------------------------------------


def _text_argument(value: Any) -> str:
    if not isinstance(value, str):
        raise ExpressionError(f"needs a string, got {type_name(value)}")
    return value


def _len(budget: WorkBudget, value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, str | list | Mapping):
        return len(value)
    raise ExpressionError(f"needs a string, list or object, got {type_name(value)}")


def _number_of(budget: WorkBudget, value: Any) -> int | float | None:
    """A number, or the number a text spells (``null`` when it spells none)."""
    if _is_number(value):
        return value  # type: ignore[no-any-return]
    if not isinstance(value, str) or len(value) > 400 or not _NUMBER_TEXT.fullmatch(value):
        return None
    number: int | float = float(value) if any(c in value for c in ".eE") else int(value)
    return _in_range(number, 0)


def _string(budget: WorkBudget, value: Any) -> str:
    budget.spend(json_size(value, past=MAX_VALUE_SIZE))
    return to_text(value)


def _json(budget: WorkBudget, value: Any) -> Any:
    return None if value is None else parse_json(_text_argument(value))


_SELF_CHARGING = frozenset({"contains", "len", "string"})  # the others cost the size of their arguments
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "len": _len,
    "lower": lambda budget, s: _bounded(_text_argument(s).lower()),
    "upper": lambda budget, s: _bounded(_text_argument(s).upper()),
    "contains": lambda budget, container, item: _contains(container, item, "contains", 0, budget),
    "startswith": lambda budget, s, p: _text_argument(s).startswith(_text_argument(p)),
    "endswith": lambda budget, s, p: _text_argument(s).endswith(_text_argument(p)),
    "number": _number_of,
    "string": _string,
    "json": _json,
}
