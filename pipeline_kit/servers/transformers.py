"""The server type `--server_type=transformers` (its command line, as vllm.py is vllm's): CPU-friendly serving for
laptops, `transformers serve` pinned to the model folder, run through kit's launcher transformers_seeded_serve.py
(the program the job runs, which seeds each generation where it runs). It answers only requests whose model is
that exact path, and /v1/models needs an existing HF_HUB_CACHE, so both are set here. A reward model
(config.json names a *ForSequenceClassification) gets kit's reward server instead, decided where the job runs.
Its requests carry their sampling settings in a `generation_config` field (inference/client.py, sampling_fields)."""

from __future__ import annotations

import shlex

from pipeline_kit.errors import UserError
from pipeline_kit.servers.base import ServerSpec, ServerType, extra_args
from pipeline_kit.servers.reward_server import REWARD_ARCHITECTURE


class TransformersServer(ServerType):
    def launch(self, spec: ServerSpec, port: str, python: str) -> str:
        device = "cuda" if spec.gpus else "cpu"
        model = shlex.quote(spec.model)
        where = f"{model} --device {device} --host 0.0.0.0 --port {port}"
        serve = (
            'export HF_HUB_CACHE="${HF_HUB_CACHE:-$KIT_LOG_DIR/hf-cache}" && mkdir -p "$HF_HUB_CACHE" && '
            f"{python} -m pipeline_kit.servers.transformers_seeded_serve {where}{extra_args(spec)}"
        )
        config = shlex.quote(f"{spec.model.rstrip('/')}/config.json")
        # --server_args are `transformers serve`'s options; the reward server has none of them
        return (
            f"if grep -qs {REWARD_ARCHITECTURE} {config}; then {python} -m pipeline_kit.servers.reward_server "
            f"{where}; else {serve}; fi"
        )

    def served_name(self, spec: ServerSpec) -> str:
        """Its path: `transformers serve` answers only requests for that exact path, and kit's reward server (which
        could take another name) is chosen only where the job runs, so both serve the path."""
        if spec.served_model_name and spec.served_model_name != spec.model:
            raise UserError(
                f"--server_type=transformers serves the model under its path ({spec.model}); "
                f"drop --served_model_name={spec.served_model_name}."
            )
        return spec.model


TRANSFORMERS = TransformersServer(
    "transformers",
    modules=("torch", "transformers", "fastapi", "uvicorn"),
    install="pip install torch==2.13.0 'transformers[serving]'",
)
