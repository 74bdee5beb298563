"""Stages that compose: the two-stage Python example of docs/python-api.md run for real (stage 2 reads what stage 1
writes), inputs made by an earlier stage or experiment checked when the job starts, overrides checked at submission, a
fully done stage that dependents can still wait on, and the launch layer's own defects (run ids, Experiment.ok,
afternotok/aftercorr on none)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import example_block, problems, rows, run_committed


def run_in_repo(user_repo: Path, tmp_path: Path, name: str, body: str, env: dict | None = None):
    return run_committed(user_repo, tmp_path, name, body, env=env)


@pytest.fixture
def none_config_dir(configs):
    return configs("none", "executor: none\njob_dir: JOB_DIR\n")


def test_documented_two_stage_example_runs(user_repo, tmp_path, stub, none_config_dir):
    server = stub()
    problems(user_repo, 4, "problems.jsonl")
    script = example_block("stages")
    script = script.replace('SERVER = "http://127.0.0.1:8000/v1"', f'SERVER = "{server.url}"')
    res = run_in_repo(user_repo, tmp_path, "stages.py", script, {"KIT_CONFIG_DIR": str(none_config_dir)})
    assert res.returncode == 0, res.stdout + res.stderr
    assert "{'solve': 'SUCCEEDED', 'verify': 'SUCCEEDED'}" in res.stdout
    verified = rows(user_repo / "out" / "verify" / "output.jsonl")
    assert [r["id"] for r in verified] == list(range(4))
    solved = {r["id"]: r for r in rows(user_repo / "out" / "solve" / "output-rs0.jsonl")}
    for r in verified:  # stage 1's fields are kept under their own names, stage 2's under verification*
        assert r["generation"] == solved[r["id"]]["generation"] and r["verification"].startswith("\\boxed{"), r
        assert (
            r["num_generated_tokens"] == solved[r["id"]]["num_generated_tokens"] and "verification_generation_time" in r
        )
    # stage 2's prompt was built from stage 1's output records (its `generation` field)
    prompts = [r["body"]["messages"][-1]["content"] for r in server.requests()[-4:]]
    assert all("Proposed solution: \\boxed{" in p for p in prompts)


PIPELINE_WITH_MISSING_INPUT = """
import sys
from pipeline_kit.cluster import load_cluster_config
from pipeline_kit.launch import run_pipeline
from pipeline_kit.pipeline import Command, CommandGroup, Job, Pipeline

if __name__ == "__main__":
    cluster = load_cluster_config("none")
    make = Job("make", [CommandGroup([Command("mkdir -p out && echo wrong > out/other.txt")])], outputs=["OUT"])
    use = Job("use", [CommandGroup([Command("cat OUT/data.txt")])], after=[make], inputs=["OUT/data.txt"])
    result = run_pipeline(Pipeline("two", cluster, [make, use]))
    print("STATES", result.states, "OK", result.ok)
    print("LOG", result.log_dir)
"""


def test_an_input_an_earlier_job_should_write_is_checked_when_the_job_starts(user_repo, tmp_path, none_config_dir):
    out = user_repo / "out"
    body = PIPELINE_WITH_MISSING_INPUT.replace("OUT", str(out))
    res = run_in_repo(user_repo, tmp_path, "two.py", body, {"KIT_CONFIG_DIR": str(none_config_dir)})
    assert res.returncode == 0, res.stdout + res.stderr  # accepted at submission: job 'make' writes that folder
    assert "STATES {'make': 'SUCCEEDED', 'use': 'FAILED'} OK False" in res.stdout
    log_dir = res.stdout.split("LOG ", 1)[1].split()[0]
    log = Path(log_dir, "use", "main.log")
    text = log.read_text() if log.exists() else ""
    assert not text  # the command never started
    rc = Path(log_dir, "use.rc").read_text().strip()
    assert rc == "2"


def test_an_input_nothing_writes_is_an_error_at_submission(user_repo, tmp_path, none_config_dir):
    body = PIPELINE_WITH_MISSING_INPUT.replace("OUT/data.txt", str(tmp_path / "nowhere.txt")).replace("OUT", "x")
    res = run_in_repo(user_repo, tmp_path, "two.py", body, {"KIT_CONFIG_DIR": str(none_config_dir)})
    assert res.returncode != 0
    assert f"job 'use': input {tmp_path / 'nowhere.txt'} does not exist, and no job" in res.stderr


def test_run_after_input_is_checked_when_the_job_starts(kit, configs, stub, tmp_path):
    """An input under a --run_after experiment's output folder is left to the job; when that experiment failed to
    write it, the job fails with one line that names the experiment's job."""
    d = configs("none", "executor: none\njob_dir: JOB_DIR\n")
    cluster = ["--cluster=none", f"--config_dir={d}"]
    inp, out1, out2 = problems(tmp_path, 2), tmp_path / "s1", tmp_path / "s2"
    dead = ["--server_type=openai", "--server_address=http://127.0.0.1:9/v1", "--model=m"]
    first = kit("generate", *cluster, *dead, f"--input_file={inp}", f"--output_dir={out1}", "--expname=s1",
                "++server.ready_timeout=1")  # fmt: skip
    assert first.returncode == 1
    second = kit("generate", *cluster, *dead, f"--input_file={out1}/output.jsonl", f"--output_dir={out2}",
                 "--expname=s2", "--run_after=s1")  # fmt: skip
    assert second.returncode == 1, second.stdout + second.stderr  # submitted, then failed at its start
    line = f"kit: job 's2' cannot start: its input {out1}/output.jsonl does not exist (job 's1' of experiment 's1'"
    assert line in second.stdout  # the tail of the job's kit.log
    assert line in kit("logs", *cluster, "s2").stdout
    assert kit("status", *cluster, "s2").stdout.split() == ["s2", "FAILED"]


def test_overrides_are_checked_at_submission(kit, configs, tmp_path):
    d = configs("none", "executor: none\njob_dir: JOB_DIR\n")
    inp = problems(tmp_path, 2)
    args = ["--cluster=none", f"--config_dir={d}", "--server_type=openai", "--server_address=http://127.0.0.1:9/v1"]
    res = kit("generate", *args, "--model=m", f"--input_file={inp}", f"--output_dir={tmp_path / 'o'}",
              "++inference.temprature=0.5")  # fmt: skip
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "unknown key ++inference.temprature. Did you mean ++inference.temperature?" in res.stderr
    assert not (tmp_path / "jobs" / "kit").exists()  # no experiment was recorded: nothing was queued


def test_route_overrides_sends_each_part_to_its_script():
    from pipeline_kit.errors import UserError
    from pipeline_kit.inference.config import parse_generate_config
    from pipeline_kit.overrides import route_overrides

    seen = {}
    required = ["++server.base_url=http://x/v1", "++server.model=m", "++input_file=in.jsonl"]

    def grade(args):
        seen["grade"] = args
        for a in args:
            if not a.startswith("++tolerance="):
                raise UserError(f"grading: unknown key {a.split('=')[0]}.")

    routed = route_overrides(
        ["++inference.temperature=0.7", "++grade.tolerance=1e-6"],
        {
            "generate": lambda a: parse_generate_config([*required, *a]),
            "grade": grade,
        },
        "generate",
    )
    assert routed == {"generate": ["++inference.temperature=0.7"], "grade": ["++tolerance=1e-6"]}
    with pytest.raises(UserError, match=r"unknown key \+\+grde.tolerance.*Did you mean 'grade'"):
        route_overrides(
            ["++grde.tolerance=1"],
            {
                "generate": lambda a: parse_generate_config([*required, *a]),
                "grade": grade,
            },
            "generate",
        )


DEPENDENCIES = """
from pipeline_kit.cluster import load_cluster_config
from pipeline_kit.launch import run_pipeline
from pipeline_kit.pipeline import Command, CommandGroup, Job, Pipeline

def job(name, cmd, **kw):
    return Job(name, [CommandGroup([Command(cmd)])], **kw)

if __name__ == "__main__":
    cluster = load_cluster_config("none")
    bad, good = job("bad", "exit 3"), job("good", "true")
    on_bad = job("on-bad", "echo ran", after=[bad], dependency_type="afternotok")
    on_good = job("on-good", "echo ran", after=[good], dependency_type="afternotok")
    units = job("units", 'test "$KIT_UNIT" != 1', array_size=3)
    corr = job("corr", 'echo unit $KIT_UNIT >> CORR', after=[units], array_size=3, dependency_type="aftercorr")
    result = run_pipeline(Pipeline("deps", cluster, [bad, good, on_bad, on_good, units, corr]))
    print("STATES", sorted(result.states.items()))
"""


def test_afternotok_and_aftercorr_hold_on_none(user_repo, tmp_path, none_config_dir):
    corr = tmp_path / "corr.txt"
    res = run_in_repo(
        user_repo,
        tmp_path,
        "deps.py",
        DEPENDENCIES.replace("CORR", str(corr)),
        {"KIT_CONFIG_DIR": str(none_config_dir)},
    )
    assert res.returncode == 0, res.stdout + res.stderr
    states = dict(eval(res.stdout.split("STATES ", 1)[1].strip()))
    assert states["on-bad"] == "SUCCEEDED" and states["on-good"] == "CANCELLED"
    assert states["units"] == "FAILED" and states["corr"] == "FAILED"  # unit 1 of corr did not run
    assert corr.read_text().split("\n")[:-1] == ["unit 0", "unit 2"]


TWO_RUNS = """
from pipeline_kit.cluster import load_cluster_config
from pipeline_kit.launch import run_pipeline
from pipeline_kit.pipeline import Command, CommandGroup, Job, Pipeline

if __name__ == "__main__":
    cluster = load_cluster_config("none")
    results = [run_pipeline(Pipeline("same", cluster, [Job("j", [CommandGroup([Command("true")])])])) for _ in "ab"]
    print("DIRS", len({r.log_dir for r in results}), "IDS", len({r.run_id for r in results}))
    dry = run_pipeline(Pipeline("same", cluster, [Job("j", [CommandGroup([Command("true")])])]), dry_run=True)
    print("OK", [r.ok for r in results], dry.ok, results[0].record.jobs[0].state)
"""


def test_two_runs_of_one_pipeline_in_one_second_get_their_own_log_folders(user_repo, tmp_path, none_config_dir):
    res = run_in_repo(user_repo, tmp_path, "twice.py", TWO_RUNS, {"KIT_CONFIG_DIR": str(none_config_dir)})
    assert res.returncode == 0, res.stdout + res.stderr
    assert "DIRS 2 IDS 2" in res.stdout
    assert "OK [True, True] False SUCCEEDED" in res.stdout  # a dry run is never ok


def test_run_ids_are_unique_and_sort_by_time():
    from pipeline_kit.launch.run import new_run_id

    ids = [new_run_id() for _ in range(200)]
    assert len(set(ids)) == 200 and ids == sorted(ids)


@pytest.mark.parametrize(
    "override, needle",
    [
        ("++inference.temperature=warm", "++inference.temperature=warm"),
        ("++max_concurrent_requests=1.5", "++max_concurrent_requests=1.5"),
        ("++inference.stop_phrases=[a,", "cannot parse override"),
        ("++inference.top_k=null", "++inference.top_k=null"),
    ],
)
def test_override_values_are_checked_at_submission(override, needle):
    """Plain values are checked against their field's type without hydra; anything else goes through hydra's parser,
    whose error is the one shown."""
    from pipeline_kit.errors import UserError
    from pipeline_kit.inference.config import check_generate_overrides

    with pytest.raises(UserError) as e:
        check_generate_overrides(["++prompt_config=generic/math", override])
    assert needle in str(e.value)
    check_generate_overrides(["++inference.temperature=0.7", "++code_execution=true", "++inference.stop_phrases=['a']"])
