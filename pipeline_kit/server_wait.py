"""Waiting for a server a job talks to (a model server's OpenAI-compatible API, or the sandbox's /health): poll
/v1/models (then /health) until it answers or the timeout passes; the error carries the tail of the server's log.
A server that refuses the key (401/403) is up: that stops at once (unless its /health answers: vLLM's does without
a key, and then the first request says it)."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from pathlib import Path

from pipeline_kit.errors import UserError
from pipeline_kit.log_causes import first_causes


class ServerError(RuntimeError):
    """The server is not reachable: never became ready, or died mid-run. The message ends with its log tail."""


def log_tail(path: str | None, lines: int = 15) -> str:
    """The log's first lines that name an error (its root cause), then its last lines."""
    if not path:
        return ""
    try:
        text = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return f"\n(server log {path} is not readable)"
    tail = text[-lines:]
    causes = first_causes(text[: len(text) - len(tail)])
    first = f"\n--- first error lines of {path}:\n" + "\n".join(causes) if causes else ""
    return first + f"\n--- last {len(tail)} lines of {path}:\n" + "\n".join(tail)


def wait_until_ready(base_url: str, timeout: float, server_log: str | None = None, api_key: str | None = None) -> float:
    """Seconds it took; ServerError after `timeout`. A server that refuses the key (401/403) and has no open
    /health (an external API) is up: a UserError at once, as waiting will not change the key."""
    start = time.monotonic()
    root = base_url.rstrip("/")
    urls = [f"{root}/models", f"{root.removesuffix('/v1')}/health"]
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    last = "no answer"
    while True:
        refused = None
        for url in urls:
            try:
                with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as r:
                    if r.status == 200:
                        return time.monotonic() - start
                    last = f"{url} answered HTTP {r.status}"
            except urllib.error.HTTPError as e:
                last = f"{url} answered HTTP {e.code}"
                refused = refused or (last if e.code in (401, 403) else None)
            except (urllib.error.URLError, OSError) as e:
                last = f"{url}: {getattr(e, 'reason', e)}"
            if time.monotonic() - start > timeout:
                break
        if refused:
            raise UserError(
                f"the server at {base_url} is up but refuses the key ({refused}): check the API key "
                "(++server.api_key_env names the environment variable that holds it)."
            )
        if time.monotonic() - start > timeout:
            if server_log is None:  # an address the user gave: nothing of kit's is starting there
                raise ServerError(
                    f"the server at {base_url} did not answer in {timeout:.0f} s (last: {last}); check "
                    "--server_address (host, port, http/https, the /v1 root) and that the server runs there, or raise "
                    "++server.external_ready_timeout if it is still starting."
                )
            raise ServerError(
                f"the server at {base_url} was not ready after {timeout:.0f} s (last: {last}); check its log, "
                f"or raise ++server.ready_timeout.{log_tail(server_log)}"
            )
        time.sleep(0.5)
