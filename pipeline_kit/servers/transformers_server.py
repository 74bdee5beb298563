"""CPU-friendly serving for laptops: `transformers serve` pinned to the model folder. It answers only requests
whose model is that exact path, and /v1/models needs an existing HF_HUB_CACHE, so both are set here."""

from __future__ import annotations

import shlex

from pipeline_kit.errors import UserError
from pipeline_kit.servers.base import SERVER_PYTHON, ServerSpec, ServerType, extra_args, register


class TransformersServer(ServerType):
    def launch(self, spec: ServerSpec, port: str) -> str:
        if spec.served_model_name and spec.served_model_name != spec.model:
            raise UserError("--server_type=transformers serves the model under its path; drop --served_model_name.")
        device = "cuda" if spec.gpus else "cpu"
        return (
            'export HF_HUB_CACHE="${HF_HUB_CACHE:-$KIT_LOG_DIR/hf-cache}" && mkdir -p "$HF_HUB_CACHE" && '
            f"{SERVER_PYTHON} -m transformers.cli.transformers serve {shlex.quote(spec.model)} --device {device}"
            f" --host 0.0.0.0 --port {port}" + extra_args(spec)
        )


register(TransformersServer("transformers"))
