"""The `calculator` tool: exact arithmetic on arbitrarily large integers (and exact fractions for `/`)."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from fractions import Fraction

from rl_core.tools import register_tool

MAX_RESULT_BITS = 14000
"""Values above 2**MAX_RESULT_BITS (about 4200 digits, under Python's int-to-str limit) are refused, so `9**9**9`
cannot hang a worker."""

_BINARY: dict[type[ast.operator], Callable[[Fraction, Fraction], Fraction]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}


class CalculatorError(ValueError):
    """An expression the calculator does not accept; the message says what is allowed."""


def _check_size(value: Fraction) -> Fraction:
    if max(abs(value.numerator).bit_length(), value.denominator.bit_length()) > MAX_RESULT_BITS:
        raise CalculatorError(f"result exceeds 2**{MAX_RESULT_BITS}; split the computation into smaller steps")
    return value


def _power(base: Fraction, exponent: Fraction) -> Fraction:
    if exponent.denominator != 1:
        raise CalculatorError("exponents must be integers")
    bits = max(abs(base.numerator).bit_length(), base.denominator.bit_length())
    if bits * abs(exponent.numerator) > MAX_RESULT_BITS + 64:
        raise CalculatorError(f"result exceeds 2**{MAX_RESULT_BITS}; split the computation into smaller steps")
    return base**exponent.numerator


def _eval(node: ast.AST) -> Fraction:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return Fraction(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _eval(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            return _check_size(_power(left, right))
        op = _BINARY.get(type(node.op))
        if op is not None:
            if right == 0 and isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)):
                raise CalculatorError("division by zero")
            return _check_size(op(left, right))
    raise CalculatorError(
        f"unsupported expression {ast.unparse(node)!r}: use integers, + - * / // % ** and parentheses"
    )


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression exactly, with integers of any size.

    Args:
        expression: Integers combined with + - * / // % ** and parentheses, e.g. "123456789 * 987654321 + 5".
            `/` gives an exact fraction such as "7/2"; no floats, names or function calls.
    """
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise CalculatorError(f"cannot parse {expression!r} ({exc.msg}); write e.g. '12 * (3 + 4)'") from exc
    except ValueError as exc:  # an integer literal past Python's digit limit
        raise CalculatorError(f"cannot parse {expression!r}: {exc}") from exc
    value = _eval(tree)
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


register_tool("calculator")(calculator)
