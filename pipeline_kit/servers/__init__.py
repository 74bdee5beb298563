"""Model servers, one module per type, in a registry: each type turns a ServerSpec into the command that serves an
OpenAI-compatible API (vllm, sglang, trtllm, transformers) or points at an external endpoint (openai)."""

from pipeline_kit.servers.base import SERVER_TYPES, ServerSpec, ServerType, get_server_type

__all__ = ["SERVER_TYPES", "ServerSpec", "ServerType", "get_server_type"]
