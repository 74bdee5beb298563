"""Fixes to the sbatch script nemo-run writes. Per-component flags for heterogeneous Slurm jobs: nemo-run writes the
first component's partition, time, --exclusive and extra sbatch arguments into every component; kit rewrites each
component's block. Job names and the account of a cluster that sets no job_name_prefix or account."""

from __future__ import annotations

import re
import shlex
from types import ModuleType

HET_FLAGS_ATTR = "kit_het_flags"  # set on a het job's first executor: one {sbatch key: value} dict per component
_FLAG = re.compile(r"#SBATCH --([A-Za-z0-9_-]+)")
NO_ACCOUNT = re.compile(r"^#SBATCH --account=''\n", re.M)


def sbatch_flag(key: str, value) -> str:
    """One `#SBATCH` line, spelled the way nemo-run spells its own."""
    key = key.replace("_", "-")
    return f"#SBATCH --{key}" if value is True else f"#SBATCH --{key}={shlex.quote(str(value))}"


def rewrite_components(script: str, flags: list[dict]) -> str:
    """Replace the managed keys in each `#SBATCH hetjob`-separated block with that component's own values."""
    managed = {k.replace("_", "-") for f in flags for k in f}
    out: list[str] = []
    component = 0
    started = False
    for line in script.split("\n"):
        m = _FLAG.match(line)
        if m and m.group(1) in managed:
            continue
        if line.startswith("#SBATCH") and not started:
            out += [sbatch_flag(k, v) for k, v in flags[0].items()]
            started = True
        out.append(line)
        if line.strip() == "#SBATCH hetjob":
            component += 1
            out += [sbatch_flag(k, v) for k, v in flags[component].items()]
    return "\n".join(out)


def install(run: ModuleType) -> None:
    """Wrap SlurmBatchRequest.materialize once: a het job (its executor carries HET_FLAGS_ATTR) gets each
    component's own flags, and a cluster without job_name_prefix or account gets plain names (see below)."""
    request_class = run.core.execution.slurm.SlurmBatchRequest
    original = request_class.materialize
    if getattr(original, "_kit_het", False):
        return

    def materialize(self) -> str:
        executor = self.executor
        if not executor.job_name_prefix:
            # with no prefix nemo-run names the job (and a het job's components) f"{account}-{account's last
            # _part}.NAME": `-.NAME` without an account; kit names them NAME, as nemo-run does once job_details
            # names them
            details = [executor.job_details] + [r.job_details for r in executor.resource_group or []]
            for d, name in zip(details, [self.jobs[0], *self.jobs], strict=False):  # no resource_group: just one
                d.job_name = d.job_name or name
        text = original(self)
        if not executor.account:
            text = NO_ACCOUNT.sub("", text)  # nemo-run needs a string; an empty one is no account, not --account=''
        flags = getattr(executor, HET_FLAGS_ATTR, None)
        return rewrite_components(text, flags) if flags and executor.heterogeneous else text

    materialize._kit_het = True
    request_class.materialize = materialize
