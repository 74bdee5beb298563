"""The server as a component of the declarative layer: its own CommandGroup (a het component on Slurm, a process
on none), a service that the job stops once its clients end. Its log is `$KIT_LOG_DIR/<job>/server.log`."""

from __future__ import annotations

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.pipeline.model import AUTO_PORT, Command, CommandGroup, HardwareConfig
from pipeline_kit.servers.base import ServerSpec, get_server_type

SERVER_NAME = "server"
# where the client finds the server's log (same job folder; on Slurm every component shares the log dir)
SERVER_LOG = "$KIT_LOG_DIR/${KIT_LOG_PREFIX:-}" + SERVER_NAME + ".log"


def server_container(spec: ServerSpec, cluster: ClusterConfig, explicit: str | None) -> str | None:
    """--server_container, else the cluster's container named after the server type (vllm, sglang, ...), if any."""
    if explicit:
        cluster.container(explicit)  # fails with the known keys when it is missing
        return explicit
    return spec.server_type if spec.server_type in cluster.containers else None


def server_group(spec: ServerSpec, container: str | None, port: int | str = AUTO_PORT) -> CommandGroup:
    command = Command(
        get_server_type(spec.server_type).command(spec),
        name=SERVER_NAME,
        container=container,
        num_gpus=spec.gpus,
        num_nodes=spec.nodes,
        num_tasks=1,  # one launcher per node; multi-node types spread the model themselves (Ray, dist-init)
        port=port,
        service=True,
    )
    return CommandGroup([command], hardware=HardwareConfig(), name=SERVER_NAME)
