"""A memory cgroup per execution, so that its processes together (not only each one, as RLIMIT_AS does) stay under
the memory limit; tmpfs pages written to its /tmp count too. Stdlib only.

The server, as root, makes one folder under cgroup v1's memory hierarchy and gives it to the sandbox's uid
(`ServerCgroup`); each execution's supervisor then makes its own child cgroup there, joins it before forking the
code, and removes it afterwards (`ExecutionCgroup`). Without root, or without a writable v1 memory hierarchy, there
is none (`/health` says so) and only the per-process limit applies."""

from __future__ import annotations

import os
import time

V1_MEMORY = "/sys/fs/cgroup/memory"


class ServerCgroup:
    """The server's folder: /sys/fs/cgroup/memory/kit-sandbox-<server pid>, owned by `uid`."""

    def __init__(self, path: str):
        self.path = path

    @classmethod
    def create(cls, uid: int, gid: int) -> ServerCgroup | None:
        if os.getuid() != 0 or not os.access(V1_MEMORY, os.W_OK) or not os.path.isdir(V1_MEMORY):
            return None
        path = f"{V1_MEMORY}/kit-sandbox-{os.getpid()}"
        try:
            os.makedirs(path, exist_ok=True)
            for entry in [path, *(os.path.join(path, name) for name in os.listdir(path))]:
                os.chown(entry, uid, gid)
        except OSError:
            return None
        return cls(path)

    def remove(self, wait: float = 5.0) -> None:
        """Once every execution ended (killed processes take a moment to go): the children, then the folder."""
        deadline = time.monotonic() + wait
        while True:
            for name in os.listdir(self.path):
                if os.path.isdir(os.path.join(self.path, name)):
                    try:
                        os.rmdir(os.path.join(self.path, name))
                    except OSError:
                        pass
            try:
                os.rmdir(self.path)
                return
            except OSError:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.1)


class ExecutionCgroup:
    """One execution's cgroup, made and joined by its supervisor (whose children then start in it)."""

    def __init__(self, base: str, memory: int):
        self.base = base
        self.path = f"{base}/e{os.getpid()}"
        os.mkdir(self.path)
        _write(f"{self.path}/memory.limit_in_bytes", str(memory))
        if os.path.exists(f"{self.path}/memory.memsw.limit_in_bytes"):
            _write(f"{self.path}/memory.memsw.limit_in_bytes", str(memory))  # no escape into swap
        _write(f"{self.path}/cgroup.procs", str(os.getpid()))

    def leave(self) -> bool:
        """Move back out, remove the cgroup; whether the kernel killed something in it for lack of memory."""
        oom_killed = False
        try:
            with open(f"{self.path}/memory.oom_control") as f:
                counters = dict(line.split() for line in f if len(line.split()) == 2)
            oom_killed = counters.get("oom_kill", "0") != "0"
        except OSError:
            pass
        _write(f"{self.base}/cgroup.procs", str(os.getpid()))
        try:
            os.rmdir(self.path)
        except OSError:
            pass  # still has a process: the server removes it at the end
        return oom_killed


def remove_later(base: str | None, pid: int | None) -> None:
    """The cgroup of a supervisor that was killed (a session): removed once its processes are gone."""
    if base and pid:
        try:
            os.rmdir(f"{base}/e{pid}")
        except OSError:
            pass


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)
