"""`kit summarize RESULTS_DIR`: find the output files of each benchmark, read them (kit's or another tool's, grading
what has no verdict yet, and matching the sampled runs by problem: output_files.py), and turn them into one table
per benchmark, a metrics.json, an optional audit of the samples worth a look, and an optional plot of pass@k and
majority@k against k.

Layouts (the first that matches wins): RESULTS_DIR/eval-results/<benchmark>/output*.jsonl, RESULTS_DIR/output*.jsonl
(the benchmark is then named after RESULTS_DIR), RESULTS_DIR/<benchmark>/output*.jsonl. Only `output.jsonl`
(greedy) and `output-rs{seed}.jsonl` (sampled) are read; chunk files (`*_chunk_*.jsonl`), `.done` markers and
in-progress files are not outputs, but an output that has them and is not merged yet is named as unfinished under its
benchmark's table (and in metrics.json), and so is one that the last run into the folder planned (its PLAN_NAME file)
and that has no file yet. The metrics themselves are defined in metrics.py."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from pipeline_kit.atomic import default_mode, write_atomic
from pipeline_kit.errors import UserError
from pipeline_kit.evaluation.judge import judge_notes, judge_tally
from pipeline_kit.evaluation.metrics import greedy_metrics, sampled_metrics
from pipeline_kit.evaluation.output_files import (
    AUDIT_CLASSES,
    ReadFile,
    audit_notes,
    extraction_of,
    graded_by,
    match,
    read_all,
)
from pipeline_kit.evaluation.reasoning_stats import ReasoningTally
from pipeline_kit.evaluation.selection_modes import decided_by_note, genselect_metrics, selection_metrics
from pipeline_kit.evaluation.trackers import sample_table
from pipeline_kit.grading.output_names import (
    OUTPUT_NAME,
    UNFINISHED_NAME,
    output_name,
    planned_outputs,
    seed_of,
)

METRICS_FILE = "metrics.json"
REGRADED_METRICS_FILE = "metrics-regraded.json"  # --regrade's, beside the labels' metrics.json, never over it
JUDGE_COLUMNS = ["judge_correct", "both_correct", "any_correct"]
AUDIT_EXAMPLES = 5


@dataclass
class BenchmarkOutputs:
    """The output files of one benchmark in a results folder: its greedy output.jsonl and its sampled
    output-rs<seed>.jsonl (not the benchmark's definition, which is pipeline_kit.benchmarks.Benchmark)."""

    name: str
    folder: Path
    greedy: Path | None = None
    seeds: list[tuple[int, Path]] = field(default_factory=list)  # (seed, file), by seed
    # outputs with chunk or in-progress files but no merged file yet (None: the greedy one), by seed
    unfinished: list[int | None] = field(default_factory=list)
    # outputs the last run into the folder planned (PLAN_NAME) that have no file at all yet, by seed
    not_started: list[int | None] = field(default_factory=list)

    @property
    def files(self) -> list[Path]:
        return ([self.greedy] if self.greedy else []) + [p for _, p in self.seeds]

    @property
    def pending(self) -> list[int | None]:
        """Every output not finished yet, by seed (None: the greedy one first)."""
        return sorted(self.unfinished + self.not_started, key=_seed_order)

    def pending_words(self) -> str:
        """Its outputs not finished yet, in words: 'seed 0 (chunk or in-progress files, no merged output) and seeds
        1-31 (planned by the last run, not started)'."""
        parts = []
        if self.unfinished:
            parts.append(f"{_outputs_words(self.unfinished)} (chunk or in-progress files, no merged output)")
        if self.not_started:
            parts.append(f"{_outputs_words(self.not_started)} (planned by the last run, not started)")
        return " and ".join(parts)


def _seed_order(seed: int | None) -> int:
    return -1 if seed is None else seed


def _outputs_words(outputs: list[int | None]) -> str:
    """'the greedy output and seeds 8-15'."""
    seeds = [s for s in outputs if s is not None]
    parts = ["the greedy output"] if None in outputs else []
    parts += [f"seed{'s' if len(seeds) > 1 else ''} {_ranges(seeds)}"] if seeds else []
    return " and ".join(parts)


def _ranges(numbers: list[int]) -> str:
    """[3, 5, 6, 7] -> '3, 5-7'."""
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


# ---------------------------------------------------------------------------------------------------- finding files


def _outputs_in(folder: Path, name: str) -> BenchmarkOutputs | None:
    bench = BenchmarkOutputs(name, folder)
    started: set[int | None] = set()
    for entry in os.scandir(folder):
        if (partial := UNFINISHED_NAME.fullmatch(entry.name)) is not None:
            started.add(seed_of(partial))
        match = OUTPUT_NAME.fullmatch(entry.name)
        if match and entry.is_file():
            if (seed := seed_of(match)) is None:
                bench.greedy = Path(entry.path)
            else:
                bench.seeds.append((seed, Path(entry.path)))
    bench.seeds.sort()
    finished = {seed for seed, _ in bench.seeds} | ({None} if bench.greedy else set())
    planned = {seed_of(OUTPUT_NAME.fullmatch(name)) for name in planned_outputs(folder)}
    bench.unfinished = sorted(started - finished, key=_seed_order)
    bench.not_started = sorted(planned - started - finished, key=_seed_order)
    return bench if bench.greedy or bench.seeds or bench.pending else None


def find_benchmark_outputs(results_dir: Path) -> list[BenchmarkOutputs]:
    if not results_dir.is_dir():
        raise UserError(f"{results_dir} is not a folder; pass the folder that holds the results of `kit eval`.")
    root = results_dir / "eval-results"
    if not root.is_dir():
        direct = _outputs_in(results_dir, results_dir.resolve().name)
        if direct:
            return [direct]
        root = results_dir
    benches = [
        b for entry in sorted(os.scandir(root), key=lambda e: e.name) if entry.is_dir()
        if (b := _outputs_in(Path(entry.path), entry.name))
    ]  # fmt: skip
    if benches and not any(b.files for b in benches):
        raise UserError(
            f"nothing under {results_dir} is finished yet: "
            + "; ".join(f"{b.name}: {b.pending_words()}" for b in benches)
            + "; wait for the run to end, or run the same command again to finish it."
        )
    if not benches:
        raise UserError(
            f"no output.jsonl or output-rs<seed>.jsonl found under {results_dir}; expected "
            f"{results_dir}/eval-results/<benchmark>/output*.jsonl, {results_dir}/<benchmark>/output*.jsonl or "
            f"{results_dir}/output*.jsonl (chunk files *_chunk_*.jsonl are merged into these when all chunks finish)."
        )
    return benches


# ---------------------------------------------------------------------------------------------------- metrics, output


def compute(bench: BenchmarkOutputs, files: list[ReadFile]) -> tuple[dict, list[str], str | None]:
    """(metrics of the benchmark keyed as in metrics.json, its correctness columns, how its sampled files were
    matched: None with fewer than two)."""
    judged = {f.has_judge for f in files}
    if len(judged) > 1:
        without = next(f.path for f in files if not f.has_judge)
        with_ = next(f.path for f in files if f.has_judge)
        raise UserError(
            f"{with_} has judge_correct but {without} does not; run the judge on every output of {bench.name}."
        )
    columns = ["symbolic_correct", *(JUDGE_COLUMNS if judged == {True} else [])]
    metrics: dict = {}
    greedy = files[0] if bench.greedy else None
    if greedy:
        metrics["greedy"] = greedy_metrics(greedy.run, columns)
    sampled = files[1:] if greedy else files
    matched_by = None
    if sampled:
        runs, matched_by = match(sampled)
        metrics.update(sampled_metrics(runs, columns))
        if len(runs) > 1:  # the selection modes, at k = n, beside majority@n
            common = {k: metrics[f"majority@{len(runs)}"][k] for k in ("num_entries", "avg_tokens", "gen_seconds")}
            metrics.update(selection_metrics(runs, columns, common))
            by_name = {f.path.name: (f.ids, f.run) for f in sampled}
            metrics.update(genselect_metrics(bench.folder / "genselect", by_name, columns, common))
    return metrics, columns, matched_by if len(sampled) > 1 else None


def _table_rows(metrics: dict, n: int) -> list[tuple[str, dict]]:
    rows = [("greedy", metrics["greedy"])] if "greedy" in metrics else []
    if n == 1:
        rows.append(("pass@1", metrics["pass@1"]))
    elif n > 1:
        rows += [(key, metrics[key]) for key in (f"pass@1[avg-of-{n}]", f"majority@{n}")]
        rows += [(key, values) for key, values in metrics.items() if "[" in key and key.endswith(f"]@{n}")]
        rows += [(key, metrics[key]) for key in (f"sc-tir@{n}", f"genselect@{n}", f"pass@{n}") if key in metrics]
    return rows


def _stat(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)  # None: the files lack the statistic


def format_table(name: str, metrics: dict, columns: list[str], n: int, notes: list[str] = ()) -> str:
    """The benchmark's table (greedy and the k = n rows), then `notes` (lines such as "graded by: kit")."""
    header = ["evaluation_mode", "num_entries", "avg_tokens", "gen_seconds", *columns, "no_answer"]
    body = []
    for mode, values in _table_rows(metrics, n):
        row = [
            mode,
            str(values["num_entries"]),
            _stat(values["avg_tokens"], ".0f"),
            _stat(values["gen_seconds"], ".2f"),
        ]
        for col in columns:
            cell = f"{values[col]:.2f}%"
            if f"{col}_std" in values and n > 1:
                cell += f" ± {values[f'{col}_std']:.2f}"
            row.append(cell)
        row.append(f"{values['no_answer']:.2f}%")
        body.append(row)
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = [" | ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in [header, *body]]
    width = max(len(line) for line in lines)
    title = f" {name} ".center(width, "-")
    return "\n".join([title, *lines, *notes])


def data_of(name: str, files: list[ReadFile], pin: tuple[int | None, str] | None) -> tuple[str, dict]:
    """(the note under a benchmark's table that names the rows its results ran on, metrics.json's "data"): their
    count and fingerprint, whether they are the data kit pins for the benchmark (`pin`: its rows and fingerprint),
    and a warning when its files ran on different rows."""
    first = files[0].data
    other = next((f for f in files if f.data != first), None)
    if other is not None:
        return (
            f"warning: {name}'s files ran on different data: {files[0].path.name} on {first}, {other.path.name} on "
            f"{other.data}; compare results only on one prepared file (rerun the odd ones with --rerun_done)",
            {"rows": None, "fingerprint": None, "pinned": None, "differs": [files[0].path.name, other.path.name]},
        )
    note = f"data: {first}"
    pinned = None
    if pin is not None:
        rows, digest = pin
        pinned = first.matches(digest) and rows in (None, first.rows)
        note += f" (kit's pinned {name})" if pinned else f" (not kit's pinned {name}: {rows} rows, {digest[:12]})"
    return note, {"rows": first.rows, "fingerprint": first.digest, "pinned": pinned}


def format_audit(name: str, files: list[ReadFile]) -> str:
    total = sum(f.run.num_problems for f in files)
    lines = [f"audit of {name}: {total} samples in {len(files)} files"]
    judged = any(f.has_judge for f in files)
    for key, label in AUDIT_CLASSES.items():
        if key == "judge_disagrees" and not judged:
            lines.append(f"  {label}: no judge ran")
            continue
        hits = [(pid, f.path.name) for f in files for pid in f.audit[key]]
        line = f"  {label}: {len(hits)} sample{'s' if len(hits) != 1 else ''}"
        if hits:
            line += ", e.g. " + ", ".join(f"{pid} ({fname})" for pid, fname in hits[:AUDIT_EXAMPLES])
        lines.append(line)
    return "\n".join(lines)


def _rounded(value):
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return round(value, 4) if isinstance(value, float) else value


def _pyplot(path: Path):
    """(matplotlib.pyplot, the file format) for --plot PATH, checked before any work is done."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UserError("--plot needs matplotlib: pip install 'pipeline-kit[plot]' (or matplotlib>=3.8).") from None
    fmt = path.suffix[1:].lower()
    supported = plt.figure().canvas.get_supported_filetypes()
    plt.close("all")
    if fmt not in supported:
        raise UserError(f"--plot {path}: matplotlib cannot write '.{fmt}' files; give a .png (or .pdf, .svg) path.")
    return plt, fmt


def plot(path: Path, metrics: dict[str, dict], ns: dict[str, int]) -> None:
    """pass@k and majority@k (symbolic_correct) against k, one panel per benchmark with sampled runs (the greedy
    accuracy, where there is one, as a dashed line)."""
    plt, fmt = _pyplot(path)
    from matplotlib.ticker import MaxNLocator

    names = [name for name in metrics if ns[name] > 0]
    if not names:
        raise UserError(f"--plot {path}: no benchmark has sampled outputs (output-rs<seed>.jsonl) to plot against k.")
    fig, axes = plt.subplots(1, len(names), figsize=(4.5 * len(names), 3.6), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        ks = list(range(1, ns[name] + 1))
        for kind, marker in (("pass", "o"), ("majority", "s")):
            ax.plot(
                ks,
                [metrics[name][f"{kind}@{k}"]["symbolic_correct"] for k in ks],
                marker=marker,
                markersize=6 if len(ks) <= 16 else 3,
                label=f"{kind}@k",
            )
        if "greedy" in metrics[name]:
            ax.axhline(metrics[name]["greedy"]["symbolic_correct"], color="gray", linestyle="--", label="greedy")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(name)
        ax.set_xlabel("k (samples)")
        ax.set_ylabel("symbolic_correct (%)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    try:
        _save_atomic(fig, path, fmt)
    finally:
        plt.close(fig)


def _save_atomic(fig, path: Path, fmt: str) -> None:
    """savefig to a temporary file beside `path`, then rename it over `path` (what write_atomic does for text)."""

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), default_mode(0o666))
            fig.savefig(f, format=fmt, dpi=120)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def metrics_target(results_dir: Path, save_metrics_path: Path | None, regrade: bool) -> Path:
    """Where the metrics go: `save_metrics_path`, else RESULTS_DIR/metrics.json, or with `regrade`
    RESULTS_DIR/metrics-regraded.json. A regrade never replaces RESULTS_DIR/metrics.json (refused in one line)."""
    if not regrade:
        return save_metrics_path or results_dir / METRICS_FILE
    labels = results_dir / METRICS_FILE
    target = save_metrics_path or results_dir / REGRADED_METRICS_FILE
    if os.path.abspath(target) == os.path.abspath(labels):
        raise UserError(
            f"--regrade writes its metrics beside {labels} (the file labels' metrics), never over it: drop "
            f"--save_metrics_path for {results_dir / REGRADED_METRICS_FILE}, or name another file."
        )
    return target


class Summary(NamedTuple):
    text: str  # the tables and their notes, to print
    metrics_path: Path  # where the metrics were written
    metrics: dict  # what was written there (benchmark -> mode -> column -> value, rounded)
    samples: dict[str, tuple[list[str], list[list]]]  # benchmark -> its samples table (columns, rows); see trackers


@dataclass
class BenchmarkSummary:
    """One benchmark of a results folder as `kit summarize` shows it: its metrics (metrics.json's entry), its
    correctness columns, its number of sampled runs, the notes under its table and its files as read."""

    bench: BenchmarkOutputs
    metrics: dict
    columns: list[str]
    notes: list[str]
    files: list[ReadFile]

    @property
    def name(self) -> str:
        return self.bench.name

    @property
    def n(self) -> int:
        return len(self.bench.seeds)

    def modes(self) -> list[str]:
        """The rows of its table: greedy and the k = n rows."""
        return [mode for mode, _ in _table_rows(self.metrics, self.n)]

    def table(self) -> str:
        return format_table(self.name, self.metrics, self.columns, self.n, self.notes)


def summarize_benchmarks(
    results_dir: Path,
    regrade: bool = False,
    extract: str = "boxed",
    pins: Callable[[str], tuple[int | None, str] | None] | None = None,
    audit: bool = False,
) -> list[BenchmarkSummary]:
    """Every benchmark of `results_dir`, read and summarized (summarize's arguments); `audit`: leave out the notes
    that --audit's lists say at length."""
    benches = find_benchmark_outputs(results_dir)
    read = read_all([p for b in benches for p in b.files], regrade, extract)
    out = []
    for bench in benches:
        if not bench.files:  # nothing finished: no table (another benchmark has one, see find_benchmark_outputs)
            print(
                f"kit: warning: {bench.name} has no table, nothing in it is finished yet: {bench.pending_words()}; "
                "run the same command again to finish it.",
                file=sys.stderr,
            )
            continue
        files = [read[p] for p in bench.files]
        metrics, columns, matched_by = compute(bench, files)
        mode = extraction_of(files)
        notes = [f"graded by: {graded_by(files)}" + (f"; answers extracted: {mode}" if mode else "")]
        data_note, metrics["data"] = data_of(bench.name, files, pins(bench.name) if pins else None)
        notes.append(data_note)
        notes += [f"seeds matched by: {matched_by}"] if matched_by else []
        if bench.pending:
            notes.append(
                f"unfinished: {bench.pending_words()}, left out of this table; run the same command again to finish them"
            )
            metrics["unfinished"] = [output_name(seed) for seed in bench.pending]
        tally = judge_tally(files)
        if tally is not None:
            metrics["judge"] = tally
        notes += judge_notes(tally) + decided_by_note(metrics)
        notes += [] if audit else audit_notes(files)
        thinking = ReasoningTally.total([f.reasoning for f in files])
        notes += [note] if (note := thinking.note()) else []
        if thinking.samples:
            metrics["reasoning"] = thinking.metrics()
        out.append(BenchmarkSummary(bench, metrics, columns, notes, files))
    return out


def rounded_metrics(summaries: list[BenchmarkSummary]) -> dict:
    """metrics.json's content: each benchmark's metrics, floats rounded to 4 places."""
    return {s.name: _rounded(s.metrics) for s in summaries}


def summarize(
    results_dir: Path,
    save_metrics_path: Path | None = None,
    audit: bool = False,
    plot_path: Path | None = None,
    regrade: bool = False,
    extract: str = "boxed",
    pins: Callable[[str], tuple[int | None, str] | None] | None = None,
    log_samples: int = 0,
) -> Summary:
    """The tables, where the metrics were written, the metrics, and with `log_samples` the first that many problems
    of each benchmark as a samples table (for trackers.py). `regrade`: grade with kit's grader the records that
    carry another tool's labels (output_files.py) instead of taking the labels as given, and write the metrics to
    metrics-regraded.json (never over metrics.json, the labels' metrics); `extract`: how kit's grader extracts the
    answers it grades here (records graded before keep theirs, shown in the table); `pins`: a benchmark's name ->
    the rows and fingerprint of the data kit pins for it (None: no pin), for the note under its table."""
    target = metrics_target(results_dir, save_metrics_path, regrade)
    if plot_path is not None:
        _pyplot(plot_path)
    summaries = summarize_benchmarks(results_dir, regrade, extract, pins, audit)
    parts = []
    samples: dict[str, tuple[list[str], list[list]]] = {}
    for s in summaries:
        parts.append(s.table())
        if log_samples:
            labels = (["greedy"] if s.bench.greedy else []) + [f"rs{seed}" for seed, _ in s.bench.seeds]
            samples[s.name] = sample_table(list(zip(labels, s.files, strict=True)), log_samples)
        if audit:
            parts.append(format_audit(s.name, s.files))
    rounded = rounded_metrics(summaries)
    write_atomic(target, json.dumps(rounded, indent=2) + "\n")
    if plot_path is not None:
        plot(plot_path, {s.name: s.metrics for s in summaries}, {s.name: s.n for s in summaries})
    return Summary("\n\n".join(parts), target, rounded, samples)
