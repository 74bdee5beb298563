"""The Python each component runs is a cluster config key (`python` for kit's own commands, `server_python` for the
model server), checked in the job's first lines: a missing interpreter or module ends the job with exit code 2 and
one line naming the config file and key. `kit status` and `kit logs` never need the config's env_vars exported."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import need

from pipeline_kit.cluster.config import build_cluster_config
from pipeline_kit.components.server import server_group
from pipeline_kit.errors import UserError
from pipeline_kit.jobs import GenerateSpec, JobOptions, generate_jobs
from pipeline_kit.servers import ServerSpec


def config(tmp_path, executor="slurm", **keys):
    return build_cluster_config({"executor": executor, "job_dir": str(tmp_path), **keys}, str(tmp_path / "c.yaml"))


def test_the_keys_name_the_interpreters_and_env_vars_override_them_where_the_job_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("KIT_VENVS", "/shared/venvs")
    cluster = config(tmp_path, python="${KIT_VENVS}/kit/bin/python", server_python="/shared/venvs/vllm/bin/python")
    assert cluster.kit_python == "/shared/venvs/kit/bin/python"
    assert config(tmp_path).kit_python == "python3" and config(tmp_path, "none").kit_python == sys.executable
    data = tmp_path / "in.jsonl"
    data.write_text('{"problem": "1+1"}\n')
    spec = GenerateSpec(ServerSpec("vllm", "/models/qwen", gpus=1), str(data), str(tmp_path / "out"))
    (job,) = generate_jobs(cluster, spec, JobOptions("py"))
    server, client = (next(c for c in job.commands if c.name == name) for name in ("server", "client"))
    assert '"${KIT_SERVER_PYTHON:-/shared/venvs/vllm/bin/python}" -m vllm.' in server.command
    assert server.python_check.python == '"${KIT_SERVER_PYTHON:-/shared/venvs/vllm/bin/python}"'
    assert server.python_check.modules == ("vllm",)
    assert "set key 'server_python' in " + str(tmp_path / "c.yaml") in server.python_check.fix
    assert client.python_check.python == '"${KIT_CLIENT_PYTHON:-/shared/venvs/kit/bin/python}"'
    assert client.command({}).startswith('"${KIT_CLIENT_PYTHON:-/shared/venvs/kit/bin/python}" -m pipeline_kit.')
    assert "set key 'python' in " in client.python_check.fix and "pipeline-kit[generate]" in client.python_check.fix
    # trtllm-serve is no Python module: nothing to check
    trtllm = server_group(ServerSpec("trtllm", "/models/qwen", gpus=1), cluster, None)
    assert trtllm.commands[0].python_check is None


@pytest.mark.parametrize(
    "key, value, needle",
    [
        ("python", "venv/bin/python", "key 'python' is 'venv/bin/python'; give the absolute path"),
        ("server_python", "/opt/my venv/bin/python", "key 'server_python' is '/opt/my venv/bin/python'"),
        ("python", "${KIT_NO_SUCH_VAR}/bin/python", "key 'python' uses ${KIT_NO_SUCH_VAR}, which is not set"),
        ("python", ["/a"], "key 'python' must be a string"),
    ],
)
def test_a_bad_interpreter_key_is_one_line_naming_it(tmp_path, key, value, needle):
    with pytest.raises(UserError, match=None) as caught:
        config(tmp_path, **{key: value})
    assert needle in str(caught.value) and str(tmp_path / "c.yaml") in str(caught.value)


def test_looking_at_runs_needs_no_env_var_exported(tmp_path, monkeypatch):
    monkeypatch.delenv("KIT_NO_SUCH_TOKEN", raising=False)
    raw = {
        "executor": "none",
        "job_dir": str(tmp_path),
        "env_vars": ["KIT_NO_SUCH_TOKEN", "KIT_SET=1"],
        "required_env_vars": ["KIT_NO_SUCH_TOKEN"],
        "mounts": ["/no/such/dir:/data"],
    }
    with pytest.raises(UserError, match="required_env_vars lists 'KIT_NO_SUCH_TOKEN'"):
        build_cluster_config(raw, "c.yaml")
    seen = build_cluster_config(raw, "c.yaml", inspect_only=True)
    assert seen.env_vars == {"KIT_SET": "1"} and seen.mounts == [] and seen.job_dir == str(tmp_path)


def test_a_job_whose_python_lacks_kit_stops_at_its_first_lines_and_status_and_logs_need_no_env(kit, configs, tmp_path):
    """A real run on none: the config's `python` is a bare venv (no kit deps) and its env_vars name a variable that
    is exported only for the submission. The job ends FAILED with one line naming the key and the file before the
    client starts; `kit status` and `kit logs` then work without the variable. $KIT_CLIENT_PYTHON overrides the key."""
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    d = configs("bare", f"executor: none\njob_dir: JOB_DIR\npython: {venv}/bin/python\nenv_vars: [KIT_RUN_TOKEN]\n")
    data = tmp_path / "in.jsonl"
    data.write_text('{"problem": "1+1"}\n')
    cluster = ["--cluster=bare", f"--config_dir={d}"]
    flags = ["--server_type=openai", "--server_address=http://127.0.0.1:9/v1", "--model=m", f"--input_file={data}"]
    res = kit("generate", *cluster, "--expname=bare", *flags, f"--output_dir={tmp_path / 'out'}",
              env={"KIT_RUN_TOKEN": "secret", "KIT_CLIENT_PYTHON": None})  # fmt: skip
    assert res.returncode != 0, res.stdout
    # pipeline_kit itself may be found through PYTHONPATH (the packed code, or a checkout's)
    found = re.search(
        r"the client's Python (\S+) cannot import (pipeline_kit )?yaml hydra litellm; set key 'python' in (\S+) ",
        res.stdout + res.stderr,
    )
    assert found and found[1] == f"{venv}/bin/python" and found[3] == f"{d}/bare.yaml", res.stdout + res.stderr
    line = found[0]
    assert "Traceback" not in res.stdout + res.stderr and not (tmp_path / "out" / "output.jsonl").exists()

    status = kit("status", "bare", *cluster, env={"KIT_RUN_TOKEN": None})
    assert status.returncode == 0 and "FAILED" in status.stdout and line in status.stdout + status.stderr, status.stderr
    logs = kit("logs", "bare", *cluster, env={"KIT_RUN_TOKEN": None})
    assert logs.returncode == 0 and line in logs.stdout, logs.stderr

    res = kit("generate", *cluster, "--expname=gone", *flags, f"--output_dir={tmp_path / 'out2'}",
              env={"KIT_RUN_TOKEN": "secret", "KIT_CLIENT_PYTHON": "/no/such/python"})  # fmt: skip
    assert "the client's Python /no/such/python does not exist; set key 'python'" in res.stdout + res.stderr


@pytest.mark.slurm
def test_on_slurm_the_check_stops_the_job_before_its_client_and_names_the_key(kit, configs, tmp_path):
    """The issue's case: on Slurm without containers the client ran the node's Python and died in a traceback.
    Here the config's `python` is a bare venv the nodes see: the job ends FAILED, its log has the one line."""
    need("SLURM_CONF", "the local Slurm cluster")
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    text = f"executor: slurm\njob_dir: JOB_DIR\naccount: root\npartition: debug\npython: {venv}/bin/python\n"
    d = configs("slurm_bare", text)
    data = tmp_path / "in.jsonl"
    data.write_text('{"problem": "1+1"}\n')
    cluster = ["--cluster=slurm_bare", f"--config_dir={d}"]
    res = kit("generate", *cluster, "--expname=bare", "--server_type=openai", "--server_address=http://127.0.0.1:9/v1",
              "--model=m", f"--input_file={data}", f"--output_dir={tmp_path / 'out'}", "--wait",
              env={"KIT_CLIENT_PYTHON": None}, timeout=180)  # fmt: skip
    assert res.returncode != 0, res.stdout + res.stderr
    logs = kit("logs", *cluster, "bare")
    found = re.search(
        r"the client's Python (\S+) cannot import [a-z_ ]*litellm; set key 'python' in (\S+) ", logs.stdout
    )
    assert found and found[1] == f"{venv}/bin/python" and found[2] == f"{d}/slurm_bare.yaml", logs.stdout
    assert "Traceback" not in logs.stdout
