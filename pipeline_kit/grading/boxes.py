"""Boxed answers: the \\boxed{…} and \\fbox{…} of a generation, their braces balanced, and the last run of boxes
that states one answer."""

from __future__ import annotations

import re

from pipeline_kit.grading.normalize import canonical, matching_brace, parse_number

# one or more backslashes: a generation quoted twice (r'\\boxed{-3}') still counts
_BOXED = re.compile(r"\\+(boxed|fbox)\b\s*")
BOX_JOINER = re.compile(r"[\s$,;]*(?:(?:and|or|&|\\q?quad|\\text\{\s*(?:and|or)\s*\})[\s$,;]*)*")


def boxes(text: str) -> tuple[list[tuple[int, int, str]], bool]:
    """The outermost boxes of `text` as (start, end, content), and whether the last \\boxed is never closed."""
    found: list[tuple[int, int, str]] = []
    open_last = False
    for m in _BOXED.finditer(text):
        if found and m.start() < found[-1][1]:
            continue  # \boxed{\boxed{1}}: inside the previous one
        if m.end() < len(text) and text[m.end()] == "{":
            end = matching_brace(text, m.end())
            if end is not None:
                found.append((m.start(), end + 1, text[m.end() + 1 : end]))
            open_last = end is None
        else:  # \boxed 42$ (no braces): up to the next $ or space
            tail = re.match(r"[^\s$]+", text[m.end() :]) if m.group().endswith((" ", "\t")) else None
            if tail:
                found.append((m.start(), m.end() + tail.end(), tail.group()))
            open_last = tail is None
    return found, open_last


def last_boxed(text: str) -> str | None:
    """The last `\\boxed{…}` or `\\fbox{…}` of `text` with its braces balanced (or `\\boxed 42` up to the next `$` or
    space), command included; None when there is none or the last one is never closed (a cut-off generation)."""
    found, open_last = boxes(text)
    return None if open_last or not found else text[found[-1][0] : found[-1][1]]


def boxed_content(text: str, *, verbatim: bool = False) -> str | None:
    """What the last \\boxed{} of `text` holds (see last_boxed), stripped; None when there is none or it is empty.
    verbatim=True keeps the spaces around it: a benchmark's reference answer read from its solution (math,
    minerva_math), whose records kit pins by fingerprint as upstream writes them."""
    found, open_last = boxes(text)
    if open_last or not found or not found[-1][2].strip():
        return None
    return found[-1][2] if verbatim else found[-1][2].strip()


def final_boxed(text: str) -> str | None:
    """The content of the last \\boxed{}, or of the last run of boxes joined only by commas, "and" or "or"
    ("\\boxed{2} and \\boxed{3}" → "2, 3": one answer boxed in parts; the same box twice, or one number boxed in two
    forms, is that answer); earlier boxes are steps on the way."""
    found, open_last = boxes(text)
    if open_last or not found:
        return None
    parts = [part for b in found[last_run(text, [(b[0], b[1]) for b in found]) :] if (part := b[2].strip())]
    if len(set(parts)) == 1 or _one_number(parts):  # \boxed{5} \boxed{5}: one answer stated twice, not a list
        return parts[-1]
    return ", ".join(parts) or None


def last_run(text: str, spans: list[tuple[int, int]]) -> int:
    """The index in `spans` ((start, end) of boxes or of $…$ in `text`, in order) where the last run of them joined
    only by commas, "and" or "or" (BOX_JOINER) begins."""
    i = len(spans) - 1
    while i > 0 and BOX_JOINER.fullmatch(text[spans[i - 1][1] : spans[i][0]]):
        i -= 1
    return i


def _one_number(parts: list[str]) -> bool:
    """Whether `parts` (boxes) are one number written several ways (MATH's "\\boxed{15\\frac{39}{40}},
    or \\boxed{\\frac{639}{40}}")."""
    values = {number.value if (number := parse_number(canonical(part))) else None for part in parts}
    return len(values) == 1 and None not in values
