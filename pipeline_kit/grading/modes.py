"""The extraction modes a user names (--extract, a prompt config's `extract`, a benchmark's METRICS_TYPE), without
the extraction itself (extraction.py): what submission checks imports only this."""

from __future__ import annotations

from pipeline_kit.errors import UserError

EXTRACT_MODES = {
    "boxed": "the last \\boxed{} (or \\fbox{}); no box, no answer",
    "auto": "the last <answer>…</answer> or \\boxed{}, else a stated final answer, else the last expression",
    "mcq": "the last stated option letter A-J (\\boxed{C}, 'Answer: C', 'the answer is (C)'), else a reply that is "
    "one letter; the expected answer is a letter too (any case), or the letter of its option",
}
DEFAULT_EXTRACT = "boxed"  # a bare file: the convention of published boxed-prompt numbers; GRPO's reward too
# what a benchmark's METRICS_TYPE says its answers are, and the extraction mode it implies (its EXTRACT and its
# prompt config's `extract` come first): math answers, or the letter of a multiple-choice option
METRICS_TYPES = {"math": DEFAULT_EXTRACT, "mcq": "mcq"}


def check_mode(mode: str, where: str = "--extract") -> str:
    """`mode` when it is one of EXTRACT_MODES, else a UserError naming `where` it came from."""
    if mode not in EXTRACT_MODES:
        raise UserError(f"{where}={mode!r} is not an extraction mode; use one of: {', '.join(EXTRACT_MODES)}.")
    return mode
