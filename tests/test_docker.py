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
