"""A Slurm task's sbatch script as nemo-run writes it at submission, rendered from the same SlurmSpecs through
nemo-run's own template file (read from the installed package, which is not imported): what a dry run prints,
without nemo-run's import. tests/test_sbatch_render.py holds it byte-identical to nemo-run's own rendering."""

from __future__ import annotations

import importlib.util
import os
import shlex
import time
from functools import cache
from pathlib import Path

from pipeline_kit.launch.executors import SlurmSpec, dependency_id
from pipeline_kit.launch.sbatch_script import NO_ACCOUNT, rewrite_components, sbatch_flag
from pipeline_kit.resources import kit_home

SBATCH_COMMAND = "sbatch --requeue --parsable"  # how nemo-run's Slurm scheduler submits every script
# the SlurmExecutor fields kit sets that nemo-run writes as #SBATCH lines (None ones are left out), and the one
# default it writes besides them
FLAG_FIELDS = ("account", "partition", "time", "nodes", "ntasks_per_node", "gpus_per_node", "array")
DEFAULT_FLAGS = {"open_mode": "append"}
RUNDIR = "/nemo_run"  # where nemo-run mounts a task's folder in its container
HEAD_NODE_IP_VAR = "head_node_ip"
HET_GROUP_HOST_VAR = "het_group_host"
RESTARTS = "${SLURM_RESTART_COUNT:-0}"


def experiment_id(title: str) -> str:
    """A new nemo-run experiment id, spelled as nemo-run spells it."""
    return f"{title}_{time.time_ns()}"


def render_task(specs: list[SlurmSpec], task_name: str, experiment_dir: str, het_flags: list[dict] | None) -> str:
    """The sbatch script of one task: one spec per group (several: a het job), with kit's fixes applied
    (launch/sbatch_script.py: plain job names without a prefix, no empty account, per-component het flags)."""
    main = specs[0].fields
    het = main["heterogeneous"]
    names = [f"{task_name}-{i}" for i in range(len(specs))] if het else [task_name]
    folder = os.path.join(experiment_dir, task_name)
    prefix = main["job_name_prefix"]
    job_name = f"{prefix}{names[0]}" if prefix else names[0]
    parameters = {k: main[k] for k in FLAG_FIELDS if main[k] is not None} | DEFAULT_FLAGS | {"job_name": job_name}
    stdout = f"{folder}/sbatch_{job_name}_%j.out"
    parameters["output"] = stdout.replace("%j", "%A_%a") if main["array"] is not None else stdout
    parameters.update(main["additional_parameters"])
    flags = _het_flags(specs, names, parameters) if het else [sbatch_flag(k, parameters[k]) for k in sorted(parameters)]
    if main["dependencies"]:
        ids = [dependency_id(d) for d in main["dependencies"]]
        flags.append(sbatch_flag("dependency", f"{main['dependency_type']}:{':'.join(dict.fromkeys(ids))}"))
    srun, group_env = [], []
    for i, spec in enumerate(specs):
        group = spec.fields
        name = f"{prefix}{names[i]}" if prefix else names[i]
        srun_out = f"{folder}/log-{name}_%j_{RESTARTS}.out"
        args = ["srun", *([f"--het-group={i}"] if het else []), "--output"]
        args = [shlex.quote(a) for a in args] + [srun_out]
        args += [shlex.quote(a) for a in _container_flags(group, folder)]
        args += [shlex.quote(a) for a in ["--wait=60", "--kill-on-bad-exit=1", *(group["srun_args"] or [])]]
        command = f"{' '.join(args)} bash {RUNDIR}/scripts/{names[i]}.sh"
        if het:
            group_env.append([f"export {k.upper()}={v}" for k, v in group["env_vars"].items()])
            command += f" & pids[{i}]=$!"
            if i != len(specs) - 1:
                command += f"\n\nsleep {group['wait_time_for_group_job']}\n"
        srun.append(command)
    text = _template().render(
        sbatch_command=SBATCH_COMMAND,
        sbatch_flags=flags,
        max_retries=0,
        env_vars=[f"export {k.upper()}={v}" for k, v in main["env_vars"].items()],
        head_node_ip_var=HEAD_NODE_IP_VAR,
        setup_lines=main["setup_lines"],
        memory_measure=None,
        srun_commands=srun,
        group_env_vars=group_env,
        heterogeneous=het,
        run_as_group=het,
        monitor_group_job=het,
        monitor_group_job_wait_time=main["monitor_group_job_wait_time"],
        het_group_host_var=HET_GROUP_HOST_VAR,
        ft_enabled=False,
    )
    if not any(s.fields["container_image"] for s in specs):
        text = text.replace(RUNDIR, folder)
    if not main["account"]:
        text = NO_ACCOUNT.sub("", text)
    return rewrite_components(text, het_flags) if het and het_flags else text


def _het_flags(specs: list[SlurmSpec], names: list[str], parameters: dict) -> list[str]:
    """Each component's block: the first component's flags with its own nodes, tasks, GPUs, name and log."""
    flags: list[str] = []
    base_name = parameters["job_name"][:-2] if parameters["job_name"].endswith("-0") else parameters["job_name"]
    for i, spec in enumerate(specs):
        own = dict(parameters, output=parameters["output"].replace(names[0], names[i]), job_name=f"{base_name}-{i}")
        own.update({k: spec.fields[k] for k in ("nodes", "ntasks_per_node", "gpus_per_node")})
        flags += [sbatch_flag(k, own[k]) for k in sorted(parameters)]
        if i != len(specs) - 1:
            flags.append("#SBATCH hetjob")
    return flags


def _container_flags(group: dict, folder: str) -> list[str]:
    if group["container_image"] is None:
        return ["--chdir", f"{folder}/code"]
    mounts = [*group["container_mounts"], f"{folder}:{RUNDIR}"]
    return ["--container-image", group["container_image"], "--container-mounts", ",".join(mounts)] + [
        "--container-workdir",
        f"{RUNDIR}/code",
    ]


@cache
def _template():
    """nemo-run's slurm.sh.j2 from the installed package, in a Jinja environment like the one nemo-run renders it
    in (its loader finds the macros the template imports); compiled once per install, under $KIT_HOME/cache."""
    import jinja2

    spec = importlib.util.find_spec("nemo_run")
    templates = Path(next(iter(spec.submodule_search_locations))) / "core" / "execution" / "templates"
    cache_dir = kit_home() / "cache" / "jinja"
    cache_dir.mkdir(parents=True, exist_ok=True)
    loader = jinja2.FileSystemLoader(templates, encoding="utf-8")
    env = jinja2.Environment(loader=loader, bytecode_cache=jinja2.FileSystemBytecodeCache(str(cache_dir)))
    return env.get_template("slurm.sh.j2")
