"""GenSelect: an LLM reads up to `window` candidate solutions of one problem and names the best ("Judgment: <index>");
with more candidates than fit one window, the windows' winners meet again (a tournament) until one is left.

- Candidates without an answer are left out; when all answered ones give one answer (grader-equal), it is chosen
  without a request. Duplicates of an answer are otherwise kept: agreement between solutions is evidence for them.
- The answered candidates are shuffled by (seed, problem position), so a rerun with the same seed asks the same.
- A judgment that cannot be read (none, not a number, out of range, or a failed request) falls back to a majority
  vote: the window's member whose answer most of the problem's candidates share (grader-equal answers, as in
  selection.voting; the first of equals). The window records it. A problem never stops the run.

The tournament only: the caller's `ask` turns a window into the model's prompt and asks it (the generation type in
pipeline_kit/inference/genselect.py does, with the prompt config).
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pipeline_kit.selection.voting import Candidate, groups
from pipeline_kit.shares import even_shares

# the last "Judgment: 2" (also "Judgement", bold markers, "Solution 2", "#2") of the text
_JUDGMENT = re.compile(r"judge?ment\**\s*:\s*\**\s*(?:solution\s*)?#?\s*(\d+)", re.I)


@dataclass(frozen=True)
class Solution:
    """One run's record for the problem: `run` names the file it came from, `answer` is its predicted answer."""

    run: str
    record: dict
    answer: str | None


@dataclass(frozen=True)
class Reply:
    """The model's reply to one window's prompt; `error` when the request failed (e.g. over the context length)."""

    text: str
    num_generated_tokens: int = 0
    error: str | None = None


# asks the model to judge one window: its solutions, in the order the reply's "Judgment: <index>" counts
Ask = Callable[[list[Solution]], Awaitable[Reply]]


def parse_judgment(text: str, count: int) -> int | None:
    """The index named by the last "Judgment: N" of `text`, None when there is none or it is not in 0..count-1."""
    found = _JUDGMENT.findall(text or "")
    if not found:
        return None
    index = int(found[-1])
    return index if index < count else None


def _fallback(window: list[Solution], votes: dict[str, int]) -> int:
    """The window position of the member whose answer most of the problem's candidates share (the first of equals):
    a majority vote over all candidates, restricted to the window."""
    return max(range(len(window)), key=lambda i: votes[window[i].run])


def windows(candidates: list, size: int) -> list[list]:
    """ceil(n / size) consecutive windows whose lengths differ by at most one (the longer ones first): a rerun with
    the same seed must ask the same windows."""
    return even_shares(candidates, -(-len(candidates) // size))


async def _judge_window(window: list[Solution], round_no: int, votes: dict[str, int], ask: Ask) -> tuple[dict, int]:
    """One window: its record (round, runs, judgment text, picked, winner, fallback) and its winner's position."""
    entry: dict = {"round": round_no, "runs": [s.run for s in window]}
    if len(window) == 1:  # a bye: nothing to compare
        return {**entry, "judgment": None, "picked": 0, "winner": window[0].run, "fallback": None}, 0
    reply = await ask(window)
    picked = parse_judgment(reply.text, len(window)) if reply.error is None else None
    winner = picked if picked is not None else _fallback(window, votes)
    entry |= {"judgment": reply.text, "picked": picked, "winner": window[winner].run}
    entry |= {
        "fallback": None if picked is not None else "majority",
        "num_generated_tokens": reply.num_generated_tokens,
    }
    if reply.error is not None:
        entry["error"] = reply.error
    return entry, winner


async def select(solutions: list[Solution], window: int, seed: str, ask: Ask) -> dict:
    """The chosen solution's record with `predicted_answer` and a `genselect` field (the format: docs/evaluation/selection.md)."""
    answered = [s for s in solutions if s.answer is not None]
    summary: dict = {"candidates": len(answered), "runs": len(solutions), "windows": [], "fallback": 0}
    summary["num_generated_tokens"] = 0
    if not answered:
        return _chosen(solutions[0], {**summary, "decided_by": "no_answer"})
    found = groups([Candidate(i, s.answer) for i, s in enumerate(answered)])
    if len(found) == 1:
        return _chosen(answered[0], {**summary, "decided_by": "unanimous"})
    votes = {answered[c.index].run: len(group) for group in found for c in group}  # per run: its answer's votes
    current = list(answered)
    random.Random(seed).shuffle(current)
    round_no = 1
    while len(current) > 1:
        parts = windows(current, window)
        judged = await asyncio.gather(*(_judge_window(part, round_no, votes, ask) for part in parts))
        summary["windows"] += [entry for entry, _ in judged]
        current = [part[winner] for part, (_, winner) in zip(parts, judged, strict=True)]
        round_no += 1
    summary["fallback"] = sum(w["fallback"] is not None for w in summary["windows"])
    summary["num_generated_tokens"] = sum(w.get("num_generated_tokens", 0) for w in summary["windows"])
    return _chosen(current[0], {**summary, "decided_by": "fallback" if summary["fallback"] else "judgment"})


def _chosen(solution: Solution, summary: dict) -> dict:
    return {
        **solution.record,
        "predicted_answer": solution.answer,
        "genselect": {"chosen_run": solution.run, **summary},
    }


def decided_text(decided: dict[str, int]) -> str:
    """Picks counted by how they were made (`decided_by`): the model's judgment, the majority fallbacks (a judgment
    that could not be read), then any other way (unanimous, no answer)."""
    parts = [f"{decided.get('judgment', 0)} by judgment", f"{decided.get('fallback', 0)} by majority fallback"]
    others = [(how, n) for how, n in decided.items() if how not in ("judgment", "fallback")]
    return ", ".join(parts + [f"{n} {how.replace('_', ' ')}" for how, n in others])
