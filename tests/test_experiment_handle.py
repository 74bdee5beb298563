"""The experiment handle run_pipeline returns (pipeline_kit.launch.Experiment): states, wait, result, logs, why jobs
failed and cancel, on none (real processes) and on the local Slurm, from the submitting process and from another
one (Experiment.load); SubmissionRefused for a pipeline refused before anything ran."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import SERVICES, git, need, run_committed

from pipeline_kit.cluster import load_cluster_config
from pipeline_kit.errors import UserError
from pipeline_kit.launch import SubmissionRefused, run_pipeline
from pipeline_kit.pipeline import Command, CommandGroup, Job, Pipeline

MIXED = """
import json, sys
from pipeline_kit.cluster import load_cluster_config
from pipeline_kit.launch import Experiment, JobFailed, run_pipeline
from pipeline_kit.pipeline import Command, CommandGroup, Job, Pipeline

if __name__ == "__main__":
    cluster = load_cluster_config("procs", sys.argv[1])
    good = Job("good", [CommandGroup([Command("echo fine", name="say")])])
    bad = Job("bad", [CommandGroup([Command("echo 'ValueError: the real cause'; exit 4", name="work")])])
    exp = run_pipeline(Pipeline("mixed", cluster, [good, bad]))
    out = {"type": type(exp).__name__, "states": exp.states, "status": exp.status(), "ok": exp.ok}
    out["wait"] = exp.wait()
    try:
        exp.wait(check=True)
    except JobFailed as e:
        out["error"] = str(e)
        out["failures"] = [[f.job, f.state, f.reason] for f in e.failures]
    try:
        exp.result()
    except JobFailed as e:
        out["result_error"] = str(e)
    logs = exp.logs()
    out["logs"] = {job: sorted(p.rsplit("/", 1)[1] for p in found.logs) for job, found in logs.items()}
    out["say"] = exp.tail(next(p for p in logs["good"].logs if p.endswith("/say.log")))
    again = Experiment.load("mixed", cluster)
    out["loaded"] = [again.run_id == exp.run_id, again.status(), [f.job for f in again.failures()]]
    print("RESULT " + json.dumps(out))
"""

# run by a second process: the handle of an experiment submitted elsewhere, found by name
HANDLE = """
import json, sys, time
from pipeline_kit.launch import Experiment, JobFailed
name, cluster, config_dir, want, action = sys.argv[1:6]
deadline = time.time() + 90
while True:  # the record appears once the submission is under way; then wait for the states we want
    try:
        exp = Experiment.load(name, cluster, config_dir)
        states = exp.status()
    except Exception as e:
        states = {"error": str(e)}
    if all(states.get(job) == state for job, state in json.loads(want).items()) or time.time() > deadline:
        break
    time.sleep(0.3)
out = {"before": states, "why": {f.job: f.reason for f in exp.failures()} if "error" not in states else {}}
if action == "cancel":
    out["cancelled"] = exp.cancel()
    out["after"] = exp.wait(timeout=60)
    out["failures"] = [[f.job, f.state, f.reason] for f in exp.failures()]
    try:
        exp.result(timeout=5)
    except JobFailed as e:
        out["result_error"] = str(e)
print("RESULT " + json.dumps(out))
"""


def result_of(proc: subprocess.CompletedProcess) -> dict:
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout + proc.stderr
    return json.loads(lines[-1].removeprefix("RESULT "))


def handle(tmp_path, name: str, cluster: str, config_dir, want: dict, action: str = "") -> dict:
    env = {**os.environ, **SERVICES, "KIT_HOME": str(tmp_path / "kh")}
    argv = [sys.executable, "-c", HANDLE, name, cluster, str(config_dir), json.dumps(want), action]
    return result_of(subprocess.run(argv, env=env, capture_output=True, text=True, timeout=200))


def test_failing_job_reports_its_cause_through_the_handle_on_none(user_repo, tmp_path, configs):
    d = configs("procs", "executor: none\njob_dir: JOB_DIR\n")
    out = result_of(run_committed(user_repo, tmp_path, "mixed.py", MIXED, str(d), timeout=120))
    assert out["type"] == "Experiment"
    assert out["states"] == out["status"] == out["wait"] == {"good": "SUCCEEDED", "bad": "FAILED"}
    assert out["ok"] is False
    # one line naming the job, its state and the first line of why; the failure keeps the whole report
    assert out["error"] == "experiment mixed: job bad FAILED (kit: command 'work' failed with exit code 4)"
    assert out["result_error"] == out["error"]
    [(job, state, reason)] = out["failures"]
    assert (job, state) == ("bad", "FAILED")
    assert "work.log: ValueError: the real cause" in reason
    assert out["logs"] == {"good": ["say.log"], "bad": ["kit.log", "work.log"]}  # kit.log: only when kit spoke
    assert out["say"] == "fine\n"
    assert out["loaded"] == [True, {"good": "SUCCEEDED", "bad": "FAILED"}, ["bad"]]


def test_cancel_through_the_handle_stops_a_running_job_on_none(user_repo, tmp_path, configs):
    d = configs("procs", "executor: none\njob_dir: JOB_DIR\n")
    marker = tmp_path / "still-running"
    body = f"""
    import sys
    from pipeline_kit.cluster import load_cluster_config
    from pipeline_kit.launch import run_pipeline
    from pipeline_kit.pipeline import Command, CommandGroup, Job, Pipeline

    if __name__ == "__main__":
        job = Job("sleeper", [CommandGroup([Command("sleep 300; touch {marker}", name="nap")])])
        quick = Job("quick", [CommandGroup([Command("true", name="done")])])
        exp = run_pipeline(Pipeline("long", load_cluster_config("procs", sys.argv[1]), [job, quick]))
        print("STATES", exp.states)
    """
    (user_repo / "long.py").write_text(textwrap.dedent(body))
    git(user_repo, "add", ".")
    git(user_repo, "commit", "-q", "-m", "long")
    env = {**os.environ, "KIT_HOME": str(tmp_path / "kh")}
    runner = subprocess.Popen(
        [sys.executable, "long.py", str(d)], cwd=user_repo, env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        out = handle(tmp_path, "long", "procs", d, {"sleeper": "RUNNING", "quick": "SUCCEEDED"}, "cancel")
        assert out["before"] == {"sleeper": "RUNNING", "quick": "SUCCEEDED"}
        assert out["cancelled"] == ["sleeper"]  # not quick, which had already ended
        assert out["after"] == {"sleeper": "CANCELLED", "quick": "SUCCEEDED"}
        [(job, state, reason)] = out["failures"]
        assert (job, state) == ("sleeper", "CANCELLED") and reason
        assert out["result_error"].startswith("experiment long: job sleeper CANCELLED")
        printed, _ = runner.communicate(timeout=60)
        assert (
            "STATES {'sleeper': 'CANCELLED', 'quick': 'SUCCEEDED'}" in printed
        )  # the submitting process sees it end too
        time.sleep(0.5)
        assert not marker.exists()
    finally:
        runner.kill()


DETACHED = """
import json, sys, time
from pathlib import Path
from pipeline_kit.cluster import load_cluster_config
from pipeline_kit.launch import Experiment, run_pipeline
from pipeline_kit.pipeline import Command, CommandGroup, Job, Pipeline

if __name__ == "__main__":
    cluster = load_cluster_config("procs", sys.argv[1])
    sleeper = Job("sleeper", [CommandGroup([Command(f"sleep 300; touch {sys.argv[2]}", name="nap")])])
    quick = Job("quick", [CommandGroup([Command("echo done", name="say")])])
    after = Job("after", [CommandGroup([Command("echo never", name="late")])], after=[sleeper])
    exp = run_pipeline(Pipeline("bg", cluster, [sleeper, quick, after]), wait=False)
    out = {"returned": exp.states, "ok": exp.ok}  # (a waited run would have taken 300 s: the test's limit is 120)
    deadline = time.time() + 60
    while time.time() < deadline and exp.status() != {"sleeper": "RUNNING", "quick": "SUCCEEDED", "after": "RUNNING"}:
        time.sleep(0.2)
    out["running"] = exp.status()
    out["loaded"] = Experiment.load("bg", cluster).status()  # from the record, as another process finds it
    pid = int((Path(exp.log_dir) / "sleeper.pid").read_text())
    out["cancelled"] = exp.cancel()
    out["wait"] = exp.wait(timeout=60)
    out["status"] = exp.status()
    try:
        out["script_gone"] = Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0]
    except OSError:
        out["script_gone"] = "gone"
    print("RESULT " + json.dumps(out))
"""


def test_run_pipeline_without_waiting_on_none_runs_the_jobs_detached(user_repo, tmp_path, configs):
    """wait=False on none: run_pipeline returns once the jobs started; the handle sees them RUNNING, cancels the
    one still running (and its dependent, waiting for it), and wait() returns the final states."""
    d = configs("procs", "executor: none\njob_dir: JOB_DIR\n")
    marker = tmp_path / "still-running"
    out = result_of(run_committed(user_repo, tmp_path, "bg.py", DETACHED, str(d), str(marker), timeout=120))
    assert out["returned"] == {} and out["ok"] is False  # no state known yet
    assert out["running"] == out["loaded"] == {"sleeper": "RUNNING", "quick": "SUCCEEDED", "after": "RUNNING"}
    assert out["cancelled"] == ["sleeper", "after"]  # not quick, which had ended
    assert out["wait"] == out["status"] == {"sleeper": "CANCELLED", "quick": "SUCCEEDED", "after": "CANCELLED"}
    assert out["script_gone"] in ("gone", "Z") and not marker.exists(), out  # ended (Z: not reaped yet)
    log_dir = next((configs.job_dir / "logs" / "bg").iterdir())
    assert (log_dir / "quick" / "say.log").read_text() == "done\n"
    assert not (log_dir / "after" / "late.log").exists()  # cancelled while it waited for its parent


def test_refused_submission_raises_submission_refused_before_anything_runs(configs, tmp_path):
    cluster = load_cluster_config("procs", str(configs("procs", "executor: none\njob_dir: JOB_DIR\n")))
    missing = str(tmp_path / "nowhere.jsonl")
    job = Job("j", [CommandGroup([Command("true")])], inputs=[missing])
    with pytest.raises(SubmissionRefused, match="nowhere.jsonl does not exist") as caught:
        run_pipeline(Pipeline("refused", cluster, [job]))
    assert isinstance(caught.value, UserError)  # the CLI prints it as one line and exits 2
    later = Job("k", [CommandGroup([Command("true")])], run_after=["never-submitted"])
    with pytest.raises(SubmissionRefused, match="no experiment named 'never-submitted'"):
        run_pipeline(Pipeline("after", cluster, [later]))
    assert not (configs.job_dir / "logs").exists()  # nothing ran


@pytest.mark.slurm
def test_status_failures_and_cancel_through_the_handle_on_slurm(user_repo, tmp_path, configs):
    need("SLURM_CONF", "the local Slurm cluster")
    d = configs("slurm", "executor: slurm\njob_dir: JOB_DIR\naccount: root\npartition: debug\n")
    body = """
    import sys
    from pipeline_kit.cluster import load_cluster_config
    from pipeline_kit.launch import run_pipeline
    from pipeline_kit.pipeline import Command, CommandGroup, Job, Pipeline

    if __name__ == "__main__":
        bad = Job("bad", [CommandGroup([Command("echo 'RuntimeError: slurm cause'; exit 5", name="work")])])
        good = Job("good", [CommandGroup([Command("true", name="quick")])])
        sleeper = Job("sleeper", [CommandGroup([Command("sleep 300", name="nap")])])
        exp = run_pipeline(Pipeline("handled", load_cluster_config("slurm", sys.argv[1]), [bad, good, sleeper]))
        print("SUBMITTED", exp.slurm_ids, exp.states, exp.ok)
    """
    proc = run_committed(user_repo, tmp_path, "submit.py", body, str(d), env=SERVICES, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().endswith("{} False"), proc.stdout  # unwaited: no state known yet, not ok
    want = {"bad": "FAILED", "good": "SUCCEEDED", "sleeper": "RUNNING"}
    out = handle(tmp_path, "handled", "slurm", d, want, "cancel")
    assert out["before"] == want, out
    assert out["cancelled"] == ["sleeper"]  # only what it cancelled: not the jobs that had already ended
    assert out["after"] == {"bad": "FAILED", "good": "SUCCEEDED", "sleeper": "CANCELLED"}, out
    failures = {job: (state, reason) for job, state, reason in out["failures"]}
    assert failures["bad"][0] == "FAILED" and "work.log: RuntimeError: slurm cause" in failures["bad"][1], failures
    assert failures["sleeper"][0] == "CANCELLED"
    assert out["result_error"].startswith(
        "experiment handled: job bad FAILED (kit: command 'work' failed with exit code 5); job sleeper CANCELLED"
    ), out["result_error"]


@pytest.mark.docker
def test_status_failures_and_cancel_through_the_handle_in_docker(kit, configs, tmp_path, user_repo):
    need("DOCKER_HOST", "the private dockerd")
    d = configs("dock", "executor: local\njob_dir: JOB_DIR\ncontainers:\n  base: kit-test-base:latest\n")
    args = ["--cluster=dock", f"--config_dir={d}", "--container=base"]
    res = kit("run_cmd", *args, "--expname=dbad", "--command=echo 'KeyError: docker cause'; exit 6")
    assert res.returncode == 1, res.stdout + res.stderr
    out = handle(tmp_path, "dbad", "dock", d, {"dbad": "FAILED"})
    assert out["before"] == {"dbad": "FAILED"}
    assert "cmd.log: KeyError: docker cause" in out["why"]["dbad"], out
    env = {**os.environ, **SERVICES, "KIT_HOME": str(tmp_path / "home" / ".kit"), "PATH": os.environ["PATH"]}
    sleeper = subprocess.Popen(
        [sys.executable, "-m", "pipeline_kit.cli.main", "run_cmd", *args, "--expname=dnap", "--command=sleep 300"],
        cwd=user_repo,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out = handle(tmp_path, "dnap", "dock", d, {"dnap": "RUNNING"}, "cancel")
        assert out["before"] == {"dnap": "RUNNING"}, out
        assert out["cancelled"] == ["dnap"]
        assert out["after"] == {"dnap": "CANCELLED"}, out
        printed, _ = sleeper.communicate(timeout=60)
        assert "dnap: job dnap CANCELLED" in printed, printed
    finally:
        sleeper.kill()
