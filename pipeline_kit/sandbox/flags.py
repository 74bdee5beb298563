"""The sandbox server's flags: its parser, and the check that `kit` runs on `--sandbox_args` where the job is
submitted, so that a mistake is one line there instead of a sandbox that fails in the queue (stdlib only)."""

from __future__ import annotations

import argparse
import os
import shlex

SET_BY_KIT = ("--host", "--port")  # kit passes them; --sandbox_port chooses the port


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print the usage and exit
        raise ValueError(message)


def parser(description: str | None = None, checking: bool = False) -> argparse.ArgumentParser:
    cls = _Parser if checking else argparse.ArgumentParser
    p = cls(prog="python -m pipeline_kit.sandbox.server", description=description, add_help=not checking)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0 for other nodes)")
    p.add_argument("--port", type=int, default=6000)
    workers = len(os.sched_getaffinity(0))
    p.add_argument("--workers", type=int, default=workers, help="fork-server workers [default: CPUs]")
    p.add_argument("--max_concurrent", type=int, default=0, help="executions at once [default: 16 per worker]")
    p.add_argument("--isolation", default="full", help="'full', or layers to switch off: no-net_ns,no-pid_ns,...")
    p.add_argument("--memory_gb", type=float, default=4.0, help="address space per process")
    p.add_argument("--processes", type=int, default=64, help="processes and threads per execution")
    p.add_argument("--file_size_mb", type=int, default=256, help="largest file an execution may write")
    p.add_argument("--tmp_size_mb", type=int, default=512, help="size of an execution's private /tmp")
    p.add_argument("--max_timeout", type=float, default=600.0, help="largest timeout a request may ask for")
    p.add_argument("--max_request_mb", type=int, default=64, help="largest request body (code + std_input)")
    p.add_argument("--max_sessions", type=int, default=256)
    p.add_argument("--session_idle_timeout", type=float, default=1800.0, help="seconds before an idle session ends")
    p.add_argument("--readonly_path", action="append", default=[], help="another host folder the code may read")
    p.add_argument(
        "--preload",
        default=None,
        metavar="MODULES",
        help="modules imported once, before the workers are forked, so that the code's `import` of them is free "
        "[default: numpy,sympy where installed; '' for none]",
    )
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a variable for the code's environment (it never gets the server's own; repeatable)",
    )
    return p


def check_args(text: str) -> None:
    """A ValueError that says what is wrong with `text`, the server flags a user passes as `--sandbox_args`."""
    try:
        argv = shlex.split(text)
    except ValueError as e:
        raise ValueError(f"cannot split it into flags: {e}") from None
    for flag in SET_BY_KIT:
        if any(arg == flag or arg.startswith(flag + "=") for arg in argv):
            raise ValueError(f"{flag} is set by kit; use --sandbox_port for the port")
    check_values(parser(checking=True).parse_args(argv))


POSITIVE = (  # flags whose value must be above 0
    "workers",
    "memory_gb",
    "processes",
    "file_size_mb",
    "tmp_size_mb",
    "max_timeout",
    "max_request_mb",
    "max_sessions",
    "session_idle_timeout",
)


def check_values(args: argparse.Namespace) -> None:
    """A ValueError naming the first flag whose value the server cannot run with."""
    from pipeline_kit.sandbox.isolation import Layers  # lazy: ctypes and libc, only where there is something to check

    for name in POSITIVE:
        if getattr(args, name) <= 0:
            raise ValueError(f"--{name} {getattr(args, name)} must be above 0")
    if args.max_concurrent < 0:
        raise ValueError(f"--max_concurrent {args.max_concurrent}: use 0 (16 per worker) or more")
    try:
        Layers.parse(args.isolation)
    except ValueError as e:
        raise ValueError(f"--isolation {args.isolation}: {e}") from None
    env_pairs(args.env)
    if args.preload is not None:
        module_names(args.preload)


def module_names(text: str) -> list[str]:
    """--preload's comma list; a ValueError naming the first item that is not a module name."""
    names = [item.strip() for item in text.split(",") if item.strip()]
    for name in names:
        if not all(part.isidentifier() for part in name.split(".")):
            raise ValueError(f"--preload {text}: '{name}' is not a module name (e.g. --preload sympy,numpy)")
    return names


def env_pairs(items: list[str]) -> dict[str, str]:
    """--env's NAME=VALUE items as a dict; a ValueError naming the first that is not one."""
    pairs = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name.isidentifier():
            raise ValueError(f"--env {item}: use NAME=VALUE, NAME a variable name (letters, digits, _)")
        pairs[name] = value
    return pairs
