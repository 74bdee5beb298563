"""A fast OpenAI-compatible stub server for client benchmarks: plain asyncio HTTP/1.1 with keep-alive, no framework,
so that one core answers many thousands of short requests per second and the client under test is the bottleneck.

  python perf/fast_stub_server.py PORT [--text TEXT] [--completion_tokens N]

Answers GET /v1/models, GET /health and GET /stats (connections opened and completions answered so far), and POST /v1/chat/completions and /v1/completions with TEXT (default
"\\boxed{42}") in an OpenAI-shaped body (id, object, created, model, choices with message or text and finish_reason,
usage). No streaming. Prints "fast stub server on PORT" once it listens."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import time

MODELS = {"object": "list", "data": [{"id": "stub", "object": "model", "created": 0, "owned_by": "kit"}]}


def response(code: int, body: bytes, keep_alive: bool) -> bytes:
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}[code]
    head = (
        f"HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
    )
    return head.encode() + body


class Completions:
    """The completion bodies: everything but id, created and model is fixed, so most of the JSON is built once."""

    def __init__(self, text: str, completion_tokens: int):
        self.ids = itertools.count()
        usage = {"prompt_tokens": 0, "completion_tokens": completion_tokens, "total_tokens": completion_tokens}
        chat_choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        text_choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "stop"}
        self.tails = {
            True: json.dumps({"object": "chat.completion", "choices": [chat_choice], "usage": usage})[1:],
            False: json.dumps({"object": "text_completion", "choices": [text_choice], "usage": usage})[1:],
        }

    def body(self, chat: bool, request: bytes) -> bytes:
        try:
            model = json.loads(request).get("model", "stub")
        except (ValueError, AttributeError):
            model = "stub"
        head = f'{{"id": "cmpl-{next(self.ids)}", "created": {int(time.time())}, "model": {json.dumps(model)}, '
        return (head + self.tails[chat]).encode()


class HTTP(asyncio.Protocol):
    completions: Completions
    stats = {"connections": 0, "completions": 0}

    def connection_made(self, transport):
        self.transport = transport
        self.buf = b""
        self.stats["connections"] += 1

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:  # pipelined or split requests: answer every complete one in the buffer
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].decode("latin-1")
            lines = head.split("\r\n")
            method, path, version = (lines[0].split(" ") + ["", ""])[:3]
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0") or 0)
            if len(self.buf) < end + 4 + length:
                return
            body = self.buf[end + 4 : end + 4 + length]
            self.buf = self.buf[end + 4 + length :]
            keep_alive = headers.get("connection", "").lower() != "close" and version == "HTTP/1.1"
            self.transport.write(self.answer(method, path.split("?")[0].rstrip("/"), body, keep_alive))
            if not keep_alive:
                self.transport.close()
                return

    def answer(self, method: str, path: str, body: bytes, keep_alive: bool) -> bytes:
        if method == "POST" and path in ("/v1/chat/completions", "/v1/completions"):
            self.stats["completions"] += 1
            return response(200, self.completions.body(path.endswith("chat/completions"), body), keep_alive)
        if method == "GET" and path == "/v1/models":
            return response(200, json.dumps(MODELS).encode(), keep_alive)
        if method == "GET" and path == "/stats":
            return response(200, json.dumps(self.stats).encode(), keep_alive)
        if method == "GET" and path == "/health":
            return response(200, b"{}", keep_alive)
        return response(404, b'{"error": {"message": "not found", "type": "NotFoundError", "code": 404}}', keep_alive)


async def serve(port: int) -> None:
    server = await asyncio.get_running_loop().create_server(HTTP, "127.0.0.1", port, backlog=4096)
    print(f"fast stub server on {port}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--text", default="\\boxed{42}")
    ap.add_argument("--completion_tokens", type=int, default=4)
    ap.add_argument("--filler_tokens", type=int, default=0, help="put this many 4-character tokens before --text")
    args = ap.parse_args()
    HTTP.completions = Completions("tok " * args.filler_tokens + args.text, args.completion_tokens)
    try:
        asyncio.run(serve(args.port))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
