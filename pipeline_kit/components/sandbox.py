"""The sandbox as a component of the declarative layer: a service Command in its own CommandGroup (its own
het component on Slurm), and the explicit builders that hand its address to the commands that use it."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.components.python_check import kit_python_check
from pipeline_kit.errors import UserError
from pipeline_kit.pipeline.model import AUTO_PORT, Command, CommandGroup, Endpoint, HardwareConfig

SANDBOX_NAME = "sandbox"
SANDBOX_PYTHON_VAR = "KIT_SANDBOX_PYTHON"  # a cluster config may point it at an env with the sandbox's deps
ADDRESS_VAR = "KIT_SANDBOX_ADDRESS"


def sandbox_command(python: str, host: str, port: int | str, args: str, container: str | None) -> Command:
    """`python`: the default interpreter ($KIT_SANDBOX_PYTHON overrides it where the job runs)."""
    line = f'"${{{SANDBOX_PYTHON_VAR}:-{python}}}" -m pipeline_kit.sandbox.server --host {host} --port "$KIT_PORT"'
    line += f" {args.strip()}" if args.strip() else ""
    return Command(line, name=SANDBOX_NAME, container=container, port=port, service=True)


def sandbox_group(command: Command, hardware: HardwareConfig | None = None) -> CommandGroup:
    """Its own group, which builds namespaces (so Docker runs it without its default seccomp/AppArmor profiles)."""
    return CommandGroup([command], hardware=hardware or HardwareConfig(), name=SANDBOX_NAME, needs_namespaces=True)


@dataclass(frozen=True)
class SandboxSpec:
    """A job's sandbox: `args` for the server (e.g. '--memory_gb 8'), its container key (default: the cluster's
    'sandbox' container, if any) and port (a number, or AUTO_PORT)."""

    args: str = ""
    container: str | None = None
    port: int | str = AUTO_PORT

    def __post_init__(self):
        if not self.args.strip():
            return
        from pipeline_kit.sandbox.flags import check_args  # lazy: argparse, and ctypes for the layers: not at start-up

        try:
            check_args(self.args)
        except ValueError as e:
            raise UserError(f"--sandbox_args={self.args!r}: {e}") from None

    def with_sessions(self, sessions: int, needed_by: str) -> SandboxSpec:
        """This sandbox with room for `sessions` sessions at once: `--max_sessions N` added where the server's default
        is lower; a UserError where --sandbox_args sets a lower one (`needed_by` says what needs them)."""
        from pipeline_kit.sandbox.flags import parser  # lazy: argparse, only for a job that runs a sandbox

        flags = parser(checking=True)
        default = flags.get_default("max_sessions")
        flags.set_defaults(max_sessions=None)
        given = flags.parse_args(shlex.split(self.args)).max_sessions
        if sessions <= (default if given is None else given):
            return self
        if given is not None:
            raise UserError(
                f"--sandbox_args={self.args!r}: --max_sessions {given} is below the {sessions} samples in flight "
                f"({needed_by}); each keeps a sandbox session, and a full sandbox ends the least recently used one "
                f"while its sample still needs it. Raise --max_sessions to {sessions} or lower {needed_by}."
            )
        return replace(self, args=f"{self.args.strip()} --max_sessions {sessions}".strip())

    def command(self, cluster: ClusterConfig, port: int | str | None = None) -> Command:
        if self.container:
            cluster.container(self.container)  # fails with the known keys when it is missing
        container = self.container or (SANDBOX_NAME if SANDBOX_NAME in cluster.containers else None)
        host = "127.0.0.1" if cluster.executor == "none" else "0.0.0.0"  # elsewhere clients are on other nodes
        command = sandbox_command(cluster.kit_python, host, self.port if port is None else port, self.args, container)
        modules = ("pipeline_kit",)  # the sandbox server is stdlib only
        command.python_check = kit_python_check(
            cluster, SANDBOX_PYTHON_VAR, modules, "the sandbox's Python", "pipeline-kit"
        )
        return command

    def group(self, cluster: ClusterConfig, port: int | str | None = None) -> CommandGroup:
        """Its own CommandGroup: on Slurm a het component in the CPU partition."""
        hardware = HardwareConfig(partition=cluster.cpu_partition) if cluster.executor == "slurm" else None
        return sandbox_group(self.command(cluster, port), hardware)


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
