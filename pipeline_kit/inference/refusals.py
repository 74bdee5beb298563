"""A server's refusal of a request (an HTTP 4xx answer) and what kit does with it. A refusal of one prompt (400, 413,
422, ...) is that sample's `error` ("HTTP <status>: <the server's message>"), the sample is failed and the run goes
on; a rerun requests the failed samples again. A prompt over the context length is a sample's final `error` (the
same model refuses it again), not a failure. 401/403 (the key) and 404 (the model or route) would refuse every
request: the run stops at the first. 408 and 429 are transient (retried, like 5xx)."""

from __future__ import annotations

import ast
import json
import re

from pipeline_kit.errors import UserError
from pipeline_kit.server_wait import ServerError

TRANSIENT_STATUS = (408, 429)
AUTH_STATUS = (401, 403)
CONTEXT_HINTS = ("context length", "maximum context", "context window", "too long", "max_model_len")
ALL_FAILED_AFTER = 32  # refusals with no success yet after which a run stops (a setting every request trips on)


class RequestsFailed(ServerError):
    """Every request of a run was refused: a request setting or the server, not the samples, is the likely cause."""


def is_transient(status: int) -> bool:
    return status in TRANSIENT_STATUS or status >= 500


def server_message(text: str) -> str:
    """The server's own message out of an error text: LiteLLM's "litellm.X: OpenAIException - Error code: 400 -
    {'error': {'message': ...}}" or a raw JSON body ({"error": {"message": ...}}, {"message": ...},
    {"detail": ...}); one line, at most 300 characters."""
    text = text.split("OpenAIException - ", 1)[-1].strip()
    text = re.sub(r"^Error code: \d+ - ", "", text)
    body = None
    for parse in (json.loads, ast.literal_eval):
        try:
            body = parse(text)
            break
        except (ValueError, SyntaxError, RecursionError):
            continue
    if isinstance(body, dict):
        inner = body.get("error", body)  # an optional wrapper; shapes differ between servers
        inner = inner if isinstance(inner, dict) else {"message": inner}
        found = next((inner[k] for k in ("message", "detail") if k in inner), None)
        text = str(found) if found is not None else text
    return " ".join(text.split())[:300]


def refusal(status: int, message: str, base_url: str, model: str, endpoint: str = "") -> tuple[str, bool]:
    """(the sample's `error`, whether the sample failed: a rerun asks again) for a request the server refused with
    `status` (a 4xx that is not transient); raises UserError for a refusal that every request would get."""
    if status in AUTH_STATUS:
        raise UserError(
            f"the server at {base_url} refused the request with HTTP {status} ({message}): check the API key "
            "(++server.api_key_env names the environment variable that holds it) and that it may use model "
            f"'{model}'."
        )
    if status == 404:
        route = f" or no {endpoint} route" if endpoint else ""
        raise UserError(
            f"the server at {base_url} answered HTTP 404 ({message}): it serves no model '{model}'{route}; check "
            "++server.model (--model) against its /v1/models" + (" and ++server.endpoint." if endpoint else ".")
        )
    if any(h in message.lower() for h in CONTEXT_HINTS):
        return f"context length exceeded: HTTP {status}: {message}", False
    return f"HTTP {status}: {message}", True


class Tally:
    """Failed and answered samples of a run: stops the run once ALL_FAILED_AFTER samples (or every sample of a
    smaller run) failed and none was answered, naming the first failure."""

    def __init__(self, base_url: str, total: int):
        self.base_url, self.total = base_url, total
        self.failed = self.answered = 0
        self.first: str | None = None

    def add(self, failure: str | None) -> None:
        """One sample: `failure` is the error of its refused request, None when it was answered."""
        if failure is None:
            self.answered += 1
            return
        self.failed += 1
        self.first = self.first or failure
        if not self.answered and self.failed >= min(ALL_FAILED_AFTER, self.total):
            what = "every request" if self.failed == self.total else f"the first {self.failed} requests"
            raise RequestsFailed(
                f"the server at {self.base_url} refused {what} of this run (first: {self.first}); check the request "
                "settings (++inference.*, ++server.endpoint, ++server.model) and the server's log; finished samples "
                "are kept."
            )
