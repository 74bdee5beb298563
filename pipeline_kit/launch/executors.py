"""nemo-run executors for the three cluster kinds, built from a cluster config and a group's hardware."""

from __future__ import annotations

import shlex
import types
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.errors import UserError
from pipeline_kit.launch.images import resolve_image, slurm_image
from pipeline_kit.launch.mounts import container_mounts, slurm_setup_lines
from pipeline_kit.launch.sbatch_script import HET_FLAGS_ATTR
from pipeline_kit.pipeline.model import CommandGroup, Job
from pipeline_kit.pipeline.render import HET_HOST_VAR, check_lines


def host_has_gpus() -> bool:
    return Path("/dev/nvidia0").exists()


def docker_executor(
    run: ModuleType, cluster: ClusterConfig, job: Job, code_dir: str, log_dirs: list[str], mount_paths: list[str]
):
    """`log_dirs`: this run's log folder, then those of experiments it runs after (their .rc files are read)."""
    # a group that names no container runs in the one its job's other groups name
    keys = list(dict.fromkeys(g.container for g in job.groups if g.container is not None)) or [None]
    if len(keys) > 1:
        shown = ", ".join(f"{g.name}: {g.container}" for g in job.groups if g.container is not None)
        raise UserError(
            f"job '{job.name}': its groups name different containers ({shown}), but on executor 'local' (Docker) "
            "a job runs in one container; give every group the same container (e.g. --container and "
            "--server_container), or run it on Slurm."
        )
    key = keys[0]
    if key is None:
        raise UserError(
            f"job '{job.name}' has no container; executor 'local' (Docker) needs --container or a key in "
            f"{cluster.source} 'containers'."
        )
    image = resolve_image(cluster, key)
    gpus = max(g.num_gpus for g in job.groups)
    if gpus and not host_has_gpus():
        raise UserError(
            f"job '{job.name}' asks for {gpus} GPU(s), but this Docker host has no /dev/nvidia*; run it on a GPU "
            "host, or ask for 0 GPUs (--num_gpus=0 / --server_gpus=0) to run on the CPU."
        )
    volumes = container_mounts(cluster, mount_paths, code_dir, log_dirs)
    # a group that builds namespaces (the sandbox) cannot run under Docker's default seccomp and AppArmor profiles
    unconfined = any(g.needs_namespaces for g in job.groups)
    security = {"security_opt": ["seccomp=unconfined", "apparmor=unconfined"]} if unconfined else {}
    return run.DockerExecutor(
        container_image=image,
        additional_kwargs=security,
        num_gpus=gpus or None,
        env_vars=dict(cluster.env_vars),
        volumes=volumes,
        network="host",
        packager=run.Packager(),
    )


@dataclass(frozen=True)
class SlurmSpec:
    """What one group's Slurm executor is made of: nemo-run's SlurmExecutor takes `fields` as its keyword arguments
    (plus a tunnel and a packager), and launch/sbatch_render.py renders the same sbatch script from them without
    importing nemo-run."""

    fields: dict
    ssh_tunnel: object | None  # the cluster's SshTunnelConfig, or None: sbatch runs on this machine


def slurm_spec(
    cluster: ClusterConfig,
    job: Job,
    group: CommandGroup,
    heterogeneous: bool,
    code_dir: str,
    log_dir: str,
    mount_paths: list[str],
    external_deps: list[str],
    array_size: int | None,
    release_locks: str | None = None,
) -> SlurmSpec:
    """`array_size`: the elements of this Slurm array (a part of the job's units when it was split);
    `release_locks`: the command that frees the run's output locks when its last job ends (output_lock)."""
    flags = component_flags(cluster, group)
    extra = {k: v for k, v in flags.items() if k not in ("partition", "time")}
    array = None
    if array_size:
        array = f"0-{array_size - 1}" + (f"%{job.array_parallelism}" if job.array_parallelism else "")
    container = slurm_image(cluster, group.container) if group.container else None
    het_hosts = " ".join(f"{HET_HOST_VAR}_{i}" for i in range(len(job.groups)))
    # runs in the batch shell before any srun: pyxis refuses a mount whose source does not exist yet
    setup = [f"export {het_hosts}"] if heterogeneous else []
    if any(g.hardware.sbatch_kwargs.get("no_requeue") for g in job.groups):
        # nemo-run submits with `sbatch --requeue`, which overrides the script's #SBATCH --no-requeue: the job
        # clears its own flag as it starts, so a node failure ends it (NODE_FAIL) instead of queueing it again
        setup.append('scontrol update JobId="$SLURM_JOB_ID" Requeue=0 || echo "kit: could not set Requeue=0" >&2')
    in_container = any(g.container for g in job.groups)
    setup.append(slurm_setup_lines(cluster, mount_paths, log_dir, job.name, in_container))
    # a generation's input checks where kit could not see its paths: on the batch host, before any server starts
    job_log = shlex.quote(f"{log_dir}/{job.name}")
    in_code = f"cd {shlex.quote(code_dir)} && PYTHONPATH={shlex.quote(code_dir)}${{PYTHONPATH:+:$PYTHONPATH}}"
    refuse = f'mkdir -p {job_log}; echo "$kit_why" | tee -a {job_log}/kit.log >&2; exit 2'
    setup += check_lines([f"{in_code} {check}" for check in job.checks], refuse)
    if release_locks:  # as the batch script ends, whatever its outcome; a killed one leaves the lock stale
        setup.append(f"trap {shlex.quote(f'command -v python3 >/dev/null && {release_locks}')} EXIT")
    fields = dict(
        account=cluster.account or "",
        partition=flags.get("partition"),
        time=flags.get("time"),  # None: no --time, so the partition's default limit applies
        nodes=group.num_nodes,
        ntasks_per_node=group.num_tasks,
        # a het component without GPUs must say 0: nemo-run writes None as `--gpus-per-node=None`, which sbatch rejects
        gpus_per_node=group.num_gpus or (0 if heterogeneous else None),
        array=array,
        additional_parameters=extra,
        container_image=container,
        srun_args=[f"--mpi={group.mpi}"] if group.mpi else None,
        container_mounts=container_mounts(cluster, mount_paths, code_dir, [log_dir]) if container else [],
        # nemo-run writes `export KEY=value` unquoted: quoted here, a value keeps its spaces (as on Docker)
        env_vars={k: shlex.quote(v) for k, v in cluster.env_vars.items()},
        job_name_prefix=cluster.job_name_prefix,
        dependency_type=job.dependency(cluster.dependency_type, cluster.executor),
        heterogeneous=heterogeneous,
        # nemo-run sets het_group_host_N in the batch shell but does not export it to srun steps.
        setup_lines="\n".join(setup),
        wait_time_for_group_job=0,
        poll_estimated_start_time=False,  # nemo-run would poll `squeue --start` per job in a thread; kit never reads it
        monitor_group_job_wait_time=1,
        # nemo-run writes --dependency only when this list is non-empty; it is replaced by in-pipeline handles.
        dependencies=[f"slurm_tunnel://nemo_run/{i}" for i in external_deps],
    )
    return SlurmSpec(fields, cluster.ssh_tunnel)


def slurm_executor(run: ModuleType, spec: SlurmSpec):
    """nemo-run's SlurmExecutor for one group, reaching sbatch over the cluster's SSH tunnel or on this machine."""
    t = spec.ssh_tunnel
    tunnel = (
        run.SSHTunnel(host=t.host, user=t.user, port=t.port, identity=t.identity, job_dir=t.job_dir)
        if t
        else run.LocalTunnel(job_dir="")
    )
    return run.SlurmExecutor(**spec.fields, tunnel=tunnel, packager=run.Packager())


def component_flags(cluster: ClusterConfig, group: CommandGroup) -> dict:
    """The sbatch flags that belong to one group (a het component): partition, time, --exclusive, extra args.
    With no --time_min and no timeout in the cluster config, no --time is written: the partition's default applies."""
    hw = group.hardware
    partition = hw.partition or cluster.partition
    flags = {"partition": partition} if partition else {}
    time_limit = cluster.time_limit(partition, hw.time_min)
    if time_limit:
        flags["time"] = time_limit
    flags["kill-on-invalid-dep"] = "yes"  # an afterok dependent of a failed job is cancelled instead of hanging
    if hw.exclusive:
        flags["exclusive"] = True
    return {**flags, **hw.sbatch_kwargs}


def adjust_slurm_task(executor, job: Job, cluster: ClusterConfig, external_deps: list[str]) -> None:
    """Fixes applied to the executor nemo-run keeps for a task (exp.add clones executors, dropping changes made
    before it): per-component flags for a het job, and dependencies on other experiments' jobs."""
    if len(job.groups) > 1:
        setattr(executor, HET_FLAGS_ATTR, [component_flags(cluster, g) for g in job.groups])
    if external_deps:
        # nemo-run overwrites `dependencies` with in-pipeline handles at launch, dropping other experiments' jobs;
        # this instance's parse_deps adds them back (nemo-run keys schedulers by exact class, so no subclass).
        executor.parse_deps = types.MethodType(_deps_plus(list(external_deps)), executor)


def dependency_id(handle: str) -> str:
    """The Slurm job id in a nemo-run dependency handle (slurm_tunnel://nemo_run/<id>)."""
    return handle.partition("://")[2].split("/")[1]


def _deps_plus(external: list[str]):
    def parse_deps(self) -> list[str]:
        own = [dependency_id(d) for d in self.dependencies]
        return list(dict.fromkeys([*own, *external]))

    return parse_deps
