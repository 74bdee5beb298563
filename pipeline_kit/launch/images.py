"""Container images named in a cluster config: a plain image name passes through; `dockerfile:PATH` is built on
the local dockerd (tag = content hash) and, for Slurm, turned once into a squashfs that pyxis starts from."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.errors import UserError
from pipeline_kit.launch.remote import upload

DOCKERFILE = "dockerfile:"


def resolve_image(cluster: ClusterConfig, key: str) -> str:
    """For Docker: an image name, or for `dockerfile:PATH` the tag of a local build named by the content hash."""
    spec = cluster.container(key)
    if not spec.startswith(DOCKERFILE):
        return spec
    return build_dockerfile(cluster, spec.removeprefix(DOCKERFILE))


def dockerfile_tag(path: Path) -> tuple[str, dict[str, str]]:
    """The content-hash tag of a Dockerfile and the build args it takes from the environment (like
    `docker build --build-arg NAME`, an ARG with a set env var of that name gets its value)."""
    text = path.read_text()
    args = {
        name: os.environ[name]
        for name in re.findall(r"^\s*ARG\s+([A-Za-z_][A-Za-z0-9_]*)", text, re.M)
        if name in os.environ
    }
    digest = hashlib.sha256((text + repr(sorted(args.items()))).encode()).hexdigest()[:16]
    return f"kit-{path.name.lower().replace('.', '-')}:{digest}", args  # Dockerfile.sandbox: kit-dockerfile-sandbox


def _dockerfile(cluster: ClusterConfig, rel: str) -> Path:
    path = Path(rel)
    if not path.is_file():
        raise UserError(
            f"{cluster.source}: containers entry dockerfile:{rel} — no such file (relative to {os.getcwd()})."
        )
    return path


def build_dockerfile(cluster: ClusterConfig, rel: str) -> str:
    path = _dockerfile(cluster, rel)
    tag, args = dockerfile_tag(path)
    import docker

    client = docker.from_env()
    try:
        client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    try:
        client.images.build(
            path=str(path.parent.resolve()), dockerfile=path.name, tag=tag, buildargs=args, rm=True, network_mode="host"
        )
    except docker.errors.BuildError as e:
        last = next(
            (
                str(x.get("stream") or x.get("error")).strip()
                for x in reversed(list(e.build_log))
                if x.get("stream") or x.get("error")
            ),
            str(e),
        )
        raise UserError(f"{cluster.source}: building dockerfile:{rel} failed: {last}") from None
    return tag


# ---- Slurm: pyxis starts containers from a squashfs file (a `dockerd://TAG` image would be imported again at
# every job start, and compute nodes rarely reach the dockerd where kit built the image)


def squashfs_name(tag: str) -> str:
    return tag.replace(":", "-").replace("/", "-") + ".sqsh"


def slurm_image(cluster: ClusterConfig, key: str) -> str:
    """The image a Slurm job names for container `key`: the config's value, or for `dockerfile:PATH` the
    squashfs that `prepare_slurm_images` makes under <job_dir>/images (as the cluster sees it)."""
    spec = cluster.container(key)
    if not spec.startswith(DOCKERFILE):
        return spec
    tag, _ = dockerfile_tag(_dockerfile(cluster, spec.removeprefix(DOCKERFILE)))
    root = cluster.ssh_tunnel.job_dir if cluster.ssh_tunnel else cluster.job_dir
    return f"{root}/images/{squashfs_name(tag)}"


def prepare_slurm_images(cluster: ClusterConfig, keys: set[str]) -> None:
    """Build every `dockerfile:` container the jobs use on the local dockerd, `enroot import` it into a squashfs
    once (cached by the content-hash tag), and copy it to the cluster over the SSH tunnel when there is one."""
    for key in sorted(keys):
        spec = cluster.container(key)
        if not spec.startswith(DOCKERFILE):
            continue
        tag = build_dockerfile(cluster, spec.removeprefix(DOCKERFILE))
        local = Path(cluster.job_dir) / "images" / squashfs_name(tag)
        if not local.is_file():
            _enroot_import(cluster, key, tag, local)
        if cluster.ssh_tunnel is not None:
            upload(cluster, str(local), f"{cluster.ssh_tunnel.job_dir}/images/{local.name}")


def _enroot_import(cluster: ClusterConfig, key: str, tag: str, dest: Path) -> None:
    if shutil.which("enroot") is None:
        raise UserError(
            f"{cluster.source}: container '{key}' is a dockerfile; on Slurm kit turns the image into a squashfs with "
            "`enroot import`, and enroot is not installed here; install enroot, or build the image and name it "
            "(an image or a .sqsh path) in 'containers'."
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}")
    tmp.unlink(missing_ok=True)
    proc = subprocess.run(["enroot", "import", "-o", str(tmp), f"dockerd://{tag}"], capture_output=True, text=True)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        last = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise UserError(f"{cluster.source}: `enroot import dockerd://{tag}` for container '{key}' failed: {last[0]}")
    os.replace(tmp, dest)
