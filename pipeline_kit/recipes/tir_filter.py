"""The AIMO recipe's TIR filter, run as its run_cmd stage (`python -m pipeline_kit.recipes.tir_filter GEN_DIR SFT_FILE
SUMMARY`): of the TIR generation's records (output*.jsonl in GEN_DIR), keep those whose code ran, whose last execution
did not fail and whose boxed final answer the grader finds correct, as SFT records (problem + generation), and count
the rest by the first reason each was dropped for. Writes both files atomically; 0 kept is an error naming the counts."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pipeline_kit.atomic import write_atomic
from pipeline_kit.errors import UserError
from pipeline_kit.grading.grade import task_of
from pipeline_kit.grading.grader_pool import grade_tasks
from pipeline_kit.grading.output_names import merged_outputs
from pipeline_kit.jsonl import read_jsonl, write_jsonl

# why a record is dropped, in the order they are checked (a record counts under the first that applies)
REASONS = {
    "generation_error": "its request or a code round failed (an `error` field)",
    "no_code_ran": "no code block was executed (code_rounds_executed 0)",
    "last_execution_failed": "its last code execution raised or timed out (code_last_status error | timeout)",
    "no_answer": "no final answer in \\boxed{}",
    "wrong_answer": "the grader finds its final answer wrong",
}
SFT_FIELDS = ("id", "problem", "generation", "expected_answer", "source")  # what the SFT record keeps, if present


def generation_files(gen_dir: str | Path) -> list[Path]:
    files = merged_outputs(gen_dir)
    if not files:
        raise UserError(f"{gen_dir}: no output.jsonl or output-rs*.jsonl; run the TIR generation stage first.")
    return files


def code_reason(record: dict, where: str) -> str | None:
    """The drop reason that needs no grading, or None."""
    if record.get("error"):  # optional: only a failed sample has one
        return "generation_error"
    if "code_rounds_executed" not in record:
        raise UserError(f"{where}: no 'code_rounds_executed'; the generation ran without ++code_execution=true.")
    if not record["code_rounds_executed"]:
        return "no_code_ran"
    if record["code_last_status"] != "completed":
        return "last_execution_failed"
    return None


def filter_records(records: list[tuple[str, dict]], extract: str = "boxed") -> tuple[list[dict], dict[str, int]]:
    """(the kept SFT records, the count of each drop reason) of (where, record) pairs."""

    dropped = dict.fromkeys(REASONS, 0)
    graded: list[tuple[dict, object]] = []
    for where, record in records:
        reason = code_reason(record, where)
        if reason is None:
            task = task_of(record, where, extract)
            if task.predicted is None:
                reason = "no_answer"
            else:
                graded.append((record, task))
        if reason is not None:
            dropped[reason] += 1
    kept = []
    for (record, _), verdict in zip(graded, grade_tasks([t for _, t in graded]), strict=True):
        if verdict.correct:
            kept.append({k: record[k] for k in SFT_FIELDS if k in record})
        else:
            dropped["wrong_answer"] += 1
    return kept, dropped


def run(gen_dir: str, sft_file: str, summary_file: str, extract: str) -> dict:
    files = generation_files(gen_dir)
    records = [(f"{path}:{line}", rec) for path in files for line, rec in read_jsonl(path)]
    kept, dropped = filter_records(records, extract)
    summary = {"records": len(records), "kept": len(kept), "dropped": dropped, "files": [str(p) for p in files]}
    Path(summary_file).parent.mkdir(parents=True, exist_ok=True)
    write_atomic(Path(summary_file), json.dumps(summary, indent=2) + "\n")
    counts = ", ".join(f"{name} {n}" for name, n in dropped.items())
    if not kept:
        raise UserError(
            f"0 of {len(records)} TIR solutions in {gen_dir} survive the filter (dropped: {counts}); there is nothing "
            f"for the TIR SFT to train on: see {summary_file}, and give more problems or samples (--tir_samples) or a "
            "model that writes code."
        )
    write_jsonl(sft_file, kept)
    print(f"kit tir_filter: kept {len(kept)} of {len(records)} TIR solutions in {sft_file} (dropped: {counts})")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline_kit.recipes.tir_filter", description=__doc__)
    parser.add_argument("gen_dir", help="the TIR generation's folder (output-rs*.jsonl)")
    parser.add_argument("sft_file", help="the kept solutions, as SFT JSONL (problem + generation)")
    parser.add_argument("summary_file", help="the counts: records, kept, dropped by reason")
    parser.add_argument("--extract", default="boxed", help="how the final answer is extracted (kit grade --extract)")
    args = parser.parse_args(argv)
    try:
        run(args.gen_dir, args.sft_file, args.summary_file, args.extract)
    except UserError as e:
        print(f"kit tir_filter: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
