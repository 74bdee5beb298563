"""The generation script: one unit (one input chunk × one seed), or every unit of a plan (++output_dir) through one
request pool (job_pool.py):
  python -m pipeline_kit.inference.generate ++input_file=... ++output_file=... ++server.base_url=... ++server.model=...
Skips finished work (.done), resumes from the in-progress file, writes the final file in input order, merges chunks.
The `generate` type's own class is in generate_task.py, what its requests go to in generation_model.py."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from pipeline_kit.atomic import no_space, remove_stale_temps
from pipeline_kit.errors import UserError
from pipeline_kit.inference import done_key, unit_files
from pipeline_kit.inference.config import GenerateConfig, parse_generate_config
from pipeline_kit.inference.input_check import check_generation
from pipeline_kit.inference.job_figures import FiguresRecorder
from pipeline_kit.inference.job_pool import UnitWork, run_units, say
from pipeline_kit.inference.refusals import RequestsFailed, Tally
from pipeline_kit.inference.registry import task_class
from pipeline_kit.inference.units import expand
from pipeline_kit.server_wait import ServerError


def api_key(cfg: GenerateConfig) -> str | None:
    name = cfg.server.api_key_env
    if name and not os.environ.get(name):
        raise UserError(f"++server.api_key_env={name}, but ${name} is not set; export it.")
    return os.environ.get(name) if name else None


def prepare(cfg: GenerateConfig) -> UnitWork | None:
    """One unit before any request: a rerun (++rerun_done) clears its .done (and cuts a merged file back into chunk
    files); a done unit (or merged chunk) is checked against its .done key and skipped, and a done chunk's merge and
    the postprocess are run now. Returns the work of a unit that has samples to request (job_pool.py), else None."""

    out = Path(cfg.output_file)
    merged = unit_files.merged_file(out, cfg.chunk_id) if cfg.num_chunks is not None else None
    key = done_key.key_fields(cfg, task_class(cfg.generation_type), _input_digest(cfg))
    rerun_hint = "++rerun_done=true (kit generate --rerun_done)"
    if cfg.rerun_done:
        # a rerun chunk of a merged file: the other chunks are cut back out of it, and all are merged again
        if merged is not None and done_key.done_marker(merged).exists():
            # the other chunks keep the key of what made them (an old .done without one: this run's)
            made_by = done_key.recorded_key(merged) or done_key.merged_fields(key)
            unit_files.split_merged(merged, cfg.num_chunks, made_by)
        for p in [done_key.done_marker(out), unit_files.in_progress_file(out)]:
            p.unlink(missing_ok=True)
    elif merged is not None and done_key.done_marker(merged).exists():
        done_key.check_done(merged, done_key.merged_fields(key), rerun_hint)
        say(f"{merged} is done; skipping chunk {cfg.chunk_id} (pass ++rerun_done=true to redo it)")
        return None
    if not cfg.rerun_done and done_key.done_marker(out).exists():
        done_key.check_done(out, key, rerun_hint)
        say(f"{out} is done; skipping (pass ++rerun_done=true to redo it)")
        when_done(cfg, key)
        return None
    for path in (out, merged) if merged is not None else (out,):  # what a kill mid-write left (this job owns them)
        remove_stale_temps(path)
    return UnitWork(cfg, key, make_task, lambda: when_done(cfg, key))


def when_done(cfg: GenerateConfig, key: dict[str, object]) -> None:
    """After a unit is done: the merge of its chunks (by the last chunk done), then the postprocess command on the
    merged file (the unit's own file without chunks)."""
    final = Path(cfg.output_file)
    if cfg.num_chunks is not None:
        final = unit_files.merged_file(final, cfg.chunk_id)
        if not unit_files.merge_chunks(final, cfg.num_chunks, done_key.merged_fields(key)):
            return
        say(f"merged {cfg.num_chunks} chunks into {final}")
    if cfg.postprocess_cmd:
        say(f"postprocess: {cfg.postprocess_cmd}")
        subprocess.run(
            cfg.postprocess_cmd,
            shell=True,
            check=True,
            env={**os.environ, "KIT_OUTPUT_FILE": str(final), "KIT_PYTHON": sys.executable},
        )


def run_job(units: list[GenerateConfig]) -> dict[str, Tally]:
    """Every unit of a job: the done ones skipped, the others through one request pool (job_pool.py). Returns the
    tallies of the units with failed samples (written, not done), by output file. The inputs and output folders
    are checked first, before the server is waited for (as at submission, where kit sees them)."""
    checked = set()
    for cfg in units:
        what = (cfg.generation_type, cfg.input_file, cfg.prompt_config, cfg.allow_empty_input, cfg.output_dir)
        if what not in checked:
            checked.add(what)
            check_generation(cfg)
    works = [work for work in map(prepare, units) if work is not None]
    if not works:
        if units:  # the job's figures say it had nothing to do
            FiguresRecorder(units[0], done_before=len(units)).nothing_to_do()
        return {}
    return asyncio.run(run_units(works, api_key(works[0].cfg), done_before=len(units) - len(works)))


def make_task(cfg: GenerateConfig):
    """The task of ++generation_type (its class is imported only when it runs)."""
    return task_class(cfg.generation_type)(cfg)


_DIGESTS: dict[tuple, str] = {}


def _input_digest(cfg: GenerateConfig) -> str:
    """The input's content digest, once per process (every unit of a plan reads the same input)."""
    source = (cfg.generation_type, cfg.input_file, cfg.input_dir)
    if source not in _DIGESTS:
        _DIGESTS[source] = task_class(cfg.generation_type).input_digest(cfg)
    return _DIGESTS[source]


def main(argv: list[str] | None = None) -> int:
    try:
        # output file -> its tally, for the units with failed samples
        failed = run_job(expand(parse_generate_config(list(sys.argv[1:] if argv is None else argv))))
    except UserError as e:
        print(f"kit generate: error: {e}", file=sys.stderr)
        return 2
    except RequestsFailed as e:  # "error: " makes it the cause that kit's job reports show
        print(f"kit generate: error: {e}", file=sys.stderr)
        return 1
    except ServerError as e:  # not ready, stopped answering, gone (inference/retry.py): with its log's tail
        print(f"kit generate: error: {e}", file=sys.stderr)
        return 1
    except subprocess.CalledProcessError as e:
        print(f"kit generate: the postprocess command failed with exit code {e.returncode}", file=sys.stderr)
        return 1
    except OSError as e:
        if (line := no_space(e)) is None:
            raise
        print(f"kit generate: error: {line}", file=sys.stderr)
        return 2
    if failed:
        first = next(iter(failed.values())).first
        count = sum(t.failed for t in failed.values())
        print(
            f"kit generate: error: {count} sample{'s' if count != 1 else ''} failed in {', '.join(failed)} (first: "
            f"{first}); the rest are kept, and a rerun requests only the failed ones (see their 'error')",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
