"""Solution selection as extra evaluation modes of `kit summarize`, over all n sampled runs of a benchmark (only for
k = n: each needs the math grader to compare answers, which is slower than majority@k's exact vote).

- `majority[equivalent]@n`: majority vote where answers the grader finds equal count as one (pipeline_kit.selection).
- `weighted[reward_model_score]@n`: the vote weighted by each sample's reward-model score; only when every sample
  has one (`kit generate ++generation_type=reward` writes it).
- `weighted[mean_logprob]@n`: weighted by exp(mean log-probability) of each sample's tokens; only when every sample
  has one (`kit generate ++inference.logprobs=true` writes it).
- `sc-tir@n`: self-consistency over TIR samples: a sample whose last code round ended in an error or a timeout, or
  that used up its code executions, is dropped, then the majority over equivalent answers of the rest. Only for
  runs made with code execution (their samples have `code_last_status`).
- `genselect@n`: the share of problems whose GenSelect pick is correct, read from the finished GenSelect outputs in
  `<benchmark>/genselect/` (`kit generate --genselect`, or `++generation_type=genselect` written there); the mean
  over several GenSelect outputs (shuffle seeds). The pick's correctness is its run's, matched by file and id.

A problem counts as correct when the chosen sample is correct; as no_answer when no (kept) sample has an answer."""

from __future__ import annotations

import functools
from pathlib import Path

from pipeline_kit.errors import UserError
from pipeline_kit.evaluation.metrics import Run
from pipeline_kit.selection.genselect import decided_text
from pipeline_kit.selection.genselect_runs import read_picks
from pipeline_kit.selection.voting import (
    MEAN_LOGPROB,
    Candidate,
    Choice,
    equivalent_majority,
    grader_equal,
    sc_tir_keeps,
    vote_weight,
    weighted,
)

REWARD = "reward_model_score"
TIR_FIELDS = ("code_last_status", "code_limit_reached")
EXTRA_FIELDS = (
    REWARD,
    MEAN_LOGPROB,
    *TIR_FIELDS,
)  # what summarize keeps of each sample besides its answer and correctness


def _kept_by_sc_tir(run: Run, i: int) -> bool:
    return sc_tir_keeps({name: run.extras[name][i] for name in TIR_FIELDS})


def _has(runs: list[Run], name: str) -> bool:
    return all(name in r.extras and all(v is not None for v in r.extras[name]) for r in runs)


def selection_metrics(runs: list[Run], columns: list[str], common: dict[str, float]) -> dict[str, dict[str, float]]:
    """The modes above that apply to these runs (the same problems in the same order), keyed like metrics.json."""
    n, m = len(runs), runs[0].num_problems
    same = functools.lru_cache(maxsize=1 << 16)(grader_equal)  # one benchmark's answers repeat a lot
    modes: dict[str, tuple] = {f"majority[equivalent]@{n}": (equivalent_majority, None, None)}
    for field in (REWARD, MEAN_LOGPROB):
        if _has(runs, field):
            modes[f"weighted[{field}]@{n}"] = (weighted, field, None)
    if all(all(f in r.extras for f in TIR_FIELDS) for r in runs):
        modes[f"sc-tir@{n}"] = (equivalent_majority, None, _kept_by_sc_tir)
    out = {}
    for mode, (vote, weight_field, keep) in modes.items():
        counts = {col: 0 for col in columns}
        unanswered = 0
        for i in range(m):
            candidates = [
                Candidate(
                    j,
                    _text(run.answers[i]),
                    vote_weight(weight_field, run.extras[weight_field][i]) if weight_field else 1.0,
                )
                for j, run in enumerate(runs)
                if keep is None or keep(run, i)
            ]
            choice: Choice | None = vote(candidates, same)
            if choice is None:
                unanswered += 1
                continue
            for col in columns:
                counts[col] += runs[choice.candidate.index].correct[col][i]
        out[mode] = {**common, **{c: 100.0 * counts[c] / m for c in columns}, "no_answer": 100.0 * unanswered / m}
    return out


def genselect_metrics(folder, files: dict[str, tuple[list, Run]], columns: list[str], common: dict) -> dict:
    """`genselect@n` from the GenSelect outputs in `folder` (none: {}); `files`: each sampled run by file name, as
    (ids, run). A pick whose run or id is not among them is an error naming both."""

    if not Path(folder).is_dir():
        return {}
    picks = read_picks(folder)
    if not picks:
        return {}
    position = {name: {str(pid): i for i, pid in enumerate(ids)} for name, (ids, _) in files.items()}
    totals = {col: 0.0 for col in columns}
    unanswered = 0.0
    decided: dict[str, int] = {}  # how the picks were made (genselect.decided_by): judgment, fallback, ...
    for out_name, chosen in picks.items():
        for pid, record in chosen.items():
            run_name = record["genselect"]["chosen_run"]
            how = record["genselect"].get("decided_by", "not recorded")
            decided[how] = decided.get(how, 0) + 1
            if run_name not in files or pid not in position[run_name]:
                raise UserError(
                    f"{folder}/{out_name}: the pick for id {pid!r} is from {run_name}, which the benchmark's runs do "
                    "not hold; rerun GenSelect over the current runs."
                )
            i, run = position[run_name][pid], files[run_name][1]
            for col in columns:
                totals[col] += run.correct[col][i] / len(chosen)
            unanswered += (run.answers[i] is None) / len(chosen)
    n = len(files)
    scale = 100.0 / len(picks)
    entry = {**common, **{c: totals[c] * scale for c in columns}, "no_answer": unanswered * scale}
    return {f"genselect@{n}": {**entry, "decided_by": decided}}


def decided_by_note(metrics: dict) -> list[str]:
    """The line under a table with a genselect@n row: how its picks were made, the fallbacks to a majority vote
    (a judgment that could not be read) counted apart from the model's own judgments."""
    key = next((k for k in metrics if k.startswith("genselect@")), None)
    if key is None:
        return []
    return [f"{key} picks: {decided_text(metrics[key]['decided_by'])} (fallback: a judgment that could not be read)"]


def _text(answer) -> str | None:
    return None if answer is None else str(answer)
