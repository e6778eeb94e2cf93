"""The ``calculator`` built-in: arithmetic parsed with :mod:`ast` and evaluated by a whitelist, never ``eval``."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

from switchyard.agents.errors import ToolExecutionError
from switchyard.agents.tools.base import RetrySemantics, ToolContext, ToolDefinition, ToolKind, ToolResult

__all__ = ["CalculatorTool", "evaluate_expression"]

MAX_EXPRESSION_CHARS = 1_000
MAX_EXPONENT = 10_000
MAX_RESULT_DIGITS = 4_300  # Python's own int-to-str guard
MAX_NODES = 200
MAX_RESULT_BITS = int(MAX_RESULT_DIGITS * 3.33)

Number = int | float

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS: dict[str, Callable[..., Number]] = {
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "log": math.log,
    "log10": math.log10,
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "floor": math.floor,
    "ceil": math.ceil,
}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}


def evaluate_expression(expression: str) -> Number:
    """Evaluate an arithmetic expression: numbers, ``+ - * / // % **``, parentheses, a few math functions.

    Raises :class:`ToolExecutionError` for anything else, for exponents above ``MAX_EXPONENT`` and for
    results with more than ``MAX_RESULT_DIGITS`` digits.
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ToolExecutionError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise ToolExecutionError("not an arithmetic expression") from None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise ToolExecutionError("expression too complex")
    try:
        return _eval(tree.body)
    except ZeroDivisionError:
        raise ToolExecutionError("division by zero") from None
    except (OverflowError, ValueError, TypeError) as exc:
        raise ToolExecutionError(f"math error: {exc}") from None


def _int_result_bits(op: ast.operator, left: Number, right: Number) -> float:
    """An upper bound of the bits of an integer ``*`` or ``**`` result, computed before computing it."""
    if not (isinstance(left, int) and isinstance(right, int)):
        return 0
    if isinstance(op, ast.Pow) and abs(left) > 1:
        return right * abs(left).bit_length()
    if isinstance(op, ast.Mult):
        return left.bit_length() + right.bit_length()
    return 0


def _check_size(value: Number) -> Number:
    if isinstance(value, int) and value.bit_length() > MAX_RESULT_BITS:
        raise ToolExecutionError(f"result has more than {MAX_RESULT_DIGITS} digits")
    if isinstance(value, complex):
        raise ToolExecutionError("complex result")
    return value


def _eval(node: ast.AST) -> Number:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _check_size(_UNARY[type(node.op)](_eval(node.operand)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ToolExecutionError(f"exponent larger than {MAX_EXPONENT}")
        if _int_result_bits(node.op, left, right) > MAX_RESULT_BITS:
            raise ToolExecutionError(f"result has more than {MAX_RESULT_DIGITS} digits")
        return _check_size(_BINARY[type(node.op)](left, right))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
        and len(node.args) <= 8
    ):
        args = [_eval(arg) for arg in node.args]
        return _check_size(_FUNCTIONS[node.func.id](*args))
    raise ToolExecutionError(f"unsupported syntax: {type(node).__name__}")


class CalculatorTool:
    """Safe arithmetic for the model. Idempotent: repeated after a crash without any effect."""

    kind = ToolKind.BUILTIN

    def __init__(self, *, name: str = "calculator", requires_approval: bool = False) -> None:
        self.requires_approval = requires_approval
        self.definition = ToolDefinition(
            name=name,
            description="Evaluate an arithmetic expression, e.g. '(2 + 3) * 4 ** 2 / sqrt(16)'.",
            parameters={
                "type": "object",
                "properties": {"expression": {"type": "string", "maxLength": MAX_EXPRESSION_CHARS}},
                "required": ["expression"],
                "additionalProperties": False,
            },
        )

    def retry_semantics(self, arguments: Mapping[str, Any]) -> RetrySemantics:
        return RetrySemantics.IDEMPOTENT

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        return ToolResult.from_value({"result": evaluate_expression(str(arguments["expression"]))})
