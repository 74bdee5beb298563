"""`kit setup`'s check of a Slurm cluster config against the cluster: the partitions (`sinfo`) and the account
(`sacctmgr`) it names, asked on the login node here or over the config's ssh_tunnel."""

from __future__ import annotations

import subprocess

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.launch.remote import ssh_argv


def slurm_name_warnings(config: ClusterConfig) -> list[str]:
    """One line per partition or account in `config` that the cluster does not list (`sinfo`, and `sacctmgr` for
    the accounts of the submitting user), asked here or over the config's ssh_tunnel; none when the cluster
    cannot be asked (no Slurm client here, ssh fails, a timeout): then nothing can be said."""
    out = []
    partitions = _ask_cluster(config, "sinfo -h -o %R")
    for key in ("partition", "cpu_partition"):
        value = getattr(config, key)
        if value and partitions and value not in partitions:
            out.append(
                f"{config.source}: {key} '{value}' is not a partition of this cluster (sinfo lists: "
                f"{', '.join(partitions)}); rerun kit setup with --force --{key}=NAME, or edit the file."
            )
    if config.account:
        accounts = _ask_cluster(config, 'sacctmgr -nP show associations where user="$(id -un)" format=account')
        if accounts and config.account.lower() not in [a.lower() for a in accounts]:
            out.append(
                f"{config.source}: account '{config.account}' is not one of your Slurm accounts (sacctmgr lists: "
                f"{', '.join(accounts)}); rerun kit setup with --force --account=NAME, or edit the file."
            )
    return out


def _ask_cluster(config: ClusterConfig, command: str) -> list[str]:
    """The distinct lines `command` prints on the cluster's login node, in order; [] when it cannot be run."""
    if config.ssh_tunnel is not None:
        ssh = ssh_argv(config)
        argv = [ssh[0], "-o", "ConnectTimeout=10", *ssh[1:], command]
    else:
        argv = ["bash", "-c", command]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if proc.returncode != 0:
        return []
    return list(dict.fromkeys(line.strip() for line in proc.stdout.splitlines() if line.strip()))
