"""One run per output: a lock file beside each output folder (or file) a run writes, `<parent>/.<name>.kit-lock.json`,
created whole or not at all (a finished temporary file hard-linked into place, which fails if one exists). It names
the run that holds it (expname, user, host, pid, Slurm job ids once queued, since when). A second run is refused in
one line; a lock whose process is gone (same host) or whose Slurm jobs are no longer queued or running is taken over
with a note. The lock sits beside the output, not in it, so a file output can be locked and a recipe stage's folder
moved aside keeps its lock. Locks of one process are shared: the stages of one run never refuse each other."""

from __future__ import annotations

import getpass
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pipeline_kit.atomic import default_mode, missing_folders, remove_made_folders, write_atomic
from pipeline_kit.errors import UserError

SUFFIX = ".kit-lock.json"
_LIVE_SLURM_STATES = "PENDING,CONFIGURING,RUNNING,SUSPENDED,REQUEUED,REQUEUE_HOLD,REQUEUE_FED,RESIZING,SIGNALING"


def lock_path(output: str) -> Path:
    """Where the lock of an output folder or file lives: beside it, hidden."""
    out = Path(os.path.normpath(os.path.abspath(output)))
    return out.parent / f".{out.name}{SUFFIX}"


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), so that a reused pid is not
    mistaken for the holder; None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


@dataclass
class _Held:
    """A lock this process holds: its token, how many holders share it, and whether it was handed to Slurm jobs
    (then it outlives this process: releasing it here leaves the file)."""

    token: str
    count: int = 1
    kept: bool = False
    made: list[Path] = field(default_factory=list)  # the folders made for the lock file, innermost first


_held: dict[Path, _Held] = {}


def _read(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}  # unreadable or not kit's: taken as stale
    return data if isinstance(data, dict) else {}


def _describe(holder: dict) -> str:
    who = f"{holder.get('owner', '?')} on {holder.get('host', '?')}"
    ids = holder.get("slurm_ids") or []
    where = f"Slurm job {','.join(ids)}" if ids else f"pid {holder.get('pid', '?')}"
    return f"run '{holder.get('expname', '?')}' ({who}, {where}, since {holder.get('since', '?')})"


def _slurm_alive(ids: list[str]) -> bool | None:
    """Whether squeue lists any of `ids` as queued or running; None when squeue cannot say."""
    try:
        out = subprocess.run(
            ["squeue", "-h", "-o", "%i", "-t", _LIVE_SLURM_STATES, "-j", ",".join(ids)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode == 0:
        return bool(out.stdout.strip())
    return False if "invalid job id" in out.stderr.lower() else None


def why_free(holder: dict) -> str | None:
    """None while the holder may still write the output; else why its lock is stale (for the takeover note)."""
    if not holder.get("expname"):
        return "the lock file is not one kit wrote"
    ids = holder.get("slurm_ids") or []
    if ids:
        alive = _slurm_alive(ids)
        return None if alive is not False else f"Slurm job {','.join(ids)} is no longer queued or running"
    if holder.get("host") != socket.gethostname():
        return None  # another machine's process: kit cannot see it
    pid = holder.get("pid")
    if not isinstance(pid, int) or _start_time(pid) is None:
        return f"its process {pid} is gone"
    if holder.get("pid_start") not in (None, _start_time(pid)):
        return f"its process {pid} is gone (the pid is another process's now)"
    return None


def _refusal(output: str, path: Path, holder: dict) -> UserError:
    name = holder.get("expname", "?")
    where = f"--cluster={holder['cluster']} " if holder.get("cluster") else ""
    return UserError(
        f"{output} is being written by {_describe(holder)}; wait until it ends (`kit status {where}{name}`) or "
        f"cancel it (`kit cancel {where}{name}`), or write to another output folder (lock: {path})."
    )


def _create(path: Path, info: dict) -> bool:
    """Write the lock whole, only if none exists (link(2) fails on an existing name); False if one does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f"{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            os.fchmod(f.fileno(), default_mode())
            f.write(json.dumps(info, indent=1) + "\n")
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)


def _take_over(path: Path, stale: dict) -> bool:
    """Move the stale lock aside and check that what moved is the one judged stale (another run may have taken it
    over in between: then it is put back, if it can be)."""
    aside = path.with_name(f"{path.name}.{uuid.uuid4().hex[:8]}.stale")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return True
    moved = _read(aside) or {}
    if moved.get("token") != stale.get("token"):
        try:
            os.link(aside, path)
        except FileExistsError:
            pass
        os.unlink(aside)
        return False
    os.unlink(aside)
    return True


@dataclass
class RunLocks:
    """The locks one run holds (paths of lock files); see `acquire`."""

    paths: list[Path] = field(default_factory=list)

    def update(self, **fields: object) -> None:
        """Record more about the run in each lock (its run id, its Slurm job ids once queued)."""
        for path in self.paths:
            held = _held.get(path)
            data = _read(path)
            if held is None or not data or data.get("token") != held.token:
                continue
            write_atomic(path, json.dumps({**data, **fields}, indent=1) + "\n")

    def keep(self) -> None:
        """The run's Slurm jobs hold the locks now: releasing them in this process leaves the files (the last job
        to end removes them, see release_in_job; they are free once the jobs are no longer queued or running, or
        after `kit cancel`)."""
        for path in self.paths:
            if path in _held:
                _held[path].kept = True

    def release(self) -> None:
        for path in self.paths:
            held = _held.get(path)
            if held is None:
                continue
            held.count -= 1
            if held.count > 0:
                continue
            del _held[path]
            if not held.kept and (_read(path) or {}).get("token") == held.token:
                path.unlink(missing_ok=True)
                remove_made_folders(held.made)  # a refused submission leaves no empty folder behind
        self.paths = []


def acquire(
    outputs: list[str],
    expname: str,
    run_id: str | None = None,
    cluster: str | None = None,
    note: Callable[[str], None] | None = None,
    after: tuple[str, ...] = (),
) -> RunLocks:
    """Lock every output for this run (all or none); a lock this process holds already is shared. Raises UserError
    naming the run that holds one (`cluster`: its config's name, for the `kit status`/`kit cancel` it suggests); a
    stale one is taken over with a `note` line (stderr by default), and so is one held by a run this one waits for
    (`after`: its --run_after experiments; its jobs start once they ended, so the two never write at once)."""
    note = note or (lambda line: print(line, file=sys.stderr, flush=True))
    locks = RunLocks()
    try:
        for output in sorted(set(outputs)):
            path = lock_path(output)
            if path in _held:  # an earlier stage of this run (a recipe) took it
                _held[path].count += 1
                locks.paths.append(path)
                RunLocks([path]).update(run_id=run_id)
                continue
            token = uuid.uuid4().hex
            made = missing_folders(path.parent)  # _create makes them
            info = {
                "expname": expname,
                "run_id": run_id,
                "cluster": cluster,
                "owner": _user(),
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "pid_start": _start_time(os.getpid()),
                "since": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                "slurm_ids": [],
                "output": output,
                "token": token,
            }
            for _ in range(5):  # a lock that vanishes or is taken over between the looks: look again
                try:
                    created = _create(path, info)
                except OSError as e:
                    raise UserError(
                        f"cannot write the lock of output {output} at {path} ({e.strerror}); make its folder "
                        "writable or pick another output folder."
                    ) from None
                if created:
                    break
                holder = _read(path)
                if holder is None:
                    continue
                stale = why_free(holder)
                if holder.get("expname") in after and stale is None:
                    stale = "this run waits for it (--run_after)"
                if stale is None:
                    raise _refusal(output, path, holder)
                if _take_over(path, holder):
                    note(f"kit: {output}: taking over the lock of {_describe(holder)}: {stale}")
            else:
                raise UserError(f"{output}: could not take its lock at {path} (other runs keep taking it); retry.")
            _held[path] = _Held(token, made=made)
            locks.paths.append(path)
    except BaseException:
        locks.release()
        raise
    return locks


def live_holders(outputs: list[str]) -> list[str]:
    """For a dry run: one line per output that another run holds now (nothing is locked)."""
    lines = []
    for output in sorted(set(outputs)):
        path = lock_path(output)
        holder = _read(path)
        if holder and path not in _held and why_free(holder) is None:
            lines.append(f"kit: note: {output} is being written by {_describe(holder)}; a submission now is refused")
    return lines


# Run by python3 on a Slurm job's batch host as the batch script ends (any Python 3, the standard library only): each
# ending job leaves a marker named by its job id in `<lock>.<token>.ended/` (so two jobs that end at the same moment
# both count), and the one that sees the run's every job ended (`expected`: its jobs and array elements) removes the
# lock, if it is still this run's (same token). A job that never ends normally (killed by a time limit or a failed
# node, or never started: a dependency failed) leaves the lock; it is then stale, and the next run takes it over with
# a note.
_RELEASE_IN_JOB = r"""
import json, os, shutil, sys
job, expected, args = os.environ.get("SLURM_JOB_ID"), int(sys.argv[1]), sys.argv[2:]
for path, token in zip(args[::2], args[1::2]):
    try:
        with open(path) as f:
            if json.load(f).get("token") != token or not job:
                continue
        ended = "%s.%s.ended" % (path, token)
        os.makedirs(ended, exist_ok=True)
        open(os.path.join(ended, job), "w").close()
        if len(os.listdir(ended)) >= expected:
            os.unlink(path)
            shutil.rmtree(ended, ignore_errors=True)
    except (OSError, ValueError, AttributeError):
        continue
"""


def release_in_job(paths: list[str], expected: int) -> str | None:
    """The shell command with which the last of a Slurm run's `expected` jobs (array elements counted one by one)
    to end removes the run's locks (`paths`, held by this process); None when it holds none of them."""
    pairs = [(path, _held[Path(path)].token) for path in paths if Path(path) in _held]
    if not pairs:
        return None
    words = [_RELEASE_IN_JOB, str(expected), *(word for pair in pairs for word in pair)]
    return "python3 -c " + " ".join(map(shlex.quote, words))


def release_run(paths: list[str], run_id: str) -> None:
    """`kit cancel`: remove the locks that run `run_id` holds (not ones another run has taken over since)."""
    for path in map(Path, paths):
        holder = _read(path)
        if holder and holder.get("run_id") == run_id:
            path.unlink(missing_ok=True)
