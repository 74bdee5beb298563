"""Launching through nemo-run: code packaging, executors for none/local/slurm, experiment records, and the
status/logs/cancel readers. nemo-run is imported only here, and only when something is rendered or submitted."""

from pipeline_kit.launch.result import RunResult
from pipeline_kit.launch.run import run_pipeline

__all__ = ["RunResult", "run_pipeline"]
