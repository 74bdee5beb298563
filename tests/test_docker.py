"""Jobs in Docker (executor: local) against the private dockerd (tests/services/docker_up.sh)."""

from __future__ import annotations

import shutil

import pytest
from conftest import need

pytestmark = pytest.mark.docker
REPO_ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent


@pytest.fixture
def docker_cluster(configs, tmp_path):
    need("DOCKER_HOST", "the private dockerd")
    data = tmp_path / "data"
    data.mkdir()
    (data / "in.txt").write_text("mounted data\n")
    (tmp_path / "secret.txt").write_text("host secret\n")
    d = configs(
        "dock",
        f"""
        executor: local
        job_dir: JOB_DIR
        containers:
          base: kit-test-base:latest
          built: dockerfile:dockerfiles/Dockerfile.kit
        mounts: ['{data}:/data']
        env_vars: ['KIT_TEST_GREETING=hi from env']
    """,
    )
    return ["--cluster=dock", f"--config_dir={d}"], tmp_path


def test_docker_job_sees_mounts_and_env_not_host(kit, docker_cluster):
    args, tmp = docker_cluster
    res = kit(
        "run_cmd",
        *args,
        "--expname=dk",
        "--container=base",
        f"--command=cat /data/in.txt; echo $KIT_TEST_GREETING; cat hello.py; pwd; "
        f"test -e {tmp}/secret.txt && echo LEAK || echo no host path",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    assert "mounted data" in out and "hi from env" in out and "no host path" in out and "LEAK" not in out
    assert "/kit/code" in out and "hello from the packaged repo" in out


def test_missing_mount_source_is_refused_before_docker_creates_it(kit, docker_cluster):
    """Docker would make a missing bind source as an empty root-owned folder; kit refuses it instead."""
    args, tmp = docker_cluster
    res = kit("run_cmd", *args, "--container=base", f"--mount_paths={tmp}/typo:/data2", "--command=ls /data2")
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"the source {tmp}/typo does not exist on this machine; create it or fix the mount." in res.stderr
    assert not (tmp / "typo").exists()


def test_dockerfile_container_is_built_and_run(kit, docker_cluster, user_repo):
    args, _ = docker_cluster
    shutil.copytree(REPO_ROOT / "dockerfiles", user_repo / "dockerfiles")
    res = kit(
        "run_cmd",
        *args,
        "--expname=built",
        "--container=built",
        "--allow_uncommitted",
        "--command=cat /kit/IMAGE_INFO; echo image=$KIT_IMAGE",
        env={"BASE_IMAGE": "kit-test-base:latest"},
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "built by kit from kit-test-base:latest" in res.stdout and "image=kit" in res.stdout


class RecordingDockerClient:
    """Stands in for a dockerd on a GPU host (this machine has no GPUs): records the container request."""

    def __init__(self):
        self.calls = []
        self.containers = self

    def run(self, image, command, **kwargs):
        self.calls.append((image, command, kwargs))


def test_gpus_are_requested_from_docker_when_the_host_has_them(monkeypatch, tmp_path):
    from pipeline_kit.cluster.config import build_cluster_config
    from pipeline_kit.launch import executors
    from pipeline_kit.launch.nemorun_env import import_nemo_run
    from pipeline_kit.pipeline import Command, CommandGroup, Job

    cluster = build_cluster_config(
        {"executor": "local", "job_dir": str(tmp_path / "jobs"), "containers": {"base": "img:1"}}, "gpu.yaml"
    )
    run = import_nemo_run(cluster)
    job = Job("train", groups=[CommandGroup([Command("nvidia-smi", num_gpus=2, container="base")])])
    from nemo_run.core.execution.docker import DockerContainer

    monkeypatch.setattr(executors, "host_has_gpus", lambda: True)
    ex = executors.docker_executor(run, cluster, job, "/code", ["/logs"], [])
    ex.experiment_id = "exp"
    client = RecordingDockerClient()
    DockerContainer(name="train", command=["true"], executor=ex, extra_env={}).run(client=client, id="x")
    request = client.calls[0][2]
    (gpu_request,) = request["device_requests"]
    assert gpu_request["Count"] == 2 and gpu_request["Capabilities"] == [["compute", "utility"]]
    assert request["network"] == "host"
    assert "/code:/kit/code" in request["volumes"] and "/logs:/logs" in request["volumes"]

    # no GPUs on the host: an error that says so, not a job that silently runs without them
    from pipeline_kit.errors import UserError

    monkeypatch.setattr(executors, "host_has_gpus", lambda: False)
    with pytest.raises(UserError, match=r"job 'train' asks for 2 GPU\(s\), but this Docker host has no /dev/nvidia\*"):
        executors.docker_executor(run, cluster, job, "/code", ["/logs"], [])


def test_generate_client_runs_in_the_container(kit, configs, stub, tmp_path):
    """`kit generate` on Docker against an endpoint on this host (host network). The image has no LiteLLM, so the
    cluster config mounts this test's Python env and names it in KIT_CLIENT_PYTHON, as a user would mount theirs."""
    import sys

    from conftest import problems, rows

    need("DOCKER_HOST", "the private dockerd")
    data = tmp_path / "data"
    data.mkdir()
    problems(data, 5)
    d = configs(
        "dock",
        f"""
        executor: local
        job_dir: JOB_DIR
        containers:
          kit: kit-test-base:latest
        mounts: ['{data}:/data', '{sys.prefix}:{sys.prefix}', '{sys.base_prefix}:{sys.base_prefix}']
        env_vars: ['KIT_CLIENT_PYTHON={sys.executable}']
    """,
    )
    server = stub()
    res = kit(
        "generate",
        "--cluster=dock",
        f"--config_dir={d}",
        "--server_type=openai",
        f"--server_address={server.url}",
        "--model=stub",
        "--input_file=/data/in.jsonl",
        "--output_dir=/data/out",
        "--num_random_seeds=2",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    for seed in (0, 1):
        assert [r["id"] for r in rows(data / "out" / f"output-rs{seed}.jsonl")] == list(range(5))
    assert len(server.requests()) == 10
