"""One request pool for every unit of a generation job: ++max_concurrent_requests samples in flight over all units,
so the server's batch never drains between units; each unit writes, finishes and merges its own files as it ends."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import gc
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pipeline_kit.inference import unit_files
from pipeline_kit.inference.client import job_connection
from pipeline_kit.inference.config import GenerateConfig
from pipeline_kit.inference.progress import Progress
from pipeline_kit.inference.refusals import Tally
from pipeline_kit.server_wait import wait_until_ready


def say(message: str) -> None:
    print(f"kit generate: {message}", file=sys.stderr, flush=True)


class Limited:
    """A model whose requests wait for a slot of `semaphore` (++max_concurrent_requests in flight at most)."""

    def __init__(self, model, semaphore: asyncio.Semaphore):
        self.model, self.semaphore = model, semaphore

    async def generate(self, messages: list[dict]):
        async with self.semaphore:
            return await self.model.generate(messages)


class Watched:
    """One sample's view of the model: `failure` is the `error` of the first of its requests that failed (the
    server refused it, see refusals.py; a result with `failed` set), None while none did."""

    def __init__(self, model):
        self.model, self.failure = model, None

    async def generate(self, request):
        result = await self.model.generate(request)
        if self.failure is None and result.failed:
            self.failure = result.error
        return result


@dataclass
class UnitWork:
    """A unit that has samples to request (or an in-progress file to finish): its config, its .done key, how to
    build its task (a tasks.GenerationTask) and what to do once it is done (merge, postprocess; in a thread)."""

    cfg: GenerateConfig
    done_key: dict[str, object]
    make_task: Callable[[GenerateConfig], Any]
    when_done: Callable[[], None]


@dataclass
class _Running:
    """A unit whose samples are being requested."""

    work: UnitWork
    task: Any
    progress_file: unit_files.InProgress
    todo: collections.deque
    tally: Tally
    progress: Progress
    model: Any = None
    unanswered: int = 0  # samples taken from `todo` and not written yet, plus those still in it
    closed: bool = field(default=False)


YOUNG_OBJECTS_PER_COLLECTION = 10_000  # the collector's first threshold while the pool runs (Python's default: 700)


@contextlib.contextmanager
def fewer_collections():
    """The collector's young generation collected every 10,000 allocations instead of 700 while requests are in
    flight: each request through LiteLLM allocates hundreds of tracked objects (its Logging object, pydantic models,
    dicts), so at the default threshold the job collected ~370 times per 1,000 requests, ~40% of its CPU (perf/'s fast
    stub, perf/README.md). Cyclic garbage is still freed, by a later collection."""
    before = gc.get_threshold()
    gc.set_threshold(YOUNG_OBJECTS_PER_COLLECTION, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


async def run_units(works: list[UnitWork], api_key: str | None) -> dict[str, Tally]:
    """Every sample of `works`, taken unit after unit into one pool of ++max_concurrent_requests workers (the next
    unit's samples start as soon as slots free up). A unit is finished (final file in input order, .done, then its
    `when_done`) by the worker that wrote its last sample. Returns the tallies of the units with failed samples
    (written but not done), by output file. An error (a server that stopped answering, every request refused)
    stops the job: the samples in flight are lost, the in-progress files keep the rest."""
    cfg = works[0].cfg  # the units of a job differ only in their chunk, seed and output file
    failed: dict[str, Tally] = {}
    pending = collections.deque(works)
    running: list[_Running] = []
    feed_lock = asyncio.Lock()
    semaphore = asyncio.Semaphore(cfg.max_concurrent_requests)
    server_checked = False
    current: _Running | None = None

    async def start(work: UnitWork) -> _Running:
        nonlocal server_checked
        task = work.make_task(work.cfg)
        rows = task.rows
        progress_file = unit_files.InProgress(work.cfg.output_file)
        todo = [i for i in range(len(rows)) if i not in progress_file.samples]
        say(
            f"{work.cfg.output_file}: {len(rows)} samples, {len(rows) - len(todo)} already done, {len(todo)} to request"
        )
        unit = _Running(
            work,
            task,
            progress_file,
            collections.deque(todo),
            Tally(work.cfg.server.base_url, len(todo)),
            Progress(len(rows), len(rows) - len(todo), work.cfg.progress_every),
            unanswered=len(todo),
        )
        running.append(unit)
        if todo:
            if not server_checked:
                server = work.cfg.server
                started_here = server.server_log is not None  # kit started it (its log is known): it may be loading
                timeout = server.ready_timeout if started_here else server.external_ready_timeout
                waited = await asyncio.to_thread(wait_until_ready, server.base_url, timeout, server.server_log, api_key)
                say(f"server {server.base_url} ready after {waited:.1f} s")
                server_checked = True
            unit.model = await task.open_model(work.cfg, api_key)
        return unit

    async def next_sample() -> tuple[_Running, int] | None:
        nonlocal current
        async with feed_lock:
            while True:
                if current is not None and current.todo:
                    return current, current.todo.popleft()
                if not pending:
                    return None
                current = await start(pending.popleft())
                if not current.todo:  # every sample is in the in-progress file already
                    await finish(current)

    async def finish(unit: _Running) -> None:
        running.remove(unit)
        unit.closed = True
        if unit.model is not None:
            await unit.model.close()
        cfg = unit.work.cfg
        count = len(unit.task.rows)
        try:
            await asyncio.to_thread(unit.progress_file.finish, cfg.output_file, count, unit.work.done_key)
        finally:
            unit.progress_file.close()
        line = f"wrote {cfg.output_file}: {count} samples, {unit.tally.failed} failed"
        if unit.tally.failed:
            line += f" (first: {unit.tally.first}); not marked done: a rerun requests the failed samples again"
            failed[cfg.output_file] = unit.tally
        say(line)
        if not unit.tally.failed:
            await asyncio.to_thread(unit.work.when_done)

    async def worker() -> None:
        while (item := await next_sample()) is not None:
            unit, i = item
            watched = Watched(Limited(unit.model, semaphore))
            sample = await unit.task.sample(i, watched)
            unit.progress_file.add(i, sample, failed=watched.failure is not None)
            unit.progress.advance()
            unit.tally.add(watched.failure)  # stops the job when every request of the unit so far failed
            unit.unanswered -= 1
            if unit.unanswered == 0:
                await finish(unit)

    with fewer_collections():
        async with job_connection(cfg.max_concurrent_requests):
            workers = [asyncio.ensure_future(worker()) for _ in range(cfg.max_concurrent_requests)]
            try:
                await asyncio.gather(*workers)
            except BaseException:
                for w in workers:
                    w.cancel()
                await asyncio.gather(*workers, return_exceptions=True)
                raise
            finally:
                for unit in running:  # stopped mid-way: the in-progress files keep what was written
                    unit.progress_file.close()
                    if unit.model is not None and not unit.closed:
                        await unit.model.close()
    return {w.cfg.output_file: failed[w.cfg.output_file] for w in works if w.cfg.output_file in failed}
