"""What a submitted experiment's generation jobs measured (pipeline_kit.measurements' JobFigures), read back per
job and array element, over ssh when the cluster is remote."""

from __future__ import annotations

import json
import shlex

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.launch.records import ExperimentRecord
from pipeline_kit.launch.remote import remote_run
from pipeline_kit.measurements import MEASUREMENTS_DIR, JobFigures, experiment_figures


def job_figures(cluster: ClusterConfig, record: ExperimentRecord) -> dict[str, list[JobFigures]]:
    """Per job, what its generation clients measured (pipeline_kit.measurements), by array element; read over ssh
    when the cluster is remote. A file that does not parse is left out (figures are advice)."""
    if cluster.ssh_tunnel:
        folder = shlex.quote(f"{record.log_dir}/{MEASUREMENTS_DIR}")
        cat = f'for f in {folder}/*.json; do [ -f "$f" ] && cat "$f" && printf \'\\036\'; done'
        found = []
        for text in remote_run(cluster, cat, check=False).stdout.split("\036"):  # JSON escapes control characters
            try:
                found.append(JobFigures.from_dict(json.loads(text)))
            except (ValueError, KeyError, TypeError):
                continue
    else:
        found = experiment_figures(record.log_dir)
    out: dict[str, list[JobFigures]] = {job.name: [] for job in record.jobs}
    for figures in sorted(found, key=lambda f: [int(p) for p in f.element.split(".") if p.isdigit()]):
        if figures.job in out:
            out[figures.job].append(figures)
    return out
