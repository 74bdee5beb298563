"""The worker's namespaces and root, made once per worker (stdlib only: the worker imports this before it takes
requests).

`enter_worker_namespaces`: user, network, IPC, UTS and mount namespaces; a small read-only tmpfs on HOLDER that holds
/proc and the staging root (read-only, allow-listed folders) at SANDBOX. `leave_host_root`: HOLDER becomes the
worker's `/` (pivot_root), and the host's mounts leave its mount namespace. Every execution copies that namespace
(`isolation.enter_execution_namespaces`) and tears its copy down at the end: a dozen mounts now, whatever the host
has (a Docker host or a cluster node mounts hundreds), and the host's filesystem is no longer in it at all."""

from __future__ import annotations

import os
import stat

from pipeline_kit.sandbox import isolation
from pipeline_kit.sandbox.isolation import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWUTS,
    DEVICES,
    HOLDER,
    MNT_DETACH,
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    PRIVATE_SCAN,
    STAGING,
    Layers,
    enter_own_user_namespace,
    mount,
    mount_flags,
    unshare,
    unshare_user_as_nobody,
)


def _bind_readonly(source_fd: int, target: str) -> None:
    mount(f"/proc/self/fd/{source_fd}", target, None, MS_BIND | MS_REC)
    flags = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | mount_flags(source_fd)
    mount(None, target, None, flags)


def _open_sources(readonly_paths: list[str]) -> dict[str, int | str]:
    """Path -> an O_PATH fd to bind from (opened while root may still traverse, e.g. /root/.pyenv), or the
    target of a top-level symlink (/bin -> usr/bin on merged-/usr systems)."""
    sources: dict[str, int | str] = {}
    for path in sorted({os.path.realpath(p) if os.path.dirname(p) != "/" else p for p in readonly_paths}):
        if os.path.islink(path):
            sources[path] = os.readlink(path)
        elif os.path.exists(path):
            sources[path] = os.open(path, os.O_PATH | os.O_CLOEXEC)
    for name in DEVICES:
        sources[f"/dev/{name}"] = os.open(f"/dev/{name}", os.O_PATH | os.O_CLOEXEC)
    return sources


def enter_worker_namespaces(layers: Layers, readonly_paths: list[str]) -> None:
    """Once per worker: user + network + IPC + UTS + mount namespaces and the staging root under STAGING.

    Root maps root of the new user namespace to `nobody` (root mapped to root would keep owning root's files, and
    RLIMIT_NPROC never binds uid 0) and opens the folders to bind first, while it may still traverse folders like
    /root. Without the nobody_uid layer (a container whose user namespace maps one uid) it maps its own uid."""
    as_root = os.getuid() == 0  # before the user namespace, where anyone is root
    as_nobody = layers.user_ns and layers.nobody_uid and as_root
    if not layers.user_ns:
        if layers.net_ns or layers.mount_ns:
            unshare((CLONE_NEWNET if layers.net_ns else 0) | (CLONE_NEWNS if layers.mount_ns else 0))
    else:
        flags = CLONE_NEWIPC | CLONE_NEWUTS | (CLONE_NEWNS if layers.mount_ns else 0)
        flags |= CLONE_NEWNET if layers.net_ns else 0
        if as_root:
            os.setgroups([])  # root's supplementary groups would keep their access outside
        if as_nobody:
            unshare_user_as_nobody(flags)
        else:
            enter_own_user_namespace(flags)
    # opened in the new mount namespace (a bind's source must be in it) and before root turns into nobody
    sources = _open_sources(readonly_paths) if layers.mount_ns else {}
    try:
        if as_nobody:
            os.setresgid(0, 0, 0)  # root of the namespace, which is nobody outside; capabilities stay
            os.setresuid(0, 0, 0)
            isolation.set_dumpable()  # a uid change clears it; uid_map writes need it
        if layers.mount_ns:
            _build_staging_root(sources, mask_private=as_root and not as_nobody)
    finally:
        for source in sources.values():
            if isinstance(source, int):
                os.close(source)


def _build_staging_root(sources: dict[str, int | str], mask_private: bool) -> None:
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("tmpfs", HOLDER, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=16k")
    os.mkdir(STAGING)
    os.mkdir(HOLDER + "/proc")
    # the worker's /proc once HOLDER is its root, outside each execution's chroot: where the supervisor writes the
    # execution's id maps, and what lets it mount a new proc (the kernel allows that only where one is fully visible)
    mount("/proc", HOLDER + "/proc", None, MS_BIND | MS_REC)
    mount("tmpfs", STAGING, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m")
    dev = STAGING + "/dev"
    os.makedirs(dev)
    mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k")
    for path, source in sources.items():
        target = STAGING + path
        if isinstance(source, str):
            os.symlink(source, target)
        elif path.startswith("/dev/"):
            open(target, "w").close()
            mount(f"/proc/self/fd/{source}", target, None, MS_BIND)
        else:
            os.makedirs(target, exist_ok=True)
            _bind_readonly(source, target)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "fd/0"), ("stdout", "fd/1"), ("stderr", "fd/2")):
        os.symlink(target, f"{dev}/{name}")
    os.makedirs(f"{dev}/shm")
    mount(None, dev, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC)
    for folder in ("proc", "tmp"):
        os.makedirs(f"{STAGING}/{folder}", exist_ok=True)
    if mask_private:
        for top in PRIVATE_SCAN:
            if os.path.isdir(STAGING + top) and not os.path.islink(STAGING + top):
                _mask_private(STAGING + top)
    mount(None, STAGING, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    mount(None, HOLDER, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


def _mask_private(top: str) -> None:
    """Cover each file and folder under `top` that others may not read with an empty one of mode 000, read-only.
    For a sandbox that runs as the uid owning them (root, where it cannot be nobody): the read-only bind alone
    would let it read /etc/shadow or private keys, being their owner; mode 000 stops it once it has no capabilities."""
    holder = STAGING + "/.mask"  # a tmpfs of its own, detached afterwards: no trace in the root, no deleted inode
    os.mkdir(holder)
    mount("tmpfs", holder, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0700,size=4k")
    mask = holder + "/empty"
    os.close(os.open(mask, os.O_CREAT | os.O_WRONLY, 0))
    os.chmod(mask, 0)
    for folder, dirs, files in os.walk(top):
        for name in list(dirs):
            path = os.path.join(folder, name)
            if os.lstat(path).st_mode & 0o005 != 0o005:
                mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=000,size=4k")
                dirs.remove(name)
        for name in files:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and not st.st_mode & stat.S_IROTH:
                mount(mask, path, None, MS_BIND)
                mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    isolation.umount(holder, MNT_DETACH)
    os.rmdir(holder)


def leave_host_root(layers: Layers) -> None:
    """After `enter_worker_namespaces` (and after the worker opened what it keeps using outside HOLDER: its cgroup
    folders): HOLDER becomes this process's `/` and the old root leaves the mount namespace. pivot_root refuses
    some roots (the initial ramfs): then the host's mounts stay, and executions chroot into STAGING as before."""
    if not layers.mount_ns:
        return
    os.chdir(HOLDER)
    if not isolation.pivot_root("."):  # done: the old root now lies over the new one, on "/"
        os.chdir("/")
        return
    isolation.umount(".", MNT_DETACH)  # every mount of the host goes with it (lazily: once no one uses them)
    os.chdir("/")
    isolation.root_is_holder()
