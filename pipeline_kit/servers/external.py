"""An external OpenAI-compatible endpoint (`--server_address`); the key comes from an env var. Nothing is started."""

from __future__ import annotations

from pipeline_kit.errors import UserError
from pipeline_kit.servers.base import ServerSpec, ServerType

DEFAULT_KEY_ENV = "OPENAI_API_KEY"


class ExternalServer(ServerType):
    def base_url(self, spec: ServerSpec, host: str, port: int) -> str:
        if not spec.address:
            raise UserError("--server_type=openai needs --server_address, e.g. http://host:8000/v1.")
        return spec.address


OPENAI = ExternalServer("openai", runs_locally=False)
