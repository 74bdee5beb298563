"""Runs shell commands where the cluster is: here (login node) or over the SSH tunnel (ssh and rsync)."""

from __future__ import annotations

import os
import shlex
import subprocess

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.errors import UserError


def ssh_argv(cluster: ClusterConfig) -> list[str]:
    t = cluster.ssh_tunnel
    assert t is not None
    argv = ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=accept-new", "-p", str(t.port)]
    if t.identity:
        argv += ["-i", t.identity]
    return [*argv, f"{t.user}@{t.host}"]


def remote_run(cluster: ClusterConfig, command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run `command` (a shell string) on the cluster's login node; here when there is no tunnel."""
    argv = [*ssh_argv(cluster), command] if cluster.ssh_tunnel else ["bash", "-c", command]
    proc = subprocess.run(argv, capture_output=True, text=True)
    if check and proc.returncode != 0:
        where = f"{cluster.ssh_tunnel.user}@{cluster.ssh_tunnel.host}" if cluster.ssh_tunnel else "this host"
        if cluster.ssh_tunnel and proc.returncode == 255:
            raise UserError(f"{cluster.source}: ssh to {where} failed ({proc.stderr.strip()}); check ssh_tunnel.")
        raise RuntimeError(f"`{command}` on {where} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def forward_port(cluster: ClusterConfig, local_port: int, host: str, port: int) -> subprocess.Popen:
    """An ssh process forwarding 127.0.0.1:`local_port` here to `host`:`port` through the cluster's ssh_tunnel,
    until it is terminated."""
    ssh = ssh_argv(cluster)
    forward = ["-N", "-o", "ExitOnForwardFailure=yes", "-L", f"127.0.0.1:{local_port}:{host}:{port}"]
    return subprocess.Popen([*ssh[:-1], *forward, ssh[-1]])


def rsync_to(cluster: ClusterConfig, src: str, dst: str) -> None:
    rsh = " ".join(shlex.quote(a) for a in ssh_argv(cluster)[:-1])
    t = cluster.ssh_tunnel
    assert t is not None
    proc = subprocess.run(["rsync", "-a", "-e", rsh, src, f"{t.user}@{t.host}:{dst}"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise UserError(f"{cluster.source}: rsync to {t.host}:{dst} failed ({proc.stderr.strip()}); check ssh_tunnel.")


def upload(cluster: ClusterConfig, local: str, remote: str) -> None:
    """Copy a file or folder to `remote` on the cluster once: into a temporary name, then renamed into place, so a
    half-copied one is never used; an existing `remote` is kept (its name says its content)."""
    if remote_run(cluster, f"test -e {shlex.quote(remote)}", check=False).returncode == 0:
        return
    tmp = f"{remote}.tmp{os.getpid()}"
    remote_run(cluster, f"mkdir -p {shlex.quote(os.path.dirname(remote))}")
    rsync_to(cluster, local + "/" if os.path.isdir(local) else local, tmp + ("/" if os.path.isdir(local) else ""))
    q, qt = shlex.quote(remote), shlex.quote(tmp)
    remote_run(cluster, f"mv -T {qt} {q} 2>/dev/null || rm -rf {qt}")
