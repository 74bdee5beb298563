"""The job of `kit run_cmd`: one shell command (optionally an array, optionally beside its own sandbox, whose
address it finds in $KIT_SANDBOX_ADDRESS)."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.components.sandbox import SANDBOX_NAME, SandboxSpec, WithSandboxAddress
from pipeline_kit.errors import UserError
from pipeline_kit.jobs.options import JobOptions, JobPlan, chain
from pipeline_kit.pipeline.model import Command, CommandGroup, Job


@dataclass
class RunCmdSpec:
    """`command` runs in the packed code folder; `inputs`/`outputs` are paths it reads and writes (see Job)."""

    command: str
    num_gpus: int = 0
    num_nodes: int = 1
    num_tasks: int = 1
    container: str | None = None
    array_size: int | None = None
    mpi: str | None = None
    sandbox: SandboxSpec | None = None
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.command.strip():
            raise UserError("--command is empty; pass the shell command to run, e.g. --command='echo hi'.")
        for flag, value, least in (("--num_gpus", self.num_gpus, 0), ("--num_nodes", self.num_nodes, 1)):
            if value < least:
                raise UserError(f"{flag} is too small ({value}); use a positive count.")
        if self.num_tasks < 1:
            raise UserError(f"--num_tasks is too small ({self.num_tasks}); use a positive count.")


def run_cmd_jobs(cluster: ClusterConfig, spec: RunCmdSpec, options: JobOptions) -> list[Job]:
    def plan(copy: int) -> list[JobPlan]:
        groups, refs, line = [], {}, spec.command
        if spec.sandbox:
            groups = [spec.sandbox.group(cluster)]
            refs = {SANDBOX_NAME: groups[0].commands[0]}
            line = WithSandboxAddress(spec.command, cluster.kit_python)
        cmd = Command(
            line,
            name="cmd",
            container=spec.container,
            num_gpus=spec.num_gpus,
            num_nodes=spec.num_nodes,
            num_tasks=spec.num_tasks,
            mpi=spec.mpi,
            refs=refs,
        )
        main = CommandGroup([cmd], name="main")
        if spec.array_size is not None and groups:  # an array cannot be heterogeneous: one group per element
            main = CommandGroup([*groups[0].commands, cmd], name="main", needs_namespaces=True)
            groups = []
        fields = {"array_size": spec.array_size, "inputs": list(spec.inputs), "outputs": list(spec.outputs)}
        return [JobPlan("", [main, *groups], fields)]

    return chain(options, plan)
