"""Which isolation layers this host or container allows, found out once at start-up by trying each one in a forked
child, as the workers would: a layer that cannot be had is dropped, with the reason the server logs and /health
reports, rather than failing every worker start (stdlib only).

What containers allow differs. Under Docker with kit's unconfined seccomp/AppArmor everything works. Under
pyxis/enroot (measured with enroot 4.1.2 as root): every namespace kind can be unshared and mounts work inside, but
enroot's user namespace maps a single uid (uid_map `0 0 1`), so root cannot map nobody (EPERM) and the sandbox stays
uid 0 outside, which RLIMIT_NPROC never binds; and enroot's seccomp filter makes setuid() & co. return success
without doing anything, so a drop to another uid cannot even be seen to fail."""

from __future__ import annotations

import errno
import os
from dataclasses import replace

from pipeline_kit.sandbox import isolation
from pipeline_kit.sandbox.isolation import Layers

# Without these the code would reach the network or the whole filesystem: a sandbox refuses to start without them
# (unless --isolation switched them off), instead of running without them.
ESSENTIAL = ("net_ns", "mount_ns")
PROBE_MOUNT = "/tmp"  # a tmpfs goes on it in the probe's own mount namespace, unseen by anyone else


class Unavailable(Exception):
    """A layer this host or container does not allow; the message says why, for the log and /health."""


def _errno_text(e: OSError) -> str:
    return f"{errno.errorcode.get(e.errno, e.errno)} ({e.strerror})" if e.errno else str(e)


def in_child(attempt) -> str | None:
    """Run `attempt()` in a forked child (whatever namespaces it enters are gone with it): None when it worked,
    else its error as text."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(r)
            attempt()
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            os.write(w, (_errno_text(e) if isinstance(e, OSError) else f"{type(e).__name__}: {e}").encode())
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        message = f.read().decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) == 0:
        return None
    return message or f"the probe exited with {os.waitstatus_to_exitcode(status)}"


def _id_map() -> str:
    try:
        with open("/proc/self/uid_map") as f:
            return " | ".join(" ".join(line.split()) for line in f)
    except OSError:
        return "unreadable"


def _user_ns() -> None:
    isolation.enter_own_user_namespace(isolation.CLONE_NEWIPC | isolation.CLONE_NEWUTS)


def _nobody() -> None:
    isolation.unshare_user_as_nobody()


def _mount() -> None:
    isolation.mount(None, "/", None, isolation.MS_REC | isolation.MS_PRIVATE)
    isolation.mount("tmpfs", PROBE_MOUNT, "tmpfs", isolation.MS_NOSUID | isolation.MS_NODEV, "size=64k")
    isolation.mount(None, PROBE_MOUNT, None, isolation.MS_REMOUNT | isolation.MS_RDONLY)


def _pid() -> None:
    """The next fork is PID 1 of the new namespace (each execution mounts its /proc there when it may)."""
    pid = os.fork()
    if pid == 0:
        os._exit(0 if os.getpid() == 1 else 1)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise isolation.IsolationError(0, "the first process of a new PID namespace was not PID 1")


def _within(user_ns: bool, flag: int, then=None):
    """An attempt at `flag` from where the worker stands: inside its user namespace when it has one."""

    def attempt() -> None:
        if user_ns:
            _user_ns()
        isolation.unshare(flag)
        if then is not None:
            then()

    return attempt


def probe(wanted: Layers) -> tuple[Layers, dict[str, str]]:
    """The layers of `wanted` this host allows, and why each other wanted one cannot be had. The cgroup layers
    are left as wanted: the pool knows only once it tries to make the server's cgroups."""
    off: dict[str, str] = {}
    if wanted.user_ns and (err := in_child(_user_ns)):
        off["user_ns"] = (
            f"unshare(CLONE_NEWUSER) failed: {err}; user namespaces are off here (kernel.unprivileged_userns_clone, "
            "user.max_user_namespaces, or a container's seccomp/AppArmor profile)"
        )
    user_ns = wanted.user_ns and "user_ns" not in off
    if wanted.user_ns and wanted.nobody_uid and (why := _why_not_nobody(user_ns)):
        off["nobody_uid"] = why
    for layer, flag, name, then in (
        ("net_ns", isolation.CLONE_NEWNET, "CLONE_NEWNET", None),
        ("mount_ns", isolation.CLONE_NEWNS, "CLONE_NEWNS", _mount),
        ("pid_ns", isolation.CLONE_NEWPID, "CLONE_NEWPID", _pid),
    ):
        if getattr(wanted, layer) and (err := in_child(_within(user_ns, flag, then))):
            inside = "in its own user namespace" if user_ns else "without a user namespace (needs CAP_SYS_ADMIN)"
            off[layer] = f"unshare({name}) {inside} failed: {err}"
    if wanted.landlock_scope and (why := _why_no_landlock_scope()):
        off["landlock_scope"] = why
    effective = replace(wanted, **{name: False for name in off})
    if not effective.user_ns:
        effective = replace(effective, nobody_uid=False)  # nobody is mapped by the user namespace, or not at all
    return effective, off


def _why_not_nobody(user_ns: bool) -> str | None:
    if not user_ns:
        return "it needs the user_ns layer, which is off"
    if os.getuid() != 0:
        return (
            f"the server runs as uid {os.getuid()}, not root: only root may map another uid, so the sandbox runs as "
            "this uid outside its namespaces"
        )
    if err := in_child(_nobody):
        return (
            f"mapping nobody ({isolation.NOBODY}) into a user namespace failed: {err}; this one maps only "
            f"'{_id_map()}' (a container's one-uid namespace, as enroot's), so the sandbox runs as uid 0 outside: it "
            "owns root's files (those under /etc that others may not read are masked), and RLIMIT_NPROC does not "
            "bind it (the kernel exempts uid 0): the process limit holds only through the pids cgroup"
        )
    return None


def _why_no_landlock_scope() -> str | None:
    without = "a worker's concurrent executions can reach each other's abstract unix sockets"
    abi = isolation.landlock_abi()
    if abi < isolation.LANDLOCK_SCOPE_ABI:
        have = "no Landlock (not built in, or not in the kernel's lsm= list)" if abi < 0 else f"Landlock ABI {abi}"
        return (
            f"scoping abstract unix sockets needs Landlock ABI {isolation.LANDLOCK_SCOPE_ABI} (Linux 6.12+); this "
            f"kernel ({os.uname().release}) has {have}: {without}"
        )
    if err := in_child(isolation.enter_landlock_scope):
        return f"entering a Landlock domain failed: {err}: {without}"
    return None


def essential_missing(wanted: Layers, off: dict[str, str]) -> list[str]:
    """The essential layers that were wanted but cannot be had."""
    return [name for name in ESSENTIAL if getattr(wanted, name) and name in off]
