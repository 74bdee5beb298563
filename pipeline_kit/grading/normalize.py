"""String rules of the math grader, applied before any sympy work: wrappers, spacing, \\dfrac, \\text{} and units,
thousands separators, leading zeros; plain numbers (with percent) read exactly; lists and multiple-choice letters."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

from pipeline_kit.grading.answer_forms import in_radians, rewritten
from pipeline_kit.grading.notation import from_plain, split_list

# wrappers around a whole answer; `\boxed{...}` and `\fbox{...}` are unwrapped by _unwrap_command
_DELIMITERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
_WRAPPING_COMMANDS = ("boxed", "fbox", "text", "textbf", "textrm", "mathrm", "mathbf", "mbox", "textit", "mathit")
_DOTS = re.compile(r"\\[lc]?dots(?![A-Za-z])|…")
_ELLIPSIS_END = re.compile(r"[,\s](?:\.\.\.|…)\s*$")
_DOLLAR = re.compile(r"(?<!\\)\$")  # a $ that is no \$ (a dollar sign)
_SPACING = re.compile(
    r"(?<!\\)\\(?:[!,;:> ]|q?quad(?![A-Za-z])|displaystyle(?![A-Za-z])|left(?![A-Za-z])|right(?![A-Za-z]))"
)
_LG = re.compile(r"\\lg(?![A-Za-z])")
_DEGREES = re.compile(r"\^\s*(?:\{\s*\\circ\s*\}|\\circ)|°|\\degree(?![A-Za-z])")
# 10,080 or 11,\! 111,\! 100 (MATH's thousands separators); only when the whole answer is such a number
_THOUSANDS = re.compile(r"[+-]?[1-9]\d{0,2}(?:,(?:\\!\s?)?\d{3})+(?:\.\d+)?")
# 1000,99 or 0,5: a decimal comma (European style); only read so against a plain number on the other side
_DECIMAL_COMMA = re.compile(r"([+-]?\d+),(\d+)")
# a bare variable before a relation: the answer is what follows it (x \approx 11, n = 34)
_VARIABLE = re.compile(r"\s*\\?[A-Za-z]+(?:_\{?\w+\}?)?\s*")
# an inequality or a chain of two, against interval notation: 1 \le x < 2 is [1,2)
_LESS = r"(<|\\le(?:q)?(?![A-Za-z])|≤|\\leqslant)"
_GREATER = r"(>|\\ge(?:q)?(?![A-Za-z])|≥|\\geqslant)"
_CHAIN = re.compile(rf"(.+?){_LESS}\s*([A-Za-z])\s*{_LESS}(.+)")
_ONE_SIDED = re.compile(rf"([A-Za-z])\s*(?:{_LESS}|{_GREATER})(.+)")
_ONE_SIDED_FLIPPED = re.compile(rf"(.+?)(?:{_LESS}|{_GREATER})\s*([A-Za-z])")  # 5 \geq x is x \leq 5
# 4 4/9 (a mixed number: 4 + 4/9), optionally a percent; only as a whole answer, never across lines
_MIXED = re.compile(r"([+-]?)(\d+)[ \t]+(\d+)/(\d+)[ \t]*(\\?%)?")
# 50 percent, 4 4/9pct, \frac{1}{2}\text{ percent}: 50%
_PERCENT_WORD = re.compile(
    r"(?<=[\d}])[ \t]*(?:\\(?:text|mathrm|mbox)\{\s*(?:percent(?:age)?|pct)\.?\s*\}|(?:percent(?:age)?|pct)\.?)$", re.I
)
_MIN_PRECISION_DIGITS = 4  # a decimal with this many significant digits stands for an exact value it rounds
# a trailing \text{ cm}, \mbox{units}, \mathrm{~m}, optionally squared: a unit once something comes before it
_UNIT_COMMAND = re.compile(r"\\(?:text|mbox|textrm|mathrm)\s*\{\s*~?[A-Za-z][A-Za-z .~/]*\}(?:\^\{?[23]\}?)?$")
_TRAILING_WORDS = re.compile(r"(?<=[\d}%)])\s+[A-Za-z][A-Za-z]+(?:\s+[A-Za-z]+)*\.?$")
_LONGEST_UNIT_SEARCH = 500  # longer "answers" are prose caught by an anchor; the word search would be quadratic
_MATH_WORDS = {"pi", "and", "or", "sqrt", "sin", "cos", "tan", "log", "ln", "exp", "infty", "infinity", "inf", "mod"}
_WORDS = re.compile(r"(?:[A-Za-z]{3,}|[Nn][Oo])(?: [A-Za-z]+)*")  # two letters are a product (ab), but "no" is a word
_TEXT_AND = re.compile(r"\\(?:text|mbox|mathrm)\s*\{\s*and\s*\}")
_AND_JOINER = re.compile(r"\s*,?\s*\band\s+")  # between the last two items of a list: "1, 2 and 3", "1, 2, and 3"
_ITEM_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{3,}")  # a word in a list's item (not a LaTeX command's name)
_LETTER = re.compile(r"\(?([A-J])\)?")
# an option's label before its value, as AMC's answer key writes it: \textbf{(D) } 12, (D) 12
_LABELLED = re.compile(
    r"(?:\\(?:textbf|text|mathrm|mathbf)\s*\{\s*\(([A-E])\)\s*\}|\(([A-E])\))(?:\s|\\[ ,;:!]|~)*(\S.*)", re.S
)
_MEMBER_OF = re.compile(r"^[A-Za-z]\\in(?![A-Za-z])")
# a sentence before the value, in the box: \text{the minimum value is } 3, \text{There are } 5 \text{ ways}
_STATED_VALUE = re.compile(
    r"^(?:\\text\{\s*[A-Za-z][A-Za-z ,']*?\b(?:is|are|equals)\s*:?\s*\}|[A-Za-z][A-Za-z ,']*?\b(?:is|are|equals)\s*:?)\s*(?=\S)"
)
_BASE = re.compile(r"([0-9][0-9A-Za-z]*)_\{?(\d+)\}?")
_VECTOR = re.compile(r"\\begin\{([pb]?matrix)\}(.*)\\end\{\1\}", re.S)
_GROUP = re.compile(r"(\\\{|\(|\[)(.*)(\\\}|\)|\])", re.S)
_ASSIGNMENT = re.compile(r"[A-Za-z](?:_\{?\w+\}?)?\s*=\s*(.+)")
_VALUE_FIRST = re.compile(r"([^=<>]+?)\s*=\s*([A-Za-z](?:_\{?\w+\}?)?)")  # 2 = x, as the value's statement
# a problem that asks for every solution ("Find all x", "Enter all the solutions, separated by commas", "the
# roots"), unless it also fixes an order ("in increasing order", "from least to greatest")
_ANY_ORDER = re.compile(
    r"separated by commas|in any order|\b(?:find|determine|list|give|compute|enter|state|identify|what are)\s+all\b"
    r"|\ball\b[^.?!]*?\b(?:solutions|roots|values|zeros|zeroes)\b|\broots\b",
    re.I,
)
_FIXED_ORDER = re.compile(
    r"\b(?:in|by)\s+(?:increasing|decreasing|ascending|descending|numerical|alphabetical)\s+order\b|\bin order\b"
    r"|\bfrom\s+(?:least|smallest|lowest|greatest|largest|highest)\s+to\b",
    re.I,
)

_PLUS_MINUS = re.compile(r"\\(?:pm|mp)(?![A-Za-z])")  # \pm or \mp (± and ∓ are written so by from_plain)
_INT = re.compile(r"[+-]?\d+")
_DECIMAL = re.compile(r"[+-]?(?:\d+\.\d*|\.\d+)")
_SCIENTIFIC = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+))(?:[eE]|\\times10\^|\\cdot10\^)\{?([+-]?\d{1,3})\}?")
_SLASH = re.compile(r"([+-]?\d+)\.?/(\d+)")  # -1./3: a Python-style float numerator
_FRAC = re.compile(r"([+-]?)(\d*)\\frac(?:\{(\d+)\}|(\d))(?:\{(\d+)\}|(\d))")


@dataclass(frozen=True)
class Number:
    """A plain number as written: its exact value, whether it was written with decimals (then it is compared to 6
    significant digits), and whether it carried a percent sign."""

    value: Fraction
    decimal: bool = False
    percent: bool = False
    places: int | None = None  # decimal places as written (0.3333: 4), for plain decimals only

    def readings(self) -> tuple[Fraction, ...]:
        """X% reads as X and as X/100 (the unit dropped, or the quantity); anything else as itself."""
        return (self.value, self.value / 100) if self.percent else (self.value,)


def strip_wrappers(text: str) -> str:
    """`text` without what surrounds a whole answer: spaces, $…$, \\(…\\), \\[…\\], \\boxed{…}, \\fbox{…}, {…},
    a trailing period or comma, and a trailing backslash (NeMo-Skills' 185\\)."""
    s = text.strip()
    while True:
        before = s
        for left, right in _DELIMITERS:
            if len(s) > len(left) + len(right) and s.startswith(left) and s.endswith(right):
                s = s[len(left) : -len(right)].strip()
        inner = _unwrap_command(s, ("boxed", "fbox"))
        if inner is None and s.startswith("{") and matching_brace(s, 0) == len(s) - 1:
            inner = s[1:-1]  # {10,\!080}
            if _a_set(inner):
                return f"\\{{{inner.strip()}\\}}"
        if inner is None and s.startswith("[") and s.endswith("]") and s[1:-1].strip().startswith("$"):
            inner = s[1:-1]  # [$\sqrt{4}$]: brackets around the math, not an interval
        if inner is not None:
            s = inner.strip()
        if not s.endswith("\\\\") and not _ELLIPSIS_END.search(s):  # 1, 2, 3, ... goes on: no full stop
            s = s.rstrip(" .,;\\").strip()
        if len(_DOLLAR.findall(s)) == 1 and (s.startswith("$") or s.endswith("$")):
            s = s.strip("$").strip()  # one $ that closes nothing: 0.3333$ (a delimiter cut in half)
        if s == before:
            return s


def _a_set(braced: str) -> bool:
    """Whether what bare braces hold is a set's items, {3, 1, 2}, and not a group: {10,\\!080}, {\\$32,348},
    {(1, 2)}."""
    if "," not in braced or ",\\!" in braced or len(split_list(braced)) < 2:
        return False
    return not _THOUSANDS.fullmatch(braced.strip().removeprefix("\\$").removesuffix("\\%").strip())


def and_list(s: str) -> str:
    """`s` with the "and" that joins the items of a list written as commas: `1, 2 and 3` → `1, 2, 3`, `x = 1 and
    x = 2` → `x = 1, x = 2`; `s` as it is without such an "and", or when an item is prose ("Alice and Bob")."""
    if "and" not in s:
        return s
    if "=" not in s:  # 19, 46, \text{ and } 82 (groups of assignments, p = 5, q = 2 \text{ and } ..., stay whole)
        s = _TEXT_AND.sub(" and ", s)
    items = _AND_JOINER.split(s)
    if len(items) < 2 or any(not item.strip() or _prose(item) for item in items):
        return s
    return ", ".join(item.strip() for item in items)


def _prose(item: str) -> bool:
    return any(word.lower() not in _MATH_WORDS for word in _ITEM_WORD.findall(item))


_PLAIN_LE_GE = re.compile(r"(?<![<=>])(?:<=|>=)(?![<=>])")


def canonical(text: str) -> str:
    """The answer rewritten by the grader's string rules; two answers with the same canonical form are equal."""
    s = from_plain(strip_wrappers(text))
    if "," in s:  # 1, 2 and 3 is 1,2,3 (a list of two, 1 and 2, keeps to the rules it had: math-verify's set)
        s = and_list(s)
    s = _PERCENT_WORD.sub("%", s.replace("{,}", ","))
    if (m := _MIXED.fullmatch(s)) and int(m.group(3)) < int(m.group(4)):  # before spaces go: 4 4/9 is not 44/9
        sign, whole, num, den, pct = m.groups()
        s = f"{sign}{whole}\\frac{{{num}}}{{{den}}}{pct or ''}"
    s = s.replace("\\lt", "<").replace("\\gt", ">")
    if "=" in s:  # x <= 3 as plain text writes x \le 3 (not <=>, "if and only if")
        s = _PLAIN_LE_GE.sub(lambda m: "\\le " if m.group() == "<=" else "\\ge ", s)
    if _THOUSANDS.fullmatch(s):
        s = re.sub(r",(?:\\!)?\s?", "", s)
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = _DOTS.sub("...", s) if "dots" in s or "…" in s else s  # \ldots, \cdots, \dots, …: one ellipsis
    s = _LG.sub(r"\\log", s) if "\\lg" in s else s  # \lg is the base-10 logarithm (ISO 80000-2), as \log is here
    s = _SPACING.sub(" ", s)
    s = _DEGREES.sub("", in_radians(s))  # \cos 60^\circ is 1/2; the angle 90^\circ is 90
    s = s.replace("\\$", "").replace("\\textdollar", "")
    for approx in ("\\approx", "≈"):  # 1/3 ≈ 0.333 states 1/3; x ≈ 11 states 11
        head, _, tail = s.partition(approx)
        if head.strip() and tail.strip():
            s = tail if _VARIABLE.fullmatch(head) else head
    s = _strip_units(_STATED_VALUE.sub("", s.strip(), count=1))
    while True:  # a whole \text{…}, \textbf{…}, \mathrm{…} or {…}: its content (\text{(B)} → (B))
        inner = _unwrap_command(s, _WRAPPING_COMMANDS)
        if inner is None and s.startswith("{") and matching_brace(s, 0) == len(s) - 1:
            inner = s[1:-1]
        if inner is None:
            break
        s = _strip_units(inner.strip())  # \text{5 cm}: the unit shows once the wrapper is gone
    s = rewritten(re.sub(r"\s+", " ", s))
    s = re.sub(r" ?([^A-Za-z ]) ?", r"\1", s)  # spaces only survive between letters (\pi r)
    s = _MEMBER_OF.sub("", s)  # x \in [-2, 7] → [-2,7]
    if _INT.fullmatch(s):
        s = str(int(s))  # 016 → 16, +7 → 7
    return s


def _strip_units(s: str) -> str:
    """Drop a trailing unit: \\text{ cm}, \\mbox{units}^2, or plain words after a number (10 cm, 5 dollars)."""
    while len(s) <= _LONGEST_UNIT_SEARCH:
        m = _UNIT_COMMAND.search(s)
        if m and s[: m.start()].strip():
            s = s[: m.start()].rstrip()
            continue
        m = _TRAILING_WORDS.search(s)
        if m and s[: m.start()].strip() and not _MATH_WORDS & set(m.group().lower().replace(".", "").split()):
            s = s[: m.start()].rstrip()
            continue
        return s
    return s


def _unwrap_command(s: str, names: tuple[str, ...]) -> str | None:
    """The content of `\\name{…}` when that command spans all of `s` (its braces balanced), else None."""
    if not s.startswith("\\"):
        return None
    m = re.match(r"\\([A-Za-z]+)\s*\{", s)
    if not m or m.group(1) not in names or not s.endswith("}"):
        return None
    end = matching_brace(s, m.end() - 1)
    return s[m.end() : end] if end == len(s) - 1 else None


def matching_brace(s: str, start: int) -> int | None:
    """The index of the `}` that closes the `{` at `start`, or None when it is never closed."""
    depth = 0
    for i in range(start, len(s)):
        ch = s[i]
        if ch == "\\":
            continue
        if ch == "{" and (i == 0 or s[i - 1] != "\\"):
            depth += 1
        elif ch == "}" and (i == 0 or s[i - 1] != "\\"):
            depth -= 1
            if depth == 0:
                return i
    return None


def parse_number(s: str) -> Number | None:
    """`s` (canonical) as a Number when it is a plain one: 16, -3.5, .5, 1/2, \\frac{1}{2}, \\frac12, 918\\frac{1}{2},
    2.5e-3, 4.5\\times10^{33}, any of them with % or \\%, or `x = <one of them>` (or `<one of them> = x`); None
    otherwise. The percent of a plain integer or decimal may be a unit (Number.readings: NeMo-Skills' rule), that of
    a fraction is a quantity."""
    percent = False
    if s.endswith("%"):
        s, percent = s[:-1].removesuffix("\\"), True
    assigned = assignment(s) if "=" in s else None
    if assigned and not percent:
        return parse_number(assigned[1])
    try:
        if _INT.fullmatch(s):
            return Number(Fraction(int(s)), False, percent)
        if _DECIMAL.fullmatch(s):
            return Number(Fraction(s), True, percent, len(s.partition(".")[2]))
        if m := _SCIENTIFIC.fullmatch(s):
            return Number(Fraction(m.group(1)) * Fraction(10) ** int(m.group(2)), True, percent)
        scale = Fraction(1, 100) if percent else 1  # the percent of a fraction is its quantity: 4\frac{4}{9}\% = 40/900
        if m := _SLASH.fullmatch(s):
            return Number(Fraction(int(m.group(1)), int(m.group(2))) * scale)
        if m := _FRAC.fullmatch(s):
            sign, whole, num, den = m.group(1), m.group(2), m.group(3) or m.group(4), m.group(5) or m.group(6)
            value = int(whole or 0) + Fraction(int(num), int(den))
            return Number((-value if sign == "-" else value) * scale)
    except (ValueError, ZeroDivisionError):  # 1/0, or an integer longer than Python converts
        return None
    return None


def decimal_comma(s: str) -> Number | None:
    """`s` (canonical) read with a decimal comma, 1000,99 → 1000.99 and 0,111 → 0.111, else None. Only for a side
    whose other side is a plain number: 1,5 alone may as well be a list of two."""
    m = _DECIMAL_COMMA.fullmatch(s)
    return Number(Fraction(f"{m.group(1)}.{m.group(2)}"), True) if m else None


def as_interval(s: str) -> str | None:
    """An inequality in one variable (canonical) as interval notation: 1\\le x<2 → [1,2), x>3 → (3,\\infty),
    x\\le-1 → (-\\infty,-1]; None when `s` is no such inequality."""
    m = _CHAIN.fullmatch(s)
    if m and _VARIABLE.fullmatch(m.group(1)) is None:
        low, lop, _, hop, high = m.groups()
        return f"{'(' if lop in '<' else '['}{low.strip()},{high.strip()}{')' if hop in '<' else ']'}"
    m = _ONE_SIDED.fullmatch(s)
    if m and not _VARIABLE.fullmatch(m.group(4)):
        _, less, greater, bound = m.groups()
    elif (m := _ONE_SIDED_FLIPPED.fullmatch(s)) and not _VARIABLE.fullmatch(m.group(1)):
        bound, greater, less, _ = m.groups()  # 5 \geq x: x is at most 5
    else:
        return None
    if less:
        return f"(-\\infty,{bound.strip()}{')' if less == '<' else ']'}"
    return f"{'(' if greater == '>' else '['}{bound.strip()},\\infty)"


def numbers_equal(a: Number, b: Number) -> bool:
    """Equal exactly, or to 6 significant digits when either side was written with decimals (1/3 = 0.333333,
    5 ≠ 5.001, 1e-8 ≠ 2e-8), or an exact value against a decimal of 4 or more significant digits that it rounds to
    at the places written (1/3 = 0.3333, 8/3 = 2.6667; not 1/3 = 0.33); a percent side is tried as X and as X/100."""
    for x in a.readings():
        for y in b.readings():
            if x == y or ((a.decimal or b.decimal) and _significant(x) == _significant(y)):
                return True
            if _rounds_to(x, b) or _rounds_to(y, a):
                return True
    return False


def _rounds_to(exact: Fraction, written: Number) -> bool:
    """Whether `written`, a plain decimal of enough significant digits, is `exact` rounded at its places."""
    if written.places is None or written.value == 0:
        return False
    digits = len(str(abs(written.value * 10**written.places).numerator).lstrip("0"))
    if digits < _MIN_PRECISION_DIGITS:
        return False
    return abs(exact - written.value) <= Fraction(1, 2 * 10**written.places)


def _significant(x: Fraction, digits: int = 6) -> Fraction:
    if x == 0:
        return x
    exponent = math.floor(math.log10(abs(x.numerator)) - math.log10(x.denominator))  # big ints are fine here
    return round(x, digits - 1 - exponent)


def grouped_digits(s: str) -> bool:
    """Whether `s` is one number with thousands separators (16,386.20; 1,\\!000), not a list."""
    return _THOUSANDS.fullmatch(s) is not None


def word_answer(s: str) -> str | None:
    """`s` lowercased when it is a plain word answer (odd, Monday, no solution), else None."""
    return s.lower() if _WORDS.fullmatch(s) else None


def choice_letter(s: str) -> str | None:
    """The letter of a multiple-choice answer written as B, (B), \\text{(B)} or \\textbf{B} (canonical), else None."""
    m = _LETTER.fullmatch(s)
    return m.group(1) if m else None


def labelled_choice(s: str) -> tuple[str, str] | None:
    """(letter, value) of an answer written as an option's label and its value (`\\textbf{(D) } 12`), else None."""
    m = _LABELLED.fullmatch(s.strip())
    return (m.group(1) or m.group(2), m.group(3)) if m else None


def bracket_items(s: str) -> tuple[str, str, list[str]] | None:
    """(opening, closing, items) when `s` (canonical) is one bracketed group of two or more comma-separated items:
    a tuple (3,\\frac{\\pi}{2}), an interval [-2,7) or a set \\{1,2\\}; else None. Compared item by item, such
    answers never reach sympy whole (its LaTeX grammar takes up to half a second to parse a tuple)."""
    m = _GROUP.fullmatch(s)
    if not m:
        return None
    depth = 0
    for ch in m.group(2):
        depth += (ch in "([{") - (ch in ")]}")
        if depth < 0:  # (a+5)(b+2): the first bracket closes before the end
            return None
    items = split_list(m.group(2))
    return (m.group(1), m.group(3), items) if depth == 0 and len(items) > 1 else None


def vector_entries(s: str) -> list[str] | None:
    """The entries of a one-column or one-row matrix (`s` canonical: \\begin{pmatrix}1\\\\2\\end{pmatrix},
    \\begin{bmatrix}1&2\\end{bmatrix}), a vector as MATH's answers write it; None for anything else."""
    m = _VECTOR.fullmatch(s) if "matrix" in s else None
    if not m or "\\begin" in m.group(2):
        return None
    rows = m.group(2).split("\\\\")
    if rows and not rows[-1].strip():  # a row break after the last row
        rows.pop()
    entries = rows[0].split("&") if len(rows) == 1 else rows if all("&" not in row for row in rows) else []
    entries = [entry.strip() for entry in entries]
    return entries if len(entries) > 1 and all(entries) else None


def plus_minus(s: str) -> list[str] | None:
    """The two answers one `\\pm` (or `\\mp`) stands for, + first (- first for \\mp): `1\\pm\\sqrt{2}` →
    [`1+\\sqrt{2}`, `1-\\sqrt{2}`]; None without exactly one, or beside a list."""
    found = _PLUS_MINUS.findall(s)
    if len(found) != 1 or len(split_list(s)) > 1:
        return None
    first, second = ("+", "-") if found[0] == "\\pm" else ("-", "+")
    return [_PLUS_MINUS.sub(first, s), _PLUS_MINUS.sub(second, s)]


def in_base(s: str) -> tuple[str, int] | None:
    """(digits, base) of a number written with its base as a subscript, 4210_{5} or 4210_5; else None."""
    m = _BASE.fullmatch(s)
    return (m.group(1).lower(), int(m.group(2))) if m else None


def is_assignment(s: str) -> bool:
    return assignment(s) is not None


def assignment(s: str) -> tuple[str, str] | None:
    """(variable, value) of `y=2x+3`, or of `2=x` (canonical), else None."""
    m = _ASSIGNMENT.fullmatch(s)
    if m:
        return s[: m.start(1)].rstrip(" ="), m.group(1)
    m = _VALUE_FIRST.fullmatch(s)
    return (m.group(2), m.group(1)) if m else None


def lists_any_order(problem: str | None) -> bool:
    """Whether a problem asks for a list whose order does not matter ("separated by commas", "in any order", "find
    all", "all the solutions", "the roots") and fixes none ("in increasing order"); without a problem text lists
    are compared in order."""
    return bool(problem) and _ANY_ORDER.search(problem) is not None and _FIXED_ORDER.search(problem) is None
