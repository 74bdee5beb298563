"""`kit summarize RESULTS_DIR`: one table per benchmark (greedy, pass@1[avg-of-k], majority@k, pass@k), a
metrics.json, and on request an audit of doubtful samples and a plot against k (pipeline_kit.evaluation.summarize)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from pipeline_kit.cli.tracker_flags import TrackerFlags, takes_tracker_flags

Opt = typer.Option
# the flags that `kit report` reads a results folder with too
REGRADE_HELP = (
    "Grade with kit's grader (in memory; files unchanged) the records that carry another tool's labels "
    "(symbolic_correct/is_correct); without it those labels are used as given."
)
Extract = Annotated[
    str,
    Opt(
        "--extract",
        help="How kit's grader extracts the answers it grades here: boxed (the last \\boxed{}), auto or mcq; records "
        "graded already keep their mode (shown under the table).",
    ),
]


def register(app: typer.Typer) -> None:
    @app.command(
        help="Summarize results (kit's or another tool's): tables per benchmark, metrics.json, --audit, --plot; "
        "--wandb_project / --mlflow_uri log them to W&B / MLflow."
    )
    @takes_tracker_flags
    def summarize(
        results_dir: Annotated[
            Path,
            typer.Argument(
                metavar="RESULTS_DIR",
                help="Folder with eval-results/<benchmark>/output*.jsonl, <benchmark>/output*.jsonl or output*.jsonl.",
            ),
        ],
        save_metrics_path: Annotated[
            Path | None,
            Opt(
                "--save_metrics_path",
                help="Where to write the metrics (default: RESULTS_DIR/metrics.json; with --regrade "
                "RESULTS_DIR/metrics-regraded.json, which never replaces metrics.json).",
            ),
        ] = None,
        audit: Annotated[
            bool,
            Opt(
                "--audit",
                help="List failed extractions, grading timeouts, grader/judge disagreements and unparsed judge verdicts.",
            ),
        ] = False,
        plot: Annotated[
            Path | None, Opt("--plot", help="Draw pass@k and majority@k against k into this image (PATH.png).")
        ] = None,
        regrade: Annotated[
            bool,
            Opt(
                "--regrade",
                help=REGRADE_HELP + " The metrics go to metrics-regraded.json, beside the labels' metrics.json.",
            ),
        ] = False,
        extract: Extract = "boxed",
        trackers: TrackerFlags = None,
    ) -> None:
        from pipeline_kit.evaluation.summarize import metrics_target
        from pipeline_kit.evaluation.summarize import summarize as run
        from pipeline_kit.grading.modes import check_mode

        check_mode(extract)
        send = trackers.trackers()
        target = metrics_target(results_dir, save_metrics_path, regrade)
        replaced = target.exists()  # said, not refused: kit's own summary of these files, made again
        samples = send.log_samples if send.wanted else 0
        summary = run(
            results_dir, save_metrics_path, audit, plot, regrade, extract, pins=pinned_data, log_samples=samples
        )
        text, metrics_path = summary.text, summary.metrics_path
        print(text, flush=True)
        what = "regraded metrics" if regrade else "metrics"
        again = " (replacing the one there)" if replaced else ""
        print(f"kit summarize: wrote the {what} to {metrics_path}{again}", file=sys.stderr)
        if plot is not None:
            print(f"kit summarize: drew the plot in {plot}", file=sys.stderr)
        if send.wanted:  # after the tables are out: a tracker that fails leaves them printed and written
            for line in send.send(summary.metrics, summary.samples, results_dir.resolve().name):
                print(line, file=sys.stderr)


def pinned_data(name: str) -> tuple[int | None, str] | None:
    """The rows and fingerprint of the data kit pins for the shipped benchmark NAME (None: unknown or no pin)."""
    from pipeline_kit.benchmarks import SHIPPED_BENCHMARKS, get_benchmark

    if name not in SHIPPED_BENCHMARKS:
        return None
    bench = get_benchmark(name)
    return None if bench.fingerprint is None else (bench.rows, bench.fingerprint)
