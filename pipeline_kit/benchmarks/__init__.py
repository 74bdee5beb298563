"""The eval benchmarks, by the name `kit eval --benchmarks=NAME:SEEDS` and `kit prepare_data NAME` take: the shipped
ones listed in SHIPPED_BENCHMARKS, plus a user's own in an `--extra_datasets DIR` folder; definition.py loads one.

A benchmark is one Python module (datasets_registry/README.md shows one): the shipped ones are
`datasets_registry/NAME/__init__.py`; a user's folder holds `NAME.py` or `NAME/__init__.py` (names starting with `_`
are helper modules, not benchmarks). A user's benchmark may not take a shipped name."""

from __future__ import annotations

from pathlib import Path

# Old benchmark modules import these from here; new ones import pipeline_kit.benchmark_helpers, not the registry.
from pipeline_kit.benchmark_helpers import Source, aops_problem, boxed_content, plain_number  # noqa: F401
from pipeline_kit.benchmarks.definition import NAME_RE, Benchmark, load_benchmark
from pipeline_kit.errors import UserError, did_you_mean
from pipeline_kit.resources import resource_dir

# The shipped benchmarks: NAME -> its module, relative to datasets_registry/. A new benchmark is a module there and a
# line here (tests/test_benchmarks.py checks that the two agree).
SHIPPED_BENCHMARKS: dict[str, str] = {
    "aime24": "aime24/__init__.py",
    "aime25": "aime25/__init__.py",
    "algebra222": "algebra222/__init__.py",
    "amc23": "amc23/__init__.py",
    "arith": "arith/__init__.py",
    "asdiv": "asdiv/__init__.py",
    "beyond-aime": "beyond-aime/__init__.py",
    "brumo25": "brumo25/__init__.py",
    "college_math": "college_math/__init__.py",
    "comp-math-24-25": "comp-math-24-25/__init__.py",
    "gaokao2023en": "gaokao2023en/__init__.py",
    "gsm-plus": "gsm-plus/__init__.py",
    "gsm8k": "gsm8k/__init__.py",
    "hmmt_feb25": "hmmt_feb25/__init__.py",
    "math": "math/__init__.py",
    "math-odyssey": "math-odyssey/__init__.py",
    "math500": "math500/__init__.py",
    "mawps": "mawps/__init__.py",
    "minerva_math": "minerva_math/__init__.py",
    "mmlu-pro": "mmlu-pro/__init__.py",
    "olympiadbench": "olympiadbench/__init__.py",
    "omni-math": "omni-math/__init__.py",
    "svamp": "svamp/__init__.py",
}

__all__ = [
    "SHIPPED_BENCHMARKS",
    "Benchmark",
    "Source",
    "all_benchmarks",
    "benchmark_names",
    "definitions",
    "get_benchmark",
    "registry_dirs",
]


def registry_dirs(extra_datasets: str | Path | None = None) -> list[Path]:
    """The folders benchmarks are defined in: the shipped registry, then the user's --extra_datasets folder."""
    dirs = [resource_dir("datasets_registry")]
    if extra_datasets:
        extra = Path(extra_datasets).expanduser()
        if not extra.is_dir():
            raise UserError(
                f"--extra_datasets {extra_datasets}: no such folder; give the folder that holds your benchmark "
                "modules (NAME.py or NAME/__init__.py, see datasets_registry/README.md)."
            )
        dirs.append(extra)
    return dirs


def definitions(extra_datasets: str | Path | None = None) -> dict[str, tuple[Path, Path]]:
    """NAME -> (module file, registry folder) of every benchmark, shipped then the user's, without importing any."""
    shipped, *user = registry_dirs(extra_datasets)
    out = {name: (shipped / module, shipped) for name, module in SHIPPED_BENCHMARKS.items()}
    for folder in user:
        for name, module in _modules_in(folder).items():
            if name in out:
                raise UserError(
                    f"benchmark '{name}' of --extra_datasets ({module}) has the name of a shipped one "
                    f"({out[name][0]}); rename yours (e.g. {name}_mine) so that results tables keep them apart."
                )
            out[name] = (module, folder)
    return out


def benchmark_names(extra_datasets: str | Path | None = None) -> list[str]:
    """The names of every benchmark (shipped, then --extra_datasets), sorted."""
    return sorted(definitions(extra_datasets))


def get_benchmark(name: str, extra_datasets: str | Path | None = None) -> Benchmark:
    """The benchmark NAME, loaded and checked; an unknown name fails with one line that suggests the closest."""
    found = definitions(extra_datasets)
    if name not in found:
        known = sorted(found)
        hint = "" if extra_datasets else " (your own benchmarks: --extra_datasets DIR)"
        raise UserError(f"unknown benchmark '{name}'.{did_you_mean(name, known)} Known: {', '.join(known)}{hint}.")
    module_file, home = found[name]
    if not module_file.is_file():
        raise UserError(
            f"{module_file}: missing, though benchmark '{name}' is a shipped one (pipeline_kit/benchmarks/"
            "__init__.py); reinstall kit, or restore the file from its source checkout."
        )
    return load_benchmark(name, module_file, home)


def all_benchmarks(extra_datasets: str | Path | None = None) -> list[Benchmark]:
    return [get_benchmark(name, extra_datasets) for name in benchmark_names(extra_datasets)]


def _modules_in(folder: Path) -> dict[str, Path]:
    """NAME -> module file of every benchmark module in a user's `folder` (NAME.py or NAME/__init__.py)."""
    found: dict[str, Path] = {}
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.name.startswith(("_", ".")):
            continue
        if entry.is_dir() and (entry / "__init__.py").is_file():
            name, module = entry.name, entry / "__init__.py"
        elif entry.is_file() and entry.suffix == ".py":
            name, module = entry.stem, entry
        else:
            continue
        if not NAME_RE.match(name):
            raise UserError(
                f"{module}: '{name}' is not a benchmark name (letters, digits, '_' and '-'); rename it, or start "
                "its name with '_' if it is a helper module and no benchmark."
            )
        if name in found:
            raise UserError(f"{folder}: benchmark '{name}' is defined twice ({found[name]} and {module}); keep one.")
        found[name] = module
    return found
