"""TensorRT-LLM: `trtllm-serve` on an engine or HF folder, tensor parallel over the node's GPUs."""

from __future__ import annotations

import shlex

from pipeline_kit.servers.base import ServerSpec, ServerType, extra_args


class TrtllmServer(ServerType):
    def launch(self, spec: ServerSpec, port: str, python: str) -> str:
        return (
            f"trtllm-serve {shlex.quote(spec.model)} --host 0.0.0.0 --port {port} --tp_size {max(spec.gpus, 1)}"
            + extra_args(spec)
        )


TRTLLM = TrtllmServer("trtllm")
