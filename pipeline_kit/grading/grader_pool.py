"""Grading many answers: a cache of verdicts by task, the string rules in this process, and math-verify in a pool of
worker processes (its timeouts are signals, which work only in a process's main thread), each answer under a timer."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Iterable
from multiprocessing.connection import Connection, wait

from pipeline_kit.grading.math_grader import DEFAULT_TIMEOUT, Task, Verdict, grade, quick_verdict, warm_up

_CACHE_LIMIT = 200_000
_cache: dict[Task, Verdict] = {}  # verdicts of this process, shared by every file it grades
_KILL_GRACE = 5.0  # a worker silent this long past the timer (stuck in C code) is killed; its answer timed out


def default_workers() -> int:
    """The CPUs this process may use (its affinity, which Slurm and taskset set), at most 8."""
    try:
        count = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        count = os.cpu_count() or 1
    return max(1, min(count, 8))


def grade_tasks(tasks: Iterable[Task], workers: int | None = None, timeout: float = DEFAULT_TIMEOUT) -> list[Verdict]:
    """The verdict of each task, in order. Repeated tasks are graded once (and remembered for later calls); what
    the string rules decide is decided here; the rest goes to `workers` processes (default_workers(); 0 grades in
    this process, which must then be in its main thread for the timer)."""
    tasks = list(tasks)
    slow: list[Task] = []
    for task in dict.fromkeys(tasks):
        if task in _cache:
            continue
        verdict = quick_verdict(task)
        if verdict is None:
            slow.append(task)
        else:
            _remember(task, verdict)
    if slow:
        workers = default_workers() if workers is None else workers
        warm_up()  # before forking: the workers share the imported math-verify
        if workers == 0 or len(slow) == 1:
            for task in slow:
                _remember(task, grade(task, timeout))
        else:
            for task, verdict in _Pool(min(workers, len(slow)), timeout).run(slow):
                _remember(task, verdict)
    return [_cache[t] for t in tasks]


def _remember(task: Task, verdict: Verdict) -> None:
    if len(_cache) >= _CACHE_LIMIT:
        _cache.clear()
    _cache[task] = verdict


class _Pool:
    """Worker processes fed one task at a time over a pipe each, so that a worker past its deadline can be killed
    (and replaced) without losing the others' work."""

    def __init__(self, size: int, timeout: float):
        self.size, self.timeout = size, timeout
        # fork: workers start at once and share the parent's imported math-verify (warm_up before forking)
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        self.ctx = multiprocessing.get_context(method)

    def run(self, tasks: list[Task]):
        todo = deque(tasks)
        idle: list[_Worker] = [self._start() for _ in range(self.size)]
        busy: dict[Connection, tuple[_Worker, Task, float]] = {}
        try:
            while todo or busy:
                while idle and todo:
                    worker, task = idle.pop(), todo.popleft()
                    worker.conn.send(task)
                    busy[worker.conn] = (worker, task, time.monotonic() + self.timeout + _KILL_GRACE)
                soonest = min(deadline for _, _, deadline in busy.values())
                for conn in wait(list(busy), timeout=max(0.0, soonest - time.monotonic())):
                    worker, task, _ = busy.pop(conn)
                    try:
                        yield task, conn.recv()
                        idle.append(worker)
                    except (EOFError, OSError):  # the worker died (killed, out of memory): count it as a timeout
                        print(
                            f"kit grade: a grading worker died on {task.predicted!r}; counted as timed out",
                            file=sys.stderr,
                        )
                        worker.stop()
                        yield task, Verdict(False, timed_out=True)
                        idle.append(self._start())
                now = time.monotonic()
                for conn in [c for c, (_, _, deadline) in busy.items() if deadline <= now]:
                    worker, task, _ = busy.pop(conn)
                    worker.stop()
                    yield task, Verdict(False, timed_out=True)
                    idle.append(self._start())
        finally:
            for worker in [*idle, *(w for w, _, _ in busy.values())]:
                worker.stop()

    def _start(self) -> _Worker:
        parent, child = self.ctx.Pipe()
        process = self.ctx.Process(target=_work, args=(child, parent, self.timeout), daemon=True)
        process.start()
        child.close()
        return _Worker(process, parent)


class _Worker:
    def __init__(self, process, conn: Connection):
        self.process, self.conn = process, conn

    def stop(self) -> None:
        self.conn.close()
        if self.process.is_alive():
            self.process.kill()
        self.process.join()


def _work(conn: Connection, parent_end: Connection, timeout: float) -> None:
    """A worker's loop: grade each task it is sent (grade() keeps the time with SIGALRM) until the pipe closes or
    the parent is gone (killed: then no one closes the pipe)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it then kills the workers
    parent_end.close()  # the parent's end, inherited by fork: held open here, it would hide the parent's exit
    parent = os.getppid()
    while True:
        try:
            while not conn.poll(1.0):
                if os.getppid() != parent:
                    return
            task = conn.recv()
            conn.send(grade(task, timeout))
        except (EOFError, OSError):  # BrokenPipeError: the parent died while this answer was graded
            return
