"""The exception types kit raises to its callers: mistakes a user can fix (UserError, and SubmissionRefused when
run_pipeline refused a pipeline), jobs that ended without succeeding (JobFailed), and the did-you-mean hint."""

from __future__ import annotations

import difflib


class UserError(Exception):
    """A problem in the user's input (a config file, a flag, a path). The message says what and how to fix it."""

    def __init__(self, message: str):
        super().__init__(" ".join(message.split()))


class SubmissionRefused(UserError):
    """run_pipeline refused the pipeline before any of its jobs could run: an input check, the cluster config,
    sbatch or the Docker daemon said no. Nothing of it is queued (jobs sbatch had queued are cancelled)."""


class JobFailed(RuntimeError):
    """Jobs of an experiment ended without succeeding (raised by `Experiment.wait(check=True)` and `.result()`).
    `failures` holds one `JobFailure` (job, state, reason) per such job; the message names each in one line."""

    def __init__(self, expname: str, failures: list):
        self.expname, self.failures = expname, failures
        parts = []
        for failure in failures:
            first = next((line.strip() for line in failure.reason.splitlines() if line.strip()), "")
            parts.append(f"job {failure.job} {failure.state}" + (f" ({first})" if first else ""))
        super().__init__(f"experiment {expname}: " + "; ".join(parts))


def closest(word: str, options: list[str] | tuple[str, ...]) -> str | None:
    """The option closest to a misspelled `word` (difflib), or None when nothing is close."""

    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return close[0] if close else None


def did_you_mean(word: str, options: list[str] | tuple[str, ...]) -> str:
    """' Did you mean 'x'?' for the closest option, or '' when nothing is close."""
    best = closest(word, options)
    return f" Did you mean '{best}'?" if best else ""
