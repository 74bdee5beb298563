"""Linux isolation primitives, through libc (stdlib only: the worker imports this before it takes requests).

A worker enters its namespaces and root once (`worker_root`: user, network, IPC, UTS and mount namespaces, a read-only
root of allow-listed folders) and refuses System V IPC and message queues (`refuse_ipc`); every execution then calls
`enter_execution_namespaces` (its own user, PID and mount namespaces) and, in the PID namespace's first process,
`enter_execution_root` (fresh /proc and /tmp), `drop_privileges` (no capabilities, no new privileges) and
`enter_landlock_scope` (abstract unix sockets and signals kept within the execution)."""

from __future__ import annotations

import ctypes
import os
import resource
import struct
from dataclasses import dataclass

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND = 32, 1024, 2048, 4096
MS_REC, MS_PRIVATE, MS_RELATIME = 16384, 1 << 18, 1 << 21
MNT_DETACH = 2

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 1, 4, 24, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
_LANDLOCK_SYSCALLS = {"landlock_create_ruleset": 444, "landlock_restrict_self": 446}  # one number on every machine
_SYSCALLS = {
    "x86_64": {"capset": 126, "pivot_root": 155, **_LANDLOCK_SYSCALLS},
    "aarch64": {"capset": 91, "pivot_root": 41, **_LANDLOCK_SYSCALLS},
}
# System V IPC (shm*, sem*, msg*) and POSIX message queues (mq_*): what an IPC namespace holds, and what `refuse_ipc`
# refuses; POSIX shared memory and semaphores are files in /dev/shm, a tmpfs of the execution's own
_IPC_SYSCALLS = {
    "x86_64": (29, 30, 31, 64, 65, 66, 67, 68, 69, 70, 71, 220, 240, 241, 242, 243, 244, 245),
    "aarch64": tuple(range(180, 198)),  # mq_open .. shmdt, in asm-generic/unistd.h's order
}
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}  # seccomp_data.arch of the native calls
_X32_BIT = 0x40000000  # x86_64's x32 calls: the native arch, each number with this bit set
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
# Landlock (linux/landlock.h): a ruleset that handles no file or network access, only scopes (ABI 6, Linux 6.12)
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET, LANDLOCK_SCOPE_SIGNAL = 1, 2
LANDLOCK_SCOPE_ABI = 6
NOBODY = 65534
# the worker's root: a small tmpfs that holds the staging root (each execution chroots into it) and /proc
HOLDER = "/tmp"
SANDBOX = "/sandbox"  # where the staging root is once HOLDER is the worker's `/`
STAGING = HOLDER + SANDBOX
DEVICES = ("null", "zero", "full", "random", "urandom")
# where an image keeps files only root may read (shadow, private keys); masked when the sandbox runs as root outside
PRIVATE_SCAN = ("/etc",)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_libc.syscall.restype = ctypes.c_long  # a file descriptor, or -1
# Each execution runs the per-execution steps below in a fresh fork of the worker, where every Python object it
# touches for the first time costs a copy-on-write page fault: so what they need is made here, once, in the worker
# (libc's functions looked up, paths and map lines as bytes), and their error messages only when one fails.
_unshare, _syscall_fn = _libc.unshare, _libc.syscall


class IsolationError(OSError):
    """A namespace or mount step failed (user namespaces off, seccomp in a container, ...)."""


def _fail(what: str) -> None:
    err = ctypes.get_errno()
    raise IsolationError(err, f"{what}: {os.strerror(err)}")


def _check(result: int, what: str) -> None:
    if result != 0:
        _fail(what)


def _b(path: str | None) -> bytes | None:
    return None if path is None else os.fsencode(path)


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _mount(_b(source), _b(target), _b(fstype), flags, _b(data))


def _mount(source: bytes | None, target: bytes, fstype: bytes | None, flags: int, data: bytes | None = None) -> None:
    if _libc.mount(source, target, fstype, flags, data) != 0:
        _fail(f"mount {(fstype or source or b'').decode()} on {target.decode()}")


def umount(target: str, flags: int = 0) -> None:
    _check(_libc.umount2(_b(target), flags), f"umount {target}")


def pivot_root(new_root: str, put_old: str | None = None) -> bool:
    """Whether pivot_root(2) worked (it refuses, e.g., a root on the initial ramfs)."""
    return _syscall("pivot_root", _b(new_root), _b(put_old or new_root)) == 0


def set_dumpable() -> None:
    _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)


def unshare(flags: int) -> None:
    if _unshare(flags) != 0:
        _fail(f"unshare({flags:#x})")


_MACHINE = os.uname().machine


def _syscall(name: str, *args) -> int:
    numbers = _SYSCALLS.get(_MACHINE)
    if numbers is None:
        raise IsolationError(0, f"unsupported machine {_MACHINE} for {name}")
    return _syscall_fn(numbers[name], *args)


@dataclass(frozen=True)
class Layers:
    """Which isolation layers run. `full()` is the default; the benchmark switches layers off one at a time. A layer
    the host or container does not allow is dropped at start-up (`support.probe`, the pool's cgroups)."""

    user_ns: bool = True  # the worker is root of its own user namespace: capabilities there, none outside it
    nobody_uid: bool = True  # outside it, as nobody: owns no file, and RLIMIT_NPROC binds it (never uid 0)
    net_ns: bool = True  # no network: a namespace with only a down loopback
    pid_ns: bool = True  # one PID namespace per execution: its first process dying kills every descendant
    mount_ns: bool = True  # read-only allow-listed root, fresh /proc, private tmpfs /tmp, chroot
    rlimits: bool = True  # memory, CPU time, processes, file size, open files
    # its own Landlock domain: abstract unix sockets (named by the network namespace, which a worker's executions
    # share) and signals reach no process outside it (Linux 6.12+)
    landlock_scope: bool = True
    memory_cgroup: bool = True  # all of an execution's processes together under the memory limit (root, cgroup v1)
    pids_cgroup: bool = True  # its processes and threads under the process limit, whatever the uid (root, cgroup v1)

    @classmethod
    def full(cls) -> Layers:
        return cls()

    @classmethod
    def parse(cls, text: str) -> Layers:
        """'full', or a comma list of the layers to switch off: 'no-net_ns,no-pid_ns'."""
        if text == "full":
            return cls()
        off = {}
        names = {f: True for f in cls.__dataclass_fields__}
        for item in filter(None, text.split(",")):
            name = item.removeprefix("no-")
            if name not in names or not item.startswith("no-"):
                raise ValueError(f"unknown isolation layer '{item}'; use 'full' or no-{'/no-'.join(names)}")
            off[name] = False
        return cls(**off)

    @classmethod
    def switchable(cls) -> list[str]:
        """The layers one switches off with `no-NAME`; nobody_uid goes with user_ns."""
        return [name for name in cls.__dataclass_fields__ if name != "nobody_uid"]

    def describe(self) -> list[str]:
        return [name for name in self.__dataclass_fields__ if getattr(self, name)]


def _write(path: str, text: str) -> None:
    """One write(2), without Python's io stack: in a fresh fork every object touched is a copy-on-write fault."""
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _map_ids(outer_uid: int, outer_gid: int, pid: str = "self") -> None:
    if pid == "self":
        _write(f"/proc/{pid}/setgroups", "deny")  # a process may map only its own gid when it cannot setgroups
    _write(f"/proc/{pid}/uid_map", f"0 {outer_uid} 1")
    _write(f"/proc/{pid}/gid_map", f"0 {outer_gid} 1")


# an execution's user namespace: its root is the worker's root (see _map_ids)
_ROOT_TO_ROOT = (
    (b"/proc/self/setgroups", b"deny"),
    (b"/proc/self/uid_map", b"0 0 1"),
    (b"/proc/self/gid_map", b"0 0 1"),
)


def unshare_user_as_nobody(flags: int = 0) -> None:
    """unshare(CLONE_NEWUSER | flags) with root of the namespace mapped to nobody. Only a process in the parent
    namespace may write a map that is not its own uid, so a forked helper (still root outside) writes it."""
    ready_r, ready_w = os.pipe()
    helper = os.fork()
    if helper == 0:
        code = 255
        try:
            os.close(ready_w)
            if os.read(ready_r, 1) == b"u":
                _map_ids(NOBODY, NOBODY, str(os.getppid()))
                code = 0
        except OSError as e:
            code = e.errno or 255  # EPERM where the parent namespace maps no nobody (enroot's maps one uid)
        finally:
            os._exit(code)
    os.close(ready_r)
    try:
        unshare(CLONE_NEWUSER | flags)
        os.write(ready_w, b"u")
    finally:
        os.close(ready_w)
        _, status = os.waitpid(helper, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        why = os.strerror(code) if 0 < code < 255 else "the helper failed"
        raise IsolationError(code if 0 < code < 255 else 0, f"writing the uid_map of nobody: {why}")


def enter_own_user_namespace(flags: int = 0) -> None:
    """unshare(CLONE_NEWUSER | flags) with root of the namespace mapped to this process's own uid and gid: what
    any process may do, and all a container with a one-uid user namespace allows (enroot maps only its user)."""
    uid, gid = os.getuid(), os.getgid()
    unshare(CLONE_NEWUSER | flags)
    _map_ids(uid, gid)


def mount_flags(fd: int) -> int:
    """The flags a bind of `fd` must keep: a user namespace may add restrictions, never drop locked ones."""
    st = os.fstatvfs(fd)
    flags = 0
    for st_flag, ms_flag in (
        (os.ST_NOSUID, MS_NOSUID),
        (os.ST_NODEV, MS_NODEV),
        (os.ST_NOEXEC, MS_NOEXEC),
        (os.ST_NOATIME, MS_NOATIME),
        (os.ST_NODIRATIME, MS_NODIRATIME),
        (os.ST_RELATIME, MS_RELATIME),
    ):
        if st.f_flag & st_flag:
            flags |= ms_flag
    return flags


def enter_execution_namespaces(layers: Layers, ipc_refused: bool) -> None:
    """In the forked execution parent: its own user, PID and mount namespaces (the next fork is PID 1), and its own
    IPC namespace unless `refuse_ipc` took in the worker."""
    flags = (CLONE_NEWPID if layers.pid_ns else 0) | (CLONE_NEWNS if layers.mount_ns else 0)
    if layers.user_ns:
        # its own process count (RLIMIT_NPROC is counted per user namespace) and its own user keyrings
        flags |= CLONE_NEWUSER
        # System V IPC objects must end with it (in the worker's IPC namespace a segment would outlive it): refused
        # outright where the filter took, else an IPC namespace of its own, whose teardown costs each execution
        # ~0.25 ms of the kernel's CPU (perf/README.md, issue 36 part 4)
        flags |= 0 if ipc_refused else CLONE_NEWIPC
    if not flags:
        return
    unshare(flags)
    if flags & CLONE_NEWUSER:  # root of the worker's namespace (itself an unprivileged uid outside) is root here
        for path, line in _ROOT_TO_ROOT:
            fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)


# The staging root, where an execution mounts its /proc and /tmp and which it chroots into: under HOLDER until the
# worker made HOLDER its `/` (`worker_root.leave_host_root`). It chroots even then: a chrooted process may not make
# user namespaces (in one it would have every capability again, if only over namespaces of its own).
_root = {name: os.fsencode(STAGING + path) for name, path in (("chroot", ""), ("proc", "/proc"), ("tmp", "/tmp"))}
_root.update(shm=os.fsencode(STAGING + "/dev/shm"), null=b"/dev/null")


def root_is_holder() -> None:
    """HOLDER is now the worker's `/`, the staging root at SANDBOX (and the host's /dev gone)."""
    _root.update({name: path.removeprefix(os.fsencode(HOLDER)) for name, path in _root.items()})
    _root["null"] = os.fsencode(SANDBOX + "/dev/null")


def open_null() -> int:
    """/dev/null, before the execution's chroot."""
    return os.open(_root["null"], os.O_RDWR)


def enter_execution_root(layers: Layers, tmp_bytes: int) -> None:
    """In PID 1 of the execution: mount its /proc and a private /tmp, then make the staging root its `/`."""
    if not layers.mount_ns:
        return
    if layers.pid_ns:
        # a container that masks parts of its /proc (Docker) forbids new proc mounts: run without one there
        _libc.mount(b"proc", _root["proc"], b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    opts = b"mode=1777,size=%d,nr_inodes=10000" % tmp_bytes
    _mount(b"tmpfs", _root["tmp"], b"tmpfs", MS_NOSUID | MS_NODEV, opts)
    _mount(b"tmpfs", _root["shm"], b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts)
    # chroot, not pivot_root: the staging mount is locked in this (less privileged) namespace, and pivot_root
    # refuses locked mounts. With every capability dropped next, the code cannot chroot again to climb out.
    os.chroot(_root["chroot"])
    os.chdir("/tmp")


def _last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            return int(f.read())
    except OSError:
        return 40


# read at import, in the worker: an execution has no /proc/sys, and in a fresh fork reading a file through Python's
# io stack costs a few hundred copy-on-write faults
LAST_CAP = _last_cap()


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


_NO_CAPS = (_CapHeader(0x20080522, 0), (_CapData * 2)())  # capset's arguments: version 3, this process, all zero


def drop_privileges() -> None:
    """No capabilities left (bounding, ambient, effective, permitted, inheritable) and no way to gain any."""
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    for cap in range(LAST_CAP + 1):
        _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EPERM without CAP_SETPCAP: then there is nothing to drop
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    _check(_syscall("capset", ctypes.byref(_NO_CAPS[0]), ctypes.byref(_NO_CAPS[1])), "capset")


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06  # classic BPF opcodes (linux/filter.h)
RET_ALLOW, RET_KILL_PROCESS, RET_EPERM = 0x7FFF0000, 0x80000000, 0x00050000 | 1  # seccomp's actions


def ipc_filter_program(machine: str) -> list[tuple[int, int, int, int]]:
    """The seccomp program of `refuse_ipc` as (code, jt, jf, k): an IPC call fails with EPERM; a call of another ABI
    (i386, x32, arm32: the same numbers name other calls there, and i386 has one `ipc` call for all) kills the
    process; every other call runs. Only the call's number and ABI are read, so the kernel's per-call cache answers
    every allowed call without running the program."""
    refused = _IPC_SYSCALLS[machine]
    allow = 4 + len(refused)
    deny, kill = allow + 1, allow + 2
    # a jump's offsets count from the next instruction
    program = [
        (_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (_JEQ_K, 0, kill - 2, _AUDIT_ARCH[machine]),
        (_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
        (_JGE_K, kill - 4, 0, _X32_BIT),
    ]
    program += [(_JEQ_K, deny - (4 + i) - 1, 0, number) for i, number in enumerate(refused)]
    return program + [(_RET_K, 0, 0, RET_ALLOW), (_RET_K, 0, 0, RET_EPERM), (_RET_K, 0, 0, RET_KILL_PROCESS)]


def refuse_ipc() -> bool:
    """Install `ipc_filter_program` on this process; every process it forks from now on inherits it and cannot
    remove it. Whether the kernel took it: it needs CAP_SYS_ADMIN in the process's user namespace (or no_new_privs)
    and a kernel with seccomp filters."""
    if _MACHINE not in _IPC_SYSCALLS:
        return False
    program = ipc_filter_program(_MACHINE)
    instructions = (_SockFilter * len(program))(*(_SockFilter(*ins) for ins in program))
    fprog = _SockFprog(len(program), instructions)
    return _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) == 0


# struct landlock_ruleset_attr {handled_access_fs, handled_access_net, scoped}: made once, in the worker
_SCOPE_ATTR = ctypes.create_string_buffer(
    struct.pack("=QQQ", 0, 0, LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL), 24
)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; -1 without Landlock (a kernel before 5.13, or Landlock not in `lsm=`)."""
    return _syscall("landlock_create_ruleset", None, 0, LANDLOCK_CREATE_RULESET_VERSION)


def enter_landlock_scope() -> None:
    """Put this process (and all it starts) in a Landlock domain of its own that scopes abstract unix sockets and
    signals: it may connect only to sockets made in its domain and signal only processes in it. Sets no_new_privs,
    which a process without CAP_SYS_ADMIN needs for this."""
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    ruleset = _syscall("landlock_create_ruleset", _SCOPE_ATTR, 24, 0)
    if ruleset < 0:
        _fail("landlock_create_ruleset")
    try:
        _check(_syscall("landlock_restrict_self", ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)


def die_with_parent() -> None:
    _libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)


def set_limits(memory: int, cpu_seconds: int, processes: int, file_size: int, open_files: int) -> None:
    """Soft = hard, so the code cannot raise them back (raising a hard limit needs CAP_SYS_RESOURCE)."""
    for limit, value in (
        (resource.RLIMIT_AS, memory),
        (resource.RLIMIT_CPU, cpu_seconds),
        (resource.RLIMIT_NPROC, processes),
        (resource.RLIMIT_FSIZE, file_size),
        (resource.RLIMIT_NOFILE, open_files),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(limit, (value, value))
