"""Container jobs on the local Slurm through pyxis + enroot (tests/services/pyxis_up.sh): run_cmd in an image, an
image built from a Dockerfile, arrays, --mpi=pmix, the SSH tunnel, mounts that are missing (at submission and at
job start), `kit logs` on a container that did not start, and generate with server and client in two images."""

from __future__ import annotations

import re
import shutil
import sys
import time
from pathlib import Path

import pytest
from conftest import SERVICES, addition_problems, check_answers, git, need, rows

pytestmark = pytest.mark.slurm
REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def pyxis(configs, tmp_path, user_repo):
    """(cluster args, data folder): a Slurm config whose containers are the base image's squashfs and an image
    built from dockerfiles/Dockerfile.kit, with one data mount and one env var."""
    need("KIT_TEST_PYXIS", "pyxis + enroot on the local Slurm")
    data = tmp_path / "data"
    data.mkdir()
    (data / "in.txt").write_text("mounted data\n")
    (tmp_path / "secret.txt").write_text("host secret\n")
    shutil.copytree(REPO_ROOT / "dockerfiles", user_repo / "dockerfiles")
    git(user_repo, "add", ".")
    git(user_repo, "commit", "-q", "-m", "dockerfiles")
    d = configs(
        "pyx",
        f"""
        executor: slurm
        job_dir: JOB_DIR
        account: root
        partition: debug
        containers:
          base: {SERVICES["KIT_TEST_BASE_SQSH"]}
          built: dockerfile:dockerfiles/Dockerfile.kit
          broken: {tmp_path / "broken.sqsh"}
        mounts: ['{data}:/data']
        env_vars: ['KIT_TEST_GREETING=hi from env']
    """,
    )
    return ["--cluster=pyx", f"--config_dir={d}"], data


BUILD_ENV = {"BASE_IMAGE": "kit-test-base:latest"}  # Dockerfile.kit's build ARG (no Docker Hub here)


def test_run_cmd_in_a_container_sees_code_env_and_mounts_only(kit, pyxis, tmp_path):
    args, _ = pyxis
    res = kit(
        "run_cmd",
        *args,
        "--expname=ctr",
        "--container=base",
        "--wait",
        "--num_gpus=2",
        "--command=head -1 /etc/os-release; cat /data/in.txt; echo $KIT_TEST_GREETING; pwd; cat hello.py; "
        f"echo CUDA=$CUDA_VISIBLE_DEVICES; test -e {tmp_path}/secret.txt && echo LEAK || echo no host path",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    logs = kit("logs", *args, "ctr").stdout
    for expected in ("bookworm", "mounted data", "hi from env", "/kit/code", "hello from the packaged repo"):
        assert expected in logs, logs
    assert "CUDA=0,1" in logs and "no host path" in logs and "LEAK" not in logs, logs
    assert "container start-up" not in logs  # no pyxis complaint


def test_dockerfile_image_is_built_once_and_run_from_its_squashfs(kit, pyxis, configs):
    args, _ = pyxis
    for name in ("b1", "b2"):
        res = kit(
            "run_cmd",
            *args,
            f"--expname={name}",
            "--container=built",
            "--wait",
            "--command=cat /kit/IMAGE_INFO; echo KIT_IMAGE=$KIT_IMAGE",
            env=BUILD_ENV,
        )
        assert res.returncode == 0, res.stdout + res.stderr
        logs = kit("logs", *args, name).stdout
        assert "built by kit from kit-test-base:latest" in logs and "KIT_IMAGE=kit" in logs, logs
        images = list((configs.job_dir / "images").glob("*.sqsh"))
        assert len(images) == 1, images
        if name == "b1":
            first = images[0].stat().st_mtime_ns
    assert images[0].stat().st_mtime_ns == first  # the second run used the same squashfs


def test_array_job_in_a_container(kit, pyxis):
    args, data = pyxis
    res = kit(
        "run_cmd", *args, "--expname=carr", "--container=base", "--array_size=4", "--wait",
        "--command=echo unit $KIT_UNIT > /data/unit-$KIT_UNIT.txt",
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    assert sorted(p.read_text() for p in data.glob("unit-*.txt")) == [f"unit {i}\n" for i in range(4)]


def test_mpi_pmix_tasks_in_a_container(kit, pyxis):
    args, _ = pyxis
    res = kit(
        "run_cmd", *args, "--expname=mpi", "--container=base", "--num_tasks=2", "--mpi=pmix", "--wait",
        "--command=echo rank=$PMIX_RANK of $SLURM_NTASKS",
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    logs = kit("logs", *args, "mpi").stdout.split("(scheduler output)")[0]  # the command's own log
    assert sorted(re.findall(r"rank=(\d) of 2", logs)) == ["0", "1"], logs


def test_missing_mount_source_is_refused_at_submission(kit, pyxis, tmp_path):
    args, _ = pyxis
    missing = tmp_path / "nowhere"
    res = kit(
        "run_cmd", *args, "--expname=nomount", "--container=base", f"--mount_paths={missing}:/x", "--command=true"
    )
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr
    assert f"container mount {missing}:/x (--mount_paths): the source {missing} does not exist" in res.stderr
    res = kit("status", *args, "nomount")
    assert res.returncode == 2 and "no experiment named 'nomount'" in res.stderr


def test_mount_source_gone_at_job_start_is_a_clear_failure(kit, pyxis, tmp_path):
    """The source exists at submission; the job it runs after removes it; the container job then fails with one
    line that `kit logs` shows (its kit.log) instead of pyxis's complaint."""
    args, _ = pyxis
    doomed, go = tmp_path / "doomed", tmp_path / "go"
    doomed.mkdir()
    # it removes the source only once the second job is submitted (`go`), however slow the submission
    res = kit("run_cmd", *args, "--expname=gone-a", f"--command=until [ -e {go} ]; do sleep 0.2; done; rm -rf {doomed}")
    assert res.returncode == 0, res.stderr
    res = kit(
        "run_cmd", *args, "--expname=gone-b", "--container=base", f"--mount_paths={doomed}:/doomed",
        "--run_after=gone-a", "--command=ls /doomed",
    )  # fmt: skip
    go.touch()
    assert res.returncode == 0, res.stderr
    assert _wait(kit, args, "gone-b") == "FAILED"
    logs = kit("logs", *args, "gone-b").stdout
    line = f"container mount {doomed}:/doomed (--mount_paths): the source {doomed} does not exist on the cluster"
    assert line in logs and "kit.log" in logs, logs


def _wait(kit, args, expname, timeout=90):
    deadline = time.time() + timeout
    while time.time() < deadline:
        out = kit("status", *args, expname).stdout.split()
        if out and out[1] in ("SUCCEEDED", "FAILED", "CANCELLED"):
            return out[1]
        time.sleep(0.5)
    return out


def test_logs_show_why_the_container_did_not_start(kit, pyxis, tmp_path):
    args, _ = pyxis
    (tmp_path / "broken.sqsh").write_bytes(b"not a squashfs\n" * 100)
    res = kit("run_cmd", *args, "--expname=broken", "--container=broken", "--wait", "--command=echo never")
    assert res.returncode == 1, res.stdout + res.stderr
    logs = kit("logs", *args, "broken").stdout
    head, _, rest = logs.partition("container start-up (pyxis/enroot)")
    assert rest, logs
    assert "0 log(s)" in head and "pyxis" in rest.splitlines()[2], logs
    assert "never" not in logs


def test_container_job_through_the_ssh_tunnel(kit, configs, tmp_path):
    need("KIT_TEST_PYXIS", "pyxis + enroot on the local Slurm")
    need("KIT_TEST_SSH_KEY", "the loopback sshd")
    remote = tmp_path / "remote_jobs"
    data = tmp_path / "data"
    data.mkdir()
    d = configs(
        "pyxssh",
        f"""
        executor: slurm
        job_dir: JOB_DIR
        account: root
        containers: {{base: {SERVICES["KIT_TEST_BASE_SQSH"]}, broken: {tmp_path / "broken.sqsh"}}}
        mounts: ['{data}:/data']
        ssh_tunnel:
          host: 127.0.0.1
          user: root
          port: {SERVICES["KIT_TEST_SSH_PORT"]}
          identity: {SERVICES["KIT_TEST_SSH_KEY"]}
          job_dir: {remote}
    """,
    )
    args = ["--cluster=pyxssh", f"--config_dir={d}"]
    res = kit("run_cmd", *args, "--expname=t", "--container=base", "--wait", "--command=echo in $(pwd) > /data/t.txt")
    assert res.returncode == 0, res.stdout + res.stderr
    assert (data / "t.txt").read_text() == "in /kit/code\n"
    res = kit(
        "run_cmd", *args, "--expname=t2", "--container=base", f"--mount_paths={tmp_path}/no:/no", "--command=true"
    )
    assert res.returncode == 2 and "does not exist on 127.0.0.1" in res.stderr, res.stderr


@pytest.mark.models
def test_generate_with_server_and_client_in_two_images(kit, configs, tmp_path, user_repo):
    """`kit generate` as one het job: the transformers server in the base image, the client in the image built
    from Dockerfile.kit (the defaults: containers named after the server type and 'kit'). The images lack torch
    and LiteLLM, so the config mounts the Python envs, as a user mounts theirs."""
    need("KIT_TEST_PYXIS", "pyxis + enroot on the local Slurm")
    need("KIT_TEST_HF_PYTHON", "the model venv and tiny model (tests/services/models_up.sh)")
    shutil.copytree(REPO_ROOT / "dockerfiles", user_repo / "dockerfiles")
    git(user_repo, "add", ".")
    git(user_repo, "commit", "-q", "-m", "dockerfiles")
    hf_python, model = SERVICES["KIT_TEST_HF_PYTHON"], SERVICES["KIT_TEST_TINY_MODEL"]
    hf_venv, client_venv = Path(hf_python).parent.parent, Path(sys.executable).parent.parent
    data = tmp_path / "data"
    data.mkdir()
    addition_problems(data / "in.jsonl", 6)
    mounts = [data, hf_venv, client_venv, Path(sys.base_prefix), Path(model)]
    d = configs(
        "pyxgen",
        f"""
        executor: slurm
        job_dir: JOB_DIR
        account: root
        partition: debug
        containers:
          transformers: {SERVICES["KIT_TEST_BASE_SQSH"]}
          kit: dockerfile:dockerfiles/Dockerfile.kit
        mounts: [{", ".join(f"'{m}:{m}'" for m in dict.fromkeys(mounts))}]
        env_vars: ['KIT_SERVER_PYTHON={hf_python}', 'KIT_CLIENT_PYTHON={sys.executable}', 'HF_HUB_OFFLINE=1']
    """,
    )
    args = ["--cluster=pyxgen", f"--config_dir={d}"]
    res = kit(
        "generate", *args, "--expname=cgen", "--wait", "--server_type=transformers", f"--model={model}",
        f"--input_file={data / 'in.jsonl'}", f"--output_dir={data / 'out'}", "++prompt_config=generic/math",
        "++inference.tokens_to_generate=12", env=BUILD_ENV, timeout=600,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    check_answers(rows(data / "out" / "output.jsonl"), 6)
    script = next((configs.job_dir / "experiments" / "cgen").glob("*/*_sbatch.sh")).read_text()
    images = re.findall(r"--container-image (\S+)", script)
    assert images == [SERVICES["KIT_TEST_BASE_SQSH"], images[1]] and images[1].endswith(".sqsh"), images
    assert "#SBATCH hetjob" in script


def test_documented_container_example_runs_as_written(kit, configs, tmp_path):
    """The Slurm container config and first command of docs/clusters/containers.md, with only this cluster's paths and names put in."""
    import shlex

    import yaml
    from conftest import example_blocks

    need("KIT_TEST_PYXIS", "pyxis + enroot on the local Slurm")
    config_text, commands = example_blocks("slurm-container")
    config = yaml.safe_load(config_text)
    data = tmp_path / "lustre_data"
    data.mkdir()
    (data / "shard-0.jsonl").write_text("{}\n")
    config.update(job_dir="JOB_DIR", account="root", partition="debug", mounts=[f"{data}:/data"])
    config["containers"]["base"] = SERVICES["KIT_TEST_BASE_SQSH"]
    d = configs("gpu", yaml.safe_dump(config))
    first = commands.split("\nkit logs")[0].replace("\\\n", " ")
    argv = shlex.split(first)
    assert argv[:2] == ["kit", "run_cmd"], argv
    res = kit(*argv[1:], f"--config_dir={d}")
    assert res.returncode == 0, res.stdout + res.stderr
    logs = kit("logs", "--cluster=gpu", f"--config_dir={d}", "ctr").stdout
    assert "GPUs 0,1" in logs and "shard-0.jsonl" in logs and "/data/hf cache" in logs and "\n42\n" in logs, logs
