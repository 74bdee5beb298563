"""Container mounts: the list a job's container gets, and the rule that every source exists before the container
starts. Kit makes its own folders (logs); a source the user named must exist, checked where kit can see it."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.errors import UserError
from pipeline_kit.launch.packaging import CONTAINER_CODE_DIR
from pipeline_kit.launch.remote import remote_run


@dataclass(frozen=True)
class UserMount:
    """A mount the user named, and where: the cluster config's `mounts` or `--mount_paths`."""

    spec: str
    named_in: str

    @property
    def source(self) -> str:
        return self.spec.split(":", 1)[0]


def user_mounts(cluster: ClusterConfig, mount_paths: list[str]) -> list[UserMount]:
    return [UserMount(m, f"'mounts' in {cluster.source}") for m in cluster.mounts] + [
        UserMount(m, "--mount_paths") for m in mount_paths
    ]


def container_mounts(cluster: ClusterConfig, mount_paths: list[str], code_dir: str, log_dirs: list[str]) -> list[str]:
    """The user's mounts, the packed code at CONTAINER_CODE_DIR, and the log folders at their own paths (kit's
    scripts write their logs and .rc files there)."""
    return [
        *(m.spec for m in user_mounts(cluster, mount_paths)),
        f"{code_dir}:{CONTAINER_CODE_DIR}",
        *(f"{d}:{d}" for d in dict.fromkeys(log_dirs)),
    ]


def missing_message(mount: UserMount, where: str) -> str:
    return (
        f"kit: container mount {mount.spec} ({mount.named_in}): the source {mount.source} does not exist {where}; "
        "create it or fix the mount."
    )


def check_sources_at_submission(cluster: ClusterConfig, mount_paths: list[str]) -> None:
    """Refuse a submission whose user-named mount source is missing: here (none, Docker, a Slurm login node) or,
    with an SSH tunnel, on the cluster in one ssh call."""
    mounts = user_mounts(cluster, mount_paths)
    if not mounts:
        return
    if cluster.executor == "slurm" and cluster.ssh_tunnel:
        probe = "; ".join(f"[ -e {shlex.quote(m.source)} ] || echo {shlex.quote(m.source)}" for m in mounts)
        missing = set(remote_run(cluster, probe).stdout.split("\n"))
        where = f"on {cluster.ssh_tunnel.host}"
    else:
        missing = {m.source for m in mounts if not os.path.exists(m.source)}
        where = "on this machine" if cluster.executor == "local" else "on the cluster"
    for m in mounts:
        if m.source in missing:
            raise UserError(missing_message(m, where).removeprefix("kit: "))


def slurm_setup_lines(
    cluster: ClusterConfig, mount_paths: list[str], log_dir: str, job_name: str, in_container: bool
) -> str:
    """Batch-script lines that run on the cluster before any srun: make the log folder pyxis will mount, and for a
    job in containers stop with one line in its kit.log (which `kit logs` shows) when a user-named source is
    missing there."""
    log = shlex.quote(log_dir)
    job_log = shlex.quote(f"{log_dir}/{job_name}")
    lines = [f"mkdir -p {log}"]
    for m in user_mounts(cluster, mount_paths) if in_container else []:
        message = shlex.quote(missing_message(m, "on the cluster"))
        lines.append(
            f"[ -e {shlex.quote(m.source)} ] || {{ mkdir -p {job_log}; echo {message} | tee -a {job_log}/kit.log >&2; "
            "exit 2; }"
        )
    return "\n".join(lines)
