"""Following a run on this machine while it works: kit's own lines ("kit generate: 40/100 samples, ...") from
its commands' logs (or every line, for a user's own command), shown as they are written. Services' logs (a server's
access log) and kit.log stay in their files."""

from __future__ import annotations

import re
import sys
import threading
from pathlib import Path

KIT_LINE = "kit "  # the lines kit's in-job code prints for people; third-party output stays in the log
FOLLOW_MODES = ("kit", "all")  # kit: only kit's lines; all: every line (`kit run_cmd`: the user's own output)
_UNIT = re.compile(r"^unit\d+-")  # an array unit's logs: <job>/unit<N>-<command>.log


def service_logs(jobs) -> set[tuple[str, str]]:
    """The (job, command) pairs of the services among `jobs`, whose logs are not followed."""
    return {(job.name, c.name) for job in jobs for c in job.commands if c.service}


def followed(path: Path, quiet: set[tuple[str, str]]) -> bool:
    """Whether kit's lines of the log at <log_dir>/<job>/<command>.log are shown while the run works."""
    command = _UNIT.sub("", path.stem)
    return command != "kit" and (path.parent.name, command) not in quiet


def shown(line: str, mode: str) -> bool:
    return mode == "all" or line.startswith(KIT_LINE)


def unshown_tail(text: str, mode: str = "kit") -> str:
    """A followed log's last lines less those already shown while it ran."""
    return "".join(line for line in text.splitlines(keepends=True) if not shown(line, mode))


class LogFollower:
    """Echo the new lines of <log_dir>/<job>/<command>.log that `mode` shows to `stream` every `interval` seconds,
    from a thread. `quiet`: (job, command) pairs whose logs are not followed (services). Use as a context manager;
    leaving it reads what was written last."""

    def __init__(
        self, log_dir: str, quiet: set[tuple[str, str]], mode: str = "kit", stream=None, interval: float = 0.5
    ):
        """`stream` [kit's lines: stderr, like kit's own messages; every line: stdout, the command's output]."""
        stream = stream or (sys.stdout if mode == "all" else sys.stderr)
        self.log_dir, self.quiet, self.mode, self.stream, self.interval = Path(log_dir), quiet, mode, stream, interval
        self.offsets: dict[Path, int] = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="kit-log-follower")

    def __enter__(self) -> LogFollower:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self.poll()

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            self.poll()

    def poll(self) -> None:
        with self.lock:
            for path in sorted(self.log_dir.glob("*/*.log")):
                if followed(Path(path), self.quiet):
                    self._echo_new_lines(path)

    def _echo_new_lines(self, path: Path) -> None:
        start = self.offsets.get(path, 0)
        try:
            with path.open("rb") as f:
                f.seek(start)
                data = f.read()
        except OSError:
            return
        end = data.rfind(b"\n") + 1  # whole lines only; the rest is read once it is complete
        if not end:
            return
        self.offsets[path] = start + end
        lines = data[:end].decode(errors="replace").splitlines()
        new = [line for line in lines if shown(line, self.mode)]
        if new:
            self.stream.write("".join(f"{line}\n" for line in new))
            self.stream.flush()
