"""TensorRT-LLM: `trtllm-serve` on an engine or HF folder, tensor parallel over the node's GPUs. It serves the model
under its own name, never another: a local folder's base name (its `OpenAIServer` takes `Path(model).name` when the
folder exists), else the model argument as given (a Hugging Face id); trtllm-serve up to 1.2 has no
--served_model_name, so kit passes none and the client asks for that name."""

from __future__ import annotations

import os
import shlex

from pipeline_kit.errors import UserError
from pipeline_kit.servers.base import ServerSpec, ServerType, extra_args


class TrtllmServer(ServerType):
    def launch(self, spec: ServerSpec, port: str, python: str) -> str:
        return (
            f"trtllm-serve {shlex.quote(spec.model)} --host 0.0.0.0 --port {port} --tp_size {max(spec.gpus, 1)}"
            + extra_args(spec)
        )

    def served_name(self, spec: ServerSpec) -> str:
        name = folder_name(spec.model)
        if spec.served_model_name and spec.served_model_name != name:
            raise UserError(
                f"--server_type=trtllm serves {spec.model} as '{name}' (trtllm-serve takes no other name); "
                f"drop --served_model_name={spec.served_model_name}."
            )
        return name


def folder_name(model: str) -> str:
    """The name trtllm-serve gives MODEL: a folder's base name, else MODEL itself. A path (absolute, ./, ../ or ~/)
    is taken for a folder (it exists where the job runs, not necessarily here); a bare relative name is a folder
    when it is one here, else a Hugging Face id (org/name)."""
    path = model.rstrip("/")
    if model.startswith(("/", "./", "../", "~")) or os.path.isdir(model):
        return os.path.basename(path) or model
    return model


TRTLLM = TrtllmServer("trtllm")
