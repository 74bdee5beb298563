"""The server types kit knows, by `--server_type` name: each names the `module:object` of its ServerType, imported
only when that type is asked for (servers.base.get_server_type). A new type is a module here and a line below."""

SERVER_TYPES: dict[str, str] = {
    "openai": "pipeline_kit.servers.external:OPENAI",
    "sglang": "pipeline_kit.servers.sglang:SGLANG",
    "transformers": "pipeline_kit.servers.transformers:TRANSFORMERS",
    "trtllm": "pipeline_kit.servers.trtllm:TRTLLM",
    "vllm": "pipeline_kit.servers.vllm:VLLM",
}
