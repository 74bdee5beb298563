"""Finds a cluster config by name (--config_dir, the user's config folder, ./cluster_configs, the package's
examples) or by path, and loads it. The user's config folder ($KIT_CONFIG_DIR, else $KIT_HOME/cluster_configs) is
where `kit setup` writes."""

from __future__ import annotations

import os
from pathlib import Path

from pipeline_kit.cluster.config import ClusterConfig, build_cluster_config
from pipeline_kit.errors import UserError, did_you_mean
from pipeline_kit.resources import kit_home, resource_dir
from pipeline_kit.yaml_files import read_yaml

PACKAGE_CONFIGS = resource_dir("cluster_configs")
DEFAULT_CLUSTER = "none"


def user_config_dir() -> Path:
    """The user's cluster configs: $KIT_CONFIG_DIR, else $KIT_HOME/cluster_configs (~/.kit/cluster_configs), outside
    any project's repository, so that a config `kit setup` writes is found from anywhere and never packed."""
    return Path(os.environ.get("KIT_CONFIG_DIR") or kit_home() / "cluster_configs")


def search_dirs(config_dir: str | None) -> list[Path]:
    dirs = [Path(config_dir)] if config_dir else []
    return [*dirs, user_config_dir(), Path("cluster_configs"), PACKAGE_CONFIGS]


def find_cluster_config(cluster: str | None, config_dir: str | None = None) -> Path:
    """The file for `--cluster` (a name or a path to a YAML file)."""
    cluster = cluster or DEFAULT_CLUSTER
    if cluster.endswith((".yaml", ".yml")) or os.sep in cluster:
        path = Path(cluster)
        if not path.is_file():
            raise UserError(f"--cluster {cluster}: no such file; give an existing YAML path or a config name.")
        return path
    if config_dir and not Path(config_dir).is_dir():
        raise UserError(f"--config_dir {config_dir}: no such directory; fix the path.")
    dirs = search_dirs(config_dir)
    for d in dirs:
        for ext in (".yaml", ".yml"):
            candidate = d / f"{cluster}{ext}"
            if candidate.is_file():
                return candidate
    raise UserError(_not_found(cluster, dirs))


def _not_found(cluster: str, dirs: list[Path]) -> str:
    """The error for a config name found nowhere: the folders looked in (absolute, those missing marked) and the
    configs they do hold, with a did-you-mean."""
    tried = [f"{d.absolute()}" + ("" if d.is_dir() else " (no such folder)") for d in dirs]
    names = [p.stem for d in dirs if d.is_dir() for p in sorted(d.iterdir()) if p.suffix in (".yaml", ".yml")]
    names = list(dict.fromkeys(names))
    return (
        f"--cluster {cluster}: no {cluster}.yaml in {', '.join(dict.fromkeys(tried))}; the configs there are "
        f"{', '.join(names) or 'none'}.{did_you_mean(cluster, names)} Pick one, pass --config_dir, or create it "
        f"with `kit setup --cluster={cluster}`."
    )


def load_cluster_config(
    cluster: str | None, config_dir: str | None = None, inspect_only: bool = False
) -> ClusterConfig:
    """The config `--cluster` names; `inspect_only` (status, logs, cancel): see build_cluster_config."""
    path = find_cluster_config(cluster, config_dir)
    raw = read_yaml(path)
    if raw is None:
        raise UserError(f"{path}: the file is empty; it needs at least 'executor' and 'job_dir'.")
    return build_cluster_config(raw, str(path), inspect_only=inspect_only)
