"""Plain-text function notation, as models and computer-algebra systems write answers (SymPy's printed forms:
`sqrt(2)`, `Abs(x)`, `x**2`, `exp(x)`, `log(x, 2)`, `sin(x)**2`, `pi`, `oo`, and `I`/`E` in an expression with
`*`), rewritten into the LaTeX the rest of the grader reads: `\\sqrt{2}`, `|x|`, `x^2`, `e^{x}`, `\\log_{2}(x)`,
`\\sin(x)^2`, `\\pi`, `\\infty`, `i`, `e`. The function names are the ones of SymPy's documented printer and of
LaTeX's math operators (sin … csc, arcsin …, sinh …, ln, log, exp)."""

from __future__ import annotations

import re

_NAMES = "sqrt|cbrt|Abs|abs|exp|ln|log|asin|acos|atan|sin|cos|tan|sec|csc|cot|arcsin|arccos|arctan|sinh|cosh|tanh"
# a call `name(` (optionally a power first: sin^2(x), sin**2(x)), never part of a longer word or a LaTeX command
_CALL = re.compile(rf"(?<![\\A-Za-z])({_NAMES})\s*(\^\s*\{{?\d+\}}?|\^\s*\d+)?\s*\(")
# a function name as plain text writes it before its argument or power: no prose word (extraction.py)
FUNCTION_CALL = re.compile(rf"(?<![\\A-Za-z])(?:{_NAMES})(?=\s*[(^*])")
_INVERSE = {"asin": "arcsin", "acos": "arccos", "atan": "arctan"}
_PI = re.compile(r"(?<![\\A-Za-z])pi(?![A-Za-z])")
_INFINITY = re.compile(r"(?<![\\A-Za-z])oo(?![A-Za-z])")
_PAREN_POWER = re.compile(r"\^\s*\(")
_SYMPY_CONSTANT = re.compile(r"(?<![\\A-Za-z])([IE])(?![A-Za-z])")
# whether a string may hold any of the above: most answers do not, and are returned at once
_HINT = re.compile(rf"\*|\^\s*\(|(?<![\\A-Za-z])(?:{_NAMES}|pi|oo)\b")


def from_plain(s: str) -> str:
    """`s` with its plain-text function notation written as LaTeX (see the module's docstring); LaTeX as it is."""
    if not _HINT.search(s):
        return s
    cas = "*" in s  # I and E are SymPy's imaginary unit and Euler's number only in a written-out expression
    s = s.replace("**", "^")
    s = _rewrite(s, _CALL, lambda m, args: _latex_call(m.group(1), m.group(2), args))
    s = _rewrite(s, _PAREN_POWER, lambda m, exponent: f"^{{{exponent}}}")  # x^(1/2) is x^{1/2}
    s = _PI.sub(r"\\pi ", s)
    s = _INFINITY.sub(r"\\infty ", s)
    if cas:
        s = _SYMPY_CONSTANT.sub(lambda m: m.group(1).lower(), s)
    return s.strip()


def _closing(s: str, start: int) -> int | None:
    """The index of the `)` that closes the `(` at `start`, or None."""
    depth = 0
    for i in range(start, len(s)):
        depth += (s[i] == "(") - (s[i] == ")")
        if depth == 0:
            return i
    return None


def _rewrite(s: str, pattern: re.Pattern, render) -> str:
    """`s` with every match of `pattern` (which ends at an opening parenthesis) and its parenthesized group replaced
    by render(match, group), the group's own matches rewritten first; an unclosed group ends the rewriting."""
    out, pos = [], 0
    while m := pattern.search(s, pos):
        end = _closing(s, m.end() - 1)
        if end is None:
            break
        out.append(s[pos : m.start()] + render(m, _rewrite(s[m.end() : end], pattern, render)))
        pos = end + 1
    return "".join(out) + s[pos:]


def _latex_call(name: str, power: str | None, args: str) -> str:
    power = re.sub(r"\s+", "", power or "")
    if name == "sqrt":
        return f"\\sqrt{{{args}}}{power}"
    if name == "cbrt":
        return f"\\sqrt[3]{{{args}}}{power}"
    if name in ("abs", "Abs"):
        return f"|{args}|{power}"
    if name == "exp":
        return f"e^{{{args}}}" if not power else f"(e^{{{args}}}){power}"
    if name == "log" and "," in args:  # SymPy's log(x, b): the logarithm of x to base b
        value, _, base = args.rpartition(",")
        return f"\\log_{{{base.strip()}}}{power}({value.strip()})"
    return f"\\{_INVERSE.get(name, name)}{power}({args})"
