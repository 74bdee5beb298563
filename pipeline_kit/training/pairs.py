"""DPO's preference pairs, as `kit dpo` reads them: each record has `chosen` and `rejected` (a text, or chat messages
ending with the assistant's) and a `prompt` (a text, or chat messages) or else a `problem` (the user message is then
built with ++prompt_config, as for SFT). `kit run_recipe magpie_math` writes both `prompt` and `problem`; `prompt`
wins. A text prompt is the user's message and a text answer the assistant's: the trainer applies the model's own
chat template, so that one file serves every model."""

from __future__ import annotations

from pipeline_kit.errors import UserError

SIDES = ("chosen", "rejected")
NEEDS = "prompt (or problem), chosen and rejected"
MADE_BY = "kit run_recipe magpie_math writes them in pairs/preference_pairs.jsonl"


def _is_messages(value: object) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                for m in value)
    )  # fmt: skip


def check_pair(record: dict, where: str) -> None:
    """One UserError naming `where` (file:line) when the record is no preference pair."""
    prompt = record.get("prompt", record.get("problem"))  # optional each: one of them is needed
    if not (isinstance(prompt, str) or _is_messages(prompt)):
        raise UserError(
            f"{where}: the record has no 'prompt' or 'problem'; DPO needs {NEEDS} on every line ({MADE_BY})."
        )
    for side in SIDES:
        value = record.get(side)
        if isinstance(value, str):
            continue
        if not _is_messages(value) or value[-1]["role"] != "assistant":
            raise UserError(
                f"{where}: the record has no {side!r} text or assistant message; DPO needs {NEEDS} on every line "
                f"({MADE_BY})."
            )


def pair_messages(record: dict, prompt_config, line_no: int) -> dict[str, list[dict]]:
    """The pair as chat messages: `prompt` (ending with the user's turn), `chosen` and `rejected` (the assistant's).
    `prompt_config`: a loaded prompt config (inference/prompts.py), used when the record has no `prompt`."""
    prompt = record.get("prompt")
    if prompt is None:
        messages = prompt_config.messages(record, line_no)
    elif isinstance(prompt, str):
        messages = [{"role": "user", "content": prompt}]
    else:
        messages = prompt
    row = {"prompt": messages}
    for side in SIDES:
        value = record[side]
        row[side] = [{"role": "assistant", "content": value}] if isinstance(value, str) else value
    return row
