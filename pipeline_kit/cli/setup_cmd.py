"""`kit setup`: write a cluster config from flags, asking for what is missing when run at a terminal, and
validate every value before the file is written. It goes to the user's config folder ($KIT_CONFIG_DIR, else
~/.kit/cluster_configs: found from anywhere, and never an untracked file in a project's repository) unless
--config_dir names another. On Slurm it also checks the partitions and the account against `sinfo` and `sacctmgr`
(here, or over the ssh_tunnel it configures) and warns about names the cluster does not list.

The file gets the umask's mode (0644 under umask 022), so a team can share it, unless an `--env_var` carries a
value (NAME=value): such values are often tokens, so that file is kept to its owner (0600). An env var given as
NAME alone takes its value from the environment when a job is submitted, and leaves the file shareable."""

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
        config_dir: Annotated[
            str | None,
            Opt("--config_dir", help="Folder to write it in (default: $KIT_CONFIG_DIR, else ~/.kit/cluster_configs)."),
        ] = None,
        executor: Annotated[str | None, Opt("--executor", help="none, local (Docker) or slurm.")] = None,
        job_dir: Annotated[
            str | None, Opt("--job_dir", help="Absolute folder for experiment records and code.")
        ] = None,
        account: Annotated[str | None, Opt("--account", help="Slurm account.")] = None,
        partition: Annotated[str | None, Opt("--partition", help="Slurm partition.")] = None,
        cpu_partition: Annotated[
            str | None, Opt("--cpu_partition", help="Slurm partition for CPU-only components (clients, sandbox).")
        ] = None,
        default_timeout: Annotated[
            str | None, Opt("--default_timeout", help="Slurm time limit of a job, e.g. 04:00:00.")
        ] = None,
        job_name_prefix: Annotated[
            str | None, Opt("--job_name_prefix", help="Prepended to every Slurm job name, e.g. 'team_'.")
        ] = None,
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
        from pipeline_kit.cluster.lookup import user_config_dir

        interactive = sys.stdin.isatty()

        def ask(value: str | None, what: str, default: str | None = None) -> str | None:
            if value is None and interactive:
                value = typer.prompt(what, default=default) if default is not None else typer.prompt(what)
            return value

        cluster = ask(cluster or None, "Config name") or ""
        if not cluster:
            raise UserError("kit setup needs --cluster NAME (the file to write is NAME.yaml).")
        folder = Path(config_dir) if config_dir else user_config_dir()
        path = folder / f"{cluster}.yaml"
        if path.exists() and not force:
            raise UserError(f"{path} already exists; pass --force to overwrite it.")
        raw: dict = {"executor": ask(executor, "Executor (none, local, slurm)", "none")}
        raw["job_dir"] = ask(job_dir, "Job dir (absolute)", str(Path.home() / ".kit" / "jobs"))
        for key in ("executor", "job_dir"):
            if raw[key] is None:
                raise UserError(f"kit setup: --{key} is required when not run at a terminal.")
            build_cluster_config({k: v for k, v in raw.items() if v is not None} | _minimal(raw), str(path))
        slurm_only = {
            "account": (account, "Slurm account (empty: your default)"),
            "partition": (partition, "Slurm partition (empty: the cluster's default)"),
            "cpu_partition": (cpu_partition, "Slurm CPU partition for clients and sandboxes (empty: the same)"),
            "default_timeout": (default_timeout, "Slurm time limit, e.g. 04:00:00 (empty: the partition's)"),
            "job_name_prefix": (job_name_prefix, "Slurm job name prefix (empty: none)"),
        }
        if raw["executor"] == "slurm":
            for key, (value, question) in slurm_only.items():
                raw[key] = ask(value, question, "") or None  # an empty answer leaves the key out
        else:
            for key, (value, _) in slurm_only.items():
                if value is not None:
                    raise UserError(
                        f"kit setup: --{key} only applies to --executor=slurm, not '{raw['executor']}'; drop it."
                    )
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
        config = build_cluster_config(raw, str(path))  # every key is checked before anything is written
        if config.executor == "slurm":
            from pipeline_kit.launch.slurm_names import slurm_name_warnings

            for warning in slurm_name_warnings(config):
                print(f"kit: warning: {warning}", file=sys.stderr)
        from pipeline_kit.atomic import write_atomic

        private = any("=" in entry for entry in raw.get("env_vars", []))
        write_atomic(path, yaml.safe_dump(raw, sort_keys=False), private=private)
        # the user's folder is looked in from anywhere; another needs --config_dir
        found = "" if folder.absolute() == user_config_dir().absolute() else f" --config_dir={folder.absolute()}"
        typer.echo(
            f"wrote {path.absolute()}"
            + (" (readable only by you: its env_vars hold values)" if private else "")
            + f"; use it with --cluster={cluster}{found}"
        )


def _minimal(raw: dict) -> dict:
    return {"executor": raw.get("executor") or "none", "job_dir": raw.get("job_dir") or "/tmp"}


def _pair(text: str, flag: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key or not value:
        raise UserError(f"{flag} {text!r} is not KEY=VALUE; fix it.")
    return key, value
