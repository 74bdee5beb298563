"""The sandbox HTTP server: POST /execute (stateless, or a session with X-Session-ID), GET /sessions,
DELETE /sessions/{id}, GET /health.  python -m pipeline_kit.sandbox.server --port 6000 [--workers N] ..."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import signal
import sys
import time

from pipeline_kit.sandbox import flags
from pipeline_kit.sandbox.executions import Session, run_stateless
from pipeline_kit.sandbox.isolation import Layers
from pipeline_kit.sandbox.limits import CELLS_HEADER, SESSION_HEADER, BadRequest, GiB, Limits, MiB, parse_request
from pipeline_kit.sandbox.pool import WorkerPool, WorkerStartError


class SandboxServer:
    def __init__(self, pool: WorkerPool, limits: Limits, max_concurrent: int, max_sessions: int, idle_timeout: float):
        self.pool, self.limits = pool, limits
        self.slots = asyncio.Semaphore(max_concurrent)
        self.max_concurrent, self.max_sessions, self.idle_timeout = max_concurrent, max_sessions, idle_timeout
        self.sessions: dict[str, Session] = {}
        self._starting: dict[str, asyncio.Task] = {}
        self.running = 0
        self.executions = 0

    def app(self, max_request_bytes: int):
        from aiohttp import web

        app = web.Application(client_max_size=max_request_bytes)
        app.add_routes(
            [
                web.post("/execute", self.execute),
                web.get("/sessions", self.list_sessions),
                web.delete("/sessions/{session_id}", self.delete_session),
                web.get("/health", self.health),
            ]
        )
        return app

    async def execute(self, request):
        from aiohttp import web

        try:
            req = parse_request(await request.json(), self.limits)
        except ValueError as e:  # a BadRequest, or a body that is not JSON
            return web.json_response({"error": str(e) if isinstance(e, BadRequest) else f"bad JSON: {e}"}, status=400)
        except TypeError as e:
            return web.json_response({"error": str(e)}, status=400)
        session_id = request.headers.get(SESSION_HEADER)
        self.running += 1
        try:
            if not session_id:
                async with self.slots:
                    return web.json_response(await run_stateless(self.pool, req, self.limits))
            try:
                expected = int(request.headers.get(CELLS_HEADER, "0"))
            except ValueError:
                return web.json_response({"error": f"{CELLS_HEADER} must be an integer"}, status=400)
            session = self.sessions.get(session_id)
            if session is not None and not session.lock.locked() and not session.running():
                session.kill()  # its process died while idle: the session is lost
                del self.sessions[session_id]
                session = None
            if session is None and expected > 0:
                return web.json_response(
                    {
                        "error": "session_lost",
                        "message": f"session '{session_id}' is not on this server (a restart, a timeout, a crash "
                        f"or an idle eviction ended it); replay its {expected} cells into a new one",
                    },
                    status=409,
                )
            if session is None:
                session = await self._session(session_id)
            async with session.lock, self.slots:
                result = await session.run_cell(req, self.limits)
            if not session.alive:
                self.sessions.pop(session_id, None)
            return web.json_response(result)
        finally:
            self.running -= 1
            self.executions += 1

    async def _session(self, session_id: str) -> Session:
        """The session, started once even when several requests for a new id arrive together."""
        if session_id not in self._starting:
            self._evict(keep=self.max_sessions - 1)
            self._starting[session_id] = asyncio.ensure_future(Session.start(session_id, self.pool, self.limits))
        try:
            session = await asyncio.shield(self._starting[session_id])
        finally:
            self._starting.pop(session_id, None)
        self.sessions[session_id] = session
        return session

    def _evict(self, keep: int, idle_before: float | None = None) -> None:
        """End the least recently used idle sessions beyond `keep`, and any idle since `idle_before`."""
        by_age = sorted(self.sessions.values(), key=lambda s: s.last_used)
        for session in by_age:
            too_many = len(self.sessions) > keep
            too_old = idle_before is not None and session.last_used < idle_before
            if (too_many or too_old) and not session.lock.locked():
                session.kill()
                del self.sessions[session.id]

    async def expire_idle_sessions(self) -> None:
        while True:
            await asyncio.sleep(min(30.0, self.idle_timeout))
            self._evict(keep=self.max_sessions, idle_before=time.time() - self.idle_timeout)

    async def list_sessions(self, request):
        from aiohttp import web

        return web.json_response({"sessions": [s.describe() for s in self.sessions.values()]})

    async def delete_session(self, request):
        from aiohttp import web

        session = self.sessions.pop(request.match_info["session_id"], None)
        if session is None:
            return web.json_response({"error": f"no session '{request.match_info['session_id']}'"}, status=404)
        session.kill()
        return web.json_response({"deleted": session.id})

    async def health(self, request):
        from aiohttp import web

        return web.json_response(
            {
                "status": "ok",
                "workers": len(self.pool.workers),
                "worker_pids": [worker.process.pid for worker in self.pool.workers],
                "worker_restarts": self.pool.restarts,
                "isolation": self.pool.active_layers(),
                "isolation_off": self.pool.inactive_layers(),
                "missing_libraries": missing_libraries(),
                "preloaded": self.pool.preloaded,
                "limits": self.limits.as_dict(),
                "max_concurrent": self.max_concurrent,
                "running": self.running,
                "executions": self.executions,
                "sessions": len(self.sessions),
            }
        )

    def close(self) -> None:
        for session in list(self.sessions.values()):
            session.kill()
        self.sessions.clear()
        self.pool.close()


MATH_LIBRARIES = ("numpy", "sympy")  # executed code runs in this interpreter's forks: what it can import


def missing_libraries() -> list[str]:

    return [name for name in MATH_LIBRARIES if importlib.util.find_spec(name) is None]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    return flags.parser(__doc__).parse_args(argv)


def build(args: argparse.Namespace) -> SandboxServer:
    layers = Layers.parse(args.isolation)
    limits = Limits(
        memory=int(args.memory_gb * GiB),
        processes=args.processes,
        file_size=args.file_size_mb * MiB,
        tmp_size=args.tmp_size_mb * MiB,
        max_timeout=args.max_timeout,
    )
    if args.preload is None:  # what math code imports, where this Python has it
        preload, strict = list(MATH_LIBRARIES), False
    else:
        preload, strict = flags.module_names(args.preload), True
    pool = WorkerPool(args.workers, layers, args.readonly_path, flags.env_pairs(args.env), preload, strict)
    pool.start()
    for name, why in pool.unavailable.items():
        print(f"kit sandbox: isolation layer {name} is off: {why}", file=sys.stderr, flush=True)
    swept = [path for cgroup in pool.cgroups for path in cgroup.swept]
    if swept:
        print(
            f"kit sandbox: removed {len(swept)} cgroup folder{'s' if len(swept) > 1 else ''} of sandbox servers that "
            f"were killed before they could remove them: {', '.join(swept)}",
            file=sys.stderr,
            flush=True,
        )
    if missing_libraries():
        print(
            f"kit sandbox: warning: {sys.executable} lacks {', '.join(missing_libraries())}, which math code imports; "
            "install them (pip install 'pipeline_kit[sandbox]') or run the sandbox in dockerfiles/Dockerfile.sandbox",
            file=sys.stderr,
            flush=True,
        )
    concurrent = args.max_concurrent or 16 * args.workers
    return SandboxServer(pool, limits, concurrent, args.max_sessions, args.session_idle_timeout)


async def serve(server: SandboxServer, args: argparse.Namespace) -> None:
    from aiohttp import web

    runner = web.AppRunner(server.app(args.max_request_mb * MiB), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, args.host, args.port).start()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    expiry = asyncio.ensure_future(server.expire_idle_sessions())
    layers = ", ".join(server.pool.active_layers()) or "none"
    print(
        f"kit sandbox: serving on http://{args.host}:{args.port} ({len(server.pool.workers)} workers; "
        f"isolation: {layers}; preloaded: {', '.join(server.pool.preloaded) or 'none'})",
        flush=True,
    )
    await stop.wait()
    expiry.cancel()
    await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        flags.check_values(args)
        missing = [path for path in args.readonly_path if not os.path.exists(path)]
        if missing:
            raise ValueError(f"--readonly_path {missing[0]}: no such file or folder on {os.uname().nodename}")
        server = build(args)
    except ValueError as e:
        print(f"kit sandbox: error: {e}", file=sys.stderr)
        return 2
    except WorkerStartError as e:
        print(
            f"kit sandbox: error: cannot isolate executions here ({e}); allow user namespaces (in Docker: "
            "--security-opt seccomp=unconfined --security-opt apparmor=unconfined) or lower --isolation knowingly",
            file=sys.stderr,
        )
        return 2
    try:
        asyncio.run(serve(server, args))
    except OSError as e:
        print(f"kit sandbox: error: cannot listen on {args.host}:{args.port}: {e.strerror}", file=sys.stderr)
        return 2
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
