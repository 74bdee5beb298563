"""SGLang: `python -m sglang.launch_server`; several nodes join through its --dist-init-addr / --nnodes /
--node-rank flags (one task per node), with tensor parallelism over every GPU of every node."""

from __future__ import annotations

import shlex

from pipeline_kit.servers.base import HEAD_HOST, ServerSpec, ServerType, extra_args

DIST_PORT = 20000


class SglangServer(ServerType):
    # no keep-alive setting as vLLM has (KEEP_ALIVE_S): SGLang's HTTP server fixes uvicorn's at 5 s, with no flag or
    # variable, so the job's pool check (inference/retry.py, PoolConnector) is what keeps requests off closed ones
    def launch(self, spec: ServerSpec, port: str, python: str) -> str:
        cmd = (
            f"{python} -m sglang.launch_server --model-path {shlex.quote(spec.model)}"
            f" --served-model-name {shlex.quote(spec.name)} --host 0.0.0.0 --port {port}"
            f" --tp-size {max(spec.gpus, 1) * spec.nodes}"
        )
        if spec.nodes > 1:
            cmd += f" --nnodes {spec.nodes} --node-rank ${{SLURM_PROCID:-0}} --dist-init-addr {HEAD_HOST}:{DIST_PORT}"
        return cmd + extra_args(spec)


SGLANG = SglangServer("sglang", multi_node=True, modules=("sglang",), install="pip install 'sglang[all]'")
