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
