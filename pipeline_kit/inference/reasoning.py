"""A reasoning model's thinking kept apart from its answer: split at its end string on the client
(++parse_reasoning), or as the server's reasoning parser returned it (`reasoning_content`), with each part's tokens."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

START = "<think>"  # a trace may open with it (when the chat template does not put it in the prompt)


@dataclass(frozen=True)
class Reasoning:
    """`trace`: the thinking (without its start and end strings); `answer`: what follows the end string, "" when
    the trace never reached it (`finished` False: cut by the token budget, so it has no answer)."""

    trace: str
    answer: str
    finished: bool


def split_reasoning(text: str, end: str) -> Reasoning:
    """`text` cut at the last `end` (as GenSelect and NeMo-Skills cut it): trace + end + answer is the text, less a
    leading start string. Without `end` the whole text is the trace, unfinished."""
    trace, found, answer = text.rpartition(end)
    if not found:
        trace, answer = text, ""
    stripped = trace.lstrip()
    trace = stripped[len(START) :] if stripped.startswith(START) else trace
    return Reasoning(trace, answer, bool(found))


def record_fields(reasoning: Reasoning, total_tokens: int, reasoning_tokens: int | None) -> dict:
    """The fields a sample gets beside its `generation` (the answer part): the trace, whether it finished, and each
    part's tokens (the answer's: the rest of the total, its end-of-turn token included); `reasoning_tokens` None:
    unknown (no tokenizer), estimated by characters and said so."""
    fields = {"reasoning_content": reasoning.trace, "finished_reasoning": reasoning.finished}
    if reasoning_tokens is None:
        chars = len(reasoning.trace) + len(reasoning.answer)
        reasoning_tokens = round(total_tokens * len(reasoning.trace) / chars) if chars else 0
        fields["reasoning_tokens_estimated"] = True
    reasoning_tokens = min(reasoning_tokens, total_tokens)
    return fields | {"num_reasoning_tokens": reasoning_tokens, "num_answer_tokens": total_tokens - reasoning_tokens}


@functools.lru_cache(maxsize=4)
def _tokenizer(folder: str):
    """The model's fast tokenizer (tokenizer.json; the `tokenizers` package comes with LiteLLM), or None."""
    path = Path(folder) / "tokenizer.json"
    if not path.is_file():
        return None
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path))


def count_tokens(text: str, model_folder: str | None) -> int | None:
    """The tokens of `text` by the model's tokenizer (no special tokens added); None without one."""
    tokenizer = _tokenizer(model_folder) if model_folder else None
    if tokenizer is None:
        return None
    return len(tokenizer.encode(text, add_special_tokens=False).ids) if text else 0


@dataclass(frozen=True)
class ReasoningSettings:
    """++parse_reasoning, ++end_reasoning_string, and the model folder whose tokenizer counts the answer's tokens."""

    parse: bool
    end: str
    tokenizer_folder: str | None

    @classmethod
    def of(cls, cfg) -> ReasoningSettings:
        """From a GenerateConfig: the tokenizer of ++server.chat_template, else of ++server.model when it is a
        local folder (a served model's name or an API's model has none: the split's tokens are then estimated)."""
        folders = [cfg.server.chat_template, cfg.server.model]
        return cls(
            cfg.parse_reasoning, cfg.end_reasoning_string, next((f for f in folders if f and Path(f).is_dir()), None)
        )

    def apply(self, completion) -> tuple[str, dict]:
        """(a sample's `generation`, its reasoning fields) from a client Completion: the server's split if it made
        one, else the text cut at the end string with ++parse_reasoning, else the text as it is and no fields. The
        thinking tokens: the server's count (vLLM: those inside the tags), else the model's tokenizer on the text
        before the answer (the tags included; LiteLLM's split, which drops them, gets them back for the count)."""
        reasoning = completion.reasoning
        if reasoning is None:
            if not self.parse:
                return completion.text, {}
            reasoning = split_reasoning(completion.text, self.end)
            before = completion.text[: len(completion.text) - len(reasoning.answer)]
        else:
            before = START + reasoning.trace + (self.end if reasoning.finished else "")
        thinking = completion.reasoning_tokens
        if thinking is None:
            thinking = count_tokens(before, self.tokenizer_folder)
        return reasoning.answer, record_fields(reasoning, completion.num_generated_tokens, thinking)
