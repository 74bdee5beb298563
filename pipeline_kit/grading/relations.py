"""Equations and inequalities compared as solution sets, by value (numeric's grammar) instead of through sympy:
`f = g` and `p = q` have the same solutions when f - g is a nonzero constant times p - q (a factored equation and
its expanded form, a line and its rearrangement); `f < g` and `p < q` when the constant is positive (an inequality
and its rearrangement: 2x+1>3 is x>1, not x<1); a linear inequality in one letter is the interval it solves to."""

from __future__ import annotations

import re
from fractions import Fraction

from pipeline_kit.grading import numeric

_INEQUALITY_SIGN = r"<=|>=|\\le(?:q|qslant)?(?![A-Za-z])|\\ge(?:q|qslant)?(?![A-Za-z])|≤|≥|<|>"
_RELATION = re.compile(rf"{_INEQUALITY_SIGN}|=")
_LESS_EQUAL = ("<=", "\\le", "\\leq", "\\leqslant", "≤")
_GREATER_EQUAL = (">=", "\\ge", "\\geq", "\\geqslant", "≥")
# a third point beside numeric's two: a ratio that holds at three generic points is no coincidence
_POINTS = (*numeric.POINTS, (0.3129, -0.8649, -0.0301, -0.1649, 0.6277, 1.0933))
_LINE_POINTS = ((0.0,), (1.0,), (0.5377,), (-1.8339,))
_SMALL = 1e-12


def _relation(s: str) -> tuple[str, bool] | None:
    """(g - f, strict) for an inequality f < g (or f ≤ g, or g > f: the side that is larger minus the other), and
    (g - f, None) for an equation f = g; None unless `s` holds exactly one relation."""
    found = list(_RELATION.finditer(s))
    if len(found) != 1:
        return None
    op, left, right = found[0].group(), s[: found[0].start()].strip(), s[found[0].end() :].strip()
    if not left or not right:
        return None
    if op == "=":
        return f"({right})-({left})", None
    strict = op in ("<", ">")
    if op == "<" or op in _LESS_EQUAL:
        return f"({right})-({left})", strict
    return f"({left})-({right})", strict


def same_solutions(a: str, b: str) -> bool | None:
    """True when the relations `a` and `b` (canonical) have the same solutions by the rule of the module's
    docstring; None otherwise (not relations, or not such multiples: left to the other rules)."""
    ra, rb = _relation(a), _relation(b)
    if ra is None or rb is None or ra[1] != rb[1]:
        return None
    found = numeric.values([ra[0], rb[0]], _POINTS)
    if found is None:
        return None
    ratios = []
    for x, y in found:
        if abs(y) <= _SMALL or abs(x) <= _SMALL:
            if abs(x) > _SMALL or abs(y) > _SMALL:
                return None
            continue
        ratios.append(x / y)
    if len(ratios) < 2 or not all(numeric.close(r, ratios[0]) for r in ratios):
        return None
    if ra[1] is not None and not (abs(ratios[0].imag) <= _SMALL and ratios[0].real > 0):
        return None  # an inequality keeps its solutions under a positive factor only
    return True


def interval_of(s: str) -> str | None:
    """The interval a linear inequality in one letter solves to, its bound a fraction: 2x+1>3 → (1,\\infty),
    3-2x\\ge 4 → (-\\infty,-\\frac{1}{2}]; None for anything else."""
    if "<" not in s and ">" not in s and "\\le" not in s and "\\ge" not in s and "≤" not in s and "≥" not in s:
        return None
    relation = _relation(s)
    if relation is None or relation[1] is None:
        return None
    found = numeric.values([relation[0]], _LINE_POINTS)
    if found is None:
        return None
    (f0,), (f1,), *rest = found
    slope, intercept = f1 - f0, f0
    if abs(slope) <= _SMALL or any(abs(v.imag) > _SMALL for (v,) in found):
        return None
    if not all(numeric.close(v, slope * t + intercept) for (v,), (t,) in zip(rest, _LINE_POINTS[2:], strict=True)):
        return None
    bound = Fraction(-intercept.real / slope.real).limit_denominator(1000)
    if not numeric.close(complex(bound), -intercept / slope):
        return None
    text = (
        str(bound.numerator) if bound.denominator == 1 else f"\\frac{{{abs(bound.numerator)}}}{{{bound.denominator}}}"
    )
    text = "-" + text if bound < 0 and bound.denominator != 1 else text
    strict = relation[1]
    if slope.real > 0:  # f = slope·(x - bound) > 0: x above the bound
        return f"{'(' if strict else '['}{text},\\infty)"
    return f"(-\\infty,{text}{')' if strict else ']'}"


# "or" between relations, as written in words or logic: x<1 \text{ or } x>3, x<1 or x>3, x<1 \lor x>3
_OR = re.compile(r"\\text\{\s*or\s*\}|\\(?:lor|vee)(?![A-Za-z])|(?<![A-Za-z])or(?![A-Za-z])")


def or_parts(s: str) -> list[str]:
    """The relations of `s` joined by "or" (one part when there is none)."""
    return [part.strip() for part in _OR.split(s)]


def same_solution_set(a, b) -> bool:
    """Whether two parsed answers (sympy objects, as math-verify parses them) have the same real solutions in one
    variable, at least one of them being an equation or inequality (or several joined by and/or) and the other
    such a relation or a set: x^2<4 is -2<x<2 and (-2,2); x^2-1\\ge0 is (-\\infty,-1]\\cup[1,\\infty)."""
    from sympy import Set
    from sympy.core.relational import Relational
    from sympy.logic.boolalg import And, Or

    relation = (Relational, And, Or)
    if not (isinstance(a, relation) or isinstance(b, relation)):
        return False
    if not all(isinstance(x, (*relation, Set)) for x in (a, b)):
        return False
    symbols = a.free_symbols | b.free_symbols
    if len(symbols) != 1:
        return False
    try:
        sa, sb = (x if isinstance(x, Set) else x.as_set() for x in (a, b))
        return bool(sa == sb or sa.symmetric_difference(sb).is_empty)
    except Exception:  # sympy cannot solve it (NotImplementedError, TypeError, ...): not shown equal
        return False


# "and" between relations, as written in words, logic or a list: x>1 \text{ and } x<4, x>1 \land x<4, x>1, x<4
_AND = re.compile(r"\\text\{\s*and\s*\}|\\(?:land|wedge)(?![A-Za-z])|(?<![A-Za-z])and(?![A-Za-z])|,")
# one variable against a bound: x > 1, x \le 4
_BOUND = re.compile(rf"\s*([A-Za-z])\s*({_INEQUALITY_SIGN})\s*(\S.*?)\s*")


def bounded_variable(s: str) -> str | None:
    """The variable `s` bounds when it is one variable against a bound (x > 1, x \\le 4), else None."""
    bound = _BOUND.fullmatch(s)
    return bound.group(1) if bound else None


def between(s: str) -> str | None:
    """Two inequalities joined by "and" (or a comma) that bound one variable from below and from above, as one chain:
    `x > 1 \\text{ and } x < 4` is `1 < x < 4`; else None."""
    parts = _AND.split(s)
    if len(parts) != 2:
        return None
    bounds = [_BOUND.fullmatch(part) for part in parts]
    if not all(bounds) or bounds[0].group(1) != bounds[1].group(1):
        return None
    lower = upper = None
    for bound in bounds:
        op, value = bound.group(2), bound.group(3)
        sign = "<" if op in ("<", ">") else "\\le"
        if op == "<" or op in _LESS_EQUAL:
            upper = (sign, value)
        else:
            lower = (sign, value)
    if lower is None or upper is None:
        return None
    return f"{lower[1]} {lower[0]} {bounds[0].group(1)} {upper[0]} {upper[1]}"
