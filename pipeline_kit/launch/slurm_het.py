"""Per-component sbatch flags for heterogeneous Slurm jobs. nemo-run writes the first component's partition,
time, --exclusive and extra sbatch arguments into every component; kit rewrites each component's block."""

from __future__ import annotations

import re
import shlex
from types import ModuleType

HET_FLAGS_ATTR = "kit_het_flags"  # set on a het job's first executor: one {sbatch key: value} dict per component
_FLAG = re.compile(r"#SBATCH --([A-Za-z0-9_-]+)")


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
    """Wrap SlurmBatchRequest.materialize once; only requests whose executor carries HET_FLAGS_ATTR change."""
    request_class = run.core.execution.slurm.SlurmBatchRequest
    original = request_class.materialize
    if getattr(original, "_kit_het", False):
        return

    def materialize(self) -> str:
        text = original(self)
        flags = getattr(self.executor, HET_FLAGS_ATTR, None)
        return rewrite_components(text, flags) if flags and self.executor.heterogeneous else text

    materialize._kit_het = True
    request_class.materialize = materialize
