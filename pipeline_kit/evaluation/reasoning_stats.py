"""A benchmark's reasoning figures for `kit summarize`: thinking and answer tokens per sample, and the traces that
never reached their end string (`truncated_reasoning`: no answer), from the fields inference/reasoning.py writes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ReasoningTally:
    """Counts over records; a record without `finished_reasoning` (no split made) is not counted."""

    samples: int = 0
    truncated: int = 0
    reasoning_tokens: int | None = 0  # None once a counted record lacks the token fields
    answer_tokens: int | None = 0

    def add(self, record: dict) -> None:
        finished = record.get("finished_reasoning")  # optional: only a split sample has it
        if finished is None:
            return
        self.samples += 1
        self.truncated += finished is False
        thinking, answer = record.get("num_reasoning_tokens"), record.get("num_answer_tokens")
        if not isinstance(thinking, int) or not isinstance(answer, int) or self.reasoning_tokens is None:
            self.reasoning_tokens = self.answer_tokens = None
        else:
            self.reasoning_tokens += thinking
            self.answer_tokens += answer

    @classmethod
    def total(cls, tallies: list[ReasoningTally]) -> ReasoningTally:
        out = cls()
        for t in tallies:
            out.samples += t.samples
            out.truncated += t.truncated
            unknown = None in (out.reasoning_tokens, t.reasoning_tokens)
            out.reasoning_tokens = None if unknown else out.reasoning_tokens + t.reasoning_tokens
            out.answer_tokens = None if unknown else out.answer_tokens + t.answer_tokens
        return out

    def metrics(self) -> dict | None:
        """metrics.json's `reasoning` entry of a benchmark; None when no sample was split."""
        if not self.samples:
            return None
        counted = self.reasoning_tokens is not None and self.answer_tokens is not None
        return {
            "samples": self.samples,
            "avg_reasoning_tokens": self.reasoning_tokens / self.samples if counted else None,
            "avg_answer_tokens": self.answer_tokens / self.samples if counted else None,
            "truncated_reasoning": self.truncated,
        }

    def note(self) -> str | None:
        """The summary's line; None when no sample was split."""
        figures = self.metrics()
        if figures is None:
            return None
        tokens = (
            f"{figures['avg_reasoning_tokens']:.0f} thinking + {figures['avg_answer_tokens']:.0f} answer tokens per "
            "sample, "
            if figures["avg_reasoning_tokens"] is not None
            else ""
        )
        return (
            f"reasoning: {tokens}{self.truncated} of {self.samples} traces never reached their end "
            "(truncated_reasoning; no answer)"
        )
