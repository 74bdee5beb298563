"""Keeping a service job (a model server, the sandbox) in the foreground: print its address once it answers (a
script can wait for that line), stop the job on Ctrl-C, SIGTERM or SIGHUP. Shared by `kit start_server` and
`kit start_sandbox`."""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass
from typing import Annotated

import typer

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@dataclass
class ForegroundFlags:
    """The flags of a command that keeps a service in the foreground (`start_server`, `start_sandbox`)."""

    create_tunnel: Annotated[
        bool, typer.Option("--create_tunnel", help="Forward the service's port here over the cluster's SSH tunnel.")
    ] = False
    ready_timeout: Annotated[
        float, typer.Option("--ready_timeout", help="Seconds to wait for the service to answer.")
    ] = 1800.0


@dataclass(frozen=True)
class Service:
    command: str  # the kit command, for messages: start_server
    name: str  # the service's Command name, which names its log: server
    path: str = ""  # appended to http://host:port in the address shown: /v1

    def run(self, flags, foreground: ForegroundFlags, cluster, expname: str, jobs: list, port: int) -> int:
        """The service's job (from its builder) as a pipeline: printed on --dry_run, else kept in the foreground
        until it ends or Ctrl-C. Returns the exit code."""
        from pipeline_kit.errors import UserError
        from pipeline_kit.launch import run_pipeline

        create_tunnel, ready_timeout = foreground.create_tunnel, foreground.ready_timeout
        if create_tunnel and cluster.ssh_tunnel is None:
            raise UserError(
                f"--create_tunnel needs an ssh_tunnel section in {cluster.source}; add one or drop the flag."
            )
        # Ctrl-C stops the service even when kit was started with SIGINT ignored (a background job of a script
        # inherits that, and Python then installs no KeyboardInterrupt handler); `kill` and a closed terminal too
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.default_int_handler)
        pipeline = flags.pipeline(cluster, expname, jobs)
        if flags.dry_run:
            typer.echo(run_pipeline(pipeline, dry_run=True).dry_run_text, nl=False)
            return 0
        if cluster.executor == "slurm":
            return foreground_on_slurm(self, pipeline, expname, port, create_tunnel, ready_timeout)
        return foreground_here(self, pipeline, expname, port, ready_timeout)


def _announce_when_ready(
    service: Service, url: str, address_line: str, timeout: float, log: str | None, stop: threading.Event
) -> None:
    """The address line, printed only once the service answers (`kit CMD: NAME serves at URL[ on NODE] ...`), then
    how long it took."""
    from pipeline_kit.errors import UserError
    from pipeline_kit.server_wait import ServerError, wait_until_ready

    try:
        waited = wait_until_ready(url, timeout, log)
    except (ServerError, UserError) as e:  # (a UserError: it refuses requests without a key)
        if not stop.is_set():
            typer.echo(f"kit {service.command}: {e}", err=True)
        return
    if not stop.is_set():
        typer.echo(f"kit {service.command}: {address_line} (Ctrl-C stops it)", err=True)
        typer.echo(f"kit {service.command}: ready after {waited:.0f} s at {url}", err=True)


def foreground_here(service: Service, pipeline, expname: str, port: int, ready_timeout: float) -> int:
    """none/local: the job runs until the server exits or Ctrl-C (which cancels it, see launch.submit)."""
    url = f"http://127.0.0.1:{port}{service.path}"
    stop = threading.Event()
    threading.Thread(
        target=_announce_when_ready,
        args=(service, url, f"{expname} serves at {url}", ready_timeout, None, stop),
        daemon=True,
    ).start()
    from pipeline_kit.launch import run_pipeline

    experiment = run_pipeline(pipeline, wait=True)
    stop.set()
    states = set(experiment.states.values())
    typer.echo(f"kit {service.command}: the {service.name} ended ({', '.join(sorted(states)) or 'no state'})", err=True)
    _say_why(service, experiment)
    return 130 if states == {"CANCELLED"} else 0 if experiment.ok else 1


def _say_why(service: Service, experiment) -> None:
    """A failed service's report (the failing command, its exit code and its log's first error lines)."""
    for failure in experiment.failures(lines=6):
        if failure.state == "FAILED" and failure.reason:
            typer.echo(f"kit {service.command}: why job {failure.job} failed:\n{failure.reason.rstrip()}", err=True)


def foreground_on_slurm(
    service: Service, pipeline, expname: str, port: int, create_tunnel: bool, ready_timeout: float
) -> int:
    """Slurm: submit, wait for the node, print the address (tunnelled here with --create_tunnel), then stay until
    the job ends; Ctrl-C cancels it."""
    from pipeline_kit.launch import run_pipeline
    from pipeline_kit.launch.remote import forward_port
    from pipeline_kit.pipeline.render import free_port

    cluster = pipeline.cluster
    experiment = run_pipeline(pipeline)
    job_id = experiment.slurm_ids[expname][0]
    log = f"{experiment.log_dir}/{expname}/{service.name}.log"
    typer.echo(f"kit {service.command}: submitted slurm job {job_id}; log {log}", err=True)
    tunnel = None
    stop = threading.Event()
    try:
        node = None
        while node is None:
            state, node = experiment.placement(expname)
            if state not in ("PENDING", "CONFIGURING", "RUNNING"):  # '' once squeue no longer lists it
                state = experiment.wait(timeout=30).get(expname) or state or "gone"  # sacct's final word
                typer.echo(f"kit {service.command}: job {job_id} ended ({state}) before it answered", err=True)
                _say_why(service, experiment)
                return 1
            if node is None:
                time.sleep(1)
        url = f"http://{node}:{port}{service.path}"
        if create_tunnel:
            local = free_port()  # not the server's own port: the node may be this very host
            tunnel = forward_port(cluster, local, node, port)
            url = f"http://127.0.0.1:{local}{service.path}"
        typer.echo(f"kit {service.command}: {expname} runs on {node}; waiting for it to answer", err=True)
        local_log = None if cluster.ssh_tunnel else log
        threading.Thread(
            target=_announce_when_ready,
            args=(service, url, f"{expname} serves at {url} on {node}", ready_timeout, local_log, stop),
            daemon=True,
        ).start()
        while True:
            state = experiment.status()[expname]  # PENDING while sacct lags behind squeue
            if state not in ("PENDING", "RUNNING"):
                typer.echo(f"kit {service.command}: job {job_id} ended ({state})", err=True)
                _say_why(service, experiment)
                return 0 if state == "SUCCEEDED" else 1
            time.sleep(2)
    except KeyboardInterrupt:
        experiment.cancel()
        typer.echo(f"kit {service.command}: cancelled slurm job {job_id}", err=True)
        return 130
    finally:
        stop.set()
        if tunnel is not None:
            tunnel.terminate()
