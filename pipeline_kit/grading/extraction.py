"""Answer extraction: the predicted answer stated by a generation, as a string, or None when it states none. Three
modes (named in modes.py): `boxed` (the last \\boxed{}, NeMo-Skills' and Qwen2.5-Math's convention), `auto` (also
<answer> tags and stated answers) and `mcq` (the last stated option letter)."""

from __future__ import annotations

import re

from pipeline_kit.grading import relations
from pipeline_kit.grading.boxes import BOX_JOINER, boxed_content, boxes, final_boxed, last_boxed, last_run  # noqa: F401  (callers take them from here too)
from pipeline_kit.grading.choices import letter_first, stated_letter
from pipeline_kit.grading.formula import formula_around
from pipeline_kit.grading.normalize import and_list, assignment, grouped_digits, strip_wrappers
from pipeline_kit.grading.notation import FUNCTION_CALL, LOG_BASE

_FINAL = re.compile(r"final answer(?: is)?\s*[:：]?", re.I)
_HASHES = re.compile(r"^\s*####\s*(.+?)\s*$", re.M)
_ANSWER_IS = re.compile(
    r"(?:\banswer\s*(?:is|[:：])|\bréponse\s*(?:est|:)|\brespuesta\s*(?:es|:)|\bantwort\s*(?:ist|:)|答案\s*[是为:：])",
    re.I,
)
# "$n$ is 34", "x equals 5": after the name of what is asked for, the verb, then the answer
_VERB = re.compile(r"\s*(?:is|are|equals|=|was|will be|would be|must be)\s+(?=\S)", re.I)
_NAME = re.compile(r"(?=.*[A-Za-z])[A-Za-z0-9\\{}_^()+\-*,' ]{1,20}")  # n, m+n, f(3), a_1, \angle ABC
_BOLD = re.compile(r"(?<![\w)\]}])\*\*|\*\*(?![\w(])")  # markdown's **bold**, not a power (x**2)
_HOPE = re.compile(r"\s*I hope it is correct\.?\s*$", re.I)
# $$…$$, $…$ or \(…\); a \$ (a dollar sign) opens or closes none of them
_INLINE_MATH = re.compile(r"(?<!\\)\$\$(.+?)(?<!\\)\$\$|(?<!\\)\$(.+?)(?<!\\)\$|\\\((.+?)\\\)", re.S)
# a number (sign, thousands or a decimal comma, decimals, a/b, a mixed 4 4/9, %, percent) or a \frac{}{}: what the
# last-resort fallbacks pick; never the digits of a word (AZYUK2A)
_PERCENT = r"(?:%|[ \t]*(?:percent(?:age)?|pct)\b)?"
_MATH_TOKEN = re.compile(
    r"\\[dt]?frac\{[^{}]*\}\{[^{}]*\}"
    rf"|(?<![A-Za-z\d.,])(?:[+-]?\d{{1,3}}(?:,\d{{3}})+(?:\.\d+)?|[+-]?\d+,\d{{1,2}}(?![\d,])"
    rf"|[+-]?\d+[ \t]+\d+/\d+(?![\d/])|[+-]?(?:\d+(?:\.\d+)?|\.\d+)(?:/\d+)?){_PERCENT}"
)
# a tuple or interval that prose ends in ("So the point is (2, -1)."): within _REACH_GROUP of its number, each item
# holds a number, pi or infinity, and no word (x, pi and oo are none)
_BRACKET_GROUP = re.compile(r"[(\[]([^()\[\]\n]*)[)\]]")
_ITEM = re.compile(r"\d|∞|π|\\infty|\\pi|(?<![A-Za-z])(?:oo|pi)(?![A-Za-z])")
_WORD = re.compile(r"(?<![\\A-Za-z])(?!(?:oo|pi)(?![A-Za-z]))[A-Za-z]{2,}")
_REACH_GROUP = 200
# a variable's relation to a number in plain text (x = -3, x <= 3, y ≥ 1/2), for runs of them in prose
_PLAIN_RELATION = re.compile(r"(?<![\w\\)^])([A-Za-z])\s*(<=|>=|=|<|>|≤|≥)\s*(-?\d+(?:\.\d+)?(?:/\d+)?)(?![\d.]*\d)")
# what says that the $…$ after it are several answers, a list ("The roots are $1$ and $-3$.")
_LISTED = re.compile(
    r"(?<![A-Za-z])(?:solutions|roots|zeros|zeroes|values|answers|points|numbers|integers)\s+(?:are|is|:)\s*$"
)
_UNION, _INTERSECTION = " \\text{ or } ", " \\text{ and } "  # how a run of inequalities is one answer
_OR_WORD = re.compile(r"(?<![A-Za-z])or(?![A-Za-z])")
_INEQUALITY = re.compile(r"<|>|\\[lg]e(?:q|qslant)?(?![A-Za-z])|\\[lg]t(?![A-Za-z])|≤|≥")
# a word of prose: three letters or more, a short English word standing alone ("It is 5."), or CJK script
_PROSE_WORD = re.compile(
    r"(?<![\\A-Za-z])[^\W\d_]{3,}|(?<!\S)(?i:is|it|so|we|be|to|of|at|on|by|as|if|an)(?=\s)|[\u3000-\u9fff\uac00-\ud7af]"
)
_SHORT_ANSWER = 60  # a whole generation this short and not prose is its own answer ("42", "\frac{4}{23}")
# a formula read whole (an <answer> tag's body, a response that is one matrix, a $…$ over several lines) is at most
# this long: a list of 20 triples fits
_LONGEST_WHOLE = 2000
_DOLLAR_SIGN = re.compile(r"(?<!\\)\$")  # one that opens or closes math ($$ counts twice), not a \$
_NO_ANSWER_WORDS = {"none", "null", "nan", "unknown"}  # a whole response of one of these says it has no answer
_SENTENCE_VERB = re.compile(r"\b(?:is|are|was|were|equals|be|get|gives?)\b", re.I)  # "The total is 12 apples."
_ENVIRONMENT = re.compile(rf"\\begin\{{(\w+\*?)\}}.{{0,{_LONGEST_WHOLE}}}\\end\{{\1\}}", re.S)  # a matrix, array, cases


_ANSWER_TAG, _ANSWER_TAG_END = "<answer>", "</answer>"
_THINK, _THINK_END = "<think>", "</think>"  # a reasoning model's trace, when the generation kept it


def extract_answer(text: str | None, multiple_choice: bool = False, mode: str = "auto") -> str | None:
    """The answer `text` states. mode "boxed": the content of the last \\boxed{}/\\fbox{} (or run of boxes joined
    by "and"/commas, see final_boxed), None without one, as the published numbers of boxed-prompt benchmarks count
    it. Modes "auto" and "mcq" first narrow `text` to its last <answer>…</answer> (R1-Zero-style prompts; the
    closing tag may be cut by a stop string), unless a box follows it. mode "mcq": the last stated option letter
    (choices.stated_letter). mode "auto", by the first rule that finds one: the last box; "The final answer is X"
    (without "I hope it is correct", a closing period or $); "#### X"; "the answer is X" / "Answer: X" (also
    réponse, respuesta, Antwort, 答案); the whole text when it is a short formula; the last $…$ that is not prose;
    the last number, or the plain-text formula it is part of (formula.formula_around). With `multiple_choice`, a
    letter A-J comes first: a boxed letter, and in auto mode a stated one, then the last "(B)". Auto and mcq modes
    take AoPS's \\framebox{} for a box. In every mode only what follows a reasoning trace (</think>) is read, and a
    trace that never ended has no answer (in auto and mcq modes, unless it holds an <answer> tag). None when nothing
    is found."""
    if not text or not text.strip():
        return None
    text = _after_thinking(text, tags=mode != "boxed")
    if text is None:
        return None
    tagged = False
    if mode != "boxed":
        text, tagged = _tagged(text)
        if "\\framebox{" in text:  # AoPS solutions' box (aime25's reference solutions): auto and mcq read it too
            text = text.replace("\\framebox{", "\\fbox{")
    if mode == "mcq":
        return stated_letter(text)
    if multiple_choice:
        letter = letter_first(text, boxed_only=mode == "boxed")
        if letter is not None:
            return letter
    found, open_last = boxes(text)
    boxed = final_boxed(text)
    if mode == "boxed" or open_last:  # a box left open: cut off mid-answer, no answer
        return boxed
    if boxed is not None:  # "...\\boxed{255} ... The final answer is $10,455$": the statement after the boxes
        return _stated(text[found[-1][1] :], _FINAL) or boxed
    stated = _stated(text, _FINAL)
    if stated is not None:
        return stated
    hashes = _HASHES.findall(text)
    if hashes:
        return strip_wrappers(hashes[-1])
    stated = _stated(text, _ANSWER_IS)
    if stated is not None:
        return stated
    if tagged:  # what the tag holds is the answer, whole: a formula of any length, or a few words on one line
        body = strip_wrappers(text)
        sentence = _SENTENCE_VERB.search(body) and re.search(r"\d", body)  # its number is the answer then
        words = len(body) <= _SHORT_ANSWER and "\n" not in body and not sentence
        if words or (len(body) <= _LONGEST_WHOLE and not _PROSE_WORD.search(_without_commands(and_list(body)))):
            return body or None
    return _fallback(text)


def _after_thinking(text: str, tags: bool) -> str | None:
    """What follows a reasoning model's trace (its last </think>; an answer stated only while thinking is none), or
    None when the trace never ended (it opens with <think>: cut by the token budget), unless `tags` and it holds an
    <answer> tag (R1-Zero's template with the trace left open); `text` without a trace."""
    _, found, after = text.rpartition(_THINK_END)
    if found:
        return after
    unfinished = text.lstrip().startswith(_THINK) and not (tags and _ANSWER_TAG in text)
    return None if unfinished else text


def _tagged(text: str) -> tuple[str, bool]:
    """What the last <answer> tag of `text` holds (up to </answer> or the end), and True; or `text` and False when
    it has none, or when a box comes after it (the answer then is boxed after all)."""
    start = text.rfind(_ANSWER_TAG)
    if start == -1:
        return text, False
    body = text[start + len(_ANSWER_TAG) :]
    end = body.find(_ANSWER_TAG_END)
    if end != -1 and "box" in body[end:] and boxes(body[end:])[0]:
        return text, False
    return (body if end == -1 else body[:end]), True


def _stated(text: str, anchor: re.Pattern) -> str | None:
    found = list(anchor.finditer(text))
    return _after_anchor(text[found[-1].end() :]) if found else None


def _after_anchor(rest: str) -> str | None:
    """The answer that follows "the answer is": the rest of its line up to a sentence's end, its first $…$ if it
    has one, and the first number or formula in it when it reads as prose ("220 $ à payer" → 220)."""
    rest = rest.lstrip(" \t:：")
    if rest.startswith("}"):  # \text{The answer is } 5: the anchor's \text group closes before the answer
        rest = rest[1:].lstrip(" \t:：")
    line = _HOPE.sub("", _first_line(rest)).strip()
    segments = list(_INLINE_MATH.finditer(line))
    if segments:  # the first $…$, with those right after it joined by commas or "and" ($f(n)=n$, $g(n)=1$)
        run = [segments[0]]
        for m in segments[1:]:
            if not BOX_JOINER.fullmatch(line[run[-1].end() : m.start()]):
                break
            run.append(m)
        parts = [_math_body(m) for m in run]
        verb = _VERB.match(line, run[-1].end())
        if verb and len(parts) == 1 and _NAME.fullmatch(parts[0]) and not re.search(r"\d\s*$", parts[0]):
            return _after_anchor(line[verb.end() :])  # "The largest $n$ is 34." states 34, not n
        parts = [p for p in parts if p]
        return _inequality_run(line, run, parts) or ", ".join(parts) or None
    line = re.split(r"\.(?:\s|$)|。", line, maxsplit=1)[0]
    m = re.match(r"(.{1,20}?)\s+(?:is|are|equals)\s+(?=\S)", line)
    if m and not m.group(1)[0].isdigit() and _NAME.fullmatch(m.group(1).replace("the ", "").replace("The ", "")):
        line = line[m.end() :]  # "x is 5", "the sum equals 12"
    line = strip_wrappers(_BOLD.sub("", line))
    if _PROSE_WORD.search(_without_commands(and_list(line))):  # "1, 2 and 3" is a list, not prose
        token = _MATH_TOKEN.search(line)
        if token:
            return _formula(line, token)
        return line if len(line.split()) <= 4 else None  # "Monday"; not "whether it is correct, let us check"
    return _last_of_chain(line) or None


def _first_line(rest: str) -> str:
    """The line after an anchor, on through the line that closes a $…$ it opens ("is $\\begin{pmatrix} 1 \\\\" then
    "2 \\end{pmatrix}$.": a matrix over two lines), its line breaks as spaces."""
    first, _, more = rest.partition("\n")
    if not more or len(_DOLLAR_SIGN.findall(first)) % 2 == 0:
        return first
    close = _DOLLAR_SIGN.search(more, 0, _LONGEST_WHOLE)
    if close is None:
        return first
    end = more.find("\n", close.end())
    return " ".join([first, more[: end if end != -1 else len(more)]]).replace("\n", " ")


def _last_of_chain(s: str) -> str:
    """The result of a worked chain, "(35 + 70 = 105)" → 105; an equation in a variable (x = 5, x^2 + y^2 = 4) is
    kept whole: the comparison reads a value from it where the expected answer is one."""
    body = s[1:-1] if s.startswith("(") and s.endswith(")") and "=" in s else s
    parts = re.split(r"(?<![<>!:=\\])=(?!=)", body)
    if len(parts) < 2 or any(re.search(r"[A-Za-z]", _without_commands(part)) for part in parts[:-1]):
        return s
    return parts[-1].strip() or s


def _fallback(text: str) -> str | None:
    stripped = strip_wrappers(_BOLD.sub("", text))
    short = len(stripped) <= _SHORT_ANSWER or _ENVIRONMENT.fullmatch(stripped) is not None  # a matrix, whole
    if short and not _PROSE_WORD.search(_without_commands(and_list(stripped))):
        return stripped or None
    found = _last_math(text)
    if found is None and len(stripped) <= _SHORT_ANSWER and "\n" not in stripped:
        one_word = stripped.isalpha() and stripped.lower() not in _NO_ANSWER_WORDS
        if "$" in stripped or one_word:  # "odd $n$", "True": a short answer in words, with no number
            return stripped
    return found


def _last_math(text: str) -> str | None:
    """The later of the last non-prose $…$ and the last number (or the plain-text formula it is part of). A run of
    $…$ joined only by commas, "and" or "or" that each give the same variable a value is one answer, a list ("The
    solutions are $x = 2$ and $x = 3$." → x = 2, x = 3)."""
    math, math_end = None, -1
    spans = list(_INLINE_MATH.finditer(text))
    for i in range(len(spans) - 1, -1, -1):
        body = _math_body(spans[i])
        if body and not _PROSE_WORD.search(_without_commands(body)) and re.search(r"[\d\\]", body):
            math, math_end = _values_of_one_variable(text, spans[: i + 1]) or body, spans[i].end()
            break
    tokens = list(_MATH_TOKEN.finditer(text))
    if tokens and tokens[-1].start() >= math_end:  # the later of the two: "...so there are 12 sequences."
        return _plain_relations(text, tokens[-1]) or _formula(text, tokens[-1])
    return math


def _math_body(span: re.Match) -> str:
    return strip_wrappers(next(g for g in span.groups() if g is not None))


def _values_of_one_variable(text: str, spans: list[re.Match]) -> str | None:
    """The run of $…$ that ends `spans`, joined by ", ", when it has two or more and each assigns a value to one and
    the same variable ($x = 2$ and $x = 3$); else None."""
    run = spans[last_run(text, [span.span() for span in spans]) :]
    if len(run) < 2:
        return None
    bodies = [_math_body(span) for span in run]
    if (joined := _inequality_run(text, run, bodies)) is not None:
        return joined
    if _LISTED.search(text, max(0, run[0].start() - 40), run[0].start()):  # "The roots are $1$ and $-3$."
        return ", ".join(bodies)
    names = {assigned[0] if (assigned := assignment(body)) else None for body in bodies}
    if len(names) != 1 or None in names:
        return None
    return ", ".join(dict.fromkeys(bodies))


def _plain_relations(text: str, token: re.Match) -> str | None:
    """A plain-text run that ends in the relation `token` is the value of, joined only by commas, "and" or "or": the
    same variable given values is a list ("x = 1 and x = -3"), inequalities joined by "or" are their union ("x <= 3
    or x >= 5"), by "and" or commas their intersection ("x > 1 and x < 4"); else None."""
    line_start = text.rfind("\n", 0, token.start()) + 1
    items = list(_PLAIN_RELATION.finditer(text, max(line_start, token.start() - _REACH_GROUP), token.end() + 1))
    if not items or not items[-1].start(3) <= token.start() < items[-1].end(3):
        return None
    run = items[last_run(text, [item.span() for item in items]) :]
    if len(run) < 2 or len({item.group(1) for item in run}) != 1:
        return None
    ops = {item.group(2) for item in run}
    if ops == {"="}:
        return ", ".join(item.group() for item in run)
    if "=" in ops:
        return None
    return (_UNION if _joined_by_or(text, run) else _INTERSECTION).join(item.group() for item in run)


def _joined_by_or(text: str, run: list[re.Match]) -> bool:
    """Whether "or" is among the words that join the spans of `run` in `text`."""
    return any(_OR_WORD.search(text, a.end(), b.start()) for a, b in zip(run, run[1:], strict=False))


def _inequality_run(text: str, run: list[re.Match], bodies: list[str]) -> str | None:
    """A run of $…$ inequalities as one answer: joined by "or", their union ($x \\le 3$ or $x \\ge 5$); bounds of one
    variable joined by "and" or commas, their intersection ($x > 1$ and $x < 4$ is 1 < x < 4); else None."""
    if len(bodies) < 2 or len(bodies) != len(run) or not all(_INEQUALITY.search(body) for body in bodies):
        return None
    if _joined_by_or(text, run):
        return _UNION.join(bodies)
    bounded = {relations.bounded_variable(body) for body in bodies}
    return _INTERSECTION.join(bodies) if len(bounded) == 1 and None not in bounded else None


def _formula(text: str, token: re.Match) -> str:
    """The number `token` found, or the plain-text formula it is part of ("We get sqrt(2)/2." → sqrt(2)/2, not 2),
    or the tuple or interval it is an item of ("So the point is (2, -1)." → (2, -1), not -1)."""
    group = _bracket_group(text, token.start(), token.end())
    if group is not None:
        return group
    number = token.group().strip()
    if not number[-1].isdigit():  # a fraction in LaTeX, a percent, a decimal comma's group: whole already
        return number
    return formula_around(text, token.start(), token.end()).strip() or number


def _bracket_group(text: str, start: int, end: int) -> str | None:
    """The innermost (…) or […] around text[start:end] that holds two or more items separated by commas, each a
    number or a formula and none prose ((2, -1), [2, 5), (-∞, 3]); not a number with thousands separators (1,000),
    nor a function's arguments (log(8, 2))."""
    for group in _BRACKET_GROUP.finditer(text, max(0, start - _REACH_GROUP), min(len(text), end + _REACH_GROUP)):
        if group.start() < start and end < group.end():
            items = [item.strip() for item in group.group(1).split(",")]
            called = group.start() > 0 and (text[group.start() - 1].isalnum() or text[group.start() - 1] == "_")
            if called or len(items) < 2 or grouped_digits(group.group(1).strip()):  # log(8, 2) is a call
                return None
            formulas = all(item and not _WORD.search(_without_commands(item)) for item in items)
            return group.group() if formulas and all(_ITEM.search(item) for item in items) else None
    return None


def _without_commands(s: str) -> str:
    """`s` without LaTeX command names, \\text{} bodies and plain-text function names, so that \\frac, \\text{ cm} or
    sqrt(2) or log_2(8) do not read as prose."""
    s = re.sub(r"\\(?:text|mathrm|mbox|begin|end)\{[^{}]*\}|\\[A-Za-z]+", " ", s)
    return FUNCTION_CALL.sub(" ", LOG_BASE.sub(" ", s))
