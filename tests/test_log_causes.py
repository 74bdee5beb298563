"""Root causes of failures (pipeline_kit/log_causes.py), not last lines: a command or service that fails is
reported with its exit code and its log's first error lines, in `--wait`'s output and in `kit logs` (which also
shows the scheduler's own output), on none and on the local Slurm."""

from __future__ import annotations

import re

import pytest
from conftest import SERVICES, need, run_committed

# a service that dies before it is ready: the root cause is early in a long log, the last line says "see above"
DYING_SERVER = (
    "python3 -c \"import sys; print('loading'); print('ValueError: Available memory on node 0 (5.29/10.46 GiB) is "
    "less than desired'); [print(f'noise {i}') for i in range(100)]; print('Engine core initialization failed. "
    "See root cause above.'); sys.stdout.write('last words, no newline'); sys.exit(3)\""
)

PIPELINE = """
import sys
from pipeline_kit.cluster import load_cluster_config
from pipeline_kit.launch import run_pipeline
from pipeline_kit.pipeline import AUTO_PORT, Command, CommandGroup, HardwareConfig, Job, Pipeline

if __name__ == "__main__":
    cluster = load_cluster_config(sys.argv[1], sys.argv[2])
    server = Command(sys.argv[3], name="server", port=AUTO_PORT, service=True)
    client = Command("sleep 60", name="client", refs={"server": server})
    groups = [CommandGroup([server, client], name="both")]
    if cluster.executor == "slurm":  # a het job: server and client in their own components
        groups = [CommandGroup([server], name="srv"), CommandGroup([client], name="cli")]
    run_pipeline(Pipeline("dies", cluster, [Job("dies", groups)]), wait=True)
"""


def test_failed_command_reports_its_first_error_lines_on_none(kit, configs):
    d = configs("procs", "executor: none\njob_dir: JOB_DIR\n")
    command = "python3 -c \"print('ValueError: the real cause'); print('x\\n' * 50, end=''); raise SystemExit(4)\""
    res = kit("run_cmd", "--cluster=procs", f"--config_dir={d}", "--expname=bad", f"--command={command}")
    assert res.returncode == 1
    why = res.stdout.split("--- why job bad failed:\n", 1)[1]
    assert why.splitlines()[:2] == [
        "kit: command 'cmd' failed with exit code 4",
        "kit:   cmd.log: ValueError: the real cause",
    ]


@pytest.mark.parametrize("executor", ["none", "slurm"])
def test_service_that_dies_before_ready_is_reported_with_its_root_cause(kit, configs, user_repo, tmp_path, executor):
    if executor == "slurm":
        need("SLURM_CONF", "the local Slurm cluster")
    d = configs("c", f"executor: {executor}\njob_dir: JOB_DIR\naccount: root\npartition: debug\n")
    res = run_committed(user_repo, tmp_path, "dies.py", PIPELINE, "c", str(d), DYING_SERVER, env=SERVICES)
    assert res.returncode == 0, res.stderr
    logs = kit("logs", "--cluster=c", f"--config_dir={d}", "dies").stdout
    kit_log = logs.split("/dies/kit.log\n", 1)[1]
    first = {  # on Slurm the server has its own het component, so nothing else was running in its script
        "none": "kit: service 'server' exited with code 3 before the other commands ended",
        "slurm": "kit: service 'server' failed with exit code 3",
    }
    assert kit_log.splitlines()[:2] == [
        first[executor],
        "kit:   server.log: ValueError: Available memory on node 0 (5.29/10.46 GiB) is less than desired",
    ], logs
    status = kit("status", "--cluster=c", f"--config_dir={d}", "dies")
    assert status.stdout == "dies FAILED\n"  # one line per job for scripts; why it failed goes to stderr
    assert status.stderr.splitlines()[:2] == [f"  {line}" for line in kit_log.splitlines()[:2]], status.stderr
    assert "last words, no newline\n" in logs  # a log without a final newline still ends its block
    assert not re.search(r"[^\n]--- /", logs), logs
    if executor == "slurm":  # the scheduler's own output is shown too
        assert "(scheduler output)" in logs


LOG = """\
(APIServer pid=1) WARNING [x.py:1] failed to raise the limit: `OSError: [Errno 24] Too many open files`
loading weights
(Worker pid=2) ERROR [m.py:9] Traceback (most recent call last):
(Worker pid=2) ERROR [m.py:9]   File "/venv/vllm/worker.py", line 10, in init
(Worker pid=2) ERROR [m.py:9]     raise ValueError(msg)
(Worker pid=2) ERROR [m.py:9] ValueError: Available memory on node 0 is less than requested
(Worker pid=2) ERROR [m.py:9] ValueError: Available memory on node 0 is less than requested
RuntimeError: Engine core initialization failed. See root cause above.
"""


@pytest.mark.parametrize(
    ("log", "expected"),
    [
        (LOG, ["(Worker pid=2) ERROR [m.py:9] ValueError: Available memory", "RuntimeError: Engine core"]),
        ("step 1\nERROR: disk quota exceeded\nbye\n", ["ERROR: disk quota exceeded"]),
        ("bash: line 1: trian.py: command not found\n", ["bash: line 1: trian.py: command not found"]),
        ("all fine\n", []),
    ],
)
def test_job_scripts_and_kit_pick_the_same_root_cause_lines(tmp_path, log, expected):
    import subprocess

    from pipeline_kit.log_causes import SHELL_FUNCTION, first_causes

    (tmp_path / "server.log").write_text(log)
    python = first_causes(log.splitlines())
    assert [line[: len(e)] for line, e in zip(python, expected, strict=True)] == expected, python
    shell = subprocess.run(
        ["bash", "-c", f"{SHELL_FUNCTION}\nkit_cause server"], env={"KIT_LOG_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert shell.splitlines() == [f"kit:   server.log: {line}" for line in python]
