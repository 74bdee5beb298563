"""Slurm's time-limit formats (sbatch --time), checked before anything is submitted: a bad one is one line that
names where it came from, not sbatch's "Invalid --time specification" after the code was packed."""

from __future__ import annotations

import re

from pipeline_kit.errors import UserError

# minutes, minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes, days-hours:minutes:seconds
SLURM_TIME = re.compile(r"^\d+(:\d{1,2}){0,2}$|^\d+-\d{1,2}(:\d{1,2}){0,2}$")


def check_slurm_time(value: str, where: str) -> str:
    """`where` names the flag or config key, e.g. "--time_min" or "cluster.yaml: key 'default_timeout'"."""
    if not SLURM_TIME.match(str(value)):
        raise UserError(
            f"{where} is '{value}', not a Slurm time; write minutes (90), HH:MM:SS (01:30:00) or D-HH:MM:SS "
            "(1-00:00:00)."
        )
    return value


def slurm_seconds(value: str) -> int:
    """A Slurm time in seconds: minutes, minutes:seconds, hours:minutes:seconds, or days-hours[:minutes[:seconds]]."""
    check_slurm_time(value, "time limit")
    days, _, rest = str(value).rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    if days:  # days-hours[:minutes[:seconds]]
        parts += [0] * (3 - len(parts))
        return int(days) * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]
    if len(parts) == 3:
        return parts[0] * 3600 + parts[1] * 60 + parts[2]
    return parts[0] * 60 + (parts[1] if len(parts) == 2 else 0)
