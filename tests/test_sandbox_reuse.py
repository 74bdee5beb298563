"""What one execution leaves behind never reaches the next: a worker reuses its cgroups (`cgroups.Slots`) rather
than making and removing one per execution, so these tests run executions one after another through a single
worker, check that they really shared a cgroup, and look for the first one's memory, OOM kills, processes and
IPC objects in the second."""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sandbox_server import SandboxServer, sandbox_pids, wait_for_census

from pipeline_kit.sandbox import isolation, support
from pipeline_kit.sandbox.cgroups import ServerCgroup, Slots, folder_name, hierarchy, sweep_stale
from pipeline_kit.sandbox.isolation import DEVICES, SANDBOX, Layers, enter_execution_namespaces
from pipeline_kit.sandbox.pool import DEFAULT_READONLY, python_paths

MiB = 1 << 20


@pytest.fixture(scope="module")
def sandbox():
    server = SandboxServer("--workers", "1", "--memory_gb", "1", "--tmp_size_mb", "600")
    try:
        time.sleep(0.2)
        server.baseline = sandbox_pids(server.proc.pid)
        assert "memory_cgroup" in server.call("GET", "/health")[1]["isolation"]
        yield server
    finally:
        server.stop()


def run_alone(sandbox, code: str, **fields) -> dict:
    """One execution, once the previous one is wholly gone (its supervisor reaped, so its cgroup is free again)."""
    assert wait_for_census(sandbox.baseline, sandbox.proc.pid) == set()
    return sandbox.run(code, **fields)


def slot_folders(sandbox) -> list[str]:
    """The execution cgroups the server's worker made under its memory folder."""
    server_folder = Path(hierarchy("memory")) / folder_name(sandbox.proc.pid)
    return sorted(p.name for p in server_folder.iterdir() if p.is_dir())


def test_the_next_execution_gets_the_whole_memory_limit_in_a_reused_cgroup(sandbox):
    code = (
        "for name in 'ab':\n    with open(f'/tmp/{name}', 'wb') as f:\n        for _ in range(45):\n"
        "            f.write(b'x' * (5 * 2**20))\nprint('wrote')"
    )
    fill = run_alone(sandbox, code, timeout=30)
    assert fill["stdout"] == "wrote\n", fill  # 450 MiB of tmpfs pages, charged to its cgroup
    # 3 x 250 MiB + the interpreters: over the 1 GiB limit had the 450 MiB stayed charged to the cgroup
    code = (
        "import os, time\nfor _ in range(3):\n    if os.fork() == 0:\n        x = b'x' * (250 * 2**20)\n"
        "        time.sleep(1)\n        os._exit(0)\nfor _ in range(3):\n    os.wait()\nprint('fits')"
    )
    res = run_alone(sandbox, code, timeout=30)
    assert (res["status"], res["stdout"]) == ("completed", "fits\n"), res
    assert len(slot_folders(sandbox)) == 1, slot_folders(sandbox)  # the two shared one cgroup


def test_an_oom_kill_is_reported_for_its_execution_only(sandbox):
    code = (
        "import os, time\nfor _ in range(6):\n    if os.fork() == 0:\n        x = b'x' * (600 * 2**20)\n"
        "        time.sleep(30)\n        os._exit(0)\nfor _ in range(6):\n    os.wait()"
    )
    res = run_alone(sandbox, code, timeout=20)
    assert res["status"] == "error" and "used more than the memory limit" in res["stderr"], res
    after = run_alone(sandbox, "print('next')")
    assert (after["status"], after["stdout"], after["stderr"]) == ("completed", "next\n", ""), after
    assert len(slot_folders(sandbox)) == 1, slot_folders(sandbox)


def test_system_v_ipc_and_message_queues_are_refused_so_none_outlives_its_execution(sandbox):
    """Executions on one worker share its IPC namespace, where a segment one left behind the next could read: the
    worker's seccomp filter (`isolation.refuse_ipc`) refuses every call that makes or reaches such an object."""
    code = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n" + "".join(
        f"print('{name}', libc.{name}({args}), ctypes.get_errno())\n"
        for name, args in (
            ("shmget", "4242, 4096, 0o1000 | 0o600"),
            ("semget", "4242, 1, 0o1000 | 0o600"),
            ("msgget", "4242, 0o1000 | 0o600"),
            ("mq_open", "b'/kit', 0o100 | 2, 0o600, None"),
            ("shmctl", "0, 0, None"),  # IPC_RMID of an id some other process might hold
        )
    )
    res = run_alone(sandbox, code)
    assert res["stdout"] == "".join(f"{name} -1 1\n" for name in ("shmget", "semget", "msgget", "mq_open", "shmctl"))
    posix = "import multiprocessing.shared_memory as s\nm = s.SharedMemory(create=True, size=64)\nprint(m.size)"
    assert run_alone(sandbox, posix)["stdout"] == "64\n"  # POSIX shared memory: a file in its own /dev/shm


LISTEN = (
    "import socket\nserver = socket.socket(socket.AF_UNIX)\nserver.bind(b'\\0kit-abstract')\nserver.listen(1)\n"
    "server.settimeout({wait})\n"
)
# ECONNREFUSED (111) while nothing listens yet: it tries again for up to 8 s, so it waits for the listener
CONNECT = (
    "import socket, time\nfor _ in range(80):\n    client = socket.socket(socket.AF_UNIX)\n    try:\n"
    "        client.connect(b'\\0kit-abstract')\n        print('connected', flush=True)\n        break\n"
    "    except OSError as e:\n        if e.errno != 111:\n            print('refused', e.errno, flush=True)\n"
    "            break\n    time.sleep(0.1)\n"
)


def test_concurrent_executions_cannot_reach_each_others_abstract_unix_sockets(sandbox):
    """A worker's executions share its network namespace, which names abstract unix sockets: each execution's own
    Landlock domain (the landlock_scope layer) keeps another's connect out, while its own processes still connect."""
    if "landlock_scope" not in sandbox.call("GET", "/health")[1]["isolation"]:
        pytest.skip("this kernel has no Landlock scoping (Linux 6.12+); /health says so")
    listener = (
        LISTEN.format(wait=4) + "try:\n    server.accept()\n    print('accepted')\nexcept OSError:\n    print('none')"
    )
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(sandbox.run, listener, timeout=10)
        other = sandbox.run(CONNECT, timeout=10)
        assert first.result()["stdout"] == "none\n", first.result()
    assert other["stdout"] == "refused 1\n", other  # EPERM: outside its domain
    within = (
        LISTEN.format(wait=5)
        + "import os\nif os.fork() == 0:\n"
        + "".join("    " + line + "\n" for line in CONNECT.splitlines())
        + "    os._exit(0)\nserver.accept()\nos.wait()"
    )
    assert run_alone(sandbox, within)["stdout"] == "connected\n"


@pytest.mark.parametrize("abi, has", [(-1, "no Landlock"), (5, "Landlock ABI 5")])
def test_a_kernel_without_landlock_scoping_drops_that_layer_and_says_what_it_means(monkeypatch, abi, has):
    monkeypatch.setattr(isolation, "landlock_abi", lambda: abi)
    layers, off = support.probe(Layers.full())
    assert not layers.landlock_scope and layers.net_ns, (layers, off)
    assert has in off["landlock_scope"] and "can reach each other's abstract unix sockets" in off["landlock_scope"]


@pytest.mark.parametrize("refused", [True, False])
def test_an_execution_has_its_own_ipc_namespace_only_where_the_filter_did_not_take(refused):
    """`enter_execution_namespaces`: with the worker's filter an execution stays in the worker's IPC namespace (its
    teardown would cost each execution ~0.25 ms of the kernel's CPU); without one it gets its own."""
    before = os.readlink("/proc/self/ns/ipc")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            enter_execution_namespaces(Layers(pid_ns=False, mount_ns=False), ipc_refused=refused)
            os.write(write, os.readlink("/proc/self/ns/ipc").encode())
        finally:
            os._exit(0)
    os.close(write)
    inside = os.read(read, 100).decode()
    os.waitpid(pid, 0)
    assert inside.startswith("ipc:[") and (inside == before) is refused, (before, inside)


def test_a_cgroup_with_a_process_left_in_it_is_not_reused():
    """Slots.give_back: a cgroup that still holds a process (a killed session's PID 1 not yet gone; an orphan
    without the pid_ns layer) drains, and only an empty one is handed out again."""
    server = ServerCgroup.create(os.getuid(), os.getgid(), "pids")
    leftover = subprocess.Popen(["sleep", "60"])
    slots = Slots([server.path])
    first = second = None
    try:
        first = slots.take(memory=1 << 30, processes=8)
        assert Path(first.paths[0], "pids.max").read_text() == "8\n"
        Path(first.paths[0], "cgroup.procs").write_text(str(leftover.pid))  # as if an execution left it there
        slots.lend(12345, first)
        slots.give_back(12345)  # its supervisor reaped, a process still in it
        second = slots.take(memory=1 << 30, processes=8)
        assert second is not first and first in slots.draining
        slots.lend(12346, second)
        slots.give_back(12346)
        assert slots.take(memory=1 << 30, processes=8) is second  # an empty one is reused
        leftover.send_signal(signal.SIGKILL)
        leftover.wait()
        deadline = time.monotonic() + 10
        while not first.empty() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert slots.take(memory=1 << 30, processes=8) is first  # drained: handed out again
    finally:
        leftover.kill()
        leftover.wait()
        for slot in {*slots.free, *slots.draining, first, second} - {None}:
            slot.remove()
        server.remove()


def test_the_folders_of_a_killed_server_are_removed_by_the_next_one():
    """A server killed with SIGKILL cannot remove its cgroup folders; the next server that starts on the host does
    (on xdist another test's server may start first and do it: either way they are gone once one has started)."""
    killed = SandboxServer("--workers", "1")
    survivor = None
    left = [Path(hierarchy(c), folder_name(killed.proc.pid)) for c in ("memory", "pids")]
    try:
        assert killed.run("print(1)")["stdout"] == "1\n"
        assert all(any(p.is_dir() for p in folder.iterdir()) for folder in left)  # a slot was made in each
        killed.proc.kill()
        killed.proc.wait()
        slots = [slot for folder in left for slot in folder.iterdir() if slot.is_dir()]
        deadline = time.monotonic() + 10  # its worker follows it (die_with_parent), and the slots empty
        while any((slot / "cgroup.procs").read_text() for slot in slots) and time.monotonic() < deadline:
            time.sleep(0.05)
        survivor = SandboxServer("--workers", "1")
        assert not any(folder.exists() for folder in left), survivor.startup_log
        assert Path(hierarchy("memory"), folder_name(survivor.proc.pid)).is_dir()
        said = "".join(line for line in survivor.startup_log if "were killed before they could remove them" in line)
        assert not said or all(str(folder) in said for folder in left)
    finally:
        for server in (killed, survivor):
            if server is not None:
                server.stop()


def test_only_the_folders_of_gone_servers_of_this_pid_namespace_are_swept(tmp_path):
    """`sweep_stale`: a folder goes when its server's pid is gone in this PID namespace and nothing is left in it;
    a live server's, another PID namespace's (a server in another container, whose pid this one cannot check), an
    older name and a folder that still holds something stay."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    own = folder_name(gone.pid).rsplit("pidns", 1)[1]
    stale = tmp_path / f"kit-sandbox-{gone.pid}-pidns{own}"
    (stale / "w1-0").mkdir(parents=True)
    (stale / "w1-1").mkdir()
    kept = [
        tmp_path / folder_name(os.getpid()),
        tmp_path / f"kit-sandbox-{gone.pid}-pidns{int(own) + 1}",
        tmp_path / f"kit-sandbox-{gone.pid}",
        tmp_path / f"kit-sandbox-{gone.pid + 1}-pidns{own}",
    ]
    for folder in kept:
        folder.mkdir()
    (kept[-1] / "w1-0").mkdir()
    (kept[-1] / "w1-0" / "held").write_text("")  # rmdir refuses it, as a cgroup with a process in it
    assert sweep_stale(str(tmp_path)) == (str(stale),)
    assert not stale.exists() and all(folder.is_dir() for folder in kept)


def test_a_key_in_the_user_keyring_stays_with_its_execution(sandbox):
    """The user keyrings belong to the user namespace: were an execution's shared with the next (one user
    namespace per worker rather than per execution), a key one added there the next could read."""
    numbers = {"x86_64": (248, 250), "aarch64": (217, 219)}.get(platform.machine())
    if numbers is None:
        pytest.skip(f"no add_key/keyctl numbers for {platform.machine()}")
    keys = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        f"ADD_KEY, KEYCTL = {numbers[0]}, {numbers[1]}\nUSER_KEYRING, SEARCH = ctypes.c_long(-4), 10\n"
    )
    add = keys + "print(libc.syscall(ADD_KEY, b'user', b'kit-left-behind', b'secret', 6, USER_KEYRING) > 0)"
    assert run_alone(sandbox, add)["stdout"] == "True\n"  # the key was added: the next check can fail
    find = (
        keys + "print(libc.syscall(KEYCTL, SEARCH, USER_KEYRING, b'user', b'kit-left-behind', 0), ctypes.get_errno())"
    )
    assert run_alone(sandbox, find)["stdout"] == "-1 126\n"  # ENOKEY: its user keyring is a new one


def test_the_worker_root_holds_only_the_staging_root(sandbox):
    """The worker makes a small tmpfs holding /proc and the staging root its `/` and lets go of the host's mounts,
    so that each execution's copy of its mount namespace holds those only: not the host's root, cgroups, sysfs or
    /dev (the code sees none of them either way: it is chrooted into the staging root)."""
    (worker,) = sandbox.call("GET", "/health")[1]["worker_pids"]
    mounts = [line.split() for line in Path(f"/proc/{worker}/mountinfo").read_text().splitlines()]
    points = {fields[4] for fields in mounts}
    fstypes = {fields[fields.index("-") + 1] for fields in mounts}
    assert not fstypes & {"cgroup", "cgroup2", "sysfs", "devpts", "mqueue"}, fstypes
    staging = {"/dev", *(f"/dev/{name}" for name in DEVICES), *DEFAULT_READONLY, *python_paths()}
    allowed = {"/", "/proc", SANDBOX} | {
        SANDBOX + (os.path.realpath(p) if os.path.dirname(p) != "/" else p) for p in staging
    }
    assert points <= allowed, points - allowed
    assert {"/", "/proc", SANDBOX, SANDBOX + "/usr"} <= points, points
    root = next(fields for fields in mounts if fields[4] == "/")
    assert root[root.index("-") + 1] == "tmpfs", root  # the holder, not the host's root
