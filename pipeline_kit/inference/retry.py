"""How a generation job retries a request that got no usable answer. A server that answers 408, 429 or 5xx is up
but busy or failing for a while: such a request is retried with capped exponential backoff (++max_retries,
++retry_delay: at least ~45 s with the defaults). A server that no connection reaches any more (refused or reset:
its process or node is gone) is named within seconds: the job stops once no request has reached it for
++server.gone_after seconds and a fresh connection to its port fails too, with the tail of its log, instead of
retrying a dead endpoint. A server that still takes connections (starved of CPU, resetting them) is retried as busy."""

from __future__ import annotations

import asyncio
import collections
import functools
import random
import select
import time
import weakref
from urllib.parse import urlsplit

MAX_DELAY_S = 10.0  # the longest wait between two tries of a request
# How long a job keeps an idle connection for its next request, by the pool's clock. uvicorn, vLLM's HTTP server,
# closes one idle for 5 s by its own (VLLM_HTTP_TIMEOUT_KEEP_ALIVE; servers kit starts get 30 s), and a request sent
# on a connection it closed is reset and retried. With aiohttp's default, 15 s, a probe whose loop was blocked past
# the server's 5 s had 64 of 64 POSTs reset. 2 s leaves 3 s for a busy loop (perf/README.md, issue 36 part 2).
KEEPALIVE_S = 2.0


def pool_connector(limit: int, **kwargs):
    """The aiohttp connector of a job's requests (generation through LiteLLM, reward scores): `limit` connections,
    each kept idle at most KEEPALIVE_S, and none reused that the server already closed. Made in the running loop."""
    return _connector_class()(limit=limit, limit_per_host=limit, keepalive_timeout=KEEPALIVE_S, **kwargs)


def closed_by_peer(transport) -> bool:
    """Whether an idle connection has something to read: the server's FIN (or RST), which the event loop has not
    read yet. An idle HTTP/1.1 connection gets nothing else. One poll(2), no wait (urllib3 checks its pool the same
    way)."""
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None:
        return False
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    return bool(poller.poll(0))


@functools.cache
def _connector_class():
    import aiohttp

    class PoolConnector(aiohttp.TCPConnector):
        """aiohttp's pool clocks a connection's idle time from when the client's code released it. Under load (a
        burst of answers to parse, a CPU-bound server on the same cores) that is seconds after the server sent the
        answer and started its own keep-alive clock, so the pool hands out connections the server closed a moment
        ago (captured on the wire: requests sent 0.2-0.7 s after vLLM's FIN, which came 5.00 s after its answer).
        So a connection from the pool is checked first and closed if the server closed it. This does not close the
        race: aiohttp writes the request one loop pass later, and a FIN can come in between (with a CPU hog beside
        the job, 7 retried requests of 2,000 remained). Servers kit starts keep connections longer for that
        (servers/vllm.py)."""

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self._handed_out = weakref.WeakSet()  # connections given to a request before: the next hand-out reuses

        async def connect(self, req, traces, timeout):
            while True:  # each pass drops one pooled connection, so a fresh one ends it
                conn = await super().connect(req, traces, timeout)
                proto = conn.protocol
                if proto is None or proto not in self._handed_out:
                    if proto is not None:
                        self._handed_out.add(proto)
                    return conn
                if not closed_by_peer(conn.transport):
                    return conn
                conn.close()

    return PoolConnector


class Retries:
    """A unit's requests tried again, and why (the error's kind and first line): the count goes to the job's figures,
    the causes to the unit's line in the log, so that a slow unit says what held it up."""

    def __init__(self) -> None:
        self.count = 0
        self.causes: collections.Counter[str] = collections.Counter()

    def add(self, cause: str) -> None:
        """`cause`: describe()'s line, or 'HTTP <status>: <the body's first 200 characters>' (both bounded)."""
        self.count += 1
        self.causes[cause] += 1

    def describe(self) -> str:
        """'' without retries; else '3 requests retried (2 x ReadTimeout: ...; 1 x HTTP 503: ...)'."""
        if not self.count:
            return ""
        common = self.causes.most_common(3)
        rest = self.count - sum(n for _, n in common)
        causes = [f"{n} x {cause}" for cause, n in common] + ([f"{rest} other"] if rest else [])
        return f"{self.count} requests retried ({'; '.join(causes)})"


def backoff(attempt: int, base: float, unanswered: bool = False) -> float:
    """Seconds to wait before retry `attempt` (0-based): `base` doubled per attempt, capped at MAX_DELAY_S, plus up to
    half of it at random (so that the requests in flight do not all come back at once). With base 0.5 s the 8 waits
    of ++max_retries=8 add up to 45.5-68 s. A request that got no answer at all (`unanswered`: no_answer) is tried
    again at once the first time, as HTTP clients do: it most often went out on a kept-alive connection the server
    had just closed, and the retry takes a new one (a dead server refuses that too, and waits follow)."""
    if unanswered and attempt == 0:
        return 0.0
    return min(base * 2**attempt, MAX_DELAY_S) * (1 + 0.5 * random.random())


class Reach:
    """Since when no request of this job has reached the server at one address (None while the last one did). Any
    HTTP answer (a 500 or 429 too) is a reach; a refused or reset connection is not."""

    def __init__(self) -> None:
        self.lost_since: float | None = None

    def answered(self) -> None:
        self.lost_since = None

    def lost(self) -> float:
        """A connection failed: the seconds since the first failure with no answer after it."""
        now = time.monotonic()
        if self.lost_since is None:
            self.lost_since = now
        return now - self.lost_since


# exception class names (anywhere in the chain of causes: LiteLLM reports a refused connection as an HTTP 500 raised
# from openai's APIConnectionError, raised from httpx's and aiohttp's) that say a request reached no server
_NO_ANSWER = {"APIConnectionError", "ClientConnectionError", "ConnectionError"}
_TIMEOUT = {"APITimeoutError", "TimeoutException", "TimeoutError"}  # the server took the request: it is there


def _chain(error: BaseException) -> list[BaseException]:
    """`error` and the exceptions it was raised from, outermost first (at most 20)."""
    chain = [error]
    while len(chain) < 20 and (below := chain[-1].__cause__ or chain[-1].__context__) is not None:
        chain.append(below)
    return chain


def no_answer(error: BaseException | None) -> bool:
    """Whether `error`, or an exception it was raised from, says that the request got no HTTP answer: the connection
    was refused, reset or closed first (a timeout is an answer of sorts: the server took the request)."""
    for e in _chain(error) if error is not None else []:
        names = {cls.__name__ for cls in type(e).__mro__}
        if names & _TIMEOUT:
            return False
        if names & _NO_ANSWER:
            return True
    return False


def describe(error: BaseException) -> str:
    """'Kind: first line' of `error`, and of the exception at the bottom of the chain it was raised from (LiteLLM's
    'InternalServerError: ... Connection error.' says only that some connection failed; the bottom says how)."""

    def line(e: BaseException) -> str:
        return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:160]}".rstrip(": ")

    root = _chain(error)[-1]
    return line(error) if root is error else f"{line(error)} (from {line(root)})"


PROBE_TIMEOUT_S = 3.0


async def listening(base_url: str) -> bool:
    """Whether a new TCP connection to `base_url`'s host and port is taken within PROBE_TIMEOUT_S: its process is
    there (it may still reset what it cannot serve), or nothing listens / the node is gone (False)."""
    url = urlsplit(base_url)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(url.hostname, port), PROBE_TIMEOUT_S)
    except (OSError, asyncio.TimeoutError):
        return False
    writer.close()
    return True


async def gone(reach: Reach, base_url: str, after: float) -> float | None:
    """After a request got no answer: the seconds no request has reached the server at `base_url` when that is
    `after` or more and a fresh connection fails too (it is gone), else None. A server that takes the connection
    counts as reached: the clock starts again."""
    lost = reach.lost()
    if lost < after:
        return None
    if await listening(base_url):
        reach.answered()
        return None
    return lost


_REACH: dict[str, Reach] = {}


def reach(base_url: str) -> Reach:
    """The one Reach of `base_url` in this process (every unit's client of a job shares it)."""
    return _REACH.setdefault(base_url, Reach())
