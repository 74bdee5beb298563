"""The nouns of the declarative layer. They only describe work; `render` turns them into scripts and
`launch` submits those. A Command names the commands it talks to in `refs` (explicit objects, not lambdas)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from pipeline_kit.errors import UserError
from pipeline_kit.slurm_time import check_slurm_time

AUTO_PORT = "auto"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class Endpoint:
    """Where a referenced command listens, as seen from the referring command: `host` is a shell word
    (`127.0.0.1`, or `${het_group_host_N}` resolved on the node), `port` a number or None."""

    host: str
    port: int | str | None  # a number, or a shell word when the port is picked where the job runs

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


CommandBuilder = Callable[[dict[str, Endpoint]], str]


@dataclass(frozen=True)
class PythonCheck:
    """The interpreter a command runs, checked where the job runs before any of its commands starts: it must exist
    and find every module of `modules`; otherwise the job ends with exit code 2 and one line, "<what> <the
    interpreter> does not exist | cannot import <modules>; <fix>" (in its kit.log, which `kit logs` shows).
    `python` is the interpreter as a shell word, e.g. `"${KIT_CLIENT_PYTHON:-/opt/venv/bin/python}"`."""

    python: str
    modules: tuple[str, ...]
    what: str  # e.g. "the client's Python"
    fix: str  # e.g. "set key 'python' in /home/me/.kit/cluster_configs/slurm.yaml to ..."


@dataclass(eq=False)
class Command:
    """One shell command. `command` is a string, or a function that builds it from the resolved `refs`.
    A `service` (a server) runs until the other commands of its job end, then it is stopped. `mpi`: on Slurm, the
    MPI plugin its srun starts tasks with (`--mpi=pmix`); other executors start a single task and ignore it.
    `python_check`: its interpreter, checked when the job starts (PythonCheck)."""

    command: str | CommandBuilder
    name: str = "main"
    container: str | None = None
    num_gpus: int = 0
    num_nodes: int = 1
    num_tasks: int = 1
    env: dict[str, str] = field(default_factory=dict)
    port: int | str | None = None
    refs: dict[str, Command] = field(default_factory=dict)
    service: bool = False
    mpi: str | None = None
    python_check: PythonCheck | None = None

    def __post_init__(self) -> None:
        check_name(self.name, "command")
        if self.port is not None and self.port != AUTO_PORT and not isinstance(self.port, int):
            raise UserError(f"command '{self.name}': port must be an integer or '{AUTO_PORT}', got {self.port!r}.")
        for ref_name, target in self.refs.items():
            if not isinstance(target, Command):
                raise UserError(
                    f"command '{self.name}': ref '{ref_name}' must be a Command, got {type(target).__name__}."
                )
            if target.port is None:
                raise UserError(
                    f"command '{self.name}': ref '{ref_name}' points at '{target.name}', which has no port."
                )


@dataclass
class HardwareConfig:
    """The allocation a CommandGroup asks for. None means: derive it from the group's commands."""

    partition: str | None = None
    num_gpus: int | None = None  # per node
    num_nodes: int | None = None
    num_tasks: int | None = None  # per node
    exclusive: bool = False
    time_min: str | None = None
    sbatch_kwargs: dict[str, str | bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.time_min is not None:
            check_slurm_time(self.time_min, "HardwareConfig.time_min")


@dataclass(eq=False)
class CommandGroup:
    """Commands that share one allocation (one component of a Slurm heterogeneous job)."""

    commands: list[Command]
    hardware: HardwareConfig = field(default_factory=HardwareConfig)
    name: str = "group"
    # its commands create user/network/PID/mount namespaces (the sandbox): Docker then runs the job without its
    # default seccomp and AppArmor profiles, which forbid that. Never inferred from a name.
    needs_namespaces: bool = False

    def __post_init__(self) -> None:
        check_name(self.name, "command group")
        if not self.commands:
            raise UserError(f"command group '{self.name}' has no commands; add at least one.")
        names = [c.name for c in self.commands]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise UserError(f"command group '{self.name}' has two commands named {dupes[0]}; give them distinct names.")
        for what, values in (
            ("containers", {c.container for c in self.commands}),
            ("mpi", {c.mpi for c in self.commands}),
        ):
            if len(values) > 1:
                raise UserError(
                    f"command group '{self.name}' mixes {what} {sorted(map(str, values))}; one allocation runs one "
                    f"srun, so give its commands the same {what.rstrip('s')}."
                )

    @property
    def container(self) -> str | None:
        return self.commands[0].container

    @property
    def mpi(self) -> str | None:
        return self.commands[0].mpi

    @property
    def num_gpus(self) -> int:
        return self.hardware.num_gpus if self.hardware.num_gpus is not None else max(c.num_gpus for c in self.commands)

    @property
    def num_nodes(self) -> int:
        return (
            self.hardware.num_nodes if self.hardware.num_nodes is not None else max(c.num_nodes for c in self.commands)
        )

    @property
    def num_tasks(self) -> int:
        return (
            self.hardware.num_tasks if self.hardware.num_tasks is not None else max(c.num_tasks for c in self.commands)
        )


@dataclass(eq=False)
class Job:
    """One scheduled unit of work: one or more CommandGroups (several make a heterogeneous job on Slurm).

    `after`: earlier Jobs of the same Pipeline; `run_after`: names of earlier experiments.
    `array_size`: run the job as N independent units; each sees its index in `$KIT_UNIT`.
    `inputs`: paths the job reads; `outputs`: files or folders it writes. An input that a job of the same pipeline
    or of a `run_after` experiment writes is checked when the job starts; any other is checked at submission.
    `input_hints`: for an input kit knows how to make, what to run (said instead of "fix the path" when it is missing).
    `plan_files`: {path: text} written at submission (never by a dry run) where kit can see the path: what the job
    plans, for whoever reads its outputs before it is done (kit summarize names the outputs that never started).
    `skip_when_parents_failed`: an afterany job (a summary of whatever finished) that does not run when every job
    it waits for failed; it ends CANCELLED, saying "skipped: <parent> failed".
    `checks`: shell commands run where the job starts, before any of its commands (a server, a trainer): one that
    exits 2 refuses the job with its output as the reason (a user's mistake kit could not see at submission); any
    other exit is left to the commands themselves (the check's own Python may lack what they have)."""

    name: str
    groups: list[CommandGroup]
    after: list[Job] = field(default_factory=list)
    run_after: list[str] = field(default_factory=list)
    array_size: int | None = None
    array_parallelism: int | None = None
    dependency_type: str | None = None
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    input_hints: dict[str, str] = field(default_factory=dict)
    plan_files: dict[str, str] = field(default_factory=dict)
    skip_when_parents_failed: bool = False
    checks: list[str] = field(default_factory=list)

    def dependency(self, default: str, executor: str) -> str:
        """The Slurm dependency type this job waits with (none/local emulate it): its own, else `default`. A job
        that is skipped when its parents failed and waits for one parent is afterok on Slurm (whose dependents of a
        failed job kit's sbatch flags cancel); none/local check every parent themselves."""
        kind = self.dependency_type or default
        single = len(self.after) + len(self.run_after) == 1
        if kind == "afterany" and self.skip_when_parents_failed and executor == "slurm" and single:
            return "afterok"
        return kind

    def __post_init__(self) -> None:
        check_name(self.name, "job")
        if not self.groups:
            raise UserError(f"job '{self.name}' has no command groups; add at least one.")
        if self.array_size is not None:
            if self.array_size < 1:
                raise UserError(f"job '{self.name}': array_size must be at least 1, got {self.array_size}.")
            if len(self.groups) > 1:
                raise UserError(
                    f"job '{self.name}': a Slurm array cannot be heterogeneous; put the commands in one group "
                    "or submit one het job per unit."
                )

    @property
    def commands(self) -> list[Command]:
        return [c for g in self.groups for c in g.commands]


def check_name(name: str, what: str) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise UserError(f"{what} name {name!r} may hold only letters, digits, '_', '.' and '-'; rename it.")
