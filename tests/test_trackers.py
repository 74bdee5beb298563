"""`kit summarize --wandb_project / --mlflow_uri` (and `kit eval`'s summarize job with the same flags): what was
logged is read back, from W&B's offline run file and from MLflow's file store, and compared with metrics.json and
the output files."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline_kit.cli.main import main
from pipeline_kit.evaluation.trackers import GENERATION_CHARS, _cut, mlflow_name, scalars

DATA = Path(__file__).parent / "data" / "summarize_results"
REPO = Path(__file__).resolve().parent.parent
# the first three problems of algebra, as its output files hold them (p3's greedy and most seeds found no answer)
ALGEBRA_ROWS = [
    ["p1", "2", "2", True, "2", True, "2", True, "3", False, "2", True, "... so the answer is \\boxed{2}."],
    ["p2", "5", "5", True, "4", False, "5", True, "4", False, "5", True, "... so the answer is \\boxed{5}."],
    ["p3", "7", None, False, None, False, None, False, "7", True, None, False, "I could not finish."],
]
ALGEBRA_COLUMNS = ["id", "expected_answer", "greedy/predicted_answer", "greedy/symbolic_correct"]
ALGEBRA_COLUMNS += [f"rs{s}/{c}" for s in range(4) for c in ("predicted_answer", "symbolic_correct")]
ALGEBRA_COLUMNS += ["greedy/generation"]


@pytest.fixture(autouse=True)
def _mlflow_opt_in_restored(monkeypatch):
    """kit sets MLFLOW_ALLOW_FILE_STORE for a file URI in its own process (here, the test's): undone after each test,
    and absent before it (kit's opt-in is what is tested)."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "")
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE")


def results(tmp_path: Path) -> Path:
    dst = tmp_path / "results"
    shutil.copytree(DATA, dst)
    return dst


def expected_scalars(metrics: dict) -> dict[str, float]:
    """Every number of every mode of metrics.json, written out here (not through trackers.scalars)."""
    out = {}
    for bench, entries in metrics.items():
        for mode, values in entries.items():
            if mode in ("data", "judge", "reasoning", "unfinished"):  # metrics.NON_MODE_KEYS, written out here too
                continue
            out.update({f"{bench}/{mode}/{col}": v for col, v in values.items() if type(v) in (int, float)})
    return out


# ---------------------------------------------------------------------------------------------------- W&B, offline


def wandb_records(path: Path):
    """The protobuf records of a W&B run file (run-<id>.wandb): a 7-byte header (':W&B', magic, version), then
    LevelDB-log style blocks of 32 KiB whose chunks (crc32c, length, type: 1 full, 2 first, 3 middle, 4 last) carry
    wandb_internal_pb2.Record messages. wandb 0.31 ships no reader for it (its Go core writes it)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", data[:8]
    block, pos, pending = 32768, 7, b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:  # a block's tail too short for a chunk header is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0 and length == 0:
            pos += left
            continue
        pending += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            pending = b""
            yield record


def wandb_run(run_dir: Path) -> tuple[object, dict]:
    """(the run record, the logged history: key -> value, nested keys as dicts)."""
    (run_file,) = run_dir.glob("run-*.wandb")
    run, history = None, {}
    for record in wandb_records(run_file):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run = record.run
        elif kind == "history":
            for item in record.history.item:
                path = [item.key] if item.key else list(item.nested_key)
                node = history
                for part in path[:-1]:
                    node = node.setdefault(part, {})
                node[path[-1]] = json.loads(item.value_json)
    return run, history


def test_wandb_offline_gets_the_metrics_and_a_samples_table(tmp_path: Path):
    res = results(tmp_path)
    env = {
        **os.environ,
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
        "WANDB_DIR": str(tmp_path),
        "WANDB_CONFIG_DIR": str(tmp_path / "wandb-config"),
        "WANDB_CACHE_DIR": str(tmp_path / "wandb-cache"),
        "WANDB_DATA_DIR": str(tmp_path / "wandb-data"),
    }
    args = ["--wandb_project=math-evals", "--wandb_name=run-1", "--wandb_group=sweep", "--log_samples=3"]
    cmd = [sys.executable, "-m", "pipeline_kit.cli.main", "summarize", str(res), *args]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = (tmp_path / "wandb").glob("offline-run-*")
    assert f"to W&B: {run_dir} (offline" in proc.stderr
    run, history = wandb_run(run_dir)
    assert (run.project, run.display_name, run.run_group) == ("math-evals", "run-1", "sweep")

    metrics = json.loads((res / "metrics.json").read_text())
    want = expected_scalars(metrics)
    assert "algebra/pass@1[avg-of-4]/symbolic_correct" in want and "algebra/majority@4/no_answer" in want
    logged = {key: value for key, value in history.items() if not key.startswith(("_", "samples/"))}
    assert logged == pytest.approx(want)
    assert not any(f"/{key}/" in name for key in ("data", "judge", "reasoning") for name in logged)

    tables = {key: value for key, value in history.items() if key.startswith("samples/")}
    assert sorted(tables) == ["samples/algebra", "samples/geometry"]
    table = json.loads((run_dir / "files" / tables["samples/algebra"]["path"]).read_text())
    assert table["columns"] == ALGEBRA_COLUMNS
    assert table["data"] == ALGEBRA_ROWS


# ---------------------------------------------------------------------------------------------------- MLflow, file store


def test_mlflow_file_store_gets_the_metrics_and_a_samples_table(tmp_path: Path, capsys):
    from mlflow import MlflowClient

    res = results(tmp_path)
    uri = (tmp_path / "mlruns").as_uri()
    args = ["--mlflow_uri", uri, "--mlflow_experiment=evals", "--mlflow_run_name=run-1", "--log_samples=2"]
    assert main(["summarize", str(res), *args]) == 0
    err = capsys.readouterr().err
    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("evals").experiment_id])
    assert f"to MLflow: run {run.info.run_id} of experiment 'evals' at {uri}" in err
    assert (run.info.run_name, run.info.status) == ("run-1", "FINISHED")

    want = {mlflow_name(key): value for key, value in expected_scalars(json.loads((res / "metrics.json").read_text())).items()}  # fmt: skip
    assert run.data.metrics == pytest.approx(want)
    assert "algebra/pass_at_1.avg-of-4/symbolic_correct" in run.data.metrics
    assert "algebra/majority_at_4/no_answer" in run.data.metrics

    artifacts = sorted(a.path for a in client.list_artifacts(run.info.run_id, "samples"))
    assert artifacts == ["samples/algebra.json", "samples/geometry.json"]
    table = json.loads(Path(client.download_artifacts(run.info.run_id, "samples/algebra.json", str(tmp_path))).read_text())  # fmt: skip
    assert table["columns"] == ALGEBRA_COLUMNS
    assert table["data"] == ALGEBRA_ROWS[:2]


def test_mlflow_without_samples_logs_no_table(tmp_path: Path):
    from mlflow import MlflowClient

    res = results(tmp_path)
    uri = (tmp_path / "mlruns").as_uri()
    assert main(["summarize", str(res), "--mlflow_uri", uri, "--log_samples=0"]) == 0
    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("pipeline-kit").experiment_id])
    assert run.info.run_name == "results" and run.data.metrics  # the results folder's name
    assert client.list_artifacts(run.info.run_id) == []


# ---------------------------------------------------------------------------------------------------- errors, names


@pytest.mark.parametrize(("flag", "module", "extra"), [("--wandb_project=p", "wandb", "wandb"), ("--mlflow_uri=file:///x", "mlflow", "mlflow")])  # fmt: skip
def test_a_missing_tracker_is_one_line_naming_the_extra(tmp_path: Path, monkeypatch, capsys, flag, module, extra):
    monkeypatch.setitem(sys.modules, module, None)  # `import module` now raises ImportError
    res = results(tmp_path)
    assert main(["summarize", str(res), flag]) == 2
    err = capsys.readouterr().err.strip()
    assert f"pip install 'pipeline-kit[{extra}]'" in err and "\n" not in err, err
    assert not (res / "metrics.json").exists()  # refused before any work


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--wandb_name=n"], "--wandb_name and --wandb_group need --wandb_project"),
        (["--mlflow_run_name=n"], "--mlflow_experiment and --mlflow_run_name need --mlflow_uri"),
        (["--mlflow_uri=file:///x", "--log_samples=-1"], "--log_samples must be 0"),
    ],
)
def test_tracker_flags_that_cannot_be_used_are_refused(tmp_path: Path, capsys, args, needle):
    assert main(["summarize", str(results(tmp_path)), *args]) == 2
    assert needle in capsys.readouterr().err


def test_names_scalars_and_cut_generations():
    metrics = {"b": {"pass@1[avg-of-4]": {"num_entries": 3, "symbolic_correct": 50.0, "avg_tokens": None},
                     "data": {"rows": 3}, "reasoning": {"samples": 2}}}  # fmt: skip
    assert scalars(metrics) == {"b/pass@1[avg-of-4]/num_entries": 3, "b/pass@1[avg-of-4]/symbolic_correct": 50.0}
    assert mlflow_name("b/pass@1[avg-of-4]/x") == "b/pass_at_1.avg-of-4/x"
    assert mlflow_name("b/majority[equivalent]@4/x") == "b/majority.equivalent_at_4/x"
    text = "a" * GENERATION_CHARS + "\\boxed{7}"
    cut = _cut(text)
    assert cut.startswith("a" * 100) and cut.endswith("\\boxed{7}") and "characters cut" in cut
    assert len(cut) < len(text) + 40 and _cut("short") == "short"


def test_help_imports_no_tracker():
    code = (
        "import sys\nfrom pipeline_kit.cli.main import main\n"
        "for args in (['--help'], ['summarize', '--help'], ['eval', '--help']):\n"
        "    try:\n        main(args)\n    except SystemExit:\n        pass\n"
        "assert not {'wandb', 'mlflow'} & set(sys.modules), sorted({'wandb', 'mlflow'} & set(sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 0, proc.stderr


# ---------------------------------------------------------------------------------------------------- kit eval


def test_eval_passes_the_tracker_flags_to_its_summarize_job(tmp_path: Path):
    from pipeline_kit.cluster import ClusterConfig
    from pipeline_kit.evaluation.trackers import Trackers
    from pipeline_kit.jobs.evaluate import EvalSpec, eval_jobs, parse_benchmarks
    from pipeline_kit.jobs.options import JobOptions
    from pipeline_kit.servers.base import ServerSpec

    data = tmp_path / "data"
    (data / "arith").mkdir(parents=True)
    (data / "arith" / "test.jsonl").write_text('{"problem": "1+1", "expected_answer": "2"}\n')
    cluster = ClusterConfig("c.yaml", "slurm", str(tmp_path / "jobs"))
    out = tmp_path / "out"

    def summarize_command(trackers: Trackers):
        spec = EvalSpec(ServerSpec("vllm", "/models/m"), parse_benchmarks("arith:2", ["arith"]), str(out),
                        data_dir=str(data), trackers=trackers)  # fmt: skip
        return eval_jobs(cluster, spec, JobOptions("ev"))[-1].groups[0].commands[0]

    plain = summarize_command(Trackers())
    assert plain.command.endswith(f"-m pipeline_kit.cli.main summarize {out}")  # no tracker flag unless given
    assert "wandb" not in plain.python_check.modules
    traced = summarize_command(Trackers("math evals", wandb_group="g", mlflow_uri="file:///m", log_samples=5))
    assert traced.command.endswith(
        f"summarize {out} '--wandb_project=math evals' --wandb_group=g --mlflow_uri=file:///m --log_samples=5"
    )
    assert {"wandb", "mlflow"} <= set(traced.python_check.modules)
    assert "pipeline-kit[wandb,mlflow]" in traced.python_check.fix


def test_eval_refuses_tracker_flags_that_cannot_be_used(capsys):
    args = ["eval", "--cluster=local", "--benchmarks=arith", "--output_dir=/tmp/x", "--wandb_group=g"]
    args += ["--server_type=openai", "--model=m", "--server_address=http://127.0.0.1:9/v1"]
    assert main(args) == 2
    assert "--wandb_name and --wandb_group need --wandb_project" in capsys.readouterr().err
