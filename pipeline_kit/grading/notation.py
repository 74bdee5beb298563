"""Plain-text function notation, as models and computer-algebra systems write answers (SymPy's printed forms: `sqrt(2)`,
`Abs(x)`, `x**2`, `exp(x)`, `log(x, 2)`, `sin(x)**2`, `pi`, `oo`, and `I`/`E` in an expression with `*`,
`Rational(1, 3)`, `Interval.open(0, 1)`, `FiniteSet(1, 2)`, `Union(...)`, `Matrix([[1, 2], [3, 4]])`, `binomial(10, 3)`,
`factorial(5)`; Python's `log2(x)`, `log10(x)`, `[[1, 2], [3, 4]]`; Unicode `2√3`, `3π/4`, `x²`, `½`, `∞`), rewritten
into the LaTeX the rest of the grader reads: `\\sqrt{2}`, `|x|`, `x^2`, `e^{x}`, `\\log_{2}(x)`, `\\sin(x)^2`,
`\\pi`, `\\infty`, `i`, `e`, `\\frac{1}{3}`, `(0, 1)`, `\\{1, 2\\}`, `pmatrix`; a power of several digits without
braces (`2^10`) is `2^{10}`, as math-verify reads it. The function names are the ones of SymPy's documented printer
and of LaTeX's math operators (sin … csc, arcsin …, sinh …, ln, log, exp)."""

from __future__ import annotations

import re

_SYMPY_NAMES = r"Rational|Integer|Interval(?:\.(?:open|Lopen|Ropen))?|FiniteSet|Union|Matrix|binomial|factorial"
FUNCTION_NAMES = (
    "sqrt|cbrt|Abs|abs|exp|ln|log|asin|acos|atan|sin|cos|tan|sec|csc|cot|arcsin|arccos|arctan|sinh|cosh|tanh"
)
# a call `name(` (optionally a power first: sin^2(x), sin**2(x)), never part of a longer word or a LaTeX command
_CALL = re.compile(rf"(?<![\\A-Za-z])({FUNCTION_NAMES})\s*(\^\s*\{{?-?\d+\}}?|\^\s*-?\d+)?\s*\(")
# a function name as plain text writes it before its argument or power: no prose word (extraction.py)
# or before a number or one letter after a space (sqrt 2, ln x, sin x)
FUNCTION_CALL = re.compile(
    rf"(?<![\\A-Za-z])(?:{FUNCTION_NAMES}|{_SYMPY_NAMES})(?=\s*[(^*]|[ \t]+(?:\d|[A-Za-z](?![A-Za-z])))"
)
# a function applied without parentheses to a number or one letter, as plain text writes it: sqrt 2, ln x, sin x
_SPACED_CALL = re.compile(rf"(?<![\\A-Za-z])({FUNCTION_NAMES})[ \t]+(\d+(?:\.\d+)?|[A-Za-z])(?![A-Za-z\d.(])")
_INVERSE = {"asin": "arcsin", "acos": "arccos", "atan": "arctan"}
_PI = re.compile(r"(?<![\\A-Za-z])pi(?![A-Za-z])")
_INFINITY = re.compile(r"(?<![\\A-Za-z])oo(?![A-Za-z])")
_PAREN_POWER = re.compile(r"\^\s*\(")
_SYMPY_CONSTANT = re.compile(r"(?<![\\A-Za-z])([IE])(?![A-Za-z])")
# Unicode mathematics as models write it in plain text: symbols, roots, superscript powers, vulgar fractions
_SYMBOLS = {
    "π": "\\pi ", "∞": "\\infty ", "·": "\\cdot ", "⋅": "\\cdot ", "×": "\\times ", "÷": "\\div ", "−": "-",
    "≤": "\\le ", "≥": "\\ge ", "≠": "\\ne ", "±": "\\pm ", "∓": "\\mp ", "∈": "\\in ", "∪": "\\cup ",
    "∩": "\\cap ", "∅": "\\emptyset ", "∴": "", "≡": "\\equiv ",
    "€": "", "£": "", "¥": "", "₹": "",  # a currency sign, as \\$ is dropped
}  # fmt: skip
SUPERSCRIPT_DIGITS = "⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺"
_SUPERSCRIPT = re.compile(f"[{SUPERSCRIPT_DIGITS}]+")
VULGAR = {"½": "1/2", "⅓": "1/3", "⅔": "2/3", "¼": "1/4", "¾": "3/4", "⅕": "1/5", "⅖": "2/5", "⅗": "3/5",
           "⅘": "4/5", "⅙": "1/6", "⅚": "5/6", "⅛": "1/8", "⅜": "3/8", "⅝": "5/8", "⅞": "7/8"}  # fmt: skip
_VULGAR_AFTER = re.compile(f"(\\d?)([{''.join(VULGAR)}])")
_SUPERSCRIPT_TABLE = str.maketrans(SUPERSCRIPT_DIGITS, "0123456789-+")
ROOTS = {"√": "\\sqrt", "∛": "\\sqrt[3]", "∜": "\\sqrt[4]"}
# a root sign and what it covers: a parenthesized or braced group, a number, a letter or a LaTeX name (\pi)
_ROOT = re.compile(
    f"([{''.join(ROOTS)}])" + r"\s*(\((?:[^()]|\([^()]*\))*\)|\{[^{}]*\}|\d+(?:\.\d+)?|\\[A-Za-z]+|[A-Za-z])"
)
_UNICODE = re.compile(f"[{''.join(_SYMBOLS)}{''.join(ROOTS)}{''.join(VULGAR)}{SUPERSCRIPT_DIGITS}]")
# whether an ASCII string may hold any of the above: most answers do not, and are returned at once
_SYMPY_CONSTANTS = {"EmptySet": "\\emptyset", "S.EmptySet": "\\emptyset", "Reals": "\\mathbb{R}",
                    "S.Reals": "\\mathbb{R}", "Integers": "\\mathbb{Z}", "S.Integers": "\\mathbb{Z}"}  # fmt: skip
# whether SymPy's printed objects (below) or a Python matrix may be in a string
_SYMPY_HINT = re.compile(rf"{_SYMPY_NAMES}|{'|'.join(map(re.escape, _SYMPY_CONSTANTS))}|\[\s*\[")
_HINT = re.compile(
    rf"\*|\^\s*\(|\^\d\d|(?<![\\A-Za-z])(?:(?:{FUNCTION_NAMES}|pi|oo|lg)\b|log_|log\d)|{_SYMPY_HINT.pattern}"
)
# a logarithm's base in its name, as Python and plain text write it: log2(x), log10(x), log_2(x), log_{b}(x); lg(x)
# is the base-10 logarithm (ISO 80000-2), which LaTeX's \log already is here
LOG_BASE = re.compile(r"(?<![\\A-Za-z])(?:log(?:_\{?([A-Za-z0-9]+)\}?|(2|10))|(lg))(?=\s*\()")
# SymPy's printed sets, intervals, rationals and matrices (what print() shows in a tool-integrated answer)
_SYMPY_OBJECT = re.compile(rf"(?<![\\A-Za-z.])({_SYMPY_NAMES})\s*\(")
_INTERVAL_BRACKETS = {"Interval": "[]", "Interval.open": "()", "Interval.Lopen": "(]", "Interval.Ropen": "[)"}
# a list of lists as Python prints a matrix: [[1, 2], [3, 4]]
_NESTED_LIST = re.compile(r"\[\s*\[.*\]\s*\]", re.S)
# a power of several digits without braces: 2^10 as plain text (and math-verify) reads it, not LaTeX's 2^{1}0
_BARE_POWER = re.compile(r"\^(\d{2,})(?![\d.])")


def from_plain(s: str) -> str:
    """`s` with its plain-text function notation written as LaTeX (see the module's docstring); LaTeX as it is."""
    if not s.isascii() and _UNICODE.search(s):
        s = _from_unicode(s)
    elif not _HINT.search(s):
        return s
    cas = "*" in s  # I and E are SymPy's imaginary unit and Euler's number only in a written-out expression
    s = s.replace("**", "^")
    s = LOG_BASE.sub(lambda m: "\\log" if m.group(3) else f"\\log_{{{m.group(1) or m.group(2)}}}", s)
    s = _rewrite(s, _CALL, lambda m, args: _latex_call(m.group(1), m.group(2), args))
    s = _SPACED_CALL.sub(lambda m: _latex_call(m.group(1), None, m.group(2)), s)
    if _SYMPY_HINT.search(s):
        s = _SYMPY_CONSTANTS.get(s.strip(), s)
        s = _rewrite(s, _SYMPY_OBJECT, lambda m, args: _latex_object(m.group(1), args))
        if _NESTED_LIST.fullmatch(s.strip()):
            s = _matrix(s.strip()) or s
    s = _rewrite(s, _PAREN_POWER, lambda m, exponent: f"^{{{exponent}}}")  # x^(1/2) is x^{1/2}
    s = _BARE_POWER.sub(r"^{\1}", s)
    s = _PI.sub(r"\\pi ", s)
    s = _INFINITY.sub(r"\\infty ", s)
    if cas:
        s = _SYMPY_CONSTANT.sub(lambda m: m.group(1).lower(), s)
    return s.strip()


def _from_unicode(s: str) -> str:
    """`s` with its Unicode mathematics written as LaTeX: 2√3 → 2\\sqrt{3}, x² → x^{2}, 3π/4 → 3\\pi /4, 2½ → 2 1/2."""
    s = "".join(_SYMBOLS.get(c, c) for c in s)
    s = _SUPERSCRIPT.sub(lambda m: "^{" + m.group().translate(_SUPERSCRIPT_TABLE) + "}", s)
    s = _VULGAR_AFTER.sub(lambda m: m.group(1) + (" " if m.group(1) else "") + VULGAR[m.group(2)], s)  # 2½: 2 1/2
    return _ROOT.sub(lambda m: f"{ROOTS[m.group(1)]}{{{_inside(m.group(2))}}}", s)


def _inside(group: str) -> str:
    return group[1:-1] if group[0] in "({" else group


def split_list(s: str) -> list[str]:
    """`s` split at its top-level commas (not inside (), [], {} or \\{ \\}); one item when it has none."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(s):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(s[start:i].strip())
            start = i + 1
    items.append(s[start:].strip())
    return items


def closing(s: str, start: int) -> int | None:
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
        end = closing(s, m.end() - 1)
        if end is None:
            break
        out.append(s[pos : m.start()] + render(m, _rewrite(s[m.end() : end], pattern, render)))
        pos = end + 1
    return "".join(out) + s[pos:]


def _latex_call(name: str, power: str | None, args: str) -> str:
    power = re.sub(r"\^(-?\d+)$", r"^{\1}", re.sub(r"\s+", "", power or ""))  # tan^-1(1): \tan^{-1}(1), arctan
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


def _latex_object(name: str, args: str) -> str:
    """The LaTeX of SymPy's printed Rational(1, 3), Interval.open(0, 1), FiniteSet(1, 2), Union(A, B), Matrix(...),
    binomial(10, 3), factorial(5)."""
    items = split_list(args)
    if name == "Rational" and len(items) == 2:
        return f"\\frac{{{items[0]}}}{{{items[1]}}}"
    if name == "Integer" and len(items) == 1:
        return items[0]
    if name == "binomial" and len(items) == 2:
        return f"\\binom{{{items[0]}}}{{{items[1]}}}"
    if name == "factorial" and len(items) == 1:
        return f"({items[0]})!"
    if name in _INTERVAL_BRACKETS and len(items) == 2:
        left, right = _INTERVAL_BRACKETS[name]
        return f"{left}{items[0]}, {items[1]}{right}"
    if name == "FiniteSet":
        return f"\\{{{', '.join(items)}\\}}"
    if name == "Union" and len(items) > 1:
        return " \\cup ".join(items)
    if name == "Matrix" and len(items) == 1:
        return _matrix(items[0]) or f"{name}({args})"
    return f"{name}({args})"


def _matrix(rows_text: str) -> str | None:
    """pmatrix LaTeX for a list of rows ([[1, 2], [3, 4]]) or a column ([1, 2, 3], as SymPy's Matrix reads it); None
    unless every row is a bracketed list of the same length."""
    if not (rows_text.startswith("[") and rows_text.endswith("]")):
        return None
    rows = split_list(rows_text[1:-1])
    if all(row.startswith("[") and row.endswith("]") for row in rows):
        cells = [split_list(row[1:-1]) for row in rows]
    elif not any("[" in row for row in rows):
        cells = [[row] for row in rows]
    else:
        return None
    if len({len(row) for row in cells}) != 1 or not all(all(cells_row) for cells_row in cells):
        return None
    body = " \\\\ ".join(" & ".join(row) for row in cells)
    return f"\\begin{{pmatrix}}{body}\\end{{pmatrix}}"
