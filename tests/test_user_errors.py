"""Every user mistake is one line on stderr that names the file/key/flag, exit 2, no traceback."""

from __future__ import annotations

import pytest

GOOD = "executor: none\njob_dir: JOB_DIR\n"

CONFIG_CASES = [
    (
        "unknown key with suggestion",
        GOOD + "job_dirr: /x\n",
        ["unknown key 'job_dirr'", "Did you mean 'job_dir'"],
    ),
    (
        "unknown executor",
        "executor: slrum\njob_dir: JOB_DIR\n",
        ["'executor'", "slrum", "Did you mean 'slurm'"],
    ),
    ("missing executor", "job_dir: JOB_DIR\n", ["required key 'executor'"]),
    ("relative job_dir", "executor: none\njob_dir: jobs/here\n", ["'job_dir'", "relative", "absolute"]),
    ("job_dir with /nemo_run", "executor: none\njob_dir: /tmp/x/nemo_run/y\n", ["'job_dir'", "/nemo_run"]),
    ("mounts not a list", GOOD + "mounts: /a:/b\n", ["'mounts'", "a list of strings"]),
    ("containers not a mapping", GOOD + "containers: [a, b]\n", ["'containers'", "mapping"]),
    (
        "missing mount source",
        GOOD + "mounts: ['/no/such/dir/kit:/data']\n",
        ["/no/such/dir/kit", "does not exist"],
    ),
    ("mount without dst", GOOD + "mounts: ['/tmp']\n", ["'/tmp'", "src:dst"]),
    ("unset ${VAR}", "executor: none\njob_dir: ${KIT_NO_SUCH_VAR}/jobs\n", ["KIT_NO_SUCH_VAR", "not set"]),
    (
        "missing required env var",
        GOOD + "required_env_vars: [KIT_NO_SUCH_TOKEN]\n",
        ["KIT_NO_SUCH_TOKEN", "export"],
    ),
    (
        "env var from environment unset",
        GOOD + "env_vars: [KIT_NO_SUCH_ENV]\n",
        ["KIT_NO_SUCH_ENV", "not set"],
    ),
    (
        "ssh_tunnel unknown key",
        "executor: slurm\njob_dir: JOB_DIR\nssh_tunnel: {host: h, user: u, job_dir: /r, prot: 2}\n",
        ["ssh_tunnel.prot", "Did you mean 'port'"],
    ),
    (
        "ssh_tunnel port not int",
        "executor: slurm\njob_dir: JOB_DIR\nssh_tunnel: {host: h, user: u, job_dir: /r, port: x}\n",
        ["ssh_tunnel.port", "an integer"],
    ),
    (
        "bad timeout",
        "executor: slurm\njob_dir: JOB_DIR\ndefault_timeout: soon\n",
        ["default_timeout", "'soon', not a Slurm time", "01:30:00"],
    ),
    ("bad dependency_type", GOOD + "dependency_type: afterwards\n", ["dependency_type", "afterany"]),
    ("invalid yaml", "executor: none\njob_dir: [unclosed\n", ["not valid YAML"]),
]


def one_error_line(res) -> str:
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, res.stderr
    assert "Traceback" not in res.stderr
    assert lines[0].startswith("kit: error: ")
    return lines[0]


@pytest.mark.parametrize("name,text,needles", CONFIG_CASES, ids=[c[0] for c in CONFIG_CASES])
def test_bad_cluster_config(kit, configs, name, text, needles):
    d = configs("bad", text)
    res = kit("run_cmd", "--cluster=bad", f"--config_dir={d}", "--command=echo hi", "--dry_run")
    line = one_error_line(res)
    assert str(d / "bad.yaml") in line
    for needle in needles:
        assert needle in line, line


FLAG_CASES = [
    (["--command=echo", "--sbatch_kwargs={not json"], ["--sbatch_kwargs", "JSON"]),
    (["--command=echo", "--sbatch_kwargs=[1]"], ["--sbatch_kwargs", "object"]),
    (["--command=echo", "--log_dirr=/tmp/x"], ["no such option --log_dirr; did you mean --log_dir?"]),
    (["--comand=echo"], ["no such option --comand; did you mean --command?"]),  # the command's own flag
    (["--command=echo", "--num_gpu", "2"], ["no such option --num_gpu; did you mean --num_gpus?"]),
    (["--command=echo", "stray"], ["'stray'", "++key=value"]),
    (["--command="], ["--command is empty"]),
    (["--command=echo", "--num_gpus=-1"], ["--num_gpus"]),
    (["--command=echo", "--cluster=nosuchcluster"], ["nosuchcluster", "kit setup", "configs there are good"]),
    (["--command=echo", "--cluster=/no/such/file.yaml"], ["/no/such/file.yaml", "no such file"]),
    (["--command=echo", "--mount_paths=relative"], ["--mount_paths", "relative"]),
    (["--command=echo", "--dependent_jobs=-2"], ["--dependent_jobs"]),
    (["--command=echo", "--log_dir=rel/logs"], ["--log_dir", "relative"]),
    (["--command=echo", "--num_nodes=abc"], ["num_nodes"]),
]


@pytest.mark.parametrize("args,needles", FLAG_CASES, ids=[" ".join(c[0]) for c in FLAG_CASES])
def test_bad_flags(kit, configs, args, needles):
    d = configs("good", GOOD)
    res = kit("run_cmd", "--cluster=good", f"--config_dir={d}", "--dry_run", *args)
    line = one_error_line(res)
    for needle in needles:
        assert needle in line, line


def test_unknown_experiment_status(kit, configs):
    d = configs("good", GOOD)
    line = one_error_line(kit("status", "--cluster=good", f"--config_dir={d}", "never-ran"))
    assert "never-ran" in line


def test_uncommitted_changes_named(kit, configs, user_repo):
    d = configs("good", GOOD)
    (user_repo / "hello.py").write_text("print('edited')\n")
    line = one_error_line(kit("run_cmd", "--cluster=good", f"--config_dir={d}", "--command=echo"))
    assert "hello.py" in line and "--allow_uncommitted" in line
    res = kit("run_cmd", "--cluster=good", f"--config_dir={d}", "--command=cat hello.py", "--allow_uncommitted")
    assert res.returncode == 0, res.stderr
    assert "hello from the packaged repo" in res.stdout  # the committed version ran, not the edit


def test_untracked_files_named(kit, configs, user_repo):
    d = configs("good", GOOD)
    (user_repo / "helper.py").write_text("X = 1\n")  # a new module, not added: the jobs would not have it
    line = one_error_line(kit("run_cmd", "--cluster=good", f"--config_dir={d}", "--command=echo"))
    assert "untracked code files helper.py" in line and "--allow_uncommitted" in line
    res = kit("run_cmd", "--cluster=good", f"--config_dir={d}", "--command=ls", "--allow_uncommitted")
    assert res.returncode == 0, res.stderr
    assert "hello.py" in res.stdout and "helper.py" not in res.stdout  # the last commit ran, without it
    warning = "kit: warning: --allow_uncommitted: the jobs run the last commit, without untracked code files helper.py"
    assert warning in res.stderr


def test_unreachable_docker_daemon_is_one_line(kit, configs):
    d = configs("dock", "executor: local\njob_dir: JOB_DIR\ncontainers:\n  base: kit-test-base:latest\n")
    res = kit(
        "run_cmd",
        "--cluster=dock",
        f"--config_dir={d}",
        "--container=base",
        "--command=true",
        env={"DOCKER_HOST": "unix:///nonexistent/docker.sock"},
    )
    assert res.returncode == 2, res.stderr
    assert "cannot reach the Docker daemon at unix:///nonexistent/docker.sock" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


@pytest.mark.parametrize(
    "args,needle",
    [
        (["setup", "--acount=x"], "no such option --acount; did you mean --account?"),
        (["status", "--clustr=none", "x"], "no such option --clustr; did you mean --cluster?"),
        (["generate", "--server_prot=8000"], "no such option --server_prot; did you mean --server_port?"),
        (["start_sandbox", "--sandbox_prot=6000"], "no such option --sandbox_prot; did you mean --sandbox_port?"),
        (["run_cmd", "--xyzzy=1"], "no such option --xyzzy (see `kit run_cmd --help`)"),
    ],
)
def test_misspelled_flag_gets_a_did_you_mean(kit, args, needle):
    assert one_error_line(kit(*args)) == f"kit: error: {needle}"


def test_unknown_cluster_names_the_folders_and_the_configs_there(kit, configs, user_repo, tmp_path):
    from pipeline_kit.cluster.lookup import PACKAGE_CONFIGS

    d = configs("slurm-a100", GOOD)
    configs("laptop", GOOD)
    line = one_error_line(kit("run_cmd", "--cluster=slurm-a10", f"--config_dir={d}", "--command=echo"))
    mine = tmp_path / "home" / ".kit" / "cluster_configs"  # the kit fixture's $KIT_HOME/cluster_configs
    assert (
        f"no slurm-a10.yaml in {d}, {mine} (no such folder), {user_repo / 'cluster_configs'} (no such folder), "
        f"{PACKAGE_CONFIGS}"
    ) in line
    assert "the configs there are laptop, slurm-a100, " in line and "none" in line  # the package's examples too
    assert "Did you mean 'slurm-a100'?" in line and "kit setup --cluster=slurm-a10" in line


def test_misspelled_container_key_gets_a_did_you_mean(kit, configs):
    d = configs("ctr", "executor: slurm\njob_dir: JOB_DIR\ncontainers: {base: /images/base.sqsh}\n")
    res = kit("run_cmd", "--cluster=ctr", f"--config_dir={d}", "--container=bsae", "--dry_run", "--command=true")
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert (
        "container 'bsae' is not under 'containers' (known: base); did you mean 'base'? Or add it there." in res.stderr
    )
