"""The check of a kit-side command's interpreter where its job runs (PythonCheck): `$VAR`, else the cluster config's
`python` key (kit_python) must find the modules the command imports; else one line naming that key."""

from __future__ import annotations

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.pipeline.model import PythonCheck


def kit_python_check(
    cluster: ClusterConfig, var: str, modules: tuple[str, ...], what: str, install: str
) -> PythonCheck:
    """`install`: what the env needs, e.g. "pipeline-kit[generate]"."""
    return PythonCheck(f'"${{{var}:-{cluster.kit_python}}}"', modules, what, cluster.python_fix("python", var, install))
