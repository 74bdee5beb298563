"""Model server types, one module each, named in registry.py: each turns a ServerSpec into the command that serves an
OpenAI-compatible API (vllm, sglang, trtllm, transformers) or points at an external endpoint (openai)."""

from pipeline_kit.servers.base import ServerSpec, ServerType, get_server_type
from pipeline_kit.servers.registry import SERVER_TYPES

__all__ = ["SERVER_TYPES", "ServerSpec", "ServerType", "get_server_type"]
