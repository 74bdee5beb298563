"""The sandbox as a component of the declarative layer: a service Command in its own CommandGroup (its own
het component on Slurm), and the explicit builders that hand its address to the commands that use it."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline_kit.pipeline.model import Command, CommandGroup, Endpoint, HardwareConfig

SANDBOX_NAME = "sandbox"
SANDBOX_PYTHON_VAR = "KIT_SANDBOX_PYTHON"  # a cluster config may point it at an env with the sandbox's deps
ADDRESS_VAR = "KIT_SANDBOX_ADDRESS"


def sandbox_command(python: str, host: str, port: int | str, args: str, container: str | None) -> Command:
    """`python`: the default interpreter ($KIT_SANDBOX_PYTHON overrides it where the job runs)."""
    line = f'"${{{SANDBOX_PYTHON_VAR}:-{python}}}" -m pipeline_kit.sandbox.server --host {host} --port "$KIT_PORT"'
    line += f" {args.strip()}" if args.strip() else ""
    return Command(line, name=SANDBOX_NAME, container=container, port=port, service=True)


def sandbox_group(command: Command, hardware: HardwareConfig | None = None) -> CommandGroup:
    return CommandGroup([command], hardware=hardware or HardwareConfig(), name=SANDBOX_NAME)


def address(refs: dict[str, Endpoint]) -> str:
    return f"http://{refs[SANDBOX_NAME].host}:{refs[SANDBOX_NAME].port}"


@dataclass(frozen=True)
class WithSandboxAddress:
    """A shell command that runs once the job's sandbox answers, with its address in $KIT_SANDBOX_ADDRESS."""

    command: str
    python: str
    ready_timeout: float = 300.0

    def __call__(self, refs: dict[str, Endpoint]) -> str:
        wait = f'"${{{SANDBOX_PYTHON_VAR}:-{self.python}}}" -m pipeline_kit.sandbox.client --wait "${ADDRESS_VAR}"'
        return f'export {ADDRESS_VAR}="{address(refs)}"\n{wait} {self.ready_timeout:g} && {self.command}'
