"""A reward model (AutoModelForSequenceClassification) behind vLLM's pooling API, for --server_type=transformers:
`transformers serve` has no scoring route. Stdlib HTTP + torch + transformers only, so any env that runs
`transformers serve` runs this too:
  python -m pipeline_kit.servers.reward_server MODEL_DIR [--device cpu] [--host 0.0.0.0] [--port 8000]
POST /pooling {"model", "messages" | "input", "use_activation"} -> {"data": [{"index": 0, "data": [score]}], ...};
GET /v1/models and /health answer once the model is loaded. Requests are scored one at a time."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REWARD_ARCHITECTURE = "ForSequenceClassification"  # the suffix of a reward model's architecture in config.json


class RewardModel:
    def __init__(self, path: str, device: str):
        import torch
        from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

        architectures = AutoConfig.from_pretrained(path).architectures or []
        if not any(a.endswith(REWARD_ARCHITECTURE) for a in architectures):
            sys.exit(f"{path} is a {', '.join(architectures) or 'model'}, not a reward model (*{REWARD_ARCHITECTURE}).")
        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModelForSequenceClassification.from_pretrained(path).to(device).eval()
        self.device = device
        self.max_length = getattr(self.model.config, "max_position_embeddings", None)
        self.lock = threading.Lock()

    def score(self, body: dict) -> tuple[list[float], int]:
        """(values, prompt tokens). The chat template renders `messages` without a generation prompt and adds no
        special tokens on top of its own, as vLLM's pooling API does; `input` is taken as text."""
        if "messages" in body:
            text = self.tokenizer.apply_chat_template(body["messages"], tokenize=False, add_generation_prompt=False)
            special = False
        elif isinstance(body.get("input"), str):
            text, special = body["input"], bool(body.get("add_special_tokens", True))
        else:
            raise ValueError("give 'messages' (a chat) or 'input' (one text)")
        ids = self.tokenizer(text, return_tensors="pt", add_special_tokens=special)["input_ids"]
        if self.max_length and ids.shape[1] > self.max_length:
            raise ValueError(f"the input has {ids.shape[1]} tokens, more than the model's {self.max_length}")
        with self.lock, self.torch.no_grad():
            logits = self.model(input_ids=ids.to(self.device)).logits[0].float()
        if body.get("use_activation") is not False:  # vLLM's default for classifiers
            logits = logits.sigmoid() if logits.numel() == 1 else logits.softmax(-1)
        return logits.tolist(), int(ids.shape[1])


def make_handler(model: RewardModel, name: str):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format, *args):  # one line per request on stderr, as uvicorn's access log
            sys.stderr.write(f"{self.address_string()} {format % args}\n")

        def _send(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str) -> None:
            self._send(status, {"error": {"message": message, "type": "BadRequestError", "code": status}})

        def do_GET(self):
            if self.path == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "kit"}]})
            elif self.path == "/health":
                self._send(200, {})
            else:
                self._error(404, f"no route {self.path}")

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError as e:
                return self._error(400, f"the body is not JSON ({e})")
            if self.path != "/pooling":
                return self._error(404, f"no route {self.path}; this server answers POST /pooling")
            if body.get("model") not in (None, name):
                return self._error(404, f"The model `{body.get('model')}` does not exist; this server has `{name}`.")
            try:
                values, tokens = model.score(body)
            except (ValueError, TypeError, KeyError) as e:
                return self._error(400, str(e))
            usage = {"prompt_tokens": tokens, "total_tokens": tokens, "completion_tokens": 0}
            data = [{"index": 0, "object": "pooling", "data": values}]
            self._send(200, {"object": "list", "model": name, "data": data, "usage": usage})

    return Handler


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pipeline_kit.servers.reward_server", description=__doc__)
    parser.add_argument("model", help="the reward model's folder")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--served-model-name", default=None, help="[default: the model path]")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    model = RewardModel(args.model, args.device)
    server = ThreadingHTTPServer((args.host, args.port), make_handler(model, args.served_model_name or args.model))
    print(f"reward server: {args.model} on {args.device}, http://{args.host}:{args.port}/pooling", file=sys.stderr)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
