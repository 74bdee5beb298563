"""Imports nemo-run the way it must be imported (NEMORUN_HOME set first) and works around its known gaps."""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from pipeline_kit.cluster import ClusterConfig, SshTunnelConfig
from pipeline_kit.errors import UserError
from pipeline_kit.launch import sbatch_script


def import_nemo_run(cluster: ClusterConfig) -> ModuleType:
    """nemo-run reads NEMORUN_HOME once at import; we keep its experiments under the cluster's job_dir."""
    home = cluster.job_dir
    if "nemo_run" in sys.modules and os.environ.get("NEMORUN_HOME") != home:
        # nemo-run computed its job maps from the first NEMORUN_HOME; another one would silently mix them.
        raise RuntimeError(f"nemo-run already imported with NEMORUN_HOME={os.environ.get('NEMORUN_HOME')}, not {home}")
    os.environ["NEMORUN_HOME"] = home
    Path(home).mkdir(parents=True, exist_ok=True)
    if cluster.ssh_tunnel is not None:
        _prepare_ssh(cluster.ssh_tunnel, home)
    _skip_lepton_sdk()
    with _modules_blocked(NOT_FOR_NEMO_RUN):
        nemo_run = _nemo_run_without_its_cli()
    sbatch_script.install(nemo_run)
    return nemo_run


LEPTON_MODULE = "nemo_run.core.execution.lepton"

# What kit takes from nemo-run (`run.X` in launch/): {attribute of the package: the module that defines it}
USED = {
    "__version__": "nemo_run.package_info",
    "Script": "nemo_run.config",
    "DockerExecutor": "nemo_run.core.execution.docker",
    "SlurmExecutor": "nemo_run.core.execution.slurm",
    "Packager": "nemo_run.core.packaging",
    "LocalTunnel": "nemo_run.core.tunnel.client",
    "SSHTunnel": "nemo_run.core.tunnel.client",
    "Experiment": "nemo_run.run.experiment",
}


def _nemo_run_without_its_cli() -> ModuleType:
    """The nemo_run package with only the modules kit uses. Its __init__ also imports its own CLI (typer's rich
    help, omegaconf, catalogue) and API helpers: 1.35 s of CPU on 2 cores, against 1.03 s for the modules below (10
    imports each; perf/README.md, "CPU per kit command"). The package object is made from its spec without running
    its __init__, then given the names kit uses; nemo-run's modules import their own dependencies by their full
    names, and the one that does `import nemo_run as run` (run/experiment.py) only reads `run.__version__`. An
    imported nemo_run (a user's code in the same process, a test) is used as it is."""
    if "nemo_run" in sys.modules:
        return sys.modules["nemo_run"]
    spec = importlib.util.find_spec("nemo_run")
    if spec is None:
        raise UserError(
            "nemo-run is not installed in this Python; install kit with its dependencies (pip install -e .)."
        )
    package = importlib.util.module_from_spec(spec)
    sys.modules["nemo_run"] = package
    try:
        for name, module in USED.items():
            setattr(package, name, getattr(importlib.import_module(module), name))
    except BaseException:
        for name in [m for m in sys.modules if m == "nemo_run" or m.startswith("nemo_run.")]:
            del sys.modules[name]
        raise
    return package


# Libraries that nemo-run's import pulls in only because they are installed, and that kit never needs to render or
# submit a job. nemo_run/core/serialization/yaml.py tries `import torch` (~1.7 s on 2 cores) to register a YAML
# representer for torch.dtype, which kit's configs never hold; its Kubeflow and SkyPilot executors try `kubernetes`
# (~1 s) and `sky`, executors kit never uses. transformers, vllm and litellm are listed so that no dependency of
# nemo-run's can start importing them unnoticed (tests/test_launch_imports.py checks that none is imported).
NOT_FOR_NEMO_RUN = ("torch", "transformers", "vllm", "litellm", "kubernetes", "sky")


@contextmanager
def _modules_blocked(names: tuple[str, ...]) -> Iterator[None]:
    """While inside, `import NAME` raises ModuleNotFoundError for each name not imported yet (None in sys.modules);
    after, only the placeholders added here are removed, so a later `import torch` works as usual. A module that
    is already imported is left alone: then nemo-run sees it, as it would without kit."""
    added = [name for name in names if name not in sys.modules]
    for name in added:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        for name in added:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


def _skip_lepton_sdk() -> None:
    # nemo-run imports the Lepton cloud SDK eagerly (1.2 s of its 2.7 s import) only to name LeptonExecutor in
    # isinstance tuples; kit never uses Lepton, so a placeholder class stands in for that one module.
    if "nemo_run" in sys.modules or LEPTON_MODULE in sys.modules:
        return
    placeholder = ModuleType(LEPTON_MODULE, "kit's stand-in: kit does not launch on Lepton")

    class LeptonExecutor:
        def __init__(self, *args, **kwargs):
            raise RuntimeError("kit does not support nemo-run's LeptonExecutor")

    LeptonExecutor.__module__ = LEPTON_MODULE
    placeholder.LeptonExecutor = LeptonExecutor
    sys.modules[LEPTON_MODULE] = placeholder


def _prepare_ssh(tunnel: SshTunnelConfig, home: str) -> None:
    # nemo-run shells out to rsync and a bare `ssh` with no way to pass options: check rsync, and put an ssh
    # wrapper first on PATH that never prompts (BatchMode) and records new host keys in kit's own file.
    if shutil.which("rsync") is None:
        raise UserError("the SSH tunnel needs rsync on this machine; install it (apt-get install rsync).")
    real_ssh = shutil.which("ssh")
    if real_ssh is None:
        raise UserError(
            "the SSH tunnel needs an ssh client on this machine; install it (apt-get install openssh-client)."
        )
    bin_dir = Path(home) / ".kit-bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    wrapper = bin_dir / "ssh"
    if Path(real_ssh).resolve() == wrapper.resolve():
        return
    extra = os.environ.get("KIT_SSH_OPTIONS", "")
    text = (
        "#!/bin/sh\n# written by kit: nemo-run cannot pass ssh options\n"
        f"exec {real_ssh} -o BatchMode=yes -o StrictHostKeyChecking=accept-new "
        f'-o UserKnownHostsFile="$HOME/.ssh/known_hosts" {extra} "$@"\n'
    )
    if not wrapper.exists() or wrapper.read_text() != text:
        tmp = wrapper.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.chmod(tmp.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        tmp.replace(wrapper)
    os.environ["PATH"] = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
