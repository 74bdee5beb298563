"""Math equivalence of a predicted and an expected answer: the string rules of `normalize` decide what they can,
math-verify (sympy) the rest, under a per-answer timeout that counts as incorrect and is reported."""

from __future__ import annotations

import logging
import re
import signal
import threading
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from pipeline_kit.errors import UserError
from pipeline_kit.grading import normalize as nz
from pipeline_kit.grading import numeric, quantities, relations
from pipeline_kit.grading.answer_forms import congruence
from pipeline_kit.grading.extraction import extract_answer, final_boxed

GRADER_VERSION = 6  # part of every record's grading_key: bump it when a rule changes what is equal
DEFAULT_TIMEOUT = 10.0  # seconds per answer
_MAX_LIST = 16  # longer lists are left to math-verify whole (matching them item by item is quadratic)
_LONE_I = re.compile(r"(?<![\\A-Za-z_])i(?![A-Za-z])")
_TRUTH = {"yes": "true", "no": "false"}
_BOUND_INDEX = re.compile(r"\\(?:sum|prod|lim)|i\s*(?:=|\\to)")


@dataclass(frozen=True)
class Task:
    """What one verdict depends on: the answers, the options of a multiple-choice question (letter → text, in
    order), and whether lists may come in any order (the problem says so)."""

    predicted: str | None
    expected: str
    options: tuple[tuple[str, str], ...] = ()
    any_order: bool = False


@dataclass(frozen=True)
class Verdict:
    correct: bool
    timed_out: bool = False


class NeedsSympy(Exception):
    """Raised by `equivalent(..., sympy=False)` when the string rules cannot decide."""


class GradingTimeout(BaseException):
    """The per-answer timer fired (a BaseException, so that math-verify's and sympy's `except Exception` let it by)."""


def grade(task: Task, timeout: float | None = DEFAULT_TIMEOUT) -> Verdict:
    """The verdict on `task`, with math-verify when needed, stopped after `timeout` seconds (SIGALRM, so only in a
    main thread; elsewhere, or with timeout None, it runs unbounded). A timeout is incorrect and says so."""
    if task.predicted is None:
        return Verdict(False)
    use_timer = bool(timeout) and threading.current_thread() is threading.main_thread()
    fired = []

    def on_alarm(signum, frame):
        fired.append(True)
        raise GradingTimeout

    previous = signal.signal(signal.SIGALRM, on_alarm) if use_timer else None
    try:
        if use_timer:
            signal.setitimer(signal.ITIMER_REAL, timeout)
        correct = equivalent(task.predicted, task.expected, task.options, task.any_order)
    except GradingTimeout:
        correct = False
    finally:
        if use_timer:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    if fired:  # also when something below swallowed the exception and went on
        return Verdict(False, timed_out=True)
    return Verdict(bool(correct))


def quick_verdict(task: Task) -> Verdict | None:
    """The verdict when the string rules decide it without sympy (fast, no timer needed), else None."""
    if task.predicted is None:
        return Verdict(False)
    try:
        return Verdict(equivalent(task.predicted, task.expected, task.options, task.any_order, sympy=False))
    except NeedsSympy:
        return None


def equivalent(
    predicted: str,
    expected: str,
    options: tuple[tuple[str, str], ...] = (),
    any_order: bool = False,
    sympy: bool = True,
) -> bool:
    """Whether `predicted` states `expected`. Rules, in order: the last run of boxes of either; the same canonical
    form (normalize.canonical); a multiple-choice letter against a letter or, through `options`, against its
    option text; numbers with a base subscript by digits and base; plain numbers exactly (to 6 significant digits
    if one has decimals; X% also reads as X/100); word answers as words; tuples, intervals and sets with the same
    brackets item by item (sets in any order); bare lists item by item, in order unless `any_order` or all items
    are assignments; assignments to the same variable by their right-hand sides; answers in numeric's small
    grammar (2\\sqrt{5}, x^3+3x-6, 8\\pi) by value at two points; then math-verify. With sympy=False, NeedsSympy
    is raised where math-verify is needed."""
    predicted, expected = nz.strip_wrappers(_stated(predicted)), nz.strip_wrappers(_stated(expected))
    lp, le = nz.labelled_choice(predicted), nz.labelled_choice(expected)
    if lp and le:
        return lp[0] == le[0]
    if lp or le:  # \textbf{(D) } 12: its letter against a letter, else its value
        letter, value = lp or le
        other_letter = nz.choice_letter(nz.canonical(expected if lp else predicted))
        if other_letter is not None:
            return letter == other_letter
        predicted, expected = (value, expected) if lp else (predicted, value)
    same_time = quantities.same_time(predicted, expected)  # before canonical drops "PM" as a unit
    if same_time is not None:
        return same_time
    p, e = nz.canonical(predicted), nz.canonical(expected)
    if not p or not e:
        return False
    if p == e:
        return True
    if options:
        verdict = _against_options(p, e, dict(options), any_order, sympy)
        if verdict is not None:
            return verdict
    lp, le = nz.choice_letter(p), nz.choice_letter(e)
    if lp and le:
        return lp == le
    bp, be = nz.in_base(p), nz.in_base(e)
    if bp or be:  # 4210_{5}: sympy would read 4210 and drop the base
        if bp and be:
            return bp == be
        return (bp or be)[0] == (e if bp else p).lower()
    cp, ce = congruence(p), congruence(e)
    if cp and ce:  # x \equiv 7 \pmod{9} against x \equiv 16 \pmod{9}: the same class
        return cp[1] == ce[1] and (cp[0] - ce[0]) % cp[1] == 0
    if (cp or ce) and (number := nz.parse_number(e if cp else p)) is not None:
        residue = nz.parse_number(str((cp or ce)[0]))  # 7 \pmod{9} states 7 (16 is in its class, but is not 7)
        return nz.numbers_equal(number, residue)
    if "pm" in p or "pm" in e or "mp" in p or "mp" in e:  # x = \frac{-1 \pm \sqrt{5}}{2}: its two solutions
        both_p, both_e = nz.plus_minus(p), nz.plus_minus(e)
        if both_p or both_e:
            items_p, items_e = both_p or _members(p), both_e or _members(e)
            if len(items_p) == len(items_e) == 2:  # else the other rules decide (x^2 = 4 against x = \pm 2)
                return _match_any_order(items_p, items_e, sympy)
    np_, ne = nz.parse_number(p), nz.parse_number(e)
    if np_ is not None and ne is not None:
        return nz.numbers_equal(np_, ne)
    if (np_ is None) != (ne is None):  # 1000,99 against 1000.99: a decimal comma
        other = nz.decimal_comma(p if np_ is None else e)
        if other is not None and nz.numbers_equal(other, np_ or ne):
            return True
        number = quantities.number_with_unit(predicted if np_ is None else expected)  # 9.8 m/s^2 against 9.8
        if number is not None and (value := nz.parse_number(nz.canonical(number))) is not None:
            return nz.numbers_equal(value, np_ or ne)
        written, other = (np_, e) if np_ is not None else (ne, p)
        if written.places is not None and (exact := numeric.real_constant(other)) is not None:
            if nz.numbers_equal(nz.Number(Fraction(exact)), written):  # \sqrt{2} and 1.4142: the decimal it rounds to
                return True
    cp, ce = relations.between(p), relations.between(e)
    if cp or ce:  # x > 1 and x < 4 (also as a list, x > 1, x < 4) is 1 < x < 4
        return equivalent(cp or p, ce or e, options, any_order, sympy)
    up, ue = _union_of(p), _union_of(e)
    if (up or ue) and _equal_or_open(up or p, ue or e, sympy):  # x<1 or x>3 is (-\infty,1)\cup(3,\infty)
        return True
    ip, ie = nz.as_interval(p) or relations.interval_of(p), nz.as_interval(e) or relations.interval_of(e)
    if (ip or ie) and _equal_or_open(ip or p, ie or e, sympy):  # 1\le x<2 is [1,2); 5\ge x is x\le 5
        return True  # never False here: -x>-1 against x<1 is for math-verify to decide
    if relations.same_solutions(p, e):  # (x-1)(x+2)=0 is x^2+x-2=0; 2x+1>3 is 1<x
        return True
    wp, we = nz.word_answer(p), nz.word_answer(e)
    if wp is not None and we is not None:  # a yes/no question's answer may be stated as true/false
        return _TRUTH.get(wp, wp) == _TRUTH.get(we, we)
    gp, ge = nz.bracket_items(p), nz.bracket_items(e)
    vectors = _as_vectors(p, e, gp, ge)
    if vectors:  # \begin{pmatrix}1\\2\end{pmatrix} against (1, 2), [1, 2] or a row: entry by entry, in order
        return len(vectors[0]) == len(vectors[1]) and _all_equal(zip(*vectors, strict=True), sympy)
    if gp and ge and gp[:2] == ge[:2]:  # the same brackets: tuples and intervals in order, sets in any order
        if len(gp[2]) != len(ge[2]):
            return False
        if gp[0] == "\\{":
            return _match_any_order(gp[2], ge[2], sympy)
        return _all_equal(zip(gp[2], ge[2], strict=True), sympy)
    items_p, items_e = nz.split_list(p), nz.split_list(e)
    group = gp or ge
    if group and not (gp and ge) and group[0] == "\\{":  # a set against a bare list: \{1,-2\} and -2, 1
        listed = items_e if gp else items_p
        if len(listed) == len(group[2]):
            return _match_any_order(listed, group[2], sympy)
    if 1 < len(items_e) <= _MAX_LIST and len(items_p) > 1:
        if len(items_p) != len(items_e):
            return False
        if any_order or all(nz.is_assignment(x) for x in items_e):
            return _match_any_order(items_p, items_e, sympy)
        return _all_equal(zip(items_p, items_e, strict=True), sympy)
    if (len(items_p) == 1) != (len(items_e) == 1) and len(items_p) + len(items_e) <= _MAX_LIST:
        single, listed = (items_p[0], items_e) if len(items_p) == 1 else (items_e[0], items_p)
        if not nz.grouped_digits(",".join(listed)) and all(nz.parse_number(x) is not None for x in (single, *listed)):
            return False  # 1 against 1, 1: a list of numbers is no one number (math-verify's set of it would be)
    ap, ae = nz.assignment(p), nz.assignment(e)
    if ap and ae and ap[0] == ae[0]:  # y = 2x+4 against y = 2x+3: the right-hand sides
        return equivalent(ap[1], ae[1], sympy=sympy)
    if (ap is None) != (ae is None) and _equal_or_open(ap[1] if ap else p, ae[1] if ae else e, sympy):
        return True  # x = 2\sqrt{3} states 2\sqrt{3}; else math-verify (y=-x/2+3/4 is the line 2x+4y-3=0)
    by_value = numeric.compare(p, e)
    if by_value is not None:
        return by_value
    if not sympy:
        raise NeedsSympy
    return _math_verify(p, e)


def _members(answer: str) -> list[str]:
    """The items of a set \\{…\\} or of a bare list; one item for anything else."""
    group = nz.bracket_items(answer)
    return group[2] if group and group[0] == "\\{" else nz.split_list(answer)


def _as_vectors(p: str, e: str, gp, ge) -> tuple[list[str], list[str]] | None:
    """The entries of both answers when one is a vector written as a one-column or one-row matrix and the other is
    one too, or a tuple or bracket list (`gp`, `ge`: their bracket_items); else None."""
    vp, ve = nz.vector_entries(p), nz.vector_entries(e)
    if vp is None and ve is None:
        return None
    xs, ys = vp or _tuple_items(gp), ve or _tuple_items(ge)
    return (xs, ys) if xs and ys else None


def _tuple_items(group: tuple[str, str, list[str]] | None) -> list[str] | None:
    """The items of a tuple (…) or bracket list […] (bracket_items' group), not of a set or half-open interval."""
    return group[2] if group and group[:2] in (("(", ")"), ("[", "]")) else None


def _union_of(answer: str) -> str | None:
    """Relations in one letter joined by "or", each an interval, as the union of those intervals; else None."""
    parts = relations.or_parts(answer)
    if len(parts) < 2:
        return None
    intervals = [nz.as_interval(part) or relations.interval_of(part) for part in parts]
    return "\\cup".join(intervals) if all(intervals) else None


def _equal_or_open(a: str, b: str, sympy: bool) -> bool:
    """equivalent(a, b), where a question the string rules leave open counts as not (yet) equal."""
    try:
        return equivalent(a, b, sympy=sympy)
    except NeedsSympy:
        return False


def _stated(answer: str) -> str:
    """What an answer states when it is written as a sentence or boxed, on either side: "\\boxed{2} and \\boxed{3}"
    states "2, 3", "the answer is 0.6666667" states 0.6666667; anything else as it is."""
    if "box" in answer:
        return final_boxed(answer) or answer
    if "answer" in answer.lower() or "####" in answer:
        return extract_answer(answer, mode="auto") or answer
    return answer


def _against_options(p: str, e: str, options: dict[str, str], any_order: bool, sympy: bool) -> bool | None:
    """A letter against an option text or the other way round; None when neither side is a letter of `options`."""
    lp, le = nz.choice_letter(p), nz.choice_letter(e)
    lp, le = (lp if lp in options else None), (le if le in options else None)
    if le and not lp:  # the expected letter, a predicted option text: it must be that option, and no other
        if not equivalent(p, options[le], any_order=any_order, sympy=sympy):
            return False
        return not any(equivalent(p, text, any_order=any_order, sympy=sympy) for k, text in options.items() if k != le)
    if lp and not le:
        return equivalent(options[lp], e, any_order=any_order, sympy=sympy)
    return None


def _all_equal(pairs, sympy: bool) -> bool:
    """Every pair equal; without sympy, a pair the string rules find unequal decides even when another is open."""
    open_ = False
    for x, y in pairs:
        try:
            if not equivalent(x, y, sympy=sympy):
                return False
        except NeedsSympy:
            open_ = True
    if open_:
        raise NeedsSympy
    return True


def _match_any_order(items_p: list[str], items_e: list[str], sympy: bool) -> bool:
    left = list(items_e)
    for x in items_p:
        hit = next((i for i, y in enumerate(left) if equivalent(x, y, sympy=sympy)), None)
        if hit is None:
            return False
        left.pop(hit)
    return True


def _math_verify(p: str, e: str) -> bool:
    """math-verify's verdict on two canonical answers, each parsed as LaTeX math (expected first: it is the gold)."""
    from math_verify import verify

    gold, pred = _parsed(_imaginary(e)), _parsed(_imaginary(p))
    if not gold or not pred:
        return False
    if len(gold) == len(pred) == 2 and gold[1] != pred[1] and _surely_different(gold[0], pred[0]):
        return False  # skips verify's simplify() for most wrong answers
    # timeout_seconds=None: math-verify's own SIGALRM timer would replace grade()'s
    if verify(gold, pred, timeout_seconds=None):
        return True
    return relations.same_solution_set(gold[0], pred[0])  # x^2<4 against -2<x<2, which verify tells apart


def _imaginary(latex: str) -> str:
    """`latex` with a lone i written I, which latex2sympy reads as the imaginary unit (i alone is a variable to it),
    unless i is bound by a sum, product or limit (\\sum_{i=1}^n i)."""
    if "i" not in latex or _BOUND_INDEX.search(latex):
        return latex
    return _LONE_I.sub("I", latex)


def _surely_different(a, b) -> bool:
    """Whether two exact expressions (no floats, which verify compares to 6 decimals; no relations, sets, matrices,
    integrals or percents, which it treats its own way) differ numerically at two points of their symbols."""
    from sympy import Derivative, Expr, Float, Integral, Limit, Product, Sum, UnevaluatedExpr
    from sympy.core.function import AppliedUndef

    special = (Float, UnevaluatedExpr, Integral, Sum, Product, Derivative, Limit, AppliedUndef)
    if not (isinstance(a, Expr) and isinstance(b, Expr)) or a.has(*special) or b.has(*special):
        return False
    symbols = sorted(a.free_symbols | b.free_symbols, key=str)
    if len(symbols) > len(numeric.POINTS[0]):
        return False
    for point in numeric.POINTS:
        values = dict(zip(symbols, point, strict=False))
        try:
            x, y = complex(a.evalf(subs=values)), complex(b.evalf(subs=values))
        # sympy's own faults (deep recursion on long matrix sums, an AttributeError from the evalf of a ceiling)
        except Exception:  # noqa: BLE001 - only mean there is no quick answer: verify decides
            return False
        if not (numeric.finite(x) and numeric.finite(y)) or abs(x - y) <= 1e-9 * max(1.0, abs(x), abs(y)):
            return False
    return True


@lru_cache(maxsize=8192)
def _parsed(latex: str) -> list:
    """math-verify's parse of one canonical answer, as LaTeX math; cached, since the expected answer of a problem
    is parsed once for each of its samples."""

    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    logging.getLogger("math_verify").setLevel(logging.ERROR)  # "timeout is disabled": grade() keeps time instead
    return parse(f"${latex}$", (LatexExtractionConfig(), ExprExtractionConfig()), parsing_timeout=None)


def warm_up() -> None:
    """Import math-verify and build its regexes (about a second), e.g. in a parent before it forks workers; a
    UserError when it is not installed."""
    try:
        import math_verify  # noqa: F401
    except ImportError as e:
        raise UserError(
            f"grading these answers needs math-verify ({e}); install it with pip install 'pipeline-kit[eval]'."
        ) from None
    _math_verify("\\frac{1}{2}", "x^2")
