"""CPU-friendly serving for laptops: `transformers serve` pinned to the model folder. It answers only requests
whose model is that exact path, and /v1/models needs an existing HF_HUB_CACHE, so both are set here. A reward model
(config.json names a *ForSequenceClassification) gets kit's reward server instead, decided where the job runs."""

from __future__ import annotations

import shlex

from pipeline_kit.errors import UserError
from pipeline_kit.servers.base import SERVER_PYTHON, ServerSpec, ServerType, extra_args, register
from pipeline_kit.servers.reward_server import REWARD_ARCHITECTURE


class TransformersServer(ServerType):
    def launch(self, spec: ServerSpec, port: str) -> str:
        if spec.served_model_name and spec.served_model_name != spec.model:
            raise UserError("--server_type=transformers serves the model under its path; drop --served_model_name.")
        device = "cuda" if spec.gpus else "cpu"
        model = shlex.quote(spec.model)
        where = f"{model} --device {device} --host 0.0.0.0 --port {port}{extra_args(spec)}"
        serve = (
            'export HF_HUB_CACHE="${HF_HUB_CACHE:-$KIT_LOG_DIR/hf-cache}" && mkdir -p "$HF_HUB_CACHE" && '
            f"{SERVER_PYTHON} -m transformers.cli.transformers serve {where}"
        )
        config = shlex.quote(f"{spec.model.rstrip('/')}/config.json")
        return (
            f"if grep -qs {REWARD_ARCHITECTURE} {config}; then {SERVER_PYTHON} -m pipeline_kit.servers.reward_server "
            f"{where}; else {serve}; fi"
        )


register(TransformersServer("transformers"))
