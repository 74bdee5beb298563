"""Cluster configs: the YAML file that says where and how jobs run (executor, job_dir, containers, Slurm keys).

`load_cluster_config(name_or_path, config_dir)` finds, expands and validates one; `ClusterConfig` is the result.
"""

from pipeline_kit.cluster.config import ClusterConfig, SshTunnelConfig
from pipeline_kit.cluster.lookup import find_cluster_config, load_cluster_config

__all__ = ["ClusterConfig", "SshTunnelConfig", "find_cluster_config", "load_cluster_config"]
