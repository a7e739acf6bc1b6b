"""Countdown: reach ``target`` with an arithmetic expression that uses each of ``numbers`` exactly once.

``ground_truth = {"target": int, "numbers": [int, ...]}``. The answer is the text of the LAST
``<answer>...</answer>`` in the response: an expression of integers, ``+ - * /``, unary minus and
parentheses, evaluated exactly with `ast` and fractions (never ``eval``). Score:

* 1.0: it uses the given numbers exactly once each (as a multiset) and equals the target (within 1e-6);
* 0.1: it parses but is wrong (another value, or other numbers used);
* 0.0: no answer tag, an expression that does not parse or holds anything else (names, calls,
  floats, other operators), or a division by zero.
"""

from __future__ import annotations

import ast
import operator
import re
from collections import Counter
from fractions import Fraction
from typing import Any

from verl.utils.reward_score import register

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}

FORMAT_SCORE = 0.1


def _evaluate(node: ast.AST, used: list[int]) -> Fraction:
    """The exact value of ``node``; appends every integer literal to ``used``."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        used.append(node.value)
        return Fraction(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand, used)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left = _evaluate(node.left, used)
        return _BINARY[type(node.op)](left, _evaluate(node.right, used))
    raise ValueError(f"not allowed in an answer: {ast.dump(node)}")


def evaluate(expression: str) -> tuple[Fraction, list[int]] | None:
    """``(value, integers used)`` of an allowed expression, or None when it is not one.

    Raises ZeroDivisionError on a division by zero.
    """
    try:
        tree = ast.parse(" ".join(expression.split()), mode="eval")  # line breaks allowed
        used: list[int] = []
        return _evaluate(tree.body, used), used
    except (SyntaxError, ValueError, RecursionError):
        return None


@register("countdown", data_sources=("countdown",))
def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None) -> float:
    found = _ANSWER.findall(solution_str or "")
    if not found:
        return 0.0
    try:
        result = evaluate(found[-1])
    except ZeroDivisionError:
        return 0.0
    if result is None:
        return 0.0
    value, used = result
    numbers = [int(x) for x in ground_truth["numbers"]]
    correct = Counter(used) == Counter(numbers) and abs(value - Fraction(int(ground_truth["target"]))) <= 1e-6
    return 1.0 if correct else FORMAT_SCORE
