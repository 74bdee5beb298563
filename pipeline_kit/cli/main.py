"""Entry point of `kit`. User errors become one line on stderr and exit 2; `--help` is served from a cache so
that it imports neither typer nor anything heavier."""

from __future__ import annotations

import sys

from pipeline_kit.cli.version import version_line
from pipeline_kit.errors import JobFailed, UserError, closest


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv in (["--version"], ["-V"]):
        print(version_line())
        return 0
    wants_help = not argv or "--help" in argv
    if wants_help:
        from pipeline_kit.cli import help_cache

        text = help_cache.read(argv)
        if text is not None:
            sys.stdout.write(text)
            return 0
    code = _run(argv, capture_help=wants_help)
    return code


def _run(argv: list[str], capture_help: bool) -> int:
    import typer
    from typer._click.exceptions import NoSuchOption, UsageError  # typer >= 0.29 vendors click

    from pipeline_kit.cli.app import click_command

    try:
        if capture_help:
            from pipeline_kit.cli import help_cache

            return help_cache.render_and_store(argv, lambda: click_command().main(argv, "kit", standalone_mode=False))
        result = click_command(argv).main(argv, "kit", standalone_mode=False)
        return result if isinstance(result, int) else 0
    except UserError as e:
        print(f"kit: error: {e}", file=sys.stderr)
        return 2
    except JobFailed as e:  # a step that needs an earlier job's success (Experiment.result()): as a failed job, 1
        print(f"kit: {e}", file=sys.stderr)
        return 1
    except UsageError as e:
        hint = f" (see `kit {e.ctx.info_name} --help`)" if e.ctx and e.ctx.info_name != "kit" else " (see `kit --help`)"
        message = " ".join(e.format_message().split()) + hint
        if isinstance(e, NoSuchOption):
            message = _no_such_option(e.option_name, e.ctx) or f"no such option {e.option_name}{hint}"
        print(f"kit: error: {message}", file=sys.stderr)
        return 2
    except typer.Exit as e:
        return e.exit_code
    except typer.Abort:
        print("kit: aborted", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("kit: interrupted", file=sys.stderr)
        return 130


def _no_such_option(name: str, ctx) -> str | None:
    """'no such option --comand; did you mean --command?' when one of the command's (visible) flags is close,
    matched as `++` keys are (pipeline_kit.errors.closest)."""
    params = ctx.command.params if ctx is not None else []
    flags = [o for p in params if not getattr(p, "hidden", False) for o in (*p.opts, *p.secondary_opts)]
    best = closest(name.lstrip("-"), [f[2:] for f in flags if f.startswith("--")])
    return f"no such option {name}; did you mean --{best}?" if best else None


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":  # `python -m pipeline_kit.cli.main ...`: how jobs run kit commands (e.g. eval's summarize)
    entry()
