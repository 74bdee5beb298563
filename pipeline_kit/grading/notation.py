"""Plain-text function notation, as models and computer-algebra systems write answers (SymPy's printed forms:
`sqrt(2)`, `Abs(x)`, `x**2`, `exp(x)`, `log(x, 2)`, `sin(x)**2`, `pi`, `oo`, and `I`/`E` in an expression with
`*`, `Rational(1, 3)`, `Interval.open(0, 1)`, `FiniteSet(1, 2)`, `Union(...)`, `Matrix([[1, 2], [3, 4]])`; Python's
`log2(x)`, `log10(x)`, `[[1, 2], [3, 4]]`; Unicode `2√3`, `3π/4`, `x²`, `½`, `∞`), rewritten into the LaTeX the rest
of the grader reads: `\\sqrt{2}`, `|x|`, `x^2`, `e^{x}`, `\\log_{2}(x)`, `\\sin(x)^2`, `\\pi`, `\\infty`, `i`, `e`,
`\\frac{1}{3}`, `(0, 1)`, `\\{1, 2\\}`, `pmatrix`; a power of several digits without braces (`2^10`) is `2^{10}`, as
math-verify reads it. The function names are the ones of SymPy's documented printer and of LaTeX's math operators
(sin … csc, arcsin …, sinh …, ln, log, exp)."""

from __future__ import annotations

import re

_SYMPY_NAMES = r"Rational|Integer|Interval(?:\.(?:open|Lopen|Ropen))?|FiniteSet|Union|Matrix"
_NAMES = "sqrt|cbrt|Abs|abs|exp|ln|log|asin|acos|atan|sin|cos|tan|sec|csc|cot|arcsin|arccos|arctan|sinh|cosh|tanh"
# a call `name(` (optionally a power first: sin^2(x), sin**2(x)), never part of a longer word or a LaTeX command
_CALL = re.compile(rf"(?<![\\A-Za-z])({_NAMES})\s*(\^\s*\{{?\d+\}}?|\^\s*\d+)?\s*\(")
# a function name as plain text writes it before its argument or power: no prose word (extraction.py)
FUNCTION_CALL = re.compile(rf"(?<![\\A-Za-z])(?:{_NAMES}|{_SYMPY_NAMES})(?=\s*[(^*])")
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
_SUPERSCRIPT_DIGITS = "⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺"
_SUPERSCRIPT = re.compile(f"[{_SUPERSCRIPT_DIGITS}]+")
_VULGAR = {"½": "1/2", "⅓": "1/3", "⅔": "2/3", "¼": "1/4", "¾": "3/4", "⅕": "1/5", "⅖": "2/5", "⅗": "3/5",
           "⅘": "4/5", "⅙": "1/6", "⅚": "5/6", "⅛": "1/8", "⅜": "3/8", "⅝": "5/8", "⅞": "7/8"}  # fmt: skip
_VULGAR_AFTER = re.compile(f"(\\d?)([{''.join(_VULGAR)}])")
_SUPERSCRIPT_TABLE = str.maketrans(_SUPERSCRIPT_DIGITS, "0123456789-+")
_ROOTS = {"√": "\\sqrt", "∛": "\\sqrt[3]", "∜": "\\sqrt[4]"}
# a root sign and what it covers: a parenthesized or braced group, a number, a letter or a LaTeX name (\pi)
_ROOT = re.compile(r"([√∛∜])\s*(\((?:[^()]|\([^()]*\))*\)|\{[^{}]*\}|\d+(?:\.\d+)?|\\[A-Za-z]+|[A-Za-z])")
_UNICODE = re.compile(f"[{''.join(_SYMBOLS)}{''.join(_ROOTS)}{''.join(_VULGAR)}{_SUPERSCRIPT_DIGITS}]")
# whether an ASCII string may hold any of the above: most answers do not, and are returned at once
_SYMPY_HINT = re.compile(r"Rational|Integer|Interval|FiniteSet|Union|Matrix|EmptySet|Reals|\[\s*\[")
_HINT = re.compile(rf"\*|\^\s*\(|\^\d\d|(?<![\\A-Za-z])(?:(?:{_NAMES}|pi|oo|lg)\b|log_|log\d)|{_SYMPY_HINT.pattern}")
# a logarithm's base in its name, as Python and plain text write it: log2(x), log10(x), log_2(x), log_{b}(x); lg(x)
# is the base-10 logarithm (ISO 80000-2), which LaTeX's \log already is here
_LOG_BASE = re.compile(r"(?<![\\A-Za-z])(?:log(?:_\{?([A-Za-z0-9]+)\}?|(2|10))|(lg))(?=\s*\()")
# SymPy's printed sets, intervals, rationals and matrices (what print() shows in a tool-integrated answer)
_SYMPY_OBJECT = re.compile(rf"(?<![\\A-Za-z.])({_SYMPY_NAMES})\s*\(")
_INTERVAL_BRACKETS = {"Interval": "[]", "Interval.open": "()", "Interval.Lopen": "(]", "Interval.Ropen": "[)"}
_SYMPY_CONSTANTS = {"EmptySet": "\\emptyset", "S.EmptySet": "\\emptyset", "Reals": "\\mathbb{R}",
                    "S.Reals": "\\mathbb{R}", "Integers": "\\mathbb{Z}", "S.Integers": "\\mathbb{Z}"}  # fmt: skip
# a list of lists as Python prints a matrix: [[1, 2], [3, 4]]
_NESTED_LIST = re.compile(r"\[\s*\[.*\]\s*\]", re.S)
# a power of several digits without braces: 2^10 as plain text (and math-verify) reads it, not LaTeX's 2^{1}0
_BARE_POWER = re.compile(r"\^(\d{2,})(?![\d.])")

# the pieces of a plain-text formula around a number that prose states: numbers, names, operators, parentheses
_PIECE = re.compile(
    rf"\d+(?:\.\d+)?|[ \t]+|{_LOG_BASE.pattern}|[A-Za-z]+|\*\*|[-+*/^·⋅×÷−]|[()|]|[{_SUPERSCRIPT_DIGITS}]+"
    f"|[π∞{''.join(_ROOTS)}{''.join(_VULGAR)}]"
)
_FUNCTION = re.compile(rf"(?:{_NAMES})")
_CALLED = re.compile(r"[ \t]*(?:\(|\^|\*\*)")  # what follows a function name in a call or its power
_CALL_BEFORE = re.compile(rf"(?<![\\A-Za-z])(?:{_NAMES})[ \t]*(?:\^[ \t]*\d+[ \t]*)?$")
_CLOCK = re.compile(r"(?<![\d:])\d{1,2}:\d{2}(?::\d{2})?(?:[ \t]*[AaPp]\.?[Mm]\b\.?)?")
_OPERATOR = ("**", "-", "+", "*", "/", "^", "·", "⋅", "×", "÷", "−")
_PAREN = re.compile(r"[()]")
_OPERATOR_NEXT = re.compile(r"[ \t]*(?:[-+*/^(·⋅×÷−]|\*\*)")
# a product written with a space: a number, then a called function or a root sign (2 sqrt(3), 2 √3)
_FACTOR_NEXT = re.compile(rf"(?:{_LOG_BASE.pattern}|{FUNCTION_CALL.pattern}|[{''.join(_ROOTS)}])")
_REACH = 200


def from_plain(s: str) -> str:
    """`s` with its plain-text function notation written as LaTeX (see the module's docstring); LaTeX as it is."""
    if not s.isascii() and _UNICODE.search(s):
        s = _from_unicode(s)
    elif not _HINT.search(s):
        return s
    cas = "*" in s  # I and E are SymPy's imaginary unit and Euler's number only in a written-out expression
    s = s.replace("**", "^")
    s = _LOG_BASE.sub(lambda m: "\\log" if m.group(3) else f"\\log_{{{m.group(1) or m.group(2)}}}", s)
    s = _rewrite(s, _CALL, lambda m, args: _latex_call(m.group(1), m.group(2), args))
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
    s = _VULGAR_AFTER.sub(lambda m: m.group(1) + (" " if m.group(1) else "") + _VULGAR[m.group(2)], s)  # 2½: 2 1/2
    return _ROOT.sub(lambda m: f"{_ROOTS[m.group(1)]}{{{_inside(m.group(2))}}}", s)


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


def _latex_object(name: str, args: str) -> str:
    """The LaTeX of SymPy's printed Rational(1, 3), Interval.open(0, 1), FiniteSet(1, 2), Union(A, B), Matrix(...)."""
    items = split_list(args)
    if name == "Rational" and len(items) == 2:
        return f"\\frac{{{items[0]}}}{{{items[1]}}}"
    if name == "Integer" and len(items) == 1:
        return items[0]
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


def formula_around(s: str, start: int, end: int) -> str:
    """The plain-text formula of which s[start:end], a number that prose states, is a part: `sqrt(2)/2` rather than
    its last 2, `3 + 2i` rather than 2, `2^10`, `log(8, 2)`, a clock time `3:15 PM`. Within its line, it takes in
    numbers, operators, parentheses, function names (called or raised to a power), `pi`, `e`, `i` and one-letter
    variables, absolute-value bars and Unicode mathematics (√, π, x²); spaces only beside an operator or between a
    number and the function or root it multiplies (2 sqrt(3)), and never a word of prose, `=`, a comma outside a
    call or a letter right after the number that is not `i`, `pi` or `e` or a variable with an operator after it (a
    unit: `5m`)."""
    for clock in _CLOCK.finditer(s, max(0, start - 6), min(len(s), end + 9)):
        if clock.start() <= start and end <= clock.end():
            return clock.group().rstrip(".")
    # within its line, and at most _REACH characters either side
    line_start = max(s.rfind("\n", 0, start) + 1, start - _REACH)
    line_end = min(len(s) if (newline := s.find("\n", end)) == -1 else newline, end + _REACH)
    lo, hi, calls = start, end, set()
    while True:
        lo, hi = _walk_left(s, lo, line_start), _walk_right(s, hi, line_end, after_number=hi == end)
        lo, hi = _balanced(s, *_paired_bars(s, lo, hi, start), start)
        call = _enclosing_call(s, lo, hi, line_start)
        if call is None or call in calls:  # a call cut back to the number's side (an odd bar in it) ends it too
            break
        lo, hi = call
        calls.add(call)
    return s[lo:hi]


def _piece_kind(piece: re.Match, s: str) -> str | None:
    """ "operand", "operator" or "paren"; None for what ends a formula (a word of prose)."""
    text = piece.group()
    if text in _OPERATOR:
        return "operator"
    if text in "()|":
        return "paren"
    if text[0].isdigit() or text in ("pi", "e", "i") or len(text) == 1 or text[0] in _SUPERSCRIPT_DIGITS:
        return "operand"
    if (_FUNCTION.fullmatch(text) and _CALLED.match(s, piece.end())) or (text[0] == "l" and _log_call(piece, s)):
        return "operand"
    return None


def _log_call(piece: re.Match, s: str) -> bool:
    """Whether `piece` is a logarithm named with its base, or lg, before its parenthesis: log2(8), log_3(9)."""
    return (log := _LOG_BASE.match(s, piece.start())) is not None and log.end() == piece.end()


def _walk_right(s: str, pos: int, stop: int, after_number: bool) -> int:
    start, pieces = pos, []
    while (piece := _PIECE.match(s, pos, stop)) is not None and (piece.group().isspace() or _piece_kind(piece, s)):
        pieces.append(piece)  # read up to the first word of prose: the formula ends there anyway
        pos = piece.end()
    return _reach(s, pieces, start, after_number=after_number)


def _walk_left(s: str, pos: int, stop: int) -> int:
    """The start of the formula that ends at `pos`, not before `stop`: read in the last 40 characters first (the
    usual formula, or a word of prose that ends it), and again from `stop` when the formula reaches back that far."""
    near = max(stop, pos - 40)
    lo = _reach(s, _pieces(s, near, pos)[::-1], pos)
    return _reach(s, _pieces(s, stop, pos)[::-1], pos) if lo == near and near > stop else lo


def _pieces(s: str, start: int, stop: int) -> list[re.Match]:
    """s[start:stop] in pieces, from the last character no piece matches (a formula cannot reach across it)."""
    pieces, at = [], start
    while at < stop:
        piece = _PIECE.match(s, at, stop)
        if piece is None:
            pieces, at = [], at + 1
            continue
        pieces.append(piece)
        at = piece.end()
    return pieces


def _reach(s: str, pieces: list[re.Match], edge: int, after_number: bool = False) -> int:
    """How far the formula at `edge` reaches through `pieces`, read outwards from it (rightwards when they start at
    `edge`, else leftwards, in reverse): where its last operand or parenthesis ends (or starts). Spaces only beside
    an operator; on the left a sign written against the number is part of it; on the right a letter right after
    the number ends it unless it is `i`, `pi`, `e` or a variable an operator follows (`5m` is 5 metres)."""
    rightwards = not pieces or pieces[0].start() == edge
    last = "operand"
    for index, piece in enumerate(pieces):
        text = piece.group()
        if text.isspace():
            beyond = pieces[index + 1].group() if index + 1 < len(pieces) else ""
            if not beyond or beyond.isspace() or (last != "operator" and beyond not in _OPERATOR):
                if not (piece.start() and s[piece.start() - 1].isdigit() and _FACTOR_NEXT.match(s, piece.end())):
                    break
            continue
        kind = _piece_kind(piece, s)
        if kind is None:
            break
        if after_number and index == 0 and text[0].isalpha() and text not in ("i", "pi", "e"):
            if not (len(text) == 1 and _OPERATOR_NEXT.match(s, piece.end())):
                break
        if kind != "operator":
            edge = piece.end() if rightwards else piece.start()
        elif not rightwards and text in "-−" and edge == piece.end():  # a sign written against the number
            edge = piece.start()
        last = kind
    return edge


def _balanced(s: str, lo: int, hi: int, start: int) -> tuple[int, int]:
    """[lo, hi) narrowed to the number's side of any parenthesis it leaves open or closes without opening."""
    opened: list[int] = []
    for i in range(lo, hi):
        if s[i] == "(":
            opened.append(i)
        elif s[i] == ")":
            if opened:
                opened.pop()
            elif i < start:
                lo = i + 1
            else:
                return _balanced(s, lo, i, start)
    for i in opened:
        if i >= start:
            return _balanced(s, lo, i, start)
        lo = max(lo, i + 1)
    return lo, hi


def _paired_bars(s: str, lo: int, hi: int, start: int) -> tuple[int, int]:
    """[lo, hi) narrowed to the number's side of an absolute-value bar left without its partner: bars pair in turn
    from the left (|x - 1| + |y|), and an odd one out is the last."""
    if s.count("|", lo, hi) % 2 == 0:
        return lo, hi
    bars = [i for i in range(lo, hi) if s[i] == "|"]
    return (bars[-1] + 1, hi) if bars[-1] < start else (lo, bars[-1])


def _enclosing_call(s: str, lo: int, hi: int, stop: int) -> tuple[int, int] | None:
    """The call `name(...)` around [lo, hi) (log(8, 2) around its 2), or None."""
    depth = 0
    for paren in reversed(list(_PAREN.finditer(s, stop, lo))):
        i = paren.start()
        depth += 1 if s[i] == ")" else -1
        if depth < 0:
            name = _CALL_BEFORE.search(s, stop, i)
            close = _closing(s, i)
            if name is None or close is None or close < hi:
                return None
            return name.start(), close + 1
    return None
