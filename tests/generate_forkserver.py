"""A pre-imported generation script for the tests: `python -m pipeline_kit.inference.generate` costs ~3 s of CPU
before its first request, nearly all of it `import litellm`. This process imports the script and LiteLLM once,
then forks one child per run; the child runs the script as `-m` does, with the caller's argv, environment and
working directory, its stdout and stderr in files, and exits with the script's exit code.

Protocol (one run at a time, JSON lines): the caller writes {"argv", "cwd", "env", "stdout", "stderr"}; this process
answers {"pid"} as soon as the child is forked, then {"rc"} when it has ended."""

import json
import os
import runpy
import sys


def run_child(request: dict) -> None:
    """In the forked child: become `python -m pipeline_kit.inference.generate ARGV` and never return."""
    code = 1
    try:
        os.setsid()  # as a subprocess of its own: a test may kill its process group
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(out, fd)
            os.close(out)
        sys.argv = ["-m", *request["argv"][1:]]  # run_module puts the module's path first
        sys.path[0] = request["cwd"]  # `python -m` puts the working directory first
        try:
            runpy.run_module("pipeline_kit.inference.generate", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if not isinstance(e.code, (int, type(None))):
                print(e.code, file=sys.stderr)
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def main() -> None:
    sys.path[0] = os.getcwd()
    import pipeline_kit.inference.generate  # noqa: F401  (every module it imports stays imported)
    from pipeline_kit.inference.client import import_litellm

    del sys.modules["pipeline_kit.inference.generate"]  # the child runs it as __main__, as `-m` does, once

    import_litellm()  # with gc frozen after it, as in a real run
    answer = sys.stdout
    print(json.dumps({"ready": True}), file=answer, flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            run_child(request)
        print(json.dumps({"pid": pid}), file=answer, flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"rc": os.waitstatus_to_exitcode(status)}), file=answer, flush=True)


if __name__ == "__main__":
    main()


def kill_group(pid: int) -> None:
    import signal

    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class ForkServer:
    """The caller's side, one per pytest worker, started on first use; `run()` answers as subprocess.run does."""

    def __init__(self):
        import subprocess

        self.proc = subprocess.Popen(
            [sys.executable, __file__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        )
        assert json.loads(self.proc.stdout.readline()) == {"ready": True}

    def run(self, argv: list[str], folder: str, timeout: float):
        import subprocess
        import tempfile
        import threading

        fd_out, out = tempfile.mkstemp(dir=folder, prefix="generate-stdout-")
        fd_err, err = tempfile.mkstemp(dir=folder, prefix="generate-stderr-")
        os.close(fd_out), os.close(fd_err)
        request = {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "stdout": out, "stderr": err}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        pid = json.loads(self.proc.stdout.readline())["pid"]
        timer = threading.Timer(timeout, kill_group, (pid,))
        timer.start()
        try:
            rc = json.loads(self.proc.stdout.readline())["rc"]
        finally:
            timed_out = not timer.is_alive()
            timer.cancel()
        with open(out) as f_out, open(err) as f_err:
            stdout, stderr = f_out.read(), f_err.read()
        os.remove(out), os.remove(err)
        if timed_out:
            raise subprocess.TimeoutExpired(argv, timeout, stdout, stderr)
        return subprocess.CompletedProcess(argv, rc, stdout, stderr)
