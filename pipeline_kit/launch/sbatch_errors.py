"""sbatch refusals turned into one line that names what to fix: the flag or cluster-config key the refused value
came from, and what the cluster has instead (its partitions, accounts), asked only once sbatch has refused."""

from __future__ import annotations

import re

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.launch.remote import remote_run
from pipeline_kit.pipeline.model import Job


def refusal_reason(stderr: str) -> str:
    """sbatch's own error line (the last line that says error), or its last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return next((line for line in reversed(lines) if "error" in line.lower()), lines[-1] if lines else "no output")


def _values(values) -> str:
    return ", ".join(f"'{v}'" for v in dict.fromkeys(values) if v) or "none"


def _listing(cluster: ClusterConfig, command: str) -> str:
    out = remote_run(cluster, command, check=False).stdout.split()
    return ", ".join(dict.fromkeys(out)) or "unknown"


def what_to_fix(cluster: ClusterConfig, job: Job, reason: str) -> str:
    """The hint for one refusal of `job`'s sbatch: the values it asked for and where they were set."""
    src = cluster.source
    text = reason.lower()
    if "partition" in text:
        asked = _values(g.hardware.partition or cluster.partition for g in job.groups)
        have = _listing(cluster, "sinfo -h -o %R")
        return (
            f"partition {asked} (--partition, or 'partition'/'cpu_partition' in {src}) is not one this cluster "
            f"accepts; its partitions: {have}"
        )
    if "account" in text:
        asked = _values([cluster.account, *(g.hardware.sbatch_kwargs.get("account") for g in job.groups)])
        have = _listing(cluster, "sacctmgr -n -P list account format=account")
        return f"account {asked} ('account' in {src}, or --sbatch_kwargs) is not yours here; accounts: {have}"
    if re.search(r"time limit|--time", text):
        asked = _values(cluster.time_limit(g.hardware.partition, g.hardware.time_min) for g in job.groups)
        return (
            f"time limit {asked} (--time_min, or 'timeouts'/'default_timeout' in {src}) is over the partition's limit"
        )
    if re.search(r"node configuration|gres|generic resource|node count", text):
        shape = "; ".join(f"{g.name}: {g.num_nodes} node(s), {g.num_gpus} GPU(s)/node" for g in job.groups)
        return (
            f"no node offers what the job asks ({shape}); lower --num_gpus/--server_gpus or --num_nodes, or pick "
            "another --partition"
        )
    return f"fix what it names (a partition, account or limit of {src}, or --sbatch_kwargs)"
