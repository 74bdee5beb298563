"""The checks at submission of what a job would only find out when it starts: a generation's input lines and output
folder, a training run's output folder and the settings of the checkpoints already in it. Each runs the in-job
check itself (pipeline_kit.inference.input_check, pipeline_kit.training.checkpoints) where kit sees the path; where
it cannot (a cluster reached over SSH), the job runs the same check before its server or trainer starts."""

from __future__ import annotations

import os
import shlex

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.components.client import CLIENT_PYTHON_VAR
from pipeline_kit.inference.config import GenerateConfig
from pipeline_kit.inference.input_check import check_input_file, check_output_dir
from pipeline_kit.inference.prompts import load_prompt_config
from pipeline_kit.overrides import config_value, take_override
from pipeline_kit.training.checkpoints import SETTINGS, check_settings, run_settings
from pipeline_kit.training.trl_backend import TRAIN_PYTHON_VAR


def sees(cluster: ClusterConfig, path: str) -> bool:
    """Whether a job's path is this machine's: on none, and where it exists here on a cluster kit reaches without
    SSH (Docker with the path mounted at the same place, Slurm from its login node)."""
    return cluster.executor == "none" or (cluster.ssh_tunnel is None and os.path.exists(path))


def here(cluster: ClusterConfig, path: str) -> str | None:
    """Where this machine sees a job's file: the path itself where `sees` says so, else on Docker the host side of
    the cluster config's mount that holds it (the job sees /data/in.jsonl of a mount /home/me/data:/data as
    /home/me/data/in.jsonl here); None where kit cannot see it."""
    if sees(cluster, path):
        return path
    if cluster.executor != "local":
        return None
    for mount in cluster.mounts:
        source, target = mount.split(":")[:2]
        inside = os.path.relpath(os.path.normpath(path), os.path.normpath(target))
        if inside != ".." and not inside.startswith("../") and os.path.exists(os.path.join(source, inside)):
            return os.path.normpath(os.path.join(source, inside))
    return None


def sees_output(cluster: ClusterConfig, folder: str) -> bool:
    """Whether this user's permissions on an output folder are the job's: on none, and on Slurm from its login node
    where the folder (or the one above it) exists here. Not on Docker, whose jobs run as the image's user."""
    if cluster.executor == "none":
        return True
    nearby = os.path.exists(folder) or os.path.isdir(os.path.dirname(os.path.normpath(folder)))
    return cluster.executor == "slurm" and cluster.ssh_tunnel is None and nearby


def flag_value(overrides: tuple[str, ...], key: str, default: str) -> str:
    value, _ = take_override(overrides, key)
    return default if value is None else value


def check_generation_inputs(
    cluster: ClusterConfig, task: type, spec_input: str, spec_output: str, input_path: str, output_dir: str, overrides
) -> None:
    """A generation's input file (every line, against the fields of its prompt config; none is an error unless
    ++allow_empty_input) and its output folder, named as the user wrote them (`spec_*`). Returns whether both were
    checked here (else the job checks them before its server starts: `job_check`)."""
    checked = task.input_key != "input_file"  # GenSelect's folder of runs: its own checks
    local = here(cluster, input_path) if task.input_key == "input_file" else None
    if local is not None and os.path.isfile(local):
        checked = True
        fields, name = set(), None
        if task.prompt_key is not None:
            name = flag_value(overrides, task.prompt_key, str(config_value(GenerateConfig(), task.prompt_key)))
            fields = load_prompt_config(name).fields()
        allow_empty = flag_value(overrides, "allow_empty_input", "false").lower() == "true"
        check_input_file(local, fields, name, allow_empty, shown=spec_input)
    if not sees_output(cluster, output_dir):
        return False
    check_output_dir(output_dir, shown=spec_output)
    return checked


def job_check(python: str, overrides: tuple[str, ...]) -> str:
    """The shell command of a job that checks a generation's input and output folder before its server starts,
    with the generation script's own overrides (Job.checks)."""
    args = " ".join(shlex.quote(a) for a in overrides)
    return f'"${{{CLIENT_PYTHON_VAR}:-{python}}}" -m pipeline_kit.inference.input_check {args}'


def check_training_output(cluster: ClusterConfig, cfg) -> bool:
    """A TRL run's output folder: writable, and when it holds an earlier run's checkpoints, the same settings (the
    trainer refuses others when it starts; this says it before the job waits in the queue). Returns whether the
    folder and the training data were checked here (else the job checks them first: `training_check`)."""
    output = cfg.output_dir
    seen = sees_output(cluster, output) and sees(cluster, cfg.training_data) and sees(cluster, cfg.model)
    if sees_output(cluster, output):
        check_output_dir(output)
    settings = os.path.join(output, SETTINGS)
    if cfg.backend == "trl" and sees(cluster, settings) and os.path.isfile(settings):
        if os.path.isfile(cfg.training_data):
            check_settings(output, run_settings(cfg), write=False)
    return seen


def training_check(python: str, overrides: tuple[str, ...]) -> str:
    """The shell command of a TRL training job that checks its inputs before the trainer starts (Job.checks)."""
    args = " ".join(shlex.quote(a) for a in overrides)
    return f'"${{{TRAIN_PYTHON_VAR}:-{python}}}" -m pipeline_kit.training.precheck {args}'
