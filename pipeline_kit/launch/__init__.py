"""Launching through nemo-run: code packaging, executors for none/local/slurm, experiment records, and the handle
on a submitted experiment (status, wait, logs, cancel). nemo-run is imported only when something is rendered or
submitted. The public surface: run_pipeline, Experiment and its errors (SubmissionRefused, JobFailed)."""

from pipeline_kit.errors import JobFailed, SubmissionRefused
from pipeline_kit.launch.experiment import Experiment, JobFailure, JobLogs
from pipeline_kit.launch.job_states import JobStatus
from pipeline_kit.launch.run import run_pipeline

__all__ = ["Experiment", "JobFailed", "JobFailure", "JobLogs", "JobStatus", "SubmissionRefused", "run_pipeline"]
