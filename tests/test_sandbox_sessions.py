"""Sessions, languages, the request contract and the client (retries, replay), against the real sandbox server."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sandbox_server import SandboxServer, sandbox_pids, wait_for_census

from pipeline_kit.sandbox.client import SandboxClient, SandboxError, SandboxReplayError


@pytest.fixture(scope="module")
def sandbox():
    server = SandboxServer()
    time.sleep(0.2)
    server.baseline = sandbox_pids(server.proc.pid)
    yield server
    server.stop()


def test_state_persists_within_a_session_and_not_across(sandbox):
    assert sandbox.run("x = 41\nopen('/tmp/note', 'w').write('kept')", session="a")["status"] == "completed"
    res = sandbox.run("print(x + 1, open('/tmp/note').read())", session="a")
    assert res["stdout"] == "42 kept\n" and res["cell"] == 2
    other = sandbox.run("import os\nprint('x' in globals(), os.path.exists('/tmp/note'))", session="b")
    assert other["stdout"] == "False False\n"
    stateless = sandbox.run("print('x' in globals())")
    assert stateless["stdout"] == "False\n"


def test_sessions_are_listed_and_deleted(sandbox):
    sandbox.run("y = 1", session="to-delete")
    ids = {s["id"] for s in sandbox.call("GET", "/sessions")[1]["sessions"]}
    assert "to-delete" in ids
    assert sandbox.call("DELETE", "/sessions/to-delete") == (200, {"deleted": "to-delete"})
    assert sandbox.call("DELETE", "/sessions/to-delete")[0] == 404
    assert "to-delete" not in {s["id"] for s in sandbox.call("GET", "/sessions")[1]["sessions"]}


def test_a_session_process_is_gone_after_delete(sandbox):
    mine = sandbox.proc.pid
    before = sandbox_pids(mine)
    sandbox.run("import subprocess\np = subprocess.Popen(['sleep', '1000'])", session="bg")
    assert len(sandbox_pids(mine) - before) >= 2  # the session and its background sleep
    sandbox.call("DELETE", "/sessions/bg")
    assert wait_for_census(before, mine) == set()


def test_languages(sandbox):
    assert sandbox.run("1 + 1", language="ipython")["stdout"] == "2\n"
    assert sandbox.run("1 + 1", language="python")["stdout"] == ""
    assert sandbox.run("x = 5\nx * 2", language="ipython", session="ip")["stdout"] == "10\n"
    res = sandbox.run("echo $((6 * 7)); cat", language="shell", std_input="in\n")
    assert res["stdout"] == "42\nin\n"
    res = sandbox.run("echo made > f.txt", language="shell", session="sh")
    assert sandbox.run("print(open('f.txt').read())", session="sh")["stdout"] == "made\n\n"


def test_multiprocessing_pools_work_as_with_python_dash_c(sandbox):
    """The code's `__main__` is a module of its own (`runner.main_namespace`): a fork pool pickles a function the
    code defined, in a stateless run and in a session; spawn and forkserver pools find no script to rerun."""
    pool = "import multiprocessing as mp\ndef cube(x):\n    return x ** 3\n"
    fork = pool + "with mp.get_context('fork').Pool(2) as p:\n    print(p.map(cube, range(4)))"
    assert sandbox.run(fork, timeout=30)["stdout"] == "[0, 1, 8, 27]\n"
    assert sandbox.run(pool, session="mp")["status"] == "completed"
    cell = "with mp.get_context('fork').Pool(2) as p:\n    print(p.map(cube, range(4)))"
    assert sandbox.run(cell, session="mp", timeout=30)["stdout"] == "[0, 1, 8, 27]\n"
    fresh = "import multiprocessing as mp\nfor how in ('spawn', 'forkserver'):\n    with mp.get_context(how).Pool(2) as p:\n"
    res = sandbox.run(fresh + "        print(how, sum(p.map(abs, range(-3, 3))))", timeout=60)
    assert res["stdout"] == "spawn 9\nforkserver 9\n", res


def test_errors_and_exit_codes(sandbox):
    res = sandbox.run("raise ValueError('bad')")
    assert res["status"] == "error" and res["stderr"].strip().endswith("ValueError: bad")
    assert "pipeline_kit" not in res["stderr"]  # the runner's own frames are not shown
    assert sandbox.run("import sys\nsys.exit(3)")["exit_code"] == 3
    res = sandbox.run("1/0", session="err")
    assert res["status"] == "error" and "ZeroDivisionError" in res["stderr"]
    assert sandbox.run("print('still alive')", session="err")["stdout"] == "still alive\n"


@pytest.mark.parametrize(
    "body, message",
    [
        ({}, "'code' is required"),
        ({"code": 1}, "'code' is required"),
        ({"code": "1", "language": "ruby"}, "language 'ruby'"),
        ({"code": "1", "timeout": 10**6}, "timeout"),
        ({"code": "1", "timeout": -1}, "timeout"),
        ({"code": "1", "max_output_characters": -5}, "max_output_characters"),
        ({"code": "1", "stdin": "x"}, "unknown field 'stdin'"),
    ],
)
def test_bad_requests_are_400_with_the_field_named(sandbox, body, message):
    status, answer = sandbox.call("POST", "/execute", body)
    assert status == 400 and message in answer["error"]


def test_body_that_is_not_json(sandbox):
    status, answer = sandbox.call("POST", "/execute", b"not json")
    assert status == 400 and "bad JSON" in answer["error"]


def test_200_concurrent_executions_all_complete(sandbox):
    async def main():
        client = SandboxClient(sandbox.url, max_connections=200)
        try:
            return await asyncio.gather(*(client.execute(f"print({i} * {i})") for i in range(200)))
        finally:
            await client.close()

    results = asyncio.run(main())
    assert [r["status"] for r in results] == ["completed"] * 200
    assert [r["stdout"] for r in results] == [f"{i * i}\n" for i in range(200)]


@pytest.mark.parametrize("code", ["while True:\n    pass", "import time\ntime.sleep(60)"])
def test_a_cell_over_its_time_is_a_timeout_whether_cpu_or_wall_ends_it(sandbox, code):
    res = sandbox.run(code, session="busy", timeout=1)
    assert res["status"] == "timeout" and "session was reset" in res["stderr"]


def test_cpu_bound_stateless_run_is_a_timeout_even_when_the_cpu_limit_ends_it(sandbox):
    """RLIMIT_CPU (= the timeout) and the wall timeout race for a busy loop; either way the answer is a timeout."""
    results = [sandbox.run("while True:\n    pass", timeout=1)["status"] for _ in range(3)]
    assert results == ["timeout"] * 3


def test_client_replays_a_session_lost_to_a_timeout(sandbox):
    logs = []

    async def main():
        client = SandboxClient(sandbox.url, log=logs.append)
        try:
            await client.execute("x = 7", session_id="s1")
            await client.execute("y = x * 6", session_id="s1")
            timed_out = await client.execute("import time\ntime.sleep(60)", session_id="s1", timeout=1)
            after = await client.execute("print(y)", session_id="s1")
            return timed_out, after
        finally:
            await client.close()

    timed_out, after = asyncio.run(main())
    assert timed_out["status"] == "timeout" and "session was reset" in timed_out["stderr"]
    assert after["stdout"] == "42\n" and after["replayed_cells"] == 2
    assert "was lost" in logs[0] and "replaying its 2 cells" in logs[0]


def _after_its_process_is_killed(sandbox, session: str, cells: list[str], then: str, log=lambda m: None) -> dict:
    """Run `cells` in `session` through the client, kill the session's process (as a crashed worker would), then
    run `then`: the client replays the cells first."""
    import os
    import signal

    async def main():
        client = SandboxClient(sandbox.url, log=log)
        try:
            for cell in cells:
                await client.execute(cell, session_id=session)
            pid = next(s["pid"] for s in sandbox.call("GET", "/sessions")[1]["sessions"] if s["id"] == session)
            os.kill(pid, signal.SIGKILL)
            await asyncio.sleep(0.3)
            return await client.execute(then, session_id=session)
        finally:
            await client.close()

    return asyncio.run(main())


def test_client_replays_a_session_whose_process_was_killed(sandbox):
    res = _after_its_process_is_killed(sandbox, "victim", ["data = [1, 2, 3]"], "print(sum(data))")
    assert res["stdout"] == "6\n" and res["replayed_cells"] == 1 and res["replay_differed"] == []


def test_a_replay_whose_cells_print_something_else_says_so(sandbox):
    """A replayed cell that draws a random number prints another one: the rebuilt state is not what the caller
    (a TIR sample's model) saw, and the result and the log say which cells differed."""
    logs = []
    cells = ["import random\nx = random.random()\nprint(x)", "y = 2\nprint(y)"]
    res = _after_its_process_is_killed(sandbox, "drawn", cells, "print(y)", logs.append)
    assert res["stdout"] == "2\n" and res["replayed_cells"] == 2 and res["replay_differed"] == [1], res
    assert "cells [1] printed other output than before" in logs[-1], logs


def test_client_replays_after_a_server_restart():
    server = SandboxServer()
    client = SandboxClient(server.url, max_retries=8, retry_delay=0.25, log=lambda m: None)

    async def first():
        await client.execute("import math\nr = math.factorial(5)", session_id="keep")

    async def second():
        try:
            return await client.execute("print(r)", session_id="keep")
        finally:
            await client.close()

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(first())
        server.stop()
        server = SandboxServer(port=server.port)  # a new process: every session is gone
        res = loop.run_until_complete(second())
    finally:
        loop.close()
        server.stop()
    assert res["stdout"] == "120\n" and res["replayed_cells"] == 1


def test_replay_that_fails_is_a_clear_error(sandbox):
    deadline = time.time() + 1.5

    async def main():
        client = SandboxClient(sandbox.url, log=lambda m: None)
        try:
            await client.execute(f"import time\nassert time.time() < {deadline}\nz = 1", session_id="s2")
            await asyncio.sleep(max(0.0, deadline - time.time()) + 0.1)
            await client.execute("import time\ntime.sleep(60)", session_id="s2", timeout=1)
            await client.execute("print(z)", session_id="s2")
        finally:
            await client.close()

    with pytest.raises(SandboxReplayError, match=r"replaying cell 1 of 1 failed .*AssertionError"):
        asyncio.run(main())


def test_unreachable_sandbox_is_one_clear_error():
    async def main():
        client = SandboxClient("http://127.0.0.1:9", max_retries=1, retry_delay=0.01)
        try:
            await client.execute("1")
        finally:
            await client.close()

    with pytest.raises(SandboxError, match=r"did not answer after 2 tries"):
        asyncio.run(main())


def test_worker_that_dies_is_restarted(sandbox):
    health = sandbox.call("GET", "/health")[1]
    victim = min(health["worker_pids"])  # a worker of this server, never another test's
    import os
    import signal

    os.kill(victim, signal.SIGKILL)
    time.sleep(0.3)
    results = [sandbox.run("print('ok')")["stdout"] for _ in range(4)]
    assert results == ["ok\n"] * 4
    assert sandbox.call("GET", "/health")[1]["worker_restarts"] == health["worker_restarts"] + 1


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_the_workers_share_one_import_of_the_preloaded_modules(sandbox):
    """The workers are forks of one zygote that imported numpy and sympy (~45 MB of memory of its own): each worker
    holds only what it wrote since (2 MB here; 47 MB when each imported them itself)."""
    pids = sandbox.call("GET", "/health")[1]["worker_pids"]
    (zygote,) = {_parent(pid) for pid in pids}
    assert _parent(zygote) == sandbox.proc.pid
    for pid in pids:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
        private = sum(int(line.split()[1]) for line in rollup if line.startswith(("Private_Dirty", "Private_Clean")))
        assert private < 16 * 1024, (pid, rollup)  # kB


def test_workers_outlive_a_dead_zygote_and_a_restart_makes_a_new_one():
    import signal

    server = SandboxServer("--workers", "1")
    try:
        (worker,) = server.call("GET", "/health")[1]["worker_pids"]
        zygote = _parent(worker)
        os.kill(zygote, signal.SIGKILL)  # its worker is bound to the server by its control socket, not to it
        time.sleep(0.3)
        assert server.run("print(1)")["stdout"] == "1\n"
        os.kill(worker, signal.SIGKILL)
        time.sleep(0.3)
        assert server.run("import sys\nprint('sympy' in sys.modules)")["stdout"] == "True\n"
        health = server.call("GET", "/health")[1]
        (new,) = health["worker_pids"]
        assert health["worker_restarts"] == 1 and new != worker and _parent(new) not in (zygote, server.proc.pid)
    finally:
        server.stop()


def test_a_python_without_numpy_and_sympy_is_named_at_start_and_in_health(tmp_path):
    """The sandbox run by an interpreter that has aiohttp but not the math libraries code imports."""
    import site

    libs = tmp_path / "site"
    libs.mkdir()
    for entry in Path(site.getsitepackages()[0]).iterdir():
        if not entry.name.lower().startswith(("numpy", "sympy", "mpmath", "_distutils", "distutils-precedence")):
            (libs / entry.name).symlink_to(entry)
    # a bare venv of the base interpreter (whose own site-packages has both); aiohttp and the rest come by PYTHONPATH
    subprocess.run(
        [Path(sys.base_prefix) / "bin" / "python3", "-m", "venv", "--without-pip", tmp_path / "v"], check=True
    )
    python = str(tmp_path / "v" / "bin" / "python3")
    server = SandboxServer(python=python, env={**os.environ, "PYTHONPATH": str(libs)})
    try:
        warning = [line for line in server.startup_log if "warning" in line]
        assert len(warning) == 1 and "lacks numpy, sympy, which math code imports" in warning[0], server.startup_log
        health = server.call("GET", "/health")[1]
        assert health["missing_libraries"] == ["numpy", "sympy"] and health["preloaded"] == [], health
        assert server.run("import sympy")["status"] == "error"
    finally:
        server.stop()
    with_them = SandboxServer()
    try:
        assert with_them.call("GET", "/health")[1]["missing_libraries"] == []
        assert not [line for line in with_them.startup_log if "lacks" in line]
    finally:
        with_them.stop()


PRELOADED = "import sys\nprint([name in sys.modules for name in ('numpy', 'sympy')])"


def test_the_math_libraries_are_preloaded_and_preload_chooses_them(sandbox):
    """By default the workers' zygote imports numpy and sympy before it forks them (an execution's `import sympy` cost ~250 ms,
    perf/README.md): executions and sessions find them imported. --preload names others, or none."""
    assert sandbox.call("GET", "/health")[1]["preloaded"] == ["numpy", "sympy"]
    assert sandbox.run(PRELOADED)["stdout"] == "[True, True]\n"
    assert sandbox.run(PRELOADED, session="preloaded")["stdout"] == "[True, True]\n"
    only_sympy = SandboxServer("--preload", "sympy", "--workers", "1")
    none = SandboxServer("--preload", "", "--workers", "1")
    try:
        assert only_sympy.run(PRELOADED)["stdout"] == "[False, True]\n"
        assert none.run(PRELOADED)["stdout"] == "[False, False]\n"
        assert none.run("import sympy\nprint(sympy.Rational(1, 3) * 3)")["stdout"] == "1\n"  # still importable
    finally:
        only_sympy.stop()
        none.stop()


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--preload", "nosuchmodule"], "--preload nosuchmodule: ModuleNotFoundError: No module named 'nosuchmodule'"),
        (["--preload", "numpy,two words"], "'two words' is not a module name"),
        # OpenBLAS then starts threads at import, and a worker with threads cannot enter a user namespace
        (
            ["--preload", "numpy", "--env", "OPENBLAS_NUM_THREADS=2"],
            "thread(s) in the worker, which must have only one",
        ),
    ],
)
def test_a_preload_that_cannot_be_had_is_one_line_at_start(flags, needle):
    res = subprocess.run(
        [sys.executable, "-m", "pipeline_kit.sandbox.server", "--port", "0", "--workers", "1", *flags],
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2 and needle in res.stderr, res
    assert len(res.stderr.strip().splitlines()) == 1 and not res.stdout, res
