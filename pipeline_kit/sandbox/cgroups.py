"""Cgroups per execution, so that its processes together (not only each one, as rlimits do) stay under its limits:
memory (tmpfs pages written to its /tmp count too) and the number of processes (the pids controller: the one cap
that also binds uid 0, which RLIMIT_NPROC does not). Stdlib only.

The server, as root, makes one folder under each cgroup v1 hierarchy and gives it to the sandbox's uid
(`ServerCgroup`); each worker makes child cgroups there as it needs them and reuses them (`Slots`): an execution's
first process joins one (a move of one thread, which the kernel makes without waiting for an RCU grace period), and
the worker gives it to a later execution once nothing is left in it. A hierarchy the server cannot use is skipped
with the reason (`CgroupUnavailable`), which the server logs and /health reports; only the per-process limits apply
then.

A server that is killed (SIGKILL, a node's OOM killer) cannot remove its folders: the next server on the host sweeps
them (`sweep_stale`), those of servers in its own PID namespace whose process is gone and in which nothing runs.

enroot mounts the hierarchies read-only (EROFS on mkdir) though its root may write them: the server then remounts
them read-write in a mount namespace of its own (its workers inherit it; the rest of the container keeps the
read-only view)."""

from __future__ import annotations

import os
import re
import time

from pipeline_kit.sandbox import isolation

CONTROLLERS = {"memory_cgroup": "memory", "pids_cgroup": "pids"}  # layer -> cgroup v1 controller
_private_mounts = False  # whether this process already has its own mount namespace


class CgroupUnavailable(Exception):
    """This host or container gives the server no usable hierarchy for a controller; the message says why."""


class ServerCgroup:
    """The server's folder for one controller: <its hierarchy>/kit-sandbox-<pid>-pidns<inode>, owned by `uid`;
    `swept`: the folders of gone servers its creation removed (`sweep_stale`)."""

    def __init__(self, path: str, swept: tuple[str, ...] = ()):
        self.path = path
        self.swept = swept

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
        swept = sweep_stale(top)
        path = f"{top}/{folder_name(os.getpid())}"
        try:
            os.makedirs(path, exist_ok=True)
            for entry in [path, *(os.path.join(path, name) for name in os.listdir(path))]:
                os.chown(entry, uid, gid)
        except OSError as e:
            raise CgroupUnavailable(f"cannot make {path}: {e.strerror} (errno {e.errno})") from None
        return cls(path, swept)

    def remove(self, wait: float = 5.0) -> None:
        """Once every execution ended (killed processes take a moment to go): the children, then the folder."""
        deadline = time.monotonic() + wait
        while not _remove_folder(self.path) and time.monotonic() <= deadline:
            time.sleep(0.1)


_FOLDER = re.compile(r"kit-sandbox-(\d+)-pidns(\d+)")


def folder_name(pid: int) -> str:
    """A server's folder: its pid, and its PID namespace's, so that a later server tells whether it is gone (a pid
    is checked only in the namespace it belongs to; another container's servers are left alone)."""
    return f"kit-sandbox-{pid}-pidns{_pid_namespace()}"


def _pid_namespace() -> int:
    """Its inode; 0 where /proc does not say (no folder is then swept)."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def sweep_stale(top: str) -> tuple[str, ...]:
    """Remove the folders (and their slots) that servers in this PID namespace left under `top` when they were
    killed: those whose pid no longer exists. A folder with a process still in it stays (rmdir refuses it) until
    a later sweep. Returns the folders removed."""
    own, removed = _pid_namespace(), []
    for name in os.listdir(top):
        match = _FOLDER.fullmatch(name)
        if not own or not match or int(match[2]) != own or _alive(int(match[1])):
            continue
        if _remove_folder(f"{top}/{name}"):
            removed.append(f"{top}/{name}")
    return tuple(removed)


def _remove_folder(path: str) -> bool:
    """A server's folder: its slots (each one rmdir refuses while a process is in it), then itself; whether it is
    gone (another server may have removed it first)."""
    try:
        for child in os.listdir(path):
            if os.path.isdir(f"{path}/{child}"):
                try:
                    os.rmdir(f"{path}/{child}")
                except OSError:
                    pass
        os.rmdir(path)
    except OSError:
        return False
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


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


class Slot:
    """One cgroup under each controller's server folder (`bases`), reused by one execution after another: its
    first process joins it (`join`, a write of "0" to a cgroup.procs the worker opened), and the worker hands it to
    the next execution only once it is empty again. Made once, so an execution costs a write per controller instead
    of a mkdir, four writes, a move out and an rmdir. What could be left of an earlier execution: page cache it read
    (reclaimable; it never holds the next one under its limit), and the cumulative counters, of which the supervisor
    reads only the difference (`oom_kills`). Everything goes through folders opened beforehand (`bases`: path and
    file descriptor), since the worker's root is the staging root, where no cgroup hierarchy is mounted."""

    def __init__(self, bases: list[tuple[str, int]], name: str):
        self.name = name
        self.paths: list[str] = []
        self.made: list[int] = []  # the bases' fds it made its folder in (for `remove`)
        self.dirs: list[int] = []  # its folders, O_PATH
        self.join_fds: list[int] = []  # `tasks`, for writing: the execution's first process joins (see `join`)
        self.oom_fd = -1  # memory.oom_control, for reading the count of processes the kernel killed in it
        self.limits: tuple[int, int] | None = None
        try:
            for base, base_fd in bases:
                os.mkdir(name, dir_fd=base_fd)
                self.paths.append(f"{base}/{name}")
                self.made.append(base_fd)
                folder = os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=base_fd)
                self.dirs.append(folder)
                self.join_fds.append(os.open("tasks", os.O_WRONLY | os.O_CLOEXEC, dir_fd=folder))
                if _exists(folder, "memory.oom_control"):
                    self.oom_fd = os.open("memory.oom_control", os.O_RDONLY | os.O_CLOEXEC, dir_fd=folder)
        except OSError:
            self.remove()
            raise

    def configure(self, memory: int, processes: int) -> None:
        """The limits of the request (the same for every one of a server, so written once per slot)."""
        if self.limits == (memory, processes):
            return
        old_memory = self.limits[0] if self.limits else 1 << 62
        for folder in self.dirs:
            if _exists(folder, "memory.limit_in_bytes"):
                files = ["memory.limit_in_bytes"]
                if _exists(folder, "memory.memsw.limit_in_bytes"):  # no escape into swap
                    files.append("memory.memsw.limit_in_bytes")  # may not be below the other: lower it last
                for name in files if memory <= old_memory else reversed(files):
                    _write(folder, name, str(memory))
            if _exists(folder, "pids.max"):
                _write(folder, "pids.max", str(processes))
        self.limits = (memory, processes)

    def join(self) -> None:
        """In the execution's first process, before it forks anything or starts a thread: into every controller's
        cgroup. Through `tasks` (this thread), not cgroup.procs (the thread group): the kernel then skips the
        global threadgroup lock, whose write side waits for an RCU grace period (up to 16 ms under load here)."""
        for fd in self.join_fds:
            os.write(fd, b"0")

    def oom_kills(self) -> int:
        """How many processes the kernel has killed in it for lack of memory (over its whole life)."""
        if self.oom_fd < 0:
            return 0
        _, found, tail = os.pread(self.oom_fd, 512, 0).rpartition(b"oom_kill ")
        return int(tail.split()[0]) if found else 0

    def empty(self) -> bool:
        """Opened afresh each time: cgroup v1 keeps the list of pids an open cgroup.procs read first. A cgroup
        that cannot be read (removed under the worker) never counts as empty."""
        for folder in self.dirs:
            try:
                fd = os.open("cgroup.procs", os.O_RDONLY | os.O_CLOEXEC, dir_fd=folder)
            except OSError:
                return False
            try:
                if os.read(fd, 64):
                    return False
            except OSError:
                return False
            finally:
                os.close(fd)
        return True

    def remove(self) -> None:
        for fd in [*self.join_fds, self.oom_fd, *self.dirs]:
            if fd >= 0:
                os.close(fd)
        self.join_fds, self.oom_fd, self.dirs = [], -1, []
        for base_fd in self.made:
            try:
                os.rmdir(self.name, dir_fd=base_fd)
            except OSError:
                pass  # still has a process: the server removes it at the end
        self.made = []


class Slots:
    """A worker's slots: taken for an execution, lent to its supervisor, given back when the worker has reaped
    the supervisor. A slot with a process still in it (a killed session's PID 1 not yet gone; without the pid_ns
    layer, an orphan) drains until it is empty; only then is it reused."""

    def __init__(self, bases: list[str]):
        self.bases = [(base, os.open(base, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)) for base in bases]
        self.free: list[Slot] = []
        self.draining: list[Slot] = []
        self.lent: dict[int, Slot] = {}
        self.made = 0

    def take(self, memory: int, processes: int) -> Slot | None:
        if not self.bases:
            return None
        if not self.free and self.draining:
            for slot in [s for s in self.draining if s.empty()]:
                self.draining.remove(slot)
                self.free.append(slot)
        if self.free:
            slot = self.free.pop()
        else:
            slot = Slot(self.bases, f"w{os.getpid()}-{self.made}")
            self.made += 1
        try:
            slot.configure(memory, processes)
        except OSError:
            slot.remove()
            raise
        return slot

    def lend(self, pid: int, slot: Slot | None) -> None:
        if slot is not None:
            self.lent[pid] = slot

    def give_back(self, pid: int) -> None:
        slot = self.lent.pop(pid, None)
        if slot is not None:
            (self.free if slot.empty() else self.draining).append(slot)


def _exists(folder: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=folder)
    except FileNotFoundError:
        return False
    return True


def _write(folder: int, name: str, text: str) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CLOEXEC, dir_fd=folder)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
