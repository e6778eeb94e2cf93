"""The syntax of workflow expressions: a tokenizer and a recursive-descent parser to a tree of frozen nodes.

Tenants write these expressions and a shared worker evaluates them, so parsing is bounded before any work: an
expression has at most ``MAX_EXPRESSION_CHARS`` characters, ``MAX_EXPRESSION_NODES`` nodes and nests at most
``MAX_NESTING`` deep (parentheses, brackets, calls and prefix operators), which also bounds the recursion of the
parser and of the evaluator. There is no ``**`` operator, and nothing here reaches Python objects: names are a
fixed set of roots, functions a fixed table, and member access only ever looks up keys of JSON objects.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from switchyard.agents.errors import AgentsError

__all__ = [
    "FUNCTION_ARITY",
    "MAX_EXPRESSION_CHARS",
    "MAX_EXPRESSION_NODES",
    "MAX_INTEGER",
    "MAX_NESTING",
    "NAMES",
    "Binary",
    "Call",
    "ExpressionError",
    "Index",
    "ListDisplay",
    "Literal",
    "Logical",
    "Member",
    "Name",
    "Node",
    "Unary",
    "parse_tree",
]

MAX_EXPRESSION_CHARS = 2_000
MAX_EXPRESSION_NODES = 300
MAX_NESTING = 50
MAX_INTEGER = 2**63 - 1  # integers stay 64-bit, so repeated multiplication in a loop cannot grow them without end

#: The names an expression may start from.
NAMES = frozenset({"state", "input", "last_output", "output"})
#: The functions an expression may call, with their number of arguments.
FUNCTION_ARITY = {
    "len": 1,
    "lower": 1,
    "upper": 1,
    "contains": 2,
    "startswith": 2,
    "endswith": 2,
    "number": 1,
    "string": 1,
    "json": 1,
}
_KEYWORDS = frozenset({"and", "or", "not", "in", "true", "false", "null"})
_OPERATORS = ("==", "!=", "<=", ">=", "<", ">", "+", "-", "*", "/", "%", "(", ")", "[", "]", ",", ".")
_MISTAKES = {"**": "there is no ** operator", "&&": "use and", "||": "use or", "!": "use not", "=": "use == to compare"}
_NUMBER = re.compile(r"\d+(\.\d+)?([eE][+-]?\d+)?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t"}
_COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">=", "in", "not in"})


class ExpressionError(AgentsError):
    """An expression or template that does not parse, or whose evaluation failed (a type error, division by zero,
    a value past a bound). ``position`` is the character offset in the expression, when known."""

    def __init__(self, message: str, position: int | None = None) -> None:
        super().__init__(message if position is None else f"{message} (at position {position})")
        self.message = message
        self.position = position


@dataclass(frozen=True, slots=True)
class Literal:
    value: Any


@dataclass(frozen=True, slots=True)
class Name:
    name: str


@dataclass(frozen=True, slots=True)
class Member:
    target: Node
    key: str


@dataclass(frozen=True, slots=True)
class Index:
    target: Node
    index: Node


@dataclass(frozen=True, slots=True)
class ListDisplay:
    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Unary:
    op: str  # "-" or "not"
    operand: Node
    position: int


@dataclass(frozen=True, slots=True)
class Binary:
    op: str  # an arithmetic or comparison operator, "in" or "not in"
    left: Node
    right: Node
    position: int


@dataclass(frozen=True, slots=True)
class Logical:
    op: str  # "and" or "or", short-circuiting
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Call:
    function: str
    args: tuple[Node, ...]
    position: int


Node = Literal | Name | Member | Index | ListDisplay | Unary | Binary | Logical | Call


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "number", "string", "name", "op" or "end"
    value: Any
    position: int


def _tokens(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char.isspace():
            i += 1
        elif char in "'\"":
            value, end = _string(text, i)
            tokens.append(_Token("string", value, i))
            i = end
        elif char.isdigit():
            match = _NUMBER.match(text, i)
            assert match is not None
            tokens.append(_Token("number", _number(match.group(), i), i))
            i = match.end()
        elif match := _NAME.match(text, i):
            tokens.append(_Token("name", match.group(), i))
            i = match.end()
        else:
            for mistake, hint in _MISTAKES.items():
                if text.startswith(mistake, i) and not text.startswith(("==", "!="), i):
                    raise ExpressionError(f"unexpected {mistake!r}: {hint}", i)
            op = next((op for op in _OPERATORS if text.startswith(op, i)), None)
            if op is None:
                raise ExpressionError(f"unexpected character {char!r}", i)
            tokens.append(_Token("op", op, i))
            i += len(op)
    tokens.append(_Token("end", None, len(text)))
    return tokens


def _string(text: str, start: int) -> tuple[str, int]:
    """The string literal opening at ``start`` and the offset after it."""
    quote, i = text[start], start + 1
    chars: list[str] = []
    while i < len(text):
        char = text[i]
        if char == quote:
            return "".join(chars), i + 1
        if char == "\\":
            escaped = text[i + 1 : i + 2]
            if escaped not in _ESCAPES:
                raise ExpressionError(f"unknown escape \\{escaped} (escapes are \\\\ \\' \\\" \\n \\t)", i)
            chars.append(_ESCAPES[escaped])
            i += 2
        else:
            chars.append(char)
            i += 1
    raise ExpressionError("unterminated string", start)


def _number(text: str, position: int) -> int | float:
    if text.isdigit():
        if len(text) > 19 or int(text) > MAX_INTEGER:
            raise ExpressionError(f"integer {text[:30]} is out of range (at most {MAX_INTEGER})", position)
        return int(text)
    value = float(text)
    if not math.isfinite(value):
        raise ExpressionError(f"number {text[:30]} is out of range", position)
    return value


def parse_tree(text: str) -> Node:
    """The syntax tree of ``text``; raises :class:`ExpressionError` with the position of the first problem."""
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ExpressionError(f"expression is longer than {MAX_EXPRESSION_CHARS:,} characters")
    parser = _Parser(_tokens(text))
    tree = parser.expression()
    if parser.peek.kind != "end":
        raise ExpressionError(f"unexpected {parser.peek.value!r}", parser.peek.position)
    return tree


class _Parser:
    """Recursive descent, one method per precedence level, lowest first."""

    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens = tokens
        self.at = 0
        self.nodes = 0
        self.depth = 0

    @property
    def peek(self) -> _Token:
        return self.tokens[self.at]

    def take(self) -> _Token:
        token = self.tokens[self.at]
        self.at += 1
        return token

    def accept(self, *values: str) -> _Token | None:
        token = self.peek
        if token.kind in ("op", "name") and token.value in values:
            self.at += 1
            return token
        return None

    def expect(self, value: str) -> _Token:
        token = self.accept(value)
        if token is None:
            found = "the end" if self.peek.kind == "end" else repr(self.peek.value)
            raise ExpressionError(f"expected {value!r}, found {found}", self.peek.position)
        return token

    def node(self, node: Node) -> Node:
        self.nodes += 1
        if self.nodes > MAX_EXPRESSION_NODES:
            raise ExpressionError(f"expression has more than {MAX_EXPRESSION_NODES} nodes", self.peek.position)
        return node

    def nested(self, position: int) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise ExpressionError(f"expression is nested more than {MAX_NESTING} deep", position)

    def expression(self) -> Node:
        left = self.conjunction()
        while self.accept("or"):
            left = self.node(Logical("or", left, self.conjunction()))
        return left

    def conjunction(self) -> Node:
        left = self.negation()
        while self.accept("and"):
            left = self.node(Logical("and", left, self.negation()))
        return left

    def negation(self) -> Node:
        token = self.accept("not")
        if token is None:
            return self.comparison()
        self.nested(token.position)
        operand = self.negation()
        self.depth -= 1
        return self.node(Unary("not", operand, token.position))

    def comparison(self) -> Node:
        left = self.additive()
        token = self.peek
        if (
            token.kind == "name"
            and token.value == "not"
            and self.tokens[self.at + 1].value == "in"
            and self.tokens[self.at + 1].kind == "name"
        ):
            self.at += 2
            op = "not in"
        elif token.kind in ("op", "name") and token.value in _COMPARISONS:
            self.at += 1
            op = token.value
        else:
            return left
        node = self.node(Binary(op, left, self.additive(), token.position))
        if self.peek.value in _COMPARISONS and self.peek.kind in ("op", "name"):
            raise ExpressionError("comparisons do not chain: join them with and", self.peek.position)
        return node

    def additive(self) -> Node:
        left = self.multiplicative()
        while token := self.accept("+", "-"):
            left = self.node(Binary(token.value, left, self.multiplicative(), token.position))
        return left

    def multiplicative(self) -> Node:
        left = self.unary()
        while token := self.accept("*", "/", "%"):
            left = self.node(Binary(token.value, left, self.unary(), token.position))
        return left

    def unary(self) -> Node:
        token = self.accept("-")
        if token is None:
            return self.postfix()
        self.nested(token.position)
        operand = self.unary()
        self.depth -= 1
        return self.node(Unary("-", operand, token.position))

    def postfix(self) -> Node:
        node = self.primary()
        while token := self.accept(".", "["):
            if token.value == ".":
                key = self.take()
                if key.kind != "name":
                    raise ExpressionError("expected a key name after '.'", key.position)
                node = self.node(Member(node, key.value))
            else:
                self.nested(token.position)
                node = self.node(Index(node, self.expression()))
                self.expect("]")
                self.depth -= 1
        return node

    def primary(self) -> Node:
        token = self.take()
        if token.kind in ("number", "string"):
            return self.node(Literal(token.value))
        if token.kind == "name":
            return self.named(token)
        if token.value in ("(", "["):
            self.nested(token.position)
            if token.value == "(":
                node = self.expression()
                self.expect(")")
            else:
                node = self.node(ListDisplay(tuple(self.arguments("]"))))
            self.depth -= 1
            return node
        found = "the end of the expression" if token.kind == "end" else repr(token.value)
        raise ExpressionError(f"expected a value, found {found}", token.position)

    def named(self, token: _Token) -> Node:
        name = token.value
        constants = {"true": True, "false": False, "null": None}
        if name in constants:
            return self.node(Literal(constants[name]))
        if name in _KEYWORDS:
            raise ExpressionError(f"expected a value, found {name!r}", token.position)
        if self.peek.value == "(" and self.peek.kind == "op":
            if name not in FUNCTION_ARITY:
                raise ExpressionError(
                    f"unknown function {name!r} (functions: {', '.join(FUNCTION_ARITY)})", token.position
                )
            self.nested(self.take().position)
            args = self.arguments(")")
            self.depth -= 1
            if len(args) != FUNCTION_ARITY[name]:
                raise ExpressionError(
                    f"{name}() takes {FUNCTION_ARITY[name]} argument(s), got {len(args)}", token.position
                )
            return self.node(Call(name, tuple(args), token.position))
        if name not in NAMES:
            raise ExpressionError(f"unknown name {name!r} (names: input, last_output, output, state)", token.position)
        return self.node(Name(name))

    def arguments(self, close: str) -> list[Node]:
        """Comma-separated expressions up to ``close`` (consumed); the opening bracket is already taken."""
        items: list[Node] = []
        if self.accept(close):
            return items
        while True:
            items.append(self.expression())
            if self.accept(close):
                return items
            self.expect(",")
