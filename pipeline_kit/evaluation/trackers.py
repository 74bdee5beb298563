"""`kit summarize --wandb_project / --mlflow_uri`: the metrics of a summary, and a table of samples per benchmark,
sent to Weights & Biases or MLflow. Both are optional extras, imported only when asked for (`check` imports them
before any work is done, so a missing one is a one-line error, not a traceback after the tables).

Scalars are named <benchmark>/<mode>/<column> (for MLflow, whose names allow no '@' or '[', with the mode spelled
mlflow_name's way); a benchmark's non-mode entries of metrics.json (metrics.NON_MODE_KEYS) are not sent. The samples
table of a benchmark holds its first N problems (of its first output file): the id, the expected answer, each
output's predicted answer and verdict, and the first output's generation, cut in the middle when long."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from pipeline_kit.errors import UserError
from pipeline_kit.evaluation.metrics import NON_MODE_KEYS

if TYPE_CHECKING:  # the output files' reader (and the grader under it) is not needed to plan a run
    from pipeline_kit.evaluation.output_files import ReadFile

GENERATION_CHARS = 2000  # a sample's generation longer than this keeps its head and tail (the answer is at the end)
DEFAULT_SAMPLES = 20
DEFAULT_MLFLOW_EXPERIMENT = "pipeline-kit"


@dataclass(frozen=True)
class Trackers:
    """Where `kit summarize` sends its metrics: W&B when wandb_project is set, MLflow when mlflow_uri is."""

    wandb_project: str | None = None
    wandb_name: str | None = None  # default: the results folder's name
    wandb_group: str | None = None
    mlflow_uri: str | None = None
    mlflow_experiment: str = DEFAULT_MLFLOW_EXPERIMENT
    mlflow_run_name: str | None = None  # default: the results folder's name
    log_samples: int = DEFAULT_SAMPLES  # problems per benchmark in the samples table; 0: no table

    @property
    def wanted(self) -> bool:
        return self.wandb_project is not None or self.mlflow_uri is not None

    def check(self) -> None:
        """Refuse flags that cannot be used, and import each tracker asked for (before any work is done)."""
        self.check_flags()
        if self.wandb_project is not None:
            _wandb()
        if self.mlflow_uri is not None:
            _mlflow()

    def check_flags(self) -> None:
        """Refuse flags that cannot be used (`kit eval` checks only these: its summarize job imports the trackers)."""
        if self.log_samples < 0:
            raise UserError(f"--log_samples must be 0 (no samples table) or more, got {self.log_samples}.")
        if self.wandb_project is None and (self.wandb_name is not None or self.wandb_group is not None):
            raise UserError("--wandb_name and --wandb_group need --wandb_project (the W&B project to log to).")
        if self.mlflow_uri is None and (
            self.mlflow_run_name is not None or self.mlflow_experiment != DEFAULT_MLFLOW_EXPERIMENT
        ):
            raise UserError("--mlflow_experiment and --mlflow_run_name need --mlflow_uri (the MLflow tracking URI).")

    def send(self, metrics: dict[str, dict], samples: dict[str, tuple[list[str], list[list]]], name: str) -> list[str]:
        """Log `metrics` (metrics.json's content) and `samples` (benchmark -> its table's columns and rows) to each
        tracker asked for; `name`: the run's name when none was given. Returns a line per tracker: where it went."""
        values = scalars(metrics)
        lines = []
        if self.wandb_project is not None:
            lines.append(_to_wandb(self, values, samples, name))
        if self.mlflow_uri is not None:
            lines.append(_to_mlflow(self, values, samples, name))
        return lines

    def summarize_args(self) -> list[str]:
        """The flags that give these trackers to `kit summarize` (only those that differ from the defaults)."""
        args = []
        for flag, value, default in (
            ("--wandb_project", self.wandb_project, None),
            ("--wandb_name", self.wandb_name, None),
            ("--wandb_group", self.wandb_group, None),
            ("--mlflow_uri", self.mlflow_uri, None),
            ("--mlflow_experiment", self.mlflow_experiment, DEFAULT_MLFLOW_EXPERIMENT),
            ("--mlflow_run_name", self.mlflow_run_name, None),
            ("--log_samples", self.log_samples, DEFAULT_SAMPLES),
        ):
            if value != default:
                args.append(f"{flag}={value}")
        return args

    def extras(self) -> list[str]:
        """The extras (and so the modules) the summarize job's Python needs for these trackers."""
        return (["wandb"] if self.wandb_project is not None else []) + (["mlflow"] if self.mlflow_uri else [])


def _wandb():
    try:
        import wandb
    except ImportError:
        raise UserError("--wandb_project needs wandb: pip install 'pipeline-kit[wandb]'.") from None
    return wandb


def _mlflow():
    try:
        import mlflow
    except ImportError:
        raise UserError("--mlflow_uri needs mlflow: pip install 'pipeline-kit[mlflow]'.") from None
    return mlflow


# ---------------------------------------------------------------------------------------------------- what is sent


def scalars(metrics: dict[str, dict]) -> dict[str, float]:
    """<benchmark>/<mode>/<column> -> value, for every number of every evaluation mode (None values are skipped:
    a statistic the files lack)."""
    out: dict[str, float] = {}
    for bench, modes in metrics.items():
        for mode, values in modes.items():
            if mode in NON_MODE_KEYS or not isinstance(values, dict):
                continue
            for column, value in values.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    out[f"{bench}/{mode}/{column}"] = value
    return out


def mlflow_name(name: str) -> str:
    """`name` in the characters MLflow allows in a metric name: pass@1[avg-of-4] -> pass_at_1.avg-of-4,
    majority@4 -> majority_at_4; any other character outside [/\\w.\\- ] becomes '_'."""
    name = name.replace("@", "_at_").replace("[", ".").replace("]", "")
    return re.sub(r"[^/\w.\- ]", "_", name)


def sample_table(outputs: list[tuple[str, ReadFile]], n: int) -> tuple[list[str], list[list]]:
    """(columns, rows) of a benchmark's samples table: its first `n` problems, in the first output's order.
    `outputs`: (label, file) per output, e.g. ("greedy", output.jsonl), ("rs0", output-rs0.jsonl). The outputs are
    matched by id when every record has one, else by problem text when no file repeats one, else by line."""
    files = [f for _, f in outputs]
    if all(None not in f.ids for f in files):
        keys = [f.ids for f in files]
    elif all(all(isinstance(p, str) for p in f.problems) and len(set(f.problems)) == len(f.problems) for f in files):
        keys = [f.problems for f in files]
    else:
        keys = [list(range(f.run.num_problems)) for f in files]
    where = [{key: i for i, key in enumerate(file_keys)} for file_keys in keys]
    columns = ["id", "expected_answer"]
    for label, _ in outputs:
        columns += [f"{label}/predicted_answer", f"{label}/symbolic_correct"]
    columns.append(f"{outputs[0][0]}/generation")
    rows = []
    for i, rec in enumerate(_first_records(files[0].path, n)):
        pid = files[0].ids[i]
        row = [str(pid) if pid is not None else f"record {i + 1}", _text(rec.get("expected_answer"))]
        for file, positions in zip(files, where, strict=True):
            j = positions.get(keys[0][i])
            if j is None:  # (summarize refuses outputs that hold other problems; kept safe here)
                row += [None, None]
            else:
                row += [_text(file.run.answers[j]), file.run.correct["symbolic_correct"][j]]
        row.append(_cut(_text(rec.get("generation"))))
        rows.append(row)
    return columns, rows


def _first_records(path: Path, n: int) -> list[dict]:
    """The first `n` records of an output file (blank lines skipped, as the reader skips them)."""
    records = []
    if n <= 0:
        return records
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.isspace():
                records.append(json.loads(line))
                if len(records) == n:
                    break
    return records


def _text(value) -> str | None:
    return None if value is None else value if isinstance(value, str) else str(value)


def _cut(text: str | None) -> str | None:
    if text is None or len(text) <= GENERATION_CHARS:
        return text
    half = GENERATION_CHARS // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


# ---------------------------------------------------------------------------------------------------- the trackers


def _to_wandb(t: Trackers, values: dict[str, float], samples: dict, name: str) -> str:
    wandb = _wandb()
    try:
        run = wandb.init(project=t.wandb_project, name=t.wandb_name or name, group=t.wandb_group, job_type="summarize")
    except Exception as e:  # wandb's own errors (no API key, no network, ...) carry the cause
        raise UserError(
            f"W&B refused the run ({type(e).__name__}: {e}); `wandb login` or set WANDB_API_KEY, or log locally "
            "with WANDB_MODE=offline (then `wandb sync`)."
        ) from None
    try:
        logged = dict(values)
        for bench, (columns, rows) in samples.items():
            logged[f"samples/{bench}"] = wandb.Table(columns=columns, data=rows)
        run.log(logged)
        where = run.url or f"{Path(run.dir).parent} (offline: `wandb sync` uploads it)"
    finally:
        run.finish()
    return f"kit summarize: logged {len(values)} metrics and {len(samples)} sample tables to W&B: {where}"


def _to_mlflow(t: Trackers, values: dict[str, float], samples: dict, name: str) -> str:
    _mlflow()
    from mlflow import MlflowClient

    if urlparse(t.mlflow_uri).scheme in ("", "file"):
        # MLflow 3 refuses its file store unless opted in; a file URI given here is that opt-in (an explicit
        # MLFLOW_ALLOW_FILE_STORE=false still wins)
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    try:
        client = MlflowClient(tracking_uri=t.mlflow_uri)
        found = client.get_experiment_by_name(t.mlflow_experiment)
        experiment = found.experiment_id if found else client.create_experiment(t.mlflow_experiment)
        run = client.create_run(experiment, run_name=t.mlflow_run_name or name)
    except Exception as e:
        raise UserError(f"MLflow at {t.mlflow_uri} refused the run ({type(e).__name__}: {e}).") from None
    run_id = run.info.run_id
    status = "FAILED"
    try:
        from mlflow.entities import Metric

        stamp = run.info.start_time
        metrics = [Metric(mlflow_name(key), float(value), stamp, 0) for key, value in values.items()]
        for start in range(0, len(metrics), 1000):  # MLflow's batch limit
            client.log_batch(run_id, metrics=metrics[start : start + 1000])
        for bench, (columns, rows) in samples.items():
            table = {col: [row[i] for row in rows] for i, col in enumerate(columns)}
            client.log_table(run_id, table, f"samples/{mlflow_name(bench)}.json")
        status = "FINISHED"
    except Exception as e:  # the run stays, marked FAILED
        raise UserError(
            f"MLflow at {t.mlflow_uri}: logging to run {run_id} failed ({type(e).__name__}: {e})."
        ) from None
    finally:
        client.set_terminated(run_id, status)
    return (
        f"kit summarize: logged {len(values)} metrics and {len(samples)} sample tables to MLflow: run {run_id} of "
        f"experiment {t.mlflow_experiment!r} at {t.mlflow_uri}"
    )
