"""How a generation job retries a request that got no usable answer. A server that answers 408, 429 or 5xx is up
but busy or failing for a while: such a request is retried with capped exponential backoff (++max_retries,
++retry_delay: at least ~45 s with the defaults). A server that no connection reaches any more (refused or reset:
its process or node is gone) is named within seconds: the job stops once no request has reached it for
++server.gone_after seconds, with the tail of its log, instead of retrying a dead endpoint."""

from __future__ import annotations

import random
import time

MAX_DELAY_S = 10.0  # the longest wait between two tries of a request


def backoff(attempt: int, base: float) -> float:
    """Seconds to wait before retry `attempt` (0-based): `base` doubled per attempt, capped at MAX_DELAY_S, plus up to
    half of it at random (so that the requests in flight do not all come back at once). With base 0.5 s the 8 waits
    of ++max_retries=8 add up to 45.5-68 s."""
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


def no_answer(error: BaseException | None) -> bool:
    """Whether `error`, or an exception it was raised from, says that the request got no HTTP answer: the connection
    was refused, reset or closed first (a timeout is an answer of sorts: the server took the request)."""
    for _ in range(20):
        if error is None:
            return False
        names = {cls.__name__ for cls in type(error).__mro__}
        if names & _TIMEOUT:
            return False
        if names & _NO_ANSWER:
            return True
        error = error.__cause__ or error.__context__
    return False


_REACH: dict[str, Reach] = {}


def reach(base_url: str) -> Reach:
    """The one Reach of `base_url` in this process (every unit's client of a job shares it)."""
    return _REACH.setdefault(base_url, Reach())
