"""`kit report RESULTS_DIR [OTHER_DIR]`: one self-contained HTML file to read the results of `kit eval` in a browser,
from a laptop's disk or a shared folder (no server, no network).

What it holds, per results folder and benchmark: the table `kit summarize` prints (its metrics, the same numbers as
metrics.json) and pass@k / majority@k over k; an index of every problem (expected answer, and per run the extracted
answer, verdict, tokens, time and flags); and the runs' texts (generation, thinking trace) of each problem as one
gzip-compressed, base64-encoded block, which the page decodes (DecompressionStream) only when that problem is
opened. With OTHER_DIR: the problems whose verdict flipped between the two folders, each way.

The page's scripts come first in the file and the texts last, so the browser shows the tables and the problem list
while it is still reading the texts (a 64 seeds x 500 problems folder of 8k-token samples: docs/evaluation/report.md).
The styles and scripts are this package's assets/ (plain CSS and JS, no library)."""

from __future__ import annotations

import base64
import datetime
import json
import os
import zlib
from collections.abc import Callable, Hashable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from pipeline_kit.atomic import no_space, open_atomic
from pipeline_kit.errors import UserError
from pipeline_kit.evaluation.output_files import ReadFile
from pipeline_kit.evaluation.summarize import (
    BenchmarkSummary,
    find_benchmark_outputs,
    rounded_metrics,
    summarize_benchmarks,
)
from pipeline_kit.jsonl import read_jsonl

ASSETS = Path(__file__).resolve().parent / "assets"
REPORT_FILE = "report.html"
# flags of a sample in the index (a bit each)
TIMED_OUT, ERROR, JUDGE_RIGHT, JUDGED, TRUNCATED = 1, 2, 4, 8, 16
SNIPPET = 300  # characters of a problem's text in a flip's line
# gzip level of the blocks: 1 compresses 64 x 500 samples of 8k tokens about 10x faster than 6, for a fifth more bytes
LEVEL = 1


@dataclass
class Problems:
    """The problems of one benchmark of one results folder, in the first run's order, and what matched them across
    its runs (as kit summarize matches seeds)."""

    kind: str  # "id", "problem" or "line"
    index: list[dict]  # per problem: id, problem, expected, samples (one per run, None where the run lacks it)
    texts: list[list]  # per problem: one [generation, thinking] per run (None where the run lacks the problem)


def _key_kind(files: list[ReadFile]) -> str:
    """How the runs of a benchmark are matched, as `kit summarize` matches its seeds (output_files.match)."""
    if all(None not in f.ids for f in files):
        return "id"
    if all(all(isinstance(p, str) for p in f.problems) and len(set(f.problems)) == len(f.problems) for f in files):
        return "problem"
    return "line"


def _keys(f: ReadFile, kind: str) -> list[Hashable]:
    return f.ids if kind == "id" else f.problems if kind == "problem" else list(range(len(f.ids)))


def _sample(f: ReadFile, i: int, lineno: int, rec: dict, timed_out: set) -> list:
    """[answer, correct, tokens, seconds, flags] of record i (on line `lineno`) of `f`, its verdict as summarize read
    it; `timed_out`: the names (id, else "line N") of its samples whose grading timed out."""
    flags = TIMED_OUT if (f.ids[i] if f.ids[i] is not None else f"line {lineno}") in timed_out else 0
    flags |= ERROR if rec.get("error") else 0
    flags |= TRUNCATED if rec.get("finished_reasoning") is False else 0
    judge = f.run.correct.get("judge_correct")
    if judge is not None:
        flags |= JUDGED | (JUDGE_RIGHT if judge[i] else 0)
    answer = f.run.answers[i]
    tokens, seconds = rec.get("num_generated_tokens"), rec.get("generation_time")
    return [
        None if answer is None else str(answer),
        bool(f.run.correct["symbolic_correct"][i]),
        tokens if isinstance(tokens, (int, float)) else None,
        round(seconds, 3) if isinstance(seconds, (int, float)) else None,
        flags,
    ]


def _texts(rec: dict) -> list:
    generation, thinking = rec.get("generation"), rec.get("reasoning_content")
    return [
        generation if isinstance(generation, str) else None if generation is None else json.dumps(generation),
        thinking if isinstance(thinking, str) else None,
    ]


def collect(summary: BenchmarkSummary) -> Problems:
    """Every problem of the benchmark with every run's sample (greedy first, then the seeds)."""
    files = summary.files
    kind = _key_kind(files)
    position: dict[Hashable, int] = {}
    index: list[dict] = []
    texts: list[list] = []
    runs = len(files)
    for r, f in enumerate(files):
        timed_out = set(f.audit["grading_timed_out"])
        records = read_jsonl(f.path)
        for i, (key, (lineno, rec)) in enumerate(zip(_keys(f, kind), records, strict=True)):
            p = position.get(key)
            if p is None:
                p = position[key] = len(index)
                problem = rec.get("problem")
                index.append(
                    {
                        "id": "" if rec.get("id") is None else str(rec["id"]),
                        "problem": problem if isinstance(problem, str) else "",
                        "expected": "" if rec.get("expected_answer") is None else str(rec["expected_answer"]),
                        "samples": [None] * runs,
                    }
                )
                texts.append([None] * runs)
            index[p]["samples"][r] = _sample(f, i, lineno, rec, timed_out)
            texts[p][r] = _texts(rec)
        del records
    return Problems(kind, index, texts)


def run_labels(summary: BenchmarkSummary) -> list[str]:
    greedy = ["greedy"] if summary.bench.greedy else []
    return greedy + [f"rs{seed}" for seed, _ in summary.bench.seeds]


def problem_verdict(samples: list, sampled_from: int) -> tuple[bool, int, int]:
    """(the problem's verdict, correct samples, samples) over its sampled runs (index >= `sampled_from`), or the
    greedy run when it has no sampled one: the verdict of the majority answer, as majority@k takes it (a tie goes to
    the answer seen first; no answer at all: wrong)."""
    runs = [s for s in samples[sampled_from:] if s is not None] or [s for s in samples[:sampled_from] if s]
    counts: dict[str, int] = {}
    first: dict[str, list] = {}
    leader = None
    for s in runs:
        answer = s[0]
        if answer is None:
            continue
        counts[answer] = counts.get(answer, 0) + 1
        first.setdefault(answer, s)
        if leader is None or counts[answer] > counts[leader]:
            leader = answer
    verdict = leader is not None and first[leader][1]
    return verdict, sum(1 for s in runs if s[1]), len(runs)


def flips(a: tuple[BenchmarkSummary, Problems], b: tuple[BenchmarkSummary, Problems]) -> dict:
    """The problems of one benchmark whose verdict (problem_verdict) differs between two results folders, matched
    by id, else by problem text; each way in a list of its own."""
    (sa, pa), (sb, pb) = a, b
    out: dict = {"matched_by": None, "fixed": [], "broken": [], "only_a": 0, "only_b": 0, "common": 0}
    if pa.kind == pb.kind == "id":
        key = "id"
    elif all(p["problem"] for p in pa.index + pb.index):
        key = "problem"
    else:
        return out  # nothing to match the folders' problems by; the page says so
    out["matched_by"] = key
    where_b = {p[key]: i for i, p in enumerate(pb.index)}
    from_a, from_b = int(sa.bench.greedy is not None), int(sb.bench.greedy is not None)
    for i, p in enumerate(pa.index):
        j = where_b.get(p[key])
        if j is None:
            out["only_a"] += 1
            continue
        out["common"] += 1
        va, ca, na = problem_verdict(p["samples"], from_a)
        vb, cb, nb = problem_verdict(pb.index[j]["samples"], from_b)
        if va != vb:
            item = {"a": i, "b": j, "id": p["id"], "problem": p["problem"][:SNIPPET], "expected": p["expected"]}
            item |= {"a_correct": [ca, na], "b_correct": [cb, nb]}
            out["fixed" if vb else "broken"].append(item)
    out["only_b"] = len(pb.index) - out["common"]
    return out


def data_warning(a: BenchmarkSummary, b: BenchmarkSummary) -> str | None:
    """One line when two results of a benchmark ran on different rows (their fingerprints, summarize.data_of)."""
    da, db = a.metrics["data"], b.metrics["data"]
    if not (da["fingerprint"] and db["fingerprint"]) or da["fingerprint"] == db["fingerprint"]:
        return None
    return (
        f"warning: {a.name} ran on other rows in A ({da['rows']} rows, fingerprint {da['fingerprint'][:12]}) than in B "
        f"({db['rows']} rows, fingerprint {db['fingerprint'][:12]}): their numbers do not compare"
    )


def _block(data) -> str:
    """JSON, gzip-compressed, base64-encoded: what the page's inflate() reads back."""
    raw = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
    return base64.b64encode(zlib.compress(raw, LEVEL, wbits=31)).decode("ascii")


def _script_json(data) -> str:
    """JSON to sit inside a <script> element: no `</script>` or `<!--` can close or confuse it."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


def _asset(name: str) -> str:
    return (ASSETS / name).read_text(encoding="utf-8")


def default_output(results_dir: Path, other_dir: Path | None) -> Path:
    if other_dir is None:
        return results_dir / REPORT_FILE
    return results_dir / f"report-vs-{other_dir.resolve().name}.html"


def build_report(
    results_dir: Path,
    other_dir: Path | None = None,
    output: Path | None = None,
    regrade: bool = False,
    extract: str = "boxed",
    pins: Callable[[str], tuple[int | None, str] | None] | None = None,
    warnings: list[str] | None = None,
) -> Path:
    """Write the report of `results_dir` (compared with `other_dir`, if given) to `output` (default: report.html,
    or report-vs-OTHER.html, in RESULTS_DIR), atomically; return its path. The folders are read as `kit summarize`
    reads them (`regrade`, `extract`, `pins` as there). `warnings` gets a line for each compared benchmark whose two
    runs ran on different rows (data_warning)."""
    dirs = [results_dir] + ([other_dir] if other_dir is not None else [])
    warnings = [] if warnings is None else warnings
    for d in dirs:
        find_benchmark_outputs(d)  # a folder without outputs is refused before any is read
    target = output or default_output(results_dir, other_dir)
    if target.is_dir():
        raise UserError(f"{target} is a folder; give the report's file name (e.g. {target / REPORT_FILE}).")
    sides = []
    for d in dirs:
        summaries = summarize_benchmarks(d, regrade, extract, pins)
        sides.append((d, summaries, [collect(s) for s in summaries]))
    meta = {
        "created": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "sides": [],
        "compare": {},
        "pairs": {},  # benchmark of RESULTS_DIR -> the differently named one of OTHER_DIR it is compared with
    }
    for d, summaries, problems in sides:
        metrics = rounded_metrics(summaries)
        meta["sides"].append(
            {
                "label": d.resolve().name,
                "path": str(d.resolve()),
                "benchmarks": [
                    {
                        "name": s.name,
                        "n": s.n,
                        "columns": s.columns,
                        "rows": s.modes(),
                        "metrics": metrics[s.name],
                        "notes": s.notes,
                        "runs": run_labels(s),
                        "problems": len(p.index),
                        "matched_by": p.kind,
                    }
                    for s, p in zip(summaries, problems, strict=True)
                ],
            }
        )
    if other_dir is not None:
        (_, sa, pa), (_, sb, pb) = sides
        by_name = {s.name: (s, p) for s, p in zip(sb, pb, strict=True)}
        if len(sa) == len(sb) == 1 and sa[0].name != sb[0].name:
            # one benchmark each, named after its folder (RESULTS_DIR/output*.jsonl): compared whatever the names
            meta["pairs"][sa[0].name] = sb[0].name
            by_name[sa[0].name] = by_name.pop(sb[0].name)
        meta["compare"] = {
            s.name: flips((s, p), by_name[s.name]) for s, p in zip(sa, pa, strict=True) if s.name in by_name
        }
        for s in sa:
            if s.name in by_name and (warning := data_warning(s, by_name[s.name][0])):
                meta["compare"][s.name]["data_warning"] = warning
                warnings.append(warning)
    try:
        with open_atomic(target) as f:
            for part in _html(meta, [problems for _, _, problems in sides]):
                f.write(part)
    except OSError as e:  # nothing is left half-written (open_atomic)
        why = no_space(e) or f"cannot write {target} ({e.strerror})"
        raise UserError(f"{why}; pass --output with a file in a folder you can write to.") from None
    return target


def _html(meta: dict, sides: list[list[Problems]]) -> Iterator[str]:
    title = "kit report: " + " vs ".join(side["label"] for side in meta["sides"])
    yield (
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{_escape(title)}</title>\n'
        f"<style>\n{_asset('report.css')}</style></head>\n<body>\n"
        f'<div id="app"><p class="loading">Loading the report…</p></div>\n'
        f'<script type="application/json" id="kit-meta">{_script_json(meta)}</script>\n'
    )
    for s, problems in enumerate(sides):  # the index of every benchmark: small, read at once
        for b, p in enumerate(problems):
            yield f'<script type="application/gzip-base64" id="kit-index-{s}-{b}">{_block(p.index)}</script>\n'
    yield f"<script>\n{_asset('report.js')}</script>\n"
    # the texts, one block per problem, last: the page is up while the browser still reads them
    workers = min(8, os.cpu_count() or 1)
    with ThreadPoolExecutor(workers) as pool:  # zlib lets go of the GIL while it compresses
        for s, problems in enumerate(sides):
            for b, p in enumerate(problems):
                for i, block in enumerate(pool.map(_block, p.texts)):
                    yield f'<script type="application/gzip-base64" id="kit-text-{s}-{b}-{i}">{block}</script>\n'
    yield "</body></html>\n"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
