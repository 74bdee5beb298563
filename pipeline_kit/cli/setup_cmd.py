"""`kit setup`: write a cluster config from flags, asking for what is missing when run at a terminal, and
validate every value before the file is written."""

import sys
from pathlib import Path
from typing import Annotated

import typer

from pipeline_kit.errors import UserError

Opt = typer.Option


def register(app: typer.Typer) -> None:
    @app.command(help="Write a cluster config (interactively, or from flags) and validate it.")
    def setup(
        cluster: Annotated[str, Opt("--cluster", help="Name of the config to write (NAME.yaml).")] = "",
        config_dir: Annotated[str, Opt("--config_dir", help="Folder to write it in.")] = "cluster_configs",
        executor: Annotated[str | None, Opt("--executor", help="none, local (Docker) or slurm.")] = None,
        job_dir: Annotated[
            str | None, Opt("--job_dir", help="Absolute folder for experiment records and code.")
        ] = None,
        account: Annotated[str | None, Opt("--account", help="Slurm account.")] = None,
        partition: Annotated[str | None, Opt("--partition", help="Slurm partition.")] = None,
        container: Annotated[list[str] | None, Opt("--container", help="KEY=IMAGE (repeatable).")] = None,
        mount: Annotated[list[str] | None, Opt("--mount", help="src:dst (repeatable).")] = None,
        env_var: Annotated[list[str] | None, Opt("--env_var", help="NAME or NAME=value (repeatable).")] = None,
        ssh_host: Annotated[str | None, Opt("--ssh_host", help="Login node, to submit over SSH.")] = None,
        ssh_user: Annotated[str | None, Opt("--ssh_user", help="SSH user.")] = None,
        ssh_port: Annotated[int, Opt("--ssh_port", help="SSH port.")] = 22,
        ssh_identity: Annotated[str | None, Opt("--ssh_identity", help="SSH private key.")] = None,
        ssh_job_dir: Annotated[str | None, Opt("--ssh_job_dir", help="Job folder on the cluster.")] = None,
        force: Annotated[bool, Opt("--force", help="Overwrite an existing file.")] = False,
    ) -> None:
        import yaml

        from pipeline_kit.cluster.config import build_cluster_config

        interactive = sys.stdin.isatty()

        def ask(value: str | None, what: str, default: str | None = None) -> str | None:
            if value is None and interactive:
                value = typer.prompt(what, default=default) if default is not None else typer.prompt(what)
            return value

        cluster = ask(cluster or None, "Config name") or ""
        if not cluster:
            raise UserError("kit setup needs --cluster NAME (the file to write is NAME.yaml).")
        path = Path(config_dir) / f"{cluster}.yaml"
        if path.exists() and not force:
            raise UserError(f"{path} already exists; pass --force to overwrite it.")
        raw: dict = {"executor": ask(executor, "Executor (none, local, slurm)", "none")}
        raw["job_dir"] = ask(job_dir, "Job dir (absolute)", str(Path.home() / ".kit" / "jobs"))
        for key in ("executor", "job_dir"):
            if raw[key] is None:
                raise UserError(f"kit setup: --{key} is required when not run at a terminal.")
            build_cluster_config({k: v for k, v in raw.items() if v is not None} | _minimal(raw), str(path))
        if raw["executor"] == "slurm":
            raw["account"] = ask(account, "Slurm account", "") or None
            raw["partition"] = ask(partition, "Slurm partition", "") or None
        if container:
            raw["containers"] = dict(_pair(c, "--container") for c in container)
        if mount:
            raw["mounts"] = list(mount)
        if env_var:
            raw["env_vars"] = list(env_var)
        if ssh_host:
            raw["ssh_tunnel"] = {"host": ssh_host, "user": ssh_user, "port": ssh_port, "job_dir": ssh_job_dir}
            if ssh_identity:
                raw["ssh_tunnel"]["identity"] = ssh_identity
        raw = {k: v for k, v in raw.items() if v is not None}
        build_cluster_config(raw, str(path))  # every key is checked before anything is written
        from pipeline_kit.launch.records import write_atomic

        write_atomic(path, yaml.safe_dump(raw, sort_keys=False))
        typer.echo(
            f"wrote {path}; use it with --cluster={cluster}"
            + (f" --config_dir={config_dir}" if config_dir != "cluster_configs" else "")
        )


def _minimal(raw: dict) -> dict:
    return {"executor": raw.get("executor") or "none", "job_dir": raw.get("job_dir") or "/tmp"}


def _pair(text: str, flag: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key or not value:
        raise UserError(f"{flag} {text!r} is not KEY=VALUE; fix it.")
    return key, value
