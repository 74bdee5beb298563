"""Plain-text function notation, as models and computer-algebra systems write answers (SymPy's printed forms:
`sqrt(2)`, `Abs(x)`, `x**2`, `exp(x)`, `log(x, 2)`, `sin(x)**2`, `pi`, `oo`, and `I`/`E` in an expression with
`*`), rewritten into the LaTeX the rest of the grader reads: `\\sqrt{2}`, `|x|`, `x^2`, `e^{x}`, `\\log_{2}(x)`,
`\\sin(x)^2`, `\\pi`, `\\infty`, `i`, `e`; a power of several digits without braces
(`2^10`) is `2^{10}`, as math-verify reads it. The function names are the ones of SymPy's documented printer and of
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
_HINT = re.compile(rf"\*|\^\s*\(|\^\d\d|(?<![\\A-Za-z])(?:{_NAMES}|pi|oo)\b")
# a power of several digits without braces: 2^10 as plain text (and math-verify) reads it, not LaTeX's 2^{1}0
_BARE_POWER = re.compile(r"\^(\d{2,})(?![\d.])")

# the pieces of a plain-text formula around a number that prose states: numbers, names, operators, parentheses
_PIECE = re.compile(r"\d+(?:\.\d+)?|[A-Za-z]+|\*\*|[-+*/^]|[()]|[ \t]+")
_FUNCTION = re.compile(rf"(?:{_NAMES})")
_CALLED = re.compile(r"[ \t]*(?:\(|\^|\*\*)")  # what follows a function name in a call or its power
_CALL_BEFORE = re.compile(rf"(?<![\\A-Za-z])(?:{_NAMES})[ \t]*(?:\^[ \t]*\d+[ \t]*)?$")
_CLOCK = re.compile(r"(?<![\d:])\d{1,2}:\d{2}(?::\d{2})?(?:[ \t]*[AaPp]\.?[Mm]\b\.?)?")
_OPERATOR = ("**", "-", "+", "*", "/", "^")
_PAREN = re.compile(r"[()]")
_OPERATOR_NEXT = re.compile(r"[ \t]*(?:[-+*/^(]|\*\*)")
_REACH = 200


def from_plain(s: str) -> str:
    """`s` with its plain-text function notation written as LaTeX (see the module's docstring); LaTeX as it is."""
    if not _HINT.search(s):
        return s
    cas = "*" in s  # I and E are SymPy's imaginary unit and Euler's number only in a written-out expression
    s = s.replace("**", "^")
    s = _rewrite(s, _CALL, lambda m, args: _latex_call(m.group(1), m.group(2), args))
    s = _rewrite(s, _PAREN_POWER, lambda m, exponent: f"^{{{exponent}}}")  # x^(1/2) is x^{1/2}
    s = _BARE_POWER.sub(r"^{\1}", s)
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


def formula_around(s: str, start: int, end: int) -> str:
    """The plain-text formula of which s[start:end], a number that prose states, is a part: `sqrt(2)/2` rather than
    its last 2, `3 + 2i` rather than 2, `2^10`, `log(8, 2)`, a clock time `3:15 PM`. Within its line, it takes in
    numbers, operators, parentheses, function names (called or raised to a power), `pi`, `e`, `i` and one-letter
    variables; spaces only beside an operator, and never a word of prose, `=`, a comma outside a call or a letter
    right after the number that is not `i`, `pi` or `e` or a variable with an operator after it (a unit: `5m`)."""
    for clock in _CLOCK.finditer(s, max(0, start - 6), min(len(s), end + 9)):
        if clock.start() <= start and end <= clock.end():
            return clock.group().rstrip(".")
    # within its line, and at most _REACH characters either side
    line_start = max(s.rfind("\n", 0, start) + 1, start - _REACH)
    line_end = min(len(s) if (newline := s.find("\n", end)) == -1 else newline, end + _REACH)
    lo, hi = start, end
    while True:
        lo, hi = _walk_left(s, lo, line_start), _walk_right(s, hi, line_end, after_number=hi == end)
        lo, hi = _balanced(s, lo, hi, start)
        call = _enclosing_call(s, lo, hi, line_start)
        if call is None:
            break
        lo, hi = call
    return s[lo:hi]


def _piece_kind(piece: re.Match, s: str) -> str | None:
    """ "operand", "operator" or "paren"; None for what ends a formula (a word of prose)."""
    text = piece.group()
    if text in _OPERATOR:
        return "operator"
    if text in "()":
        return "paren"
    if text[0].isdigit() or text in ("pi", "e", "i") or len(text) == 1:
        return "operand"
    if _FUNCTION.fullmatch(text) and _CALLED.match(s, piece.end()):
        return "operand"
    return None


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
        elif not rightwards and text == "-" and edge == piece.end():  # a sign written against the number
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
