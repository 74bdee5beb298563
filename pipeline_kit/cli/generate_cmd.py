"""`kit generate`: chunks × seeds of an input file through a model server, as jobs of the declarative layer.
Each job is a server group (unless the server is external) plus a client group that runs its share of the units."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated

import typer

from pipeline_kit.cli.job_flags import JobFlags, JobPlan, job_command, job_python, submit
from pipeline_kit.cli.sandbox_flags import SandboxFlags
from pipeline_kit.cli.server_flags import ServerFlags
from pipeline_kit.errors import UserError

if TYPE_CHECKING:
    from pipeline_kit.inference.client_command import ClientCommand


def register(app: typer.Typer) -> None:
    @job_command(app, "generate", help="Generate with an LLM over a JSONL file: chunks × random seeds, resumable.")
    def generate(
        flags: JobFlags,
        server: ServerFlags,
        sandbox: SandboxFlags,
        input_file: Annotated[str, typer.Option("--input_file", help="Input JSONL (a path where the job runs).")] = "",
        output_dir: Annotated[str, typer.Option("--output_dir", help="Folder for output[-rs{seed}].jsonl.")] = "",
        num_chunks: Annotated[int | None, typer.Option("--num_chunks", help="Cut the input into N chunks.")] = None,
        chunk_ids: Annotated[str | None, typer.Option("--chunk_ids", help="Only these chunks, e.g. 0,3,5-7.")] = None,
        num_random_seeds: Annotated[
            int | None, typer.Option("--num_random_seeds", help="N sampled outputs: seeds starting_seed..+N-1.")
        ] = None,
        random_seeds: Annotated[
            str | None, typer.Option("--random_seeds", help="Exactly these seeds, e.g. 0,4-7.")
        ] = None,
        starting_seed: Annotated[int, typer.Option("--starting_seed", help="First seed for --num_random_seeds.")] = 0,
        rerun_done: Annotated[bool, typer.Option("--rerun_done", help="Redo units whose .done exists.")] = False,
        postprocess_cmd: Annotated[
            str | None,
            typer.Option("--postprocess_cmd", help="Shell command run on each final file ($KIT_OUTPUT_FILE)."),
        ] = None,
        num_jobs: Annotated[
            int | None,
            typer.Option(
                "--num_jobs",
                help="Spread units over N jobs, one server each (default: 1 locally, 1 per unit on Slurm).",
            ),
        ] = None,
        container: Annotated[
            str | None, typer.Option("--container", help="Container key for the client (default: 'kit' if defined).")
        ] = None,
    ) -> int:
        from pipeline_kit.inference.client_command import ClientCommand
        from pipeline_kit.inference.config import override_value
        from pipeline_kit.inference.units import parse_id_list, plan_units

        spec = server.spec()
        if num_random_seeds is not None and random_seeds is not None:
            raise UserError("give --num_random_seeds or --random_seeds, not both.")
        if num_random_seeds is not None and num_random_seeds < 1:
            raise UserError(f"--num_random_seeds must be at least 1, got {num_random_seeds}.")
        seeds = (
            parse_id_list(random_seeds, "--random_seeds")
            if random_seeds is not None
            else list(range(starting_seed, starting_seed + num_random_seeds))
            if num_random_seeds is not None
            else None
        )
        chunks = parse_id_list(chunk_ids, "--chunk_ids") if chunk_ids is not None else None
        units = plan_units(seeds, num_chunks, chunks)
        if num_jobs is not None and num_jobs < 1:
            raise UserError(f"--num_jobs must be at least 1, got {num_jobs}.")

        def plan(cluster, copy):
            paths = _job_paths(cluster.executor, input_file, output_dir)
            todo = (
                units if rerun_done or not _outputs_visible(cluster) else [u for u in units if not u.is_done(paths[1])]
            )
            if len(todo) < len(units) and copy == 0:
                typer.echo(
                    f"kit generate: {len(units) - len(todo)} of {len(units)} units are done already (--rerun_done redoes them)"
                )
            if not todo:
                return []
            default_jobs = len(todo) if cluster.executor == "slurm" else 1
            shares = _split(todo, min(num_jobs or default_jobs, len(todo)))
            common = [f"++input_file={override_value(paths[0])}", f"++output_dir={override_value(paths[1])}"]
            common += [f"++num_chunks={num_chunks}"] if num_chunks is not None else []
            # only the first job of a --dependent_jobs chain redoes; the next ones resume what it left
            common += ["++rerun_done=true"] if rerun_done and copy == 0 else []
            common += [f"++postprocess_cmd={override_value(postprocess_cmd)}"] if postprocess_cmd else []
            labels = tuple(tuple(u.label for u in share) for share in shares)
            client = ClientCommand(
                job_python(cluster),
                spec,
                (*common, *flags.extra_args),
                labels,
            )
            groups = _groups(cluster, server, sandbox, spec, container, client, array=len(shares) > 1)
            return [JobPlan("", groups, {"array_size": len(shares)} if len(shares) > 1 else {})]

        raise typer.Exit(submit(flags, "generate", plan))


def _job_paths(executor: str, input_file: str, output_dir: str) -> tuple[str, str]:
    """On none, paths are taken from here (jobs run in the packaged code folder); elsewhere they must be absolute."""
    if not input_file or not output_dir:
        raise UserError("--input_file and --output_dir are required (a JSONL file and a folder for the outputs).")
    if executor == "none":
        input_file, output_dir = os.path.abspath(input_file), os.path.abspath(output_dir)
        if not os.path.isfile(input_file):
            raise UserError(f"--input_file={input_file}: no such file.")
        return input_file, output_dir
    for flag, path in (("--input_file", input_file), ("--output_dir", output_dir)):
        if not os.path.isabs(path):
            raise UserError(
                f"{flag}={path} is relative; on executor '{executor}' give the absolute path where the job runs."
            )
    return input_file, output_dir


def _outputs_visible(cluster) -> bool:
    """Whether the output folder is this machine's (so finished units can be left out of the plan)."""
    return cluster.executor == "none" or (cluster.executor == "slurm" and cluster.ssh_tunnel is None)


def _split(units: list, n: int) -> list[list]:
    size, extra = divmod(len(units), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(units[start:end])
        start = end
    return out


def _groups(
    cluster, server: ServerFlags, sandbox: SandboxFlags, spec, container: str | None, client: ClientCommand, array: bool
):
    """One job: server group + client group (+ sandbox group): a het job on Slurm. An array job (several shares of
    the units) cannot be heterogeneous on Slurm, so each element runs everything side by side in one group."""
    from pipeline_kit.pipeline import Command, CommandGroup, HardwareConfig
    from pipeline_kit.sandbox.component import SANDBOX_NAME
    from pipeline_kit.servers.component import SERVER_NAME, server_container, server_group

    if container:
        cluster.container(container)
    client_container = container or ("kit" if "kit" in cluster.containers else None)
    sandboxed = sandbox.group(cluster, sandbox.port()) if sandbox.with_sandbox else None
    refs = {SANDBOX_NAME: sandboxed.commands[0]} if sandboxed else {}
    if array and sandboxed and sandboxed.container != client_container:
        raise UserError(
            f"several jobs run the sandbox beside the client in one container, but they differ ({sandboxed.container} "
            f"vs {client_container}); pass --num_jobs=1 or the same --container and --sandbox_container."
        )
    if not server.starts_server():
        client_cmd = Command(client, name="client", container=client_container, refs=refs)
        if array and sandboxed:
            return [CommandGroup([*sandboxed.commands, client_cmd], name="generate")]
        return [CommandGroup([client_cmd], name="client"), *([sandboxed] if sandboxed else [])]
    served = server_group(spec, server_container(spec, cluster, server.server_container), server.port())
    refs[SERVER_NAME] = served.commands[0]
    client_cmd = Command(client, name="client", container=client_container, refs=refs)
    if array:
        if spec.nodes > 1:
            raise UserError(
                f"--server_nodes={spec.nodes} needs one job for all units (--num_jobs=1): several jobs run as a Slurm "
                "array, whose elements cannot hold a multi-node server beside its client."
            )
        if served.container != client_container:
            raise UserError(
                f"several jobs run server and client in one container, but they differ ({served.container} vs "
                f"{client_container}); pass --num_jobs=1 or the same --container and --server_container."
            )
        sandbox_cmds = sandboxed.commands if sandboxed else []
        return [CommandGroup([*served.commands, *sandbox_cmds, client_cmd], name="generate")]
    hardware = HardwareConfig(partition=cluster.cpu_partition) if cluster.executor == "slurm" else HardwareConfig()
    return [served, CommandGroup([client_cmd], hardware=hardware, name="client"), *([sandboxed] if sandboxed else [])]
