"""The one-job pipelines of `kit start_server` and `kit start_sandbox`: a model server or the sandbox as a
service job, kept in the foreground by the CLI."""

from __future__ import annotations

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.components.sandbox import SandboxSpec
from pipeline_kit.components.server import server_container, server_group
from pipeline_kit.errors import UserError
from pipeline_kit.jobs.options import JobOptions, JobPlan, chain
from pipeline_kit.pipeline.model import Job
from pipeline_kit.servers.base import ServerSpec


def server_jobs(
    cluster: ClusterConfig, spec: ServerSpec, port: int, options: JobOptions, container: str | None = None
) -> list[Job]:
    """A server on `port`, in `container` (default: the cluster's container named after the server type)."""

    spec.validate()
    if not spec.starts_server:
        raise UserError(f"--server_type={spec.server_type} with --server_address: there is nothing to start.")
    group = server_group(spec, cluster, server_container(spec, cluster, container), port)
    return chain(options, lambda copy: [JobPlan("", [group])])


def sandbox_jobs(cluster: ClusterConfig, spec: SandboxSpec, port: int, options: JobOptions) -> list[Job]:
    return chain(options, lambda copy: [JobPlan("", [spec.group(cluster, port)])])
