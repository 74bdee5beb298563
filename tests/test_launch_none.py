"""Jobs on `executor: none` (local processes, no services needed): run_cmd waits and reports, multi-job pipelines
run in dependency order, afterok cancels dependents, references resolve to 127.0.0.1, arrays, --run_after."""

from __future__ import annotations

import os
import subprocess

from conftest import run_committed


def none_cluster(configs, extra: str = "") -> list[str]:
    d = configs("local0", "executor: none\njob_dir: JOB_DIR\n" + extra)
    return ["--cluster=local0", f"--config_dir={d}"]


def states(kit, cluster, expname) -> dict[str, str]:
    res = kit("status", *cluster, expname)
    assert res.returncode == 0, res.stderr
    return dict(line.split(" ", 1) for line in res.stdout.splitlines())


def run_script(user_repo, tmp_path, name: str, body: str, *args: str) -> subprocess.CompletedProcess:
    return run_committed(user_repo, tmp_path, name, body, *args, timeout=120)


def test_run_cmd_waits_and_reports_state_and_log(kit, configs):
    cluster = none_cluster(configs)
    res = kit("run_cmd", *cluster, "--expname=ok", "--command=python3 hello.py", "++lr=0.5")
    assert res.returncode == 0, res.stderr
    assert "ok: job ok SUCCEEDED" in res.stdout
    assert "hello from the packaged repo" in res.stdout  # ran in the packed code folder
    assert states(kit, cluster, "ok") == {"ok": "SUCCEEDED"}
    res = kit("run_cmd", *cluster, "--expname=args", "--command=echo got", "++lr=0.5")
    assert "got ++lr=0.5" in res.stdout  # ++ arguments go through to the command

    res = kit("run_cmd", *cluster, "--expname=bad", "--command=echo oops; exit 3")
    assert res.returncode == 1
    assert states(kit, cluster, "bad") == {"bad": "FAILED"}
    assert "oops" in kit("logs", *cluster, "bad").stdout


def test_pipeline_of_three_jobs_runs_in_dependency_order(user_repo, tmp_path, configs):
    d = configs("local0", "executor: none\njob_dir: JOB_DIR\n")
    order = tmp_path / "order.txt"
    res = run_script(
        user_repo,
        tmp_path,
        "chain.py",
        f"""
        import sys
        from pipeline_kit.cluster import load_cluster_config
        from pipeline_kit.launch import run_pipeline
        from pipeline_kit.pipeline import Command, CommandGroup, Job, Pipeline

        def step(name, sleep):
            return Job(name, groups=[CommandGroup([Command(f"sleep {{sleep}}; echo {{name}} >> {order}")])])

        if __name__ == "__main__":
            first, second, third = step("first", 1), step("second", 0), step("third", 0)
            second.after.append(first)
            third.after.append(second)
            # listed out of order on purpose: the pipeline orders them
            result = run_pipeline(Pipeline("chain", load_cluster_config("local0", sys.argv[1]), [third, first, second]))
            print("STATES", sorted(result.states.items()))
        """,
        str(d),
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert order.read_text().split() == ["first", "second", "third"]
    assert "STATES [('first', 'SUCCEEDED'), ('second', 'SUCCEEDED'), ('third', 'SUCCEEDED')]" in res.stdout


def test_afterok_dependent_of_failed_job_is_cancelled_afterany_runs(user_repo, tmp_path, configs):
    d = configs("local0", "executor: none\njob_dir: JOB_DIR\n")
    res = run_script(
        user_repo,
        tmp_path,
        "deps.py",
        """
        import sys
        from pipeline_kit.cluster import load_cluster_config
        from pipeline_kit.launch import run_pipeline
        from pipeline_kit.pipeline import Command, CommandGroup, Job, Pipeline

        def job(name, text, **kw):
            return Job(name, groups=[CommandGroup([Command(text)])], **kw)

        if __name__ == "__main__":
            bad = job("bad", "exit 3")
            ok_dep = job("needs_ok", "echo SHOULD-NOT-RUN", after=[bad], dependency_type="afterok")
            any_dep = job("needs_any", "echo ran anyway", after=[bad], dependency_type="afterany")
            result = run_pipeline(Pipeline("deps", load_cluster_config("local0", sys.argv[1]), [bad, ok_dep, any_dep]))
            print("STATES", sorted(result.states.items()))
        """,
        str(d),
    )
    assert "('bad', 'FAILED')" in res.stdout, res.stdout + res.stderr
    assert "('needs_ok', 'CANCELLED')" in res.stdout
    assert "('needs_any', 'SUCCEEDED')" in res.stdout
    logs = list((configs.job_dir / "logs" / "deps").glob("*/*/*.log"))
    assert not any("needs_ok" in str(p) and p.name != "kit.log" for p in logs)  # it never started its command
    notes = [p.read_text() for p in logs if p.parent.name == "needs_ok" and p.name == "kit.log"]
    assert notes == ["kit: job 'needs_ok' not run: an afterok dependency did not succeed\n"]
    assert res.returncode == 0  # the script itself reported the states and exited normally


def test_client_reaches_local_server_through_reference(user_repo, tmp_path, configs):
    d = configs("local0", "executor: none\njob_dir: JOB_DIR\n")
    res = run_script(
        user_repo,
        tmp_path,
        "serve.py",
        """
        import sys
        from pipeline_kit.cluster import load_cluster_config
        from pipeline_kit.launch import run_pipeline
        from pipeline_kit.pipeline import AUTO_PORT, Command, CommandGroup, Job, Pipeline

        from probe import probe_command

        if __name__ == "__main__":
            server = Command("exec python3 -m http.server $KIT_PORT", name="server", port=AUTO_PORT, service=True)
            cli = Command(probe_command, name="client", refs={"server": server})
            job = Job("serve", groups=[CommandGroup([server], name="srv"), CommandGroup([cli], name="cli")])
            result = run_pipeline(Pipeline("serve", load_cluster_config("local0", sys.argv[1]), [job]))
            print("STATES", result.states)
        """,
        str(d),
    )
    assert "STATES {'serve': 'SUCCEEDED'}" in res.stdout, res.stdout + res.stderr
    client_log = next((configs.job_dir / "logs" / "serve").glob("*/serve/client.log")).read_text()
    assert "client got 200 from http://127.0.0.1:" in client_log


def test_array_units_and_failed_unit_in_status(kit, configs):
    cluster = none_cluster(configs)
    res = kit(
        "run_cmd", *cluster, "--expname=arr", "--array_size=3", "--command=echo unit=$KIT_UNIT; [ $KIT_UNIT != 1 ]"
    )
    assert res.returncode == 1
    assert states(kit, cluster, "arr") == {"arr": "FAILED", "arr[1]": "FAILED"}
    logs = kit("logs", *cluster, "arr").stdout
    assert all(f"unit={u}" in logs for u in range(3))
    # the units share the job's kit.log: each of kit's lines there names the unit it is about
    note = next((configs.job_dir / "logs" / "arr").glob("*/arr/kit.log")).read_text()
    assert note.startswith("[unit 1] kit: command ") and "failed with exit code 1" in note, note
    assert all(line.startswith("[unit 1] ") for line in note.splitlines()), note


def test_run_after_across_invocations_honours_afterok(kit, configs):
    cluster = none_cluster(configs, "dependency_type: afterok\n")
    assert kit("run_cmd", *cluster, "--expname=parent", "--command=exit 4").returncode == 1
    res = kit("run_cmd", *cluster, "--expname=child", "--run_after=parent", "--command=echo child ran")
    assert res.returncode == 1
    assert states(kit, cluster, "child") == {"child": "CANCELLED"}
    assert kit("run_cmd", *cluster, "--expname=parent", "--command=true").returncode == 0
    res = kit("run_cmd", *cluster, "--expname=child", "--run_after=parent", "--command=echo child ran")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "child ran" in res.stdout


def test_unguarded_launching_script_runs_once(user_repo, tmp_path, configs):
    # nemo-run copies the launching script and may exec it again; kit never asks it to, so no __main__ guard needed
    d = configs("local0", "executor: none\njob_dir: JOB_DIR\n")
    launches = tmp_path / "launches.txt"
    res = run_script(
        user_repo,
        tmp_path,
        "unguarded.py",
        f"""
        import sys
        from pipeline_kit.cluster import load_cluster_config
        from pipeline_kit.launch import run_pipeline
        from pipeline_kit.pipeline import Command, CommandGroup, Job, Pipeline

        open("{launches}", "a").write("launched\\n")
        jobs = [Job(n, groups=[CommandGroup([Command("echo " + n)])]) for n in ("a", "b")]
        jobs[1].after.append(jobs[0])
        print(run_pipeline(Pipeline("unguarded", load_cluster_config("local0", sys.argv[1]), jobs)).states)
        """,
        str(d),
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "{'a': 'SUCCEEDED', 'b': 'SUCCEEDED'}" in res.stdout
    assert launches.read_text() == "launched\n"


def test_log_dir_flag_puts_logs_there(kit, configs, tmp_path):
    cluster = none_cluster(configs)
    log_dir = tmp_path / "my-logs"
    res = kit("run_cmd", *cluster, "--expname=logged", f"--log_dir={log_dir}", "--command=echo to my folder")
    assert res.returncode == 0, res.stderr
    assert (log_dir / "logged" / "cmd.log").read_text() == "to my folder\n"
    assert str(log_dir) in kit("logs", *cluster, "logged").stdout


def test_kit_cancel_stops_a_running_job_and_its_commands(kit, configs, user_repo, tmp_path):
    """`kit cancel` signals the job's script; its trap stops the commands it started in their own sessions."""
    import time

    from conftest import BIN, SERVICES

    cluster = none_cluster(configs)
    marker = tmp_path / "still-running"
    sleep = f"sleep {600 + os.getpid() % 1000}.25"  # a command line no other process has
    env = {**os.environ, **SERVICES, "KIT_HOME": str(tmp_path / "home" / ".kit")}
    proc = subprocess.Popen(
        [str(BIN / "kit"), "run_cmd", *cluster, "--expname=long", f"--command={sleep}; touch {marker}"],
        cwd=user_repo,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 60
        while subprocess.run(["pgrep", "-f", f"^{sleep}$"], capture_output=True).returncode != 0:
            assert time.time() < deadline, "the job never ran"
            time.sleep(0.5)
        assert states(kit, cluster, "long") == {"long": "RUNNING"}  # asking does not disturb it
        assert subprocess.run(["pgrep", "-f", f"^{sleep}$"], capture_output=True).returncode == 0
        res = kit("cancel", *cluster, "long")
        assert res.returncode == 0, res.stderr
        out, _ = proc.communicate(timeout=60)
        assert "long: job long CANCELLED" in out, out
        time.sleep(0.5)
        assert subprocess.run(["pgrep", "-f", f"^{sleep}$"], capture_output=True).returncode == 1  # command gone
    finally:
        proc.kill()
        subprocess.run(["pkill", "-f", f"^{sleep}$"])
    assert states(kit, cluster, "long") == {"long": "CANCELLED"}
