"""Cgroups per execution, so that its processes together (not only each one, as rlimits do) stay under its limits:
memory (tmpfs pages written to its /tmp count too) and the number of processes (the pids controller: the one cap
that also binds uid 0, which RLIMIT_NPROC does not). Stdlib only.

The server, as root, makes one folder under each cgroup v1 hierarchy and gives it to the sandbox's uid
(`ServerCgroup`); each execution's supervisor then makes its own child cgroup there, joins it before forking the
code, and removes it afterwards (`ExecutionCgroup`). A hierarchy the server cannot use is skipped with the reason
(`CgroupUnavailable`), which the server logs and /health reports; only the per-process limits apply then.

enroot mounts the hierarchies read-only (EROFS on mkdir) though its root may write them: the server then remounts
them read-write in a mount namespace of its own (its workers inherit it; the rest of the container keeps the
read-only view)."""

from __future__ import annotations

import os
import time

from pipeline_kit.sandbox import isolation

CONTROLLERS = {"memory_cgroup": "memory", "pids_cgroup": "pids"}  # layer -> cgroup v1 controller
_private_mounts = False  # whether this process already has its own mount namespace


class CgroupUnavailable(Exception):
    """This host or container gives the server no usable hierarchy for a controller; the message says why."""


class ServerCgroup:
    """The server's folder for one controller: <its hierarchy>/kit-sandbox-<pid>, owned by `uid`."""

    def __init__(self, path: str):
        self.path = path

    @classmethod
    def create(cls, uid: int, gid: int, controller: str = "memory") -> ServerCgroup:
        top = hierarchy(controller)
        if top is None:
            raise CgroupUnavailable(
                f"no cgroup v1 {controller} hierarchy is mounted (kit uses cgroup v1; a cgroup v2-only host has none)"
            )
        if os.getuid() != 0:
            raise CgroupUnavailable(f"the server runs as uid {os.getuid()}, not root: it cannot make cgroups in {top}")
        _make_writable(top)
        path = f"{top}/kit-sandbox-{os.getpid()}"
        try:
            os.makedirs(path, exist_ok=True)
            for entry in [path, *(os.path.join(path, name) for name in os.listdir(path))]:
                os.chown(entry, uid, gid)
        except OSError as e:
            raise CgroupUnavailable(f"cannot make {path}: {e.strerror} (errno {e.errno})") from None
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


def hierarchy(controller: str) -> str | None:
    """Where this process sees the cgroup v1 hierarchy of `controller`: the first mount of it that no other mount
    hides (on some hosts enroot's cgroup hook stacks copies of /sys/fs/cgroup over the controllers' folders)."""
    try:
        with open("/proc/self/mountinfo") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        tail = fields[fields.index("-") + 1 :]
        if tail[0] != "cgroup" or controller not in tail[2].split(","):
            continue
        point = fields[4].encode().decode("unicode_escape")  # mountinfo writes a space as \040
        major, minor = (int(n) for n in fields[2].split(":"))
        try:
            st = os.stat(point)
        except OSError:
            continue
        if (os.major(st.st_dev), os.minor(st.st_dev)) == (major, minor) and os.path.exists(f"{point}/cgroup.procs"):
            return point
    return None


def _make_writable(hierarchy: str) -> None:
    """A hierarchy mounted read-only (enroot's): remount it read-write in this process's own mount namespace."""
    global _private_mounts
    if not os.statvfs(hierarchy).f_flag & os.ST_RDONLY:
        return
    try:
        if not _private_mounts:
            isolation.unshare(isolation.CLONE_NEWNS)  # before any thread starts: unshare refuses threaded processes
            _private_mounts = True
        fd = os.open(hierarchy, os.O_PATH | os.O_CLOEXEC)
        try:
            flags = isolation.MS_REMOUNT | isolation.MS_BIND | isolation.mount_flags(fd)
        finally:
            os.close(fd)
        isolation.mount(None, hierarchy, None, flags)
    except OSError as e:
        raise CgroupUnavailable(f"{hierarchy} is mounted read-only and remounting it read-write failed: {e}") from None


class ExecutionCgroup:
    """One execution's cgroup under one controller's server folder, made and joined by its supervisor (whose
    children then start in it). `limits` is the request's: memory bytes, processes (+1: the supervisor is in it)."""

    def __init__(self, base: str, limits: dict):
        self.base = base
        self.path = f"{base}/e{os.getpid()}"
        os.mkdir(self.path)
        self.memory = os.path.exists(f"{self.path}/memory.limit_in_bytes")
        if self.memory:
            _write(f"{self.path}/memory.limit_in_bytes", str(limits["memory"]))
            if os.path.exists(f"{self.path}/memory.memsw.limit_in_bytes"):
                _write(f"{self.path}/memory.memsw.limit_in_bytes", str(limits["memory"]))  # no escape into swap
        if os.path.exists(f"{self.path}/pids.max"):
            _write(f"{self.path}/pids.max", str(limits["processes"] + 1))
        _write(f"{self.path}/cgroup.procs", str(os.getpid()))

    def leave(self) -> bool:
        """Move back out, remove the cgroup; whether the kernel killed something in it for lack of memory."""
        oom_killed = False
        try:
            if self.memory:
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


def remove_later(bases: list[str], pid: int | None) -> None:
    """The cgroups of a supervisor that was killed (a session): removed once its processes are gone."""
    for base in bases:
        if pid:
            try:
                os.rmdir(f"{base}/e{pid}")
            except OSError:
                pass


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)
