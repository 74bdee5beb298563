"""`kit prepare_data NAME...`: the flags, and the list of benchmarks; the download, conversion and atomic write of
each benchmark's records live in pipeline_kit/benchmarks/prepare.py."""

from __future__ import annotations

from typing import Annotated

import typer

from pipeline_kit.errors import UserError

BASE_URL_VAR = "KIT_DATASETS_BASE_URL"  # named in the help; pipeline_kit.benchmarks.prepare reads it
Opt = typer.Option


def register(app: typer.Typer) -> None:
    @app.command(
        name="prepare_data",
        help=(
            "Download benchmarks and write <data_dir>/NAME/<split>.jsonl (id, problem, expected_answer). "
            f"--list shows them; {BASE_URL_VAR} redirects every download to a mirror."
        ),
    )
    def prepare_data(
        names: Annotated[list[str] | None, typer.Argument(help="Benchmarks to prepare, e.g. math500 aime24.")] = None,
        data_dir: Annotated[
            str | None,
            Opt("--data_dir", help="Write NAME/<split>.jsonl here (default: the folder that defines the benchmark)."),
        ] = None,
        extra_datasets: Annotated[
            str | None, Opt("--extra_datasets", help="A folder of your own benchmark modules (NAME.py).")
        ] = None,
        list_them: Annotated[bool, Opt("--list", help="List the benchmarks and exit.")] = False,
    ) -> None:
        from pipeline_kit.benchmarks import benchmark_names, get_benchmark
        from pipeline_kit.benchmarks.prepare import prepare_one

        if list_them:
            print_list(extra_datasets)
            return
        if not names:
            known = benchmark_names(extra_datasets)
            raise UserError(
                f"kit prepare_data needs benchmark names, e.g. `kit prepare_data math500 aime24`; known: {', '.join(known)}."
            )
        benches = [get_benchmark(name, extra_datasets) for name in dict.fromkeys(names)]  # unknown names fail first
        for i, bench in enumerate(benches):
            path = prepare_one(bench, data_dir, f"[{i + 1}/{len(benches)}] {bench.name}")
            print(f"{bench.name}: {path}")


def print_list(extra_datasets: str | None) -> None:
    """One line per benchmark: its rows, default seeds and tokens, licence, source (repository@revision, or the
    branch it follows) and description."""
    from pipeline_kit.benchmarks import all_benchmarks

    rows = [("NAME", "ROWS", "SEEDS", "TOKENS", "LICENSE", "SOURCE", "DESCRIPTION")]
    for b in all_benchmarks(extra_datasets):
        rows.append(
            (
                b.name,
                str(b.rows) if b.rows else "?",
                str(b.num_samples) if b.num_samples else "greedy",
                str(b.tokens_to_generate),
                b.license,
                source_cell(b.sources),
                b.description,
            )
        )
    widths = [max(len(r[k]) for r in rows) for k in range(6)]
    for r in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(r[:6], widths, strict=True)) + "  " + r[6])


def source_cell(sources) -> str:
    """Where a benchmark's data comes from, short: OWNER/REPO@REVISION (8 digits) or @BRANCH for GitHub and Hugging
    Face files, else the host; 'generated' without a download."""
    if not sources:
        return "generated"
    first = sources[0]
    cell = f"{first.repository[0]}@{first.repository[1][:8]}" if first.repository else first.url.split("/")[2]
    return cell + (f" ({len(sources)} files)" if len(sources) > 1 else "")
