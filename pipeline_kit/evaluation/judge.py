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


def parse_verdict(text: str | None) -> bool | None:
    """The judge's last verdict in its generation: True (yes), False (no), None when it wrote none (unparsed: the
    metrics count it as not correct, and summarize counts it apart, never as a "no")."""
    found = _VERDICT.findall(text or "")
    return found[-1].lower() == "yes" if found else None


def verdict(text: str | None) -> bool:
    """The judge's last verdict as judge_correct: an unparsed one counts as not correct."""
    return parse_verdict(text) is True


def judge_folder(results_file: Path) -> Path:
    """output.jsonl -> judge/, output-rs3.jsonl -> judge-rs3/ (beside the results file)."""
    stem = results_file.name.removesuffix(".jsonl")
    return results_file.parent / ("judge" + stem.removeprefix("output"))


def verdicts_for(results_file: Path) -> dict[str, bool | None] | None:
    """id -> the parsed verdict (None: unparsed) from the judge's finished output for `results_file` (its .done
    written), else None."""
    judged = judge_folder(results_file) / "output.jsonl"
    if not Path(f"{judged}.done").exists():
        return None
    out = {}
    for n, rec in numbered_records(judged.read_text().splitlines(), judged):
        if "id" not in rec or "generation" not in rec:
            raise UserError(f"{judged}:{n}: not a judge record with id and generation; rerun the judge stage.")
        out[str(rec["id"])] = parse_verdict(rec["generation"])
    return out


def judge_tally(files: list) -> dict | None:
    """metrics.json's "judge" entry for a benchmark's read files (output_files.ReadFile): how many samples the judge
    and the grader disagree on, each way, and how many judge outputs held no verdict; None when no judge ran."""
    judged = [f for f in files if f.has_judge]
    if not judged:
        return None
    disagree = sum(len(f.audit["judge_disagrees"]) for f in judged)
    yes_no = sum(len(f.judge_only) for f in judged)
    return {
        "samples": sum(f.run.num_problems for f in judged),
        "disagree": disagree,
        "judge_yes_grader_no": yes_no,
        "judge_no_grader_yes": disagree - yes_no,
        "unparsed": sum(len(f.audit["judge_unparsed"]) for f in judged),
    }


def judge_notes(tally: dict | None) -> list[str]:
    """The lines under a benchmark's table: the judge-vs-grader disagreements (always, once a judge ran) and the
    judge outputs without a verdict (when there are any)."""
    if tally is None:
        return []
    n, total = tally["disagree"], tally["samples"]
    notes = [
        f"judge and grader disagree on {n} of {total} sample{'s' if total != 1 else ''} (judge yes/grader no: "
        f"{tally['judge_yes_grader_no']}, judge no/grader yes: {tally['judge_no_grader_yes']})"
    ]
    if tally["unparsed"]:
        u = tally["unparsed"]
        notes.append(
            f"judge wrote no verdict for {u} sample{'s' if u != 1 else ''} (unparsed: counted as not correct in "
            "judge_correct, not as a disagreement); --audit names them"
        )
    return notes
