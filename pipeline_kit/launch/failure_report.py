"""Why a job failed, as kit found it in its logs (job_logs.py): its kit.log, else its container's start-up lines,
else the end of its batch output."""

from __future__ import annotations

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.launch.job_logs import container_startup_lines, scheduler_outputs, tail
from pipeline_kit.launch.records import ExperimentRecord


def failure_report(cluster: ClusterConfig, record: ExperimentRecord, job: str, lines: int = 20) -> str:
    """Why a job failed, as kit found it: its kit.log (the failing command or service, its exit code and its
    log's first error lines), else the container start-up lines, else the end of its batch output."""
    text = tail(cluster, f"{record.log_dir}/{job}/kit.log", lines)
    if not text:
        text = "\n".join(container_startup_lines(cluster, record, lines)[job])
    if not text:
        outputs = scheduler_outputs(cluster, record)[job]
        text = "".join(tail(cluster, path, 5) for path in outputs[:2])
    return text if not text or text.endswith("\n") else text + "\n"
