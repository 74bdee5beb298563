"""Answer forms that say one thing in several ways, each rewritten to the form the other rules compare: a set written
by its condition, a general solution with its integer parameter, a repeating decimal, an angle in degrees inside a
trigonometric function, a congruence's modulus, {n \\choose k}, "all real numbers" and "all integers", a vector in
angle brackets, the empty set's symbols and "no solution"."""

from __future__ import annotations

import re
from fractions import Fraction

# {x | x > 2}, {x \mid -1 < x < 3}, {x : x \ge 0}: the condition on the one letter states the set
_SET_BUILDER = re.compile(r"\\\{\s*([A-Za-z])\s*(?:\\mid|\\vert|\||:|\\colon)\s*(.+?)\s*\\\}")
# ", k \in \mathbb{Z}", "(k\in\mathbf Z)", "\text{ where } n \in \mathbb{Z}": the parameter of a general solution
_PARAMETER = re.compile(
    r"\s*[,;]?\s*(?:\\(?:text|mathrm)\{\s*(?:where|for)\s*\}|\\quad|\\,)*\s*\(?\s*([A-Za-z])\s*\\in\s*"
    r"\\(?:mathbb|mathbf|Bbb)\s*\{?\s*Z\s*\}?\s*\)?\s*$"
)
# 0.\overline{3}, 0.1\overline{6}, 1.\dot{3}, 0.(142857): the digits under the bar repeat for ever
_LONGEST_DECIMAL = 60  # longer digit strings are no one's answer (and past 4,300 digits int() refuses them)
_REPEATING = re.compile(r"([+-]?)(\d*)\.(\d*)(?:\\overline\{(\d+)\}|\\dot\{?(\d)\}?|\((\d+)\))")
# a trigonometric function of an angle in degrees: \cos 60^\circ, \sin(30°), \tan 45^{\circ}, \sin^2 30^\circ
_TRIG_DEGREES = re.compile(
    r"(\\(?:sin|cos|tan|sec|csc|cot)(?:\^\s*\{?\d\}?)?)\s*(?:(\()\s*)?(\d+)\s*"
    r"(?:\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|°|\\degree(?![A-Za-z]))"
    r"(?(2)\s*\))"
)
# a congruence's modulus however it is written: \pmod 3, \pmod{3}, (mod 3), (\text{mod } 3), \mod 3
_MODULUS = re.compile(
    r"\\pmod\s*\{\s*(\w+)\s*\}|\\pmod\s*(\w)|\(\s*(?:\\text\{\s*|\\b?)?mod\s*\}?\s*(\w+)\s*\)|\\b?mod\s+(\w+)"
)
_CHOOSE = re.compile(r"\{?\s*(\w+)\s*\\choose\s*(\w+)\s*\}?")  # {10 \choose 3}: plain TeX's \binom{10}{3}
_ALL_REALS = re.compile(r"all real numbers|all reals|every real number", re.I)
_ALL_INTEGERS = re.compile(r"all integers|every integer", re.I)
# a vector in angle brackets, as calculus texts write it: \langle 1, 2, 3 \rangle, ⟨1, 2⟩, <1, 2, 3>
_ANGLE_VECTOR = re.compile(r"(?:\\left)?(?:\\langle|⟨|<)\s*([^<>]*,[^<>]*?)\s*(?:\\right)?(?:\\rangle|⟩|>)")
_EMPTY_SET = re.compile(r"\\varnothing(?![A-Za-z])|\\\{\s*\\\}|\\O(?![A-Za-z])")
# a whole answer saying that nothing solves the problem: the empty set (college_math's "No solution", and its
# "No solution : $\oslash$", a symbol for it)
_NO_SOLUTION = re.compile(
    r"(?:(?:there (?:is|are) )?no (?:real |such )?(?:solutions?|roots?|values?)|none)\.?"
    r"(?:\s*:\s*\$?\\(?:oslash|emptyset|varnothing)\$?)?",
    re.I,
)
# a residue class, in canonical form: x\equiv7\pmod{9}, \equiv7\pmod{9}, 7\pmod{9}
_CONGRUENCE = re.compile(r"(?:(?:[A-Za-z](?:_\{?\w+\}?)?)?\\equiv)?([+-]?\d{1,18})\\pmod\{(\d{1,18})\}")


def in_radians(s: str) -> str:
    """`s` with each trigonometric function of whole degrees taking radians: \\cos 60^\\circ → \\cos(\\frac{\\pi}{180}
    \\cdot 60). To be applied before degree signs elsewhere are dropped (90^\\circ as an answer is 90)."""
    if "circ" not in s and "°" not in s and "degree" not in s:
        return s
    return _TRIG_DEGREES.sub(lambda m: f"{m.group(1)}(\\frac{{\\pi}}{{180}}\\cdot {m.group(3)})", s)


def rewritten(s: str) -> str:
    """`s` in the form the other rules compare: a vector in angle brackets as a tuple, a congruence's modulus as
    \\pmod{m}, {n \\choose k} as \\binom{n}{k}, "all real numbers" as \\mathbb{R} ("all integers": \\mathbb{Z}), the
    condition of a set written by it, a general solution without its parameter's range, a repeating decimal as the
    fraction it is, \\emptyset for the empty set. Each run of whitespace in `s` must be one space already: on long
    runs, the patterns here would take quadratic time."""
    if "mod" in s:
        s = _MODULUS.sub(lambda m: f"\\pmod{{{next(g for g in m.groups() if g)}}}", s)
    if "choose" in s:
        s = _CHOOSE.sub(r"\\binom{\1}{\2}", s)
    if "real" in s and _ALL_REALS.fullmatch(s.strip()):
        return "\\mathbb{R}"
    if "integer" in s and _ALL_INTEGERS.fullmatch(s.strip()):
        return "\\mathbb{Z}"
    if len(s) < 40 and "no" in s.lower() and _NO_SOLUTION.fullmatch(s.strip()):
        return "\\emptyset"
    if s.rstrip().endswith((">", "rangle", "⟩")) and (m := _ANGLE_VECTOR.fullmatch(s.strip())):
        return f"({m.group(1)})"
    if s.startswith("\\{") and (m := _SET_BUILDER.fullmatch(s)):
        s = m.group(2)
    if "Z" in s and "\\in" in s and (m := _PARAMETER.search(s)):  # (not \\infty alone)
        s = _as_k(s[: m.start()] + s[m.end() :], m.group(1))
    if "." in s and len(s) < _LONGEST_DECIMAL and (m := _REPEATING.fullmatch(s)):
        return _fraction(*m.groups())
    return _EMPTY_SET.sub(r"\\emptyset", s) if "\\varnothing" in s or "\\{" in s or "\\O" in s else s


def congruence(canonical: str) -> tuple[int, int] | None:
    """(residue, modulus) of a residue class in canonical form (`x\\equiv7\\pmod{9}`, `7\\pmod{9}`), else None."""
    m = _CONGRUENCE.fullmatch(canonical) if "pmod" in canonical else None
    return (int(m.group(1)), int(m.group(2))) if m and int(m.group(2)) > 0 else None


def _as_k(s: str, letter: str) -> str:
    """A general solution's integer parameter named k, the name most answer keys give it (2n\\pi, n \\in \\mathbb{Z}
    is 2k\\pi), unless k already names something else in it."""
    alone = r"(?<![A-Za-z\\]){}(?![A-Za-z])"
    if letter == "k" or re.search(alone.format("k"), s):
        return s
    return re.sub(alone.format(letter), "k", s)


def _fraction(sign: str, whole: str, fixed: str, *repeating_groups: str | None) -> str:
    repeating = next(group for group in repeating_groups if group)
    period = 10 ** len(repeating) - 1
    value = int(whole or "0") + Fraction(int(fixed + repeating) - int(fixed or "0"), 10 ** len(fixed) * period)
    return str(-value if sign == "-" else value)
