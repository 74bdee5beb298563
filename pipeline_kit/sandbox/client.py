"""Async client of the sandbox server: retries when the server cannot be reached, and session replay. A session
the server lost (its worker process was killed by a timeout or a crash, an idle eviction, a server restart) is
rebuilt by replaying the session's successful cells, and the client says so; if that fails, a clear error."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable

from pipeline_kit.sandbox.limits import CELLS_HEADER, SESSION_HEADER
from pipeline_kit.server_wait import ServerError, wait_until_ready

RETRY_STATUSES = (502, 503, 504)


class SandboxError(RuntimeError):
    """The sandbox server could not be reached or refused a request."""


class SandboxReplayError(SandboxError):
    """A lost session could not be rebuilt."""


def _say(message: str) -> None:
    print(f"kit sandbox client: {message}", file=sys.stderr, flush=True)


class SandboxClient:
    def __init__(
        self,
        address: str,
        max_retries: int = 5,
        retry_delay: float = 0.5,
        max_connections: int = 64,
        log: Callable[[str], None] = _say,
    ):
        self.address = address.rstrip("/")
        if "://" not in self.address:
            self.address = "http://" + self.address
        self.max_retries, self.retry_delay, self.max_connections, self.log = (
            max_retries,
            retry_delay,
            max_connections,
            log,
        )
        # session -> its successful cells, in order, each with the stdout it printed (to tell a replay that differs)
        self.histories: dict[str, list[tuple[dict, str]]] = {}
        self._http = None

    async def _session(self):
        import aiohttp

        if self._http is None:
            self._http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=self.max_connections))
        return self._http

    async def _call(self, method: str, path: str, body: dict | None = None, headers: dict | None = None, timeout=None):
        """(HTTP status, JSON body). Connection failures and 502/503/504 are retried with backoff."""
        import aiohttp

        http = await self._session()
        client_timeout = aiohttp.ClientTimeout(total=None if timeout is None else timeout + 60)
        last = ""
        for attempt in range(self.max_retries + 1):
            try:
                async with http.request(
                    method, self.address + path, json=body, headers=headers or {}, timeout=client_timeout
                ) as resp:
                    if resp.status not in RETRY_STATUSES:
                        return resp.status, await resp.json(content_type=None)
                    last = f"HTTP {resp.status}"
            except (aiohttp.ClientConnectionError, asyncio.TimeoutError) as e:
                last = f"{type(e).__name__}: {e}"
            if attempt < self.max_retries:
                await asyncio.sleep(self.retry_delay * 2**attempt)
        raise SandboxError(f"the sandbox at {self.address} did not answer after {self.max_retries + 1} tries ({last})")

    async def execute(
        self,
        code: str,
        *,
        language: str = "python",
        session_id: str | None = None,
        timeout: float = 10.0,
        std_input: str = "",
        max_output_characters: int = 10_000,
    ) -> dict:
        """The server's result: {status, stdout, stderr, truncated, ...}; after a replay, with `replayed_cells` and
        `replay_differed` (the numbers of the replayed cells whose stdout was not what they printed before: random
        numbers, the clock; the session's state may then not be what the caller saw)."""
        cell = {
            "code": code,
            "language": language,
            "timeout": timeout,
            "std_input": std_input,
            "max_output_characters": max_output_characters,
        }
        if session_id is None:
            return self._checked(*await self._call("POST", "/execute", cell, timeout=timeout))
        history = self.histories.setdefault(session_id, [])
        status, body = await self._post_cell(session_id, cell, len(history))
        differed = None
        if status == 409 and body.get("error") == "session_lost":
            differed = await self._replay(session_id, history, body.get("message", ""))
            status, body = await self._post_cell(session_id, cell, len(history))
        result = self._checked(status, body)
        if differed is not None:
            result["replayed_cells"], result["replay_differed"] = len(history), differed
        if result["status"] == "completed":
            history.append((cell, result["stdout"]))
        return result

    async def _post_cell(self, session_id: str, cell: dict, known_cells: int) -> tuple[int, dict]:
        headers = {SESSION_HEADER: session_id, CELLS_HEADER: str(known_cells)}
        return await self._call("POST", "/execute", cell, headers, timeout=cell["timeout"])

    def _checked(self, status: int, body: dict) -> dict:
        if status != 200:
            raise SandboxError(
                f"the sandbox at {self.address} refused the request (HTTP {status}: {body.get('error')})"
            )
        return body

    async def _replay(self, session_id: str, history: list[tuple[dict, str]], why: str) -> list[int]:
        """The numbers of the cells whose stdout differed from the first run's."""
        self.log(f"session '{session_id}' was lost on the sandbox ({why}); replaying its {len(history)} cells")
        differed = []
        for i, (cell, stdout) in enumerate(history):
            status, body = await self._post_cell(session_id, cell, i)
            if status != 200 or body.get("status") != "completed":
                detail = body.get("error") or (body.get("stderr") or "").strip().splitlines()[-1:] or body.get("status")
                raise SandboxReplayError(
                    f"session '{session_id}' was lost and replaying cell {i + 1} of {len(history)} failed "
                    f"({detail}); its state cannot be rebuilt, so start the sample again"
                )
            if body.get("stdout") != stdout:
                differed.append(i + 1)
        note = f"; cells {differed} printed other output than before, so its state may differ" if differed else ""
        self.log(f"session '{session_id}': replayed {len(history)} cells{note}")
        return differed

    async def delete_session(self, session_id: str) -> None:
        self.histories.pop(session_id, None)
        await self._call("DELETE", f"/sessions/{session_id}")

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None


def main(argv: list[str] | None = None) -> int:
    """python -m pipeline_kit.sandbox.client --wait ADDRESS [TIMEOUT]: block until the sandbox answers."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (2, 3) or args[0] != "--wait":
        print("usage: python -m pipeline_kit.sandbox.client --wait ADDRESS [TIMEOUT_SECONDS]", file=sys.stderr)
        return 2
    timeout = float(args[2]) if len(args) == 3 else 300.0
    try:
        waited = wait_until_ready(args[1], timeout)  # its GET /health answers
    except ServerError:
        _say(f"the sandbox at {args[1]} did not answer /health within {timeout:g} s")
        return 1
    _say(f"sandbox {args[1]} ready after {waited:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
