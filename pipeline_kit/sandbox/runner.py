"""Runs code inside an isolated execution: one stateless run (`run_once`) or a session's cell loop (`session_loop`).
Python runs in the forked interpreter (no new process); `ipython` also prints the value of a last expression."""

from __future__ import annotations

import ast
import io
import json
import os
import resource
import socket
import subprocess
import sys
import traceback
import types

SHELL = "/bin/bash"


def _bind_std_streams() -> None:
    """Fresh Python streams over fds 0, 1 and 2 (the worker's were dup2-ed over)."""
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), errors="replace")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), errors="backslashreplace", write_through=False)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), errors="backslashreplace", line_buffering=True)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


def run_python(code: str, namespace: dict, display_last: bool) -> int:
    """Exit code: 0, the SystemExit code, or 1 after printing the traceback (without this module's frames)."""
    try:
        tree = ast.parse(code, "<code>")
        last = None
        if display_last and tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, "<code>", "exec"), namespace)
        if last is not None:
            value = eval(compile(last, "<code>", "eval"), namespace)
            if value is not None:
                print(repr(value))
        return 0
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException as e:  # noqa: BLE001 - the code's own error is its result
        tb = e.__traceback__.tb_next if e.__traceback__ is not None else None
        traceback.print_exception(type(e), e, tb)
        return 1
    finally:
        _flush()


def main_namespace() -> dict:
    """A fresh `__main__` module for the code, registered as `sys.modules["__main__"]` (else it is the worker's): what
    the code defines can then be pickled by reference, as multiprocessing does with a function in `Pool.map`. It has
    no `__file__`, as with `python -c`, so spawn and forkserver children do not look for a main script to rerun."""
    main = types.ModuleType("__main__")
    main.__builtins__ = __builtins__
    sys.modules["__main__"] = main
    return main.__dict__


def run_once(code: str, language: str) -> int:
    """A stateless execution (this process is PID 1 of its namespace; its exit ends everything it started)."""
    if language == "shell":
        _flush()
        os.execv(SHELL, [SHELL, "-c", code])
    _bind_std_streams()
    return run_python(code, main_namespace(), language == "ipython")


def session_loop(channel: socket.socket, cpu_limit_total: int) -> None:
    """Cells arrive on `channel` as JSON with three fds (stdin, stdout, stderr); each answer is {"exit_code": N}."""
    namespace = main_namespace()
    null = os.open(os.devnull, os.O_RDWR)
    while True:
        data, fds, _, _ = socket.recv_fds(channel, 1 << 24, 3)
        if not data:
            os._exit(0)
        cell = json.loads(data)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        _bind_std_streams()
        used = resource.getrusage(resource.RUSAGE_SELF)
        spent = int(used.ru_utime + used.ru_stime)
        resource.setrlimit(resource.RLIMIT_CPU, (min(spent + cell["cpu_seconds"], cpu_limit_total), cpu_limit_total))
        if cell["language"] == "shell":
            code = subprocess.call([SHELL, "-c", cell["code"]])
        else:
            code = run_python(cell["code"], namespace, cell["language"] == "ipython")
        for target in range(3):
            os.dup2(null, target)
        channel.send(json.dumps({"exit_code": code}).encode())
