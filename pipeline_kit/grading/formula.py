"""The plain-text formula around a number that prose states, as a model ends an answer without a box: "We get
sqrt(2)/2." states `sqrt(2)/2`, not 2 (extraction's last resort; notation.from_plain then reads it)."""

from __future__ import annotations

import re

from pipeline_kit.grading.notation import (
    FUNCTION_CALL,
    FUNCTION_NAMES,
    LOG_BASE,
    ROOTS,
    SUPERSCRIPT_DIGITS,
    VULGAR,
    closing,
)

# the pieces of a plain-text formula around a number that prose states: numbers, names, operators, parentheses
_SIGNS = "-+*/^·⋅×÷−"  # the operators of one character, ASCII and Unicode
_PIECE = re.compile(
    rf"\d+(?:\.\d+)?|[ \t]+|{LOG_BASE.pattern}|[A-Za-z]+|\*\*|[{re.escape(_SIGNS)}]|[()|]|[{SUPERSCRIPT_DIGITS}]+"
    f"|[π∞{''.join(ROOTS)}{''.join(VULGAR)}]"
)
_FUNCTION = re.compile(rf"(?:{FUNCTION_NAMES})")
_CALLED = re.compile(r"[ \t]*(?:\(|\^|\*\*)")  # what follows a function name in a call or its power
_CALL_BEFORE = re.compile(rf"(?<![\\A-Za-z])(?:{FUNCTION_NAMES})[ \t]*(?:\^[ \t]*\d+[ \t]*)?$")
_CLOCK = re.compile(r"(?<![\d:])\d{1,2}:\d{2}(?::\d{2})?(?:[ \t]*[AaPp]\.?[Mm]\b\.?)?")
_OPERATOR = ("**", *_SIGNS)
_PAREN = re.compile(r"[()]")
_OPERATOR_NEXT = re.compile(rf"[ \t]*(?:[{re.escape(_SIGNS)}(]|\*\*)")
# a product written with a space: a number, then a called function or a root sign (2 sqrt(3), 2 √3)
_FACTOR_NEXT = re.compile(rf"(?:{LOG_BASE.pattern}|{FUNCTION_CALL.pattern}|[{''.join(ROOTS)}])")
_REACH = 200


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
    if text[0].isdigit() or text in ("pi", "e", "i") or len(text) == 1 or text[0] in SUPERSCRIPT_DIGITS:
        return "operand"
    if (_FUNCTION.fullmatch(text) and _CALLED.match(s, piece.end())) or (text[0] == "l" and _log_call(piece, s)):
        return "operand"
    return None


def _log_call(piece: re.Match, s: str) -> bool:
    """Whether `piece` is a logarithm named with its base, or lg, before its parenthesis: log2(8), log_3(9)."""
    return (log := LOG_BASE.match(s, piece.start())) is not None and log.end() == piece.end()


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
            close = closing(s, i)
            if name is None or close is None or close < hi:
                return None
            return name.start(), close + 1
    return None
