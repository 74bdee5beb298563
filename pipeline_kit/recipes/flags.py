"""The flag helpers every recipe shares: a '++key=value ...' flag split into overrides, a required flag, and a path
flag as the jobs will see it."""

from __future__ import annotations

import os

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.errors import UserError
from pipeline_kit.overrides import split_overrides


def split_args(flag: str, text: str) -> tuple[str, ...]:
    """A recipe's '++key=value ...' flag as overrides (pipeline_kit.overrides, the one grammar)."""
    return split_overrides(flag, text)


def required(flag: str, value: str | None, why: str) -> str:
    if not value:
        raise UserError(f"{flag} is required {why}.")
    return value


def recipe_path(cluster: ClusterConfig, flag: str, path: str) -> str:
    """On none, this machine's path made absolute; elsewhere it must already be absolute where the jobs run."""
    if cluster.executor == "none":
        return os.path.abspath(path)
    if not os.path.isabs(path):
        raise UserError(f"{flag}={path} is relative; on executor '{cluster.executor}' give the absolute path.")
    return path
