"""The LLM judge's verdicts for a results file: eval's judge stage writes them beside it, as the judge's own output
(<bench>/judge[-rs{seed}]/output.jsonl); summarize reads them as `judge_correct`, matched by id. The results file
itself is never rewritten, so its content (an input of the judge's .done key) stays what the judge saw."""

from __future__ import annotations

import re
from pathlib import Path

from pipeline_kit.errors import UserError
from pipeline_kit.jsonl import numbered_records

# the prompt (prompts/judge/math.yaml) asks for a last line "Judgement: Yes" or "Judgement: No"
_VERDICT = re.compile(r"judge?ment\**\s*:\s*\**\s*(yes|no)\b", re.I)


def verdict(text: str | None) -> bool:
    """The judge's last verdict in its generation; no verdict counts as not correct."""
    found = _VERDICT.findall(text or "")
    return bool(found) and found[-1].lower() == "yes"


def judge_folder(results_file: Path) -> Path:
    """output.jsonl -> judge/, output-rs3.jsonl -> judge-rs3/ (beside the results file)."""
    stem = results_file.name.removesuffix(".jsonl")
    return results_file.parent / ("judge" + stem.removeprefix("output"))


def verdicts_for(results_file: Path) -> dict[str, bool] | None:
    """id -> judge_correct from the judge's finished output for `results_file` (its .done written), else None."""
    judged = judge_folder(results_file) / "output.jsonl"
    if not Path(f"{judged}.done").exists():
        return None
    out = {}
    for n, rec in numbered_records(judged.read_text().splitlines(), judged):
        if "id" not in rec or "generation" not in rec:
            raise UserError(f"{judged}:{n}: not a judge record with id and generation; rerun the judge stage.")
        out[str(rec["id"])] = verdict(rec["generation"])
    return out
