"""A small OpenAI-compatible server for tests, where the point is the client, not the model (real vLLM is used
elsewhere). It logs every completion request it receives (one JSON line), so tests count what reached the server.

  python stub_openai_server.py PORT REQUEST_LOG [--delay S] [--die_after N] [--never_ready | --ready_file PATH]
                               [--context_limit C [--context_style vllm|vllm_old|sglang]]
                               [--tir_rounds N [--tir_code TEMPLATE]] [--add_seed]
                               [--fail_status CODE [--fail_when TEXT | --fail_for S [--fail_from K]]]
                               [--answer_chars N] [--script FILE] [--think [--reasoning_parser]] [--drop_for S]
                               [--hold N]

Answers `\\boxed{<the number in the last message>}` (plus the request's seed with --add_seed). With --never_ready
every GET answers 503 (a server still loading); with --ready_file PATH, until PATH exists (a server that becomes
ready when the test says so). With --context_limit
C the model's context window is C tokens, a token being a character of the prompt: a prompt over C gets the 400
that vLLM gives; a prompt plus max_tokens over C is cut by the server as vLLM 0.11+ does (--context_style vllm, the
default; /v1/models then says max_model_len=C), or refused with the 400 of vLLM 0.6-0.9 (vllm_old) or of SGLang
(sglang), each naming the window and the prompt's tokens. With --fail_status CODE, requests whose prompt holds TEXT (every request
without --fail_when) are refused with HTTP CODE and an OpenAI-style error body whose message names the code; a 401
or 403 for every request refuses GET /v1/models too, as a server that checks keys does. With --fail_for S it refuses
every completion request for S seconds from the (K+1)-th one it gets (--fail_from K, default 0), then recovers (a
server overloaded or failing for a while); each request's log line says `refused` (the status) or not. With
--answer_chars N every answer is padded with N characters of filler text before the boxed number. With --tir_rounds N it is a
scripted tool-using model: until the prompt holds N ```output blocks it writes a ```python block (TEMPLATE with
{numbers} = the problem's numbers joined by +, {round}), honouring `stop` like vLLM; then it answers
\\boxed{<the last output>}. Only the sandbox can compute that output. To a judge prompt (prompts/judge/math.yaml)
it says "Judgement: Yes" when the expected and predicted answers are the same string; to
a GenSelect prompt (prompts/generic/genselect.yaml) it names the solution with the largest \\boxed number.
With --script FILE (a JSON list of {"match": REGEX, "replies": [TEXT, ...]}) the first rule whose REGEX finds the
prompt (re.S) answers replies[seed % len(replies)] as written; a prompt no rule finds gets an HTTP 400 (which is
not retried), so a test's script covers every request it causes. With --think it is a reasoning model: its text is
`<think>Maybe \\boxed{<the number + 1>}? No, recount.</think>` and the answer, a token is a character, and max_tokens cuts the
text (finish_reason "length"); with --reasoning_parser the chat endpoint splits it as vLLM's deepseek_r1 parser
does: `reasoning` (vLLM 0.10+'s field) and `content` (null when the trace never ended), and counts
completion_tokens_details.reasoning_tokens. With --drop_for S, for S seconds from the first completion request, each one
is read and its connection closed without an answer (a live server that resets connections, as one starved of CPU
may); its log line says `dropped`. With --hold N no completion request is answered before N have arrived (or
30 s have passed): a test sees which requests a client keeps in flight together, however slow the machine."""

from __future__ import annotations

import argparse
import json
import os
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("request_log")
    ap.add_argument("--delay", type=float, default=0.0)
    ap.add_argument("--die_after", type=int, default=0)
    ap.add_argument("--never_ready", action="store_true")
    ap.add_argument("--ready_file")
    ap.add_argument("--context_limit", type=int, default=0)
    ap.add_argument("--context_style", choices=("vllm", "vllm_old", "sglang"), default="vllm")
    ap.add_argument("--tir_rounds", type=int, default=0)
    ap.add_argument("--tir_code", default="print({numbers})")
    ap.add_argument("--add_seed", action="store_true")
    ap.add_argument("--fail_status", type=int, default=0)
    ap.add_argument("--fail_when", default="")
    ap.add_argument("--fail_for", type=float, default=0.0)
    ap.add_argument("--fail_from", type=int, default=0)
    ap.add_argument("--answer_chars", type=int, default=0)
    ap.add_argument("--script")
    ap.add_argument("--think", action="store_true")
    ap.add_argument("--reasoning_parser", action="store_true")
    ap.add_argument("--drop_for", type=float, default=0.0)
    ap.add_argument("--hold", type=int, default=0)
    args = ap.parse_args()
    script = []
    if args.script:
        with open(args.script) as f:
            script = [(re.compile(rule["match"], re.S), rule["replies"]) for rule in json.load(f)]
    lock = threading.Lock()
    arrived = threading.Condition(lock)  # --hold: answers wait for the N-th request
    served = [0]
    failing_since = [None]  # time.monotonic() when --fail_for's window opened
    dropping_since = [None]  # time.monotonic() when --drop_for's window opened
    in_flight = [0]  # requests being answered, this one included (in each log line: units' requests overlap)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):  # keep the test output quiet
            pass

        def reply(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if args.never_ready or (args.ready_file and not os.path.exists(args.ready_file)):
                self.reply(503, {"error": "loading"})
            elif args.fail_status in (401, 403) and not args.fail_when:
                self.reply(args.fail_status, {"error": {"message": "bad key", "code": args.fail_status}})
            elif self.path.rstrip("/") == "/v1/models":
                model = {"id": "stub", "object": "model"}
                if args.context_limit and args.context_style == "vllm":
                    model["max_model_len"] = args.context_limit
                self.reply(200, {"object": "list", "data": [model]})
            else:
                self.reply(404, {"error": "not found"})

        def do_POST(self):
            with lock:
                in_flight[0] += 1
            try:
                self.answer()
            finally:
                with lock:
                    in_flight[0] -= 1

        def answer(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            chat = self.path.endswith("/chat/completions")
            prompt = body["messages"][-1]["content"] if chat else body["prompt"]
            prompt = prompt[0] if isinstance(prompt, list) else prompt
            with lock:
                served[0] += 1
                arrived.notify_all()
                refused = args.fail_status if args.fail_status and args.fail_when in prompt else 0
                if args.fail_for:
                    if failing_since[0] is None and served[0] > args.fail_from:
                        failing_since[0] = time.monotonic()
                    opened = failing_since[0]
                    refused = refused if opened is not None and time.monotonic() - opened < args.fail_for else 0
                if args.drop_for and dropping_since[0] is None:
                    dropping_since[0] = time.monotonic()
                dropped = bool(args.drop_for) and time.monotonic() - dropping_since[0] < args.drop_for
                with open(args.request_log, "a") as f:
                    record = {"path": self.path, "prompt": prompt, "body": body, "auth": self.headers["Authorization"]}
                    record |= {
                        "in_flight": in_flight[0],
                        "arrived": time.time(),
                        "refused": refused,
                        "dropped": dropped,
                    }
                    f.write(json.dumps(record) + "\n")
                if args.die_after and served[0] > args.die_after:
                    os._exit(17)  # the server crashes mid-run
            if dropped:  # no answer: the connection is closed (the client sees it disconnected)
                self.close_connection = True
                return
            if refused:
                msg = f"stub refuses this request (status {args.fail_status})"
                self.reply(args.fail_status, {"error": {"message": msg, "type": "StubError", "code": args.fail_status}})
                return
            refused = context_refusal(len(prompt), body.get("max_tokens"))
            if refused:
                self.reply(400, {"error": {"message": refused, "type": "BadRequestError", "code": 400}})
                return
            time.sleep(args.delay)
            if args.hold:
                with arrived:
                    arrived.wait_for(lambda: served[0] >= args.hold, timeout=30)
            numbers = re.findall(r"\d+", prompt)
            answer = int(numbers[-1]) if numbers else 0
            text = f"\\boxed{{{answer + ((body.get('seed') or 0) if args.add_seed else 0)}}}"
            if args.answer_chars:
                text = ("filler " * (args.answer_chars // 7 + 1))[: args.answer_chars] + text
            if args.tir_rounds:
                text = tir_answer(body, chat)
            if script:
                replies = next((replies for rx, replies in script if rx.search(prompt)), None)
                if replies is None:
                    self.reply(400, {"error": {"message": f"no script rule finds {prompt!r}", "code": 400}})
                    return
                text = replies[(body.get("seed") or 0) % len(replies)]
            judged = re.search(r"Expected answer: (.*)\nPredicted answer: (.*)", prompt)
            if judged:  # a judge prompt (prompts/judge/math.yaml): equal strings are a Yes
                text = f"Compared.\nJudgement: {'Yes' if judged[1].strip() == judged[2].strip() else 'No'}"
            if "Solution 0:" in prompt:  # a GenSelect prompt (prompts/generic/genselect.yaml)
                text = genselect_answer(prompt)
            usage = {"prompt_tokens": len(prompt), "completion_tokens": 3, "total_tokens": len(prompt) + 3}
            choice = {"index": 0, "finish_reason": "stop"}
            choice |= {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
            if args.think:
                thinking(text, body, chat, usage, choice)
            if body.get("logprobs"):  # three tokens of log-probability -(1 + seed) / 10 each
                value = -(1 + (body.get("seed") or 0)) / 10
                tokens = [{"token": "t", "logprob": value, "bytes": [116], "top_logprobs": []}] * 3
                choice["logprobs"] = (
                    {"content": tokens} if chat else {"tokens": ["t"] * 3, "token_logprobs": [value] * 3}
                )
            obj = "chat.completion" if chat else "text_completion"
            self.reply(
                200,
                {"id": "x", "object": obj, "created": 0, "model": body["model"], "choices": [choice], "usage": usage},
            )

    def context_refusal(prompt: int, asked: int | None) -> str | None:
        """The 400 message a server with a window of --context_limit tokens gives this request, or None."""
        window = args.context_limit
        if not window:
            return None
        if prompt > window:
            return (
                f"This model's maximum context length is {window} tokens. However, your prompt contains {prompt} "
                "input tokens, which exceeds this limit even without any output tokens. Please reduce the length "
                "of the input prompt."
            )
        if asked is None or prompt + asked <= window or args.context_style == "vllm":
            return None
        if args.context_style == "vllm_old":
            return (
                f"This model's maximum context length is {window} tokens. However, you requested {prompt + asked} "
                f"tokens ({prompt} in the messages, {asked} in the completion). Please reduce the length of the "
                "messages or completion."
            )
        return (
            f"Requested token count exceeds the model's maximum context length of {window} tokens. You requested a "
            f"total of {prompt + asked} tokens: {prompt} tokens from the input messages and {asked} tokens for the "
            "completion. Please reduce the number of tokens in the input messages or the completion to fit within "
            "the limit."
        )

    def thinking(answer: str, body: dict, chat: bool, usage: dict, choice: dict) -> None:
        """--think: the choice and usage of a reasoning model's answer, cut at max_tokens characters."""
        wrong = re.sub(r"\d+", lambda m: str(int(m[0]) + 1), answer)  # a boxed guess the trace drops
        text = f"<think>Maybe {wrong}? No, recount.</think>\n{answer}"
        asked = body.get("max_tokens")
        if asked is not None and len(text) > asked:
            text, choice["finish_reason"] = text[:asked], "length"
        usage |= {"completion_tokens": len(text), "total_tokens": usage["prompt_tokens"] + len(text)}
        if not chat:
            choice["text"] = text
        elif not args.reasoning_parser:
            choice["message"]["content"] = text
        else:
            trace, ended, content = text.removeprefix("<think>").partition("</think>")
            choice["message"] = {"role": "assistant", "reasoning": trace, "content": content if ended else None}
            usage["completion_tokens_details"] = {"reasoning_tokens": len("<think>" + trace + ended)}

    def genselect_answer(prompt: str) -> str:
        """The solution with the largest boxed number ("Judgment: 1" then "Judgment: <it>": the last counts); a
        problem that says [out of range] gets "Judgment: 99", one that says [garbage] no judgment at all."""
        if "[garbage]" in prompt:
            return "All of them look fine to me."
        if "[out of range]" in prompt:
            return "Judgment: 99"
        boxed = [int(n) for n in re.findall(r"\\boxed\{(\d+)\}", prompt)]
        best = boxed.index(max(boxed)) if boxed else 0
        return f"Judgment: 1\nOn second thought, the largest is best.\nJudgment: {best}"

    def tir_answer(body: dict, chat: bool) -> str:
        if chat:
            question = next(m["content"] for m in body["messages"] if m["role"] == "user")
            so_far = body["messages"][-1]["content"] if body["messages"][-1]["role"] == "assistant" else ""
        else:
            question = so_far = body["prompt"][0] if isinstance(body["prompt"], list) else body["prompt"]
        outputs = re.findall(r"```output\n(.*?)```", so_far, re.S)
        if len(outputs) >= args.tir_rounds:
            return f"So the answer is \\boxed{{{outputs[-1].strip()}}}."
        numbers = "+".join(re.findall(r"\d+", question.split("```")[0]))
        text = f"Let me compute.\n```python\n{args.tir_code.format(numbers=numbers, round=len(outputs))}\n```\nDone."
        for stop in body.get("stop") or []:
            if stop in text:
                text = text[: text.index(stop)]
        return text

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(f"stub server on {args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
