"""Multiple-choice answers: the option letter (A-J) a generation states. `--extract=mcq` takes the last stated one;
the other modes take a letter first for records with options (`letter_first`)."""

from __future__ import annotations

import re

from pipeline_kit.grading.boxes import boxed_content, boxes
from pipeline_kit.grading.normalize import canonical, choice_letter

LETTERS = "ABCDEFGHIJ"
# "the answer is (B)", "Answer: B", "the correct option is C", "Choice (D)", "答案：C", "**Answer:** $\textbf{(D)}$",
# "so I choose D" (a decision, counted like an option: see _stated)
_STATED = re.compile(
    r"(\banswer|\boption|\bchoice|\bchoose|\bselect|\bpick|\bgo with|答案)"
    r"\s*(?:is|[:：])?\s*[:：]?[\s*$]*(?:\\text(?:bf)?\{|\\mathrm\{)?\s*"
    rf"(\()?([{LETTERS}{LETTERS.lower()}])(?![A-Za-z0-9])(\))?",
    re.I,
)
# an option or choice called the right one, before it ("the correct option is C") or after it ("option C is right")
_CORRECT_BEFORE = re.compile(r"(?i:correct|right|best|final|true)\s+$")
_CORRECT_AFTER = re.compile(r"[\s.:*)$]*(?i:is|would be|seems)?\s*(?i:the\s+)?(?i:correct|right|best|true|answer)\b")
_MARKED = re.compile(rf"\(([{LETTERS}])\)")
_WHOLE = re.compile(r"[\s*$]+|[.。]$")  # around a reply that is one letter: **C**, $C$, C.


def letter_of(answer: str) -> str | None:
    """B for B, (B), B), \\text{(B)}, \\textbf{B}, "B: 12" or "(B) 12"; None when `answer` is no letter."""
    m = re.match(rf"\(?([{LETTERS}])(?![A-Za-z0-9_=])", canonical(answer))
    return m.group(1) if m else None


def _stated(text: str, answered: bool = False) -> list[tuple[int, str]]:
    """(position, letter) of every letter stated after "answer", "option", "choice" or a decision ("I choose D",
    "I'll go with B"); a lowercase one only in parentheses ("the answer is (c)"; never the article of "the answer is a
    prime"). Where an answer is stated (after "answer", or in a box: `answered`), an option, choice or decision
    counts only when called correct ("option C is correct", "the best choice is C"), not where the reasoning goes
    through the options ("option A fails")."""
    found = []
    for m in _STATED.finditer(text):
        word, opened, letter, closed = m.groups()
        if letter.isupper() or (opened and closed):
            found.append((m, word.lower() in ("answer", "答案"), letter.upper()))
    answered = answered or any(anchored for _, anchored, _ in found)
    out = []
    for m, anchored, letter in found:
        called_correct = _CORRECT_BEFORE.search(text, max(0, m.start() - 20), m.start()) or _CORRECT_AFTER.match(
            text, m.end()
        )
        if anchored or not answered or called_correct:
            out.append((m.start(), letter))
    return out


def stated_letter(text: str) -> str | None:
    """`--extract=mcq`: the last option letter `text` states, in a box (\\boxed{C}, \\boxed{(C)}, \\boxed{\\text{C}})
    or after "answer", "option", "choice" or a decision (see _stated), whichever comes last; else the letter of a
    reply, or of a last line, that is nothing but a letter ("C", "(C)", "**C**"); None when it states none."""
    found = [(start, letter) for start, _, content in boxes(text)[0] if (letter := letter_of(content))]
    found += _stated(text, answered=bool(found))
    if found:
        return max(found)[1]
    lines = [line for line in text.strip().splitlines() if line.strip()]
    for candidate in (text, lines[-1] if lines else ""):
        letter = choice_letter(_WHOLE.sub("", candidate).upper()) if len(candidate) < 40 else None
        if letter:
            return letter
    return None


def expected_letter(answer: str) -> str | None:
    """The option letter of an expected answer, in either case (c, (C), \\text{(C)}); None when it is no letter."""
    return choice_letter(canonical(answer).upper()) if len(answer) < 40 else None


def letter_first(text: str, boxed_only: bool = False) -> str | None:
    """The other modes' letter for a record with options: the letter of the last box (None when that box holds
    something else, such as an option's text), else unless `boxed_only` the last stated letter, else the last
    "(B)" of the text."""
    boxed = boxed_content(text)
    if boxed is not None or boxed_only:
        return None if boxed is None else letter_of(boxed)
    stated = _stated(text)
    if stated:
        return stated[-1][1]
    marked = _MARKED.findall(text)
    return marked[-1] if marked else None
