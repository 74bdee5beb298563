"""The grader's own numeric reading (grading/numeric.py) against SymPy's evaluation of the same LaTeX, on random
expressions of its grammar: the two must agree wherever both give a finite value. Odd roots of negative numbers are
left out (kit reads them as the real root, as competitions do; SymPy takes the principal one), and so are tangents
(near a pole the two round apart) and inverse tangents of imaginary numbers (a branch cut both sides read)."""

from __future__ import annotations

import logging
import random

import pytest

pytest.importorskip("math_verify")

from pipeline_kit.grading import normalize, numeric  # noqa: E402

EXPONENTS = ["2", "3", "-1", "-2", "\\frac{1}{2}", "0.5"]
FUNCTIONS = ["sin", "cos", "ln", "exp"]


def _atom(rng: random.Random, depth: int) -> str:
    r = rng.random()
    if r < 0.3:
        return str(rng.randint(-9, 12))
    if r < 0.36:
        return "\\pi"
    if r < 0.41:
        return "e"
    if r < 0.46:
        return "i"
    if r < 0.52:
        return f"{rng.randint(1, 9)}.{rng.randint(0, 99)}"
    return _expression(rng, depth + 1)


def _expression(rng: random.Random, depth: int = 0) -> str:
    if depth > 3:
        return str(rng.randint(1, 9))
    kind = rng.choice(["frac", "sqrt", "pow", "add", "sub", "mul", "neg", "function", "abs", "paren"])
    x, y = _atom(rng, depth), _atom(rng, depth)
    if kind == "frac":
        return f"\\frac{{{x}}}{{{y}}}"
    if kind == "sqrt":
        return f"\\sqrt{{{x}}}"
    if kind == "pow":
        return "{(" + x + ")}^{" + rng.choice(EXPONENTS) + "}"
    if kind == "function":
        return f"\\{rng.choice(FUNCTIONS)}({x})"
    if kind == "abs":
        return f"\\left|{x}\\right|"
    if kind == "neg":
        return f"-{x}"
    if kind == "paren":
        return f"({x})"
    return x + {"add": "+", "sub": "-", "mul": "\\cdot "}[kind] + y


def test_numeric_reading_agrees_with_sympy_on_random_expressions():
    import sympy
    from math_verify import parse

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    rng = random.Random(0)
    compared, differ = 0, []
    while compared < 150:
        latex = _expression(rng)
        found = numeric.values([normalize.canonical(latex)])
        parsed = parse(f"${latex}$")
        if found is None or not parsed:
            continue
        try:
            theirs = complex(sympy.N(parsed[0].subs(sympy.Symbol("i"), sympy.I), 30))
        except (TypeError, ValueError):  # not a number to SymPy (zoo, nan): nothing to compare
            continue
        if not numeric.finite(theirs) or abs(theirs) > 1e12:
            continue
        compared += 1
        if abs(found[0][0] - theirs) > 1e-6 * max(1.0, abs(theirs)):
            differ.append((latex, found[0][0], theirs))
    assert differ == []
