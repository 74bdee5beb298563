"""Preference pairs from scored responses: per problem the best and the worst response (by a score field) when the
best beats the worst by at least the minimum gap, in DPO's conversational `prompt`/`chosen`/`rejected` format
(TRL's DPOTrainer reads it) plus `problem`, `chosen_score`, `rejected_score`, `id`, `domain`. Run in a job as
  python -m pipeline_kit.recipes.preference_pairs SCORED OUTPUT --score_field F --min_score_gap G --prompt_config P
Ties: among equal best (or worst) scores the first response in the file (lowest seed) is taken; a problem whose
responses all score the same gives no pair, whatever the gap. Responses without a score (None) are left out."""

from __future__ import annotations

import argparse
import math
import sys

from pipeline_kit.errors import UserError
from pipeline_kit.jsonl import read_jsonl
from pipeline_kit.recipes.magpie_data import write_rows


def select_pair(responses: list[dict], score_field: str, min_gap: float) -> tuple[dict, dict] | None:
    """(best, worst) of one problem's responses, or None when fewer than two are scored, all tie, or the gap is
    under `min_gap`."""
    scored = [r for r in responses if isinstance(r.get(score_field), (int, float)) and math.isfinite(r[score_field])]
    if len(scored) < 2:
        return None
    best = max(scored, key=lambda r: r[score_field])  # max/min keep the first of equals
    worst = min(scored, key=lambda r: r[score_field])
    gap = best[score_field] - worst[score_field]
    if gap <= 0 or gap < min_gap:
        return None
    return best, worst


def preference_pairs(rows: list[dict], score_field: str, min_gap: float, prompt_config: str) -> list[dict]:
    """One pair per problem (by `id`, in first-seen order) that has one; `prompt` is the messages the responses
    were generated from (the prompt config applied to the problem)."""
    from pipeline_kit.inference.prompts import load_prompt_config

    prompt = load_prompt_config(prompt_config)
    by_problem: dict[str, list[dict]] = {}
    for row in rows:
        by_problem.setdefault(row["id"], []).append(row)
    pairs = []
    for pid, responses in by_problem.items():
        picked = select_pair(responses, score_field, min_gap)
        if picked is None:
            continue
        best, worst = picked
        pairs.append({
            "prompt": prompt.messages(best),
            "chosen": [{"role": "assistant", "content": best["generation"]}],
            "rejected": [{"role": "assistant", "content": worst["generation"]}],
            "problem": best["problem"],
            "chosen_score": best[score_field],
            "rejected_score": worst[score_field],
            "id": pid,
            "domain": best.get("domain"),
        })  # fmt: skip
    return pairs


def main(argv: list[str]) -> int:

    parser = argparse.ArgumentParser(prog="python -m pipeline_kit.recipes.preference_pairs")
    parser.add_argument("scored")
    parser.add_argument("output")
    parser.add_argument("--score_field", required=True)
    parser.add_argument("--min_score_gap", type=float, required=True)
    parser.add_argument("--prompt_config", required=True)
    args = parser.parse_args(argv)
    try:
        rows = [row for _, row in read_jsonl(args.scored)]
        pairs = preference_pairs(rows, args.score_field, args.min_score_gap, args.prompt_config)
        write_rows(args.output, pairs)
        print(f"kit magpie_math: {len(pairs)} pairs from {len({r['id'] for r in rows})} problems", file=sys.stderr)
    except UserError as e:
        print(f"kit magpie_math: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
