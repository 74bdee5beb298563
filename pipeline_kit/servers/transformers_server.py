"""CPU-friendly serving for laptops: `transformers serve` pinned to the model folder, through kit's launcher
(pipeline_kit/servers/transformers_serve.py, which seeds each generation where it runs). It answers only requests
whose model is that exact path, and /v1/models needs an existing HF_HUB_CACHE, so both are set here. A reward model
(config.json names a *ForSequenceClassification) gets kit's reward server instead, decided where the job runs.
Its requests carry their sampling settings in a `generation_config` field (inference/client.py, sampling_fields)."""

from __future__ import annotations

import shlex

from pipeline_kit.errors import UserError
from pipeline_kit.servers.base import ServerSpec, ServerType, extra_args
from pipeline_kit.servers.reward_server import REWARD_ARCHITECTURE


class TransformersServer(ServerType):
    def launch(self, spec: ServerSpec, port: str, python: str) -> str:
        if spec.served_model_name and spec.served_model_name != spec.model:
            raise UserError("--server_type=transformers serves the model under its path; drop --served_model_name.")
        device = "cuda" if spec.gpus else "cpu"
        model = shlex.quote(spec.model)
        where = f"{model} --device {device} --host 0.0.0.0 --port {port}{extra_args(spec)}"
        serve = (
            'export HF_HUB_CACHE="${HF_HUB_CACHE:-$KIT_LOG_DIR/hf-cache}" && mkdir -p "$HF_HUB_CACHE" && '
            f"{python} -m pipeline_kit.servers.transformers_serve {where}"
        )
        config = shlex.quote(f"{spec.model.rstrip('/')}/config.json")
        return (
            f"if grep -qs {REWARD_ARCHITECTURE} {config}; then {python} -m pipeline_kit.servers.reward_server "
            f"{where}; else {serve}; fi"
        )


TRANSFORMERS = TransformersServer(
    "transformers",
    modules=("torch", "transformers", "fastapi", "uvicorn"),
    install="pip install torch==2.13.0 'transformers[serving]'",
)
