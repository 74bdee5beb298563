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


# ---- mistakes in the inputs: refused at submission (dry run and real), before any job folder or request


def _chattr(path, flag: str) -> None:
    import subprocess

    subprocess.run(["chattr", flag, str(path)], check=True)


@pytest.fixture
def read_only_dir(tmp_path):
    """A folder nobody can write into, root included (immutable); writable again after the test."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    _chattr(folder, "+i")
    yield folder
    _chattr(folder, "-i")


INPUT_CASES = [
    ("broken line", '{"problem": "a"}\n{"problem": "b"}\n\n{"problem": \n', [], ["in.jsonl:4: not valid JSON"]),
    (
        "missing prompt field",
        '{"problem": "a"}\n{"question": "b"}\n',
        ["++prompt_config=generic/math"],
        ["in.jsonl:2: the record has no field 'problem', which prompt config generic/math needs", "(it has: question)"],
    ),
    ("empty input", "", [], ["in.jsonl: the input file has no records", "++allow_empty_input=True"]),
    ("blank lines only", "\n\n", [], ["in.jsonl: the input file has no records"]),
]


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry run", "submission"])
@pytest.mark.parametrize("name,text,extra,needles", INPUT_CASES, ids=[c[0] for c in INPUT_CASES])
def test_bad_generation_input_is_refused_at_submission(
    kit, configs, none_cluster, stub, tmp_path, user_repo, dry_run, name, text, extra, needles
):
    server = stub()
    (tmp_path / "in.jsonl").write_text(text)
    args = ["--server_type=openai", f"--server_address={server.url}", "--model=stub", *extra]
    res = kit("generate", *none_cluster, "--input_file=../in.jsonl", "--output_dir=../out", *args,
              *(["--dry_run"] if dry_run else []))  # fmt: skip
    line = one_error_line(res)
    for needle in needles:
        assert needle in line, line
    assert "../in.jsonl" in line and "/.kit/" not in line  # the user's path, not the packed copy's
    assert not configs.job_dir.exists() and not (tmp_path / "out").exists()
    assert server.requests() == []


def test_an_empty_input_is_allowed_when_asked(kit, none_cluster, stub, tmp_path):
    server = stub()
    (tmp_path / "in.jsonl").write_text("")
    res = kit("generate", *none_cluster, f"--input_file={tmp_path / 'in.jsonl'}", f"--output_dir={tmp_path / 'out'}",
              "--server_type=openai", f"--server_address={server.url}", "--model=stub", "++allow_empty_input=True")  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "out" / "output.jsonl").read_text() == ""
    assert (tmp_path / "out" / "output.jsonl.done").exists()


def test_eval_with_a_broken_benchmark_file_is_refused_at_submission(kit, configs, none_cluster, tmp_path):
    data = tmp_path / "data"
    assert kit("prepare_data", "arith", f"--data_dir={data}").returncode == 0
    test_file = next(data.glob("arith/*.jsonl"))
    with test_file.open("a") as f:
        f.write("{oops\n")
    lines = len(test_file.read_text().splitlines())
    res = kit("eval", *none_cluster, "--benchmarks=arith", f"--data_dir={data}", f"--output_dir={tmp_path / 'ev'}",
              "--server_type=openai", "--server_address=http://127.0.0.1:9/v1", "--model=stub")  # fmt: skip
    line = one_error_line(res)
    assert f"{test_file}:{lines}: not valid JSON" in line
    assert not configs.job_dir.exists() and not (tmp_path / "ev").exists()


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry run", "submission"])
def test_an_output_folder_that_cannot_be_written_is_refused(kit, configs, none_cluster, stub, tmp_path, read_only_dir,
                                                            dry_run):  # fmt: skip
    server = stub()
    (tmp_path / "in.jsonl").write_text('{"problem": "a"}\n')
    out = read_only_dir / "out"
    res = kit("generate", *none_cluster, f"--input_file={tmp_path / 'in.jsonl'}", f"--output_dir={out}",
              "--server_type=openai", f"--server_address={server.url}", "--model=stub",
              *(["--dry_run"] if dry_run else []))  # fmt: skip
    line = one_error_line(res)
    assert f"--output_dir={out}: {read_only_dir}, where kit would make it, cannot be written" in line
    assert not configs.job_dir.exists() and server.requests() == []


def test_the_job_refuses_what_submission_could_not_see(stub, tmp_path, read_only_dir):
    """Where kit cannot see the paths (a cluster over SSH), the generation script says the same before any request
    (and before it waits for the server)."""
    from conftest import generate

    server = stub()
    inp = tmp_path / "in.jsonl"
    base = [f"++server.base_url={server.url}", "++server.model=stub", f"++input_file={inp}"]
    inp.write_text("")
    res = generate(*base, f"++output_dir={tmp_path / 'o'}")
    assert res.returncode == 2 and "in.jsonl: the input file has no records" in res.stderr, res.stderr
    inp.write_text('{"problem": "a"}\n')
    res = generate(*base, f"++output_dir={read_only_dir / 'o'}")
    assert res.returncode == 2 and f"++output_dir={read_only_dir / 'o'}: {read_only_dir}" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and server.requests() == []


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry run", "submission"])
def test_sft_into_a_folder_trained_with_other_settings_is_refused(kit, configs, none_cluster, tmp_path, dry_run):
    """The settings the trainer recorded in <output_dir>/kit-train.json are compared at submission, as the trainer
    compares them when it starts; the same settings pass."""
    import json

    from conftest import additions

    from pipeline_kit.training.checkpoints import run_settings
    from pipeline_kit.training.config import parse_train_overrides

    data, model, out = additions(tmp_path / "sft.jsonl", 8, 0), tmp_path / "model", tmp_path / "out"
    model.mkdir()
    (model / "config.json").write_text("{}")
    own = ["++algorithm=sft", "++backend=trl", f"++model={model}", f"++training_data={data}", f"++output_dir={out}"]
    out.mkdir()
    (out / "kit-train.json").write_text(json.dumps(run_settings(parse_train_overrides(own))))
    args = ["sft", *none_cluster, f"--model={model}", f"--training_data={data}", f"--output_dir={out}"]
    res = kit(*args, "++learning_rate=1e-4", *(["--dry_run"] if dry_run else []))
    line = one_error_line(res)
    assert f"{out} holds a run with other settings (learning_rate: 1e-05 → 0.0001)" in line
    assert not configs.job_dir.exists()
    assert kit(*args, "--dry_run").returncode == 0  # the same settings: a resume


def test_docker_checks_an_input_it_sees_through_a_mount(kit, configs, tmp_path):
    """On Docker the job's /data/in.jsonl is this machine's <host>/in.jsonl through the config's mount: checked at
    submission, named as the job sees it."""
    host = tmp_path / "host-data"
    host.mkdir()
    (host / "in.jsonl").write_text('{"problem": "a"}\n{"problem": \n')
    d = configs(
        "dock",
        f"executor: local\njob_dir: JOB_DIR\nmounts: ['{host}:/data']\ncontainers:\n  kit: kit-test-base:latest\n",
    )
    res = kit("generate", "--cluster=dock", f"--config_dir={d}", "--input_file=/data/in.jsonl", "--output_dir=/data/out",
              "--server_type=openai", "--server_address=http://127.0.0.1:9/v1", "--model=m", "--dry_run")  # fmt: skip
    assert (
        one_error_line(res)
        == "kit: error: /data/in.jsonl:2: not valid JSON (Expecting value); fix or remove that line."
    )
    assert not configs.job_dir.exists()
