"""Cost of containers on Slurm (pyxis + enroot), through kit itself (see perf/README.md, issue 12).

  source /tmp/kit-services/services.env   # SLURM_CONF, DOCKER_HOST, KIT_TEST_BASE_SQSH (tests/services/up.sh)
  python perf/bench_slurm_containers.py
  options: --rounds 4 --array_sizes 8 32 --array_rounds 2 [--no_dockerd]   (8-11 minutes on 2 cores)

Every job is `kit run_cmd --cluster=<slurm config> --wait` (a fresh kit process, as a user runs it) on the local
test cluster, with a cluster config that has `containers: {sqsh: $KIT_TEST_BASE_SQSH, dockerd:
dockerd://kit-test-base:latest}` and `env_vars: [DOCKER_HOST=...]` (pyxis imports a dockerd:// image from the
daemon named by the job's DOCKER_HOST).
1. One trivial job (`echo`), three ways: no container (`none`), `--container=sqsh` (pyxis unpacks the squashfs at
   each start), `--container=dockerd` (pyxis imports the image from dockerd at each start, then unpacks it).
2. An array job of N units (`--array_size=N`), without and with the squashfs container.
Figures, each from timestamps on this machine (Slurm's own, in sacct, are whole seconds):
- wall: kit started → kit returned with every job SUCCEEDED (kit's start-up, sbatch, queueing, the job, kit's
  1 s polling);
- in job: the batch step's start → its end, i.e. the birth time → the last write of the job's sbatch output file
  (slurmstepd creates it when the batch script starts; `set -x` writes to it up to the script's last line);
- to command: the batch step's start → the moment the command ran, a `date +%s.%N` the command prints (through the
  `hostname` step of the batch script, srun, and with a container: pyxis/enroot creating and starting it).
Arrays: wall / N, the marginal cost of an element between the two sizes ((wall(N2) - wall(N1)) / (N2 - N1), the
fixed costs of one submission taken out), and the median over the elements of in job and to command.
Rounds interleave the variants, the order reversed every other round; ratios against `none` are taken within a
round, then their median (min–max) over the rounds is printed."""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
COMMAND = 'echo "kit_t=$(date +%s.%N) task=${SLURM_ARRAY_TASK_ID:-0}"'


def stat_times(paths: list[Path]) -> dict[Path, tuple[float, float]]:
    """path -> (birth, last modification), nanosecond timestamps (os.stat has no birth time on Linux)."""
    out = subprocess.run(["stat", "-c", "%.9W %.9Y", *map(str, paths)], capture_output=True, text=True, check=True)
    lines = [ln.split() for ln in out.stdout.splitlines()]
    return {p: (float(b), float(m)) for p, (b, m) in zip(paths, lines, strict=True)}


def run_job(work: Path, env: dict, expname: str, container: str | None, array_size: int | None) -> dict:
    """Submit one job with kit and wait for it; its figures (per element for an array)."""
    argv = [BIN / "kit", "run_cmd", f"--cluster={work / 'slurm.yaml'}", f"--expname={expname}", "--wait"]
    argv += [f"--command={COMMAND}"]
    argv += [f"--container={container}"] if container else []
    argv += [f"--array_size={array_size}"] if array_size else []
    start = time.perf_counter()
    res = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if res.returncode != 0 or "SUCCEEDED" not in res.stdout:
        logs = subprocess.run(
            [BIN / "kit", "logs", f"--cluster={work / 'slurm.yaml'}", expname],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
        )
        raise SystemExit(f"{expname} failed:\n{res.stdout}{res.stderr}\nkit logs:\n{logs.stdout}{logs.stderr}")
    slurm_id = re.search(r"\(slurm job (\d+)\)", res.stdout).group(1)
    exp = work / "jobs" / "experiments" / expname
    n = array_size or 1
    if array_size:  # sbatch_<name>_<array id>_<task>.out
        outs = {int(p.stem.rsplit("_", 1)[1]): p for p in exp.glob(f"*/{expname}/sbatch_*_{slurm_id}_*.out")}
    else:
        outs = dict(enumerate(exp.glob(f"*/{expname}/sbatch_*_{slurm_id}.out")))
    if len(outs) != n:
        raise SystemExit(f"{expname}: {len(outs)} sbatch output files for {n} element(s): {outs}")
    times = stat_times(list(outs.values()))
    batch = {task: times[p] for task, p in outs.items()}
    ran = {}
    for log in (work / "jobs" / "logs" / expname).rglob("*cmd.log"):
        for t, task in re.findall(r"kit_t=([\d.]+) task=(\d+)", log.read_text()):
            ran[int(task)] = float(t)
    if sorted(ran) != sorted(batch):
        raise SystemExit(f"{expname}: command timestamps for tasks {sorted(ran)}, sbatch outputs for {sorted(batch)}")
    in_job = [end - begin for begin, end in batch.values()]
    to_cmd = [ran[task] - batch[task][0] for task in batch]
    return {"wall": wall, "in_job": statistics.median(in_job), "to_cmd": statistics.median(to_cmd), "n": n}


def span(values: list[float], fmt: str) -> str:
    return f"{format(statistics.median(values), fmt)} ({format(min(values), fmt)}–{format(max(values), fmt)})"


def ratios(runs: dict[str, list[dict]], who: str, base: str, key: str) -> str:
    return span([r[key] / b[key] for b, r in zip(runs[base], runs[who], strict=True)], ".2f") + "×"


def diffs(runs: dict[str, list[dict]], who: str, base: str, key: str) -> str:
    return span([r[key] - b[key] for b, r in zip(runs[base], runs[who], strict=True)], "+.2f") + " s"


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=4, help="rounds of the single-job variants")
    ap.add_argument("--array_sizes", type=int, nargs="+", default=[8, 32])
    ap.add_argument("--array_rounds", type=int, default=2)
    ap.add_argument("--no_dockerd", action="store_true", help="skip the dockerd:// variant")
    args = ap.parse_args()
    missing = [v for v in ("SLURM_CONF", "KIT_TEST_BASE_SQSH", "DOCKER_HOST") if not os.environ.get(v)]
    if missing:
        raise SystemExit(f"{', '.join(missing)} not set: source /tmp/kit-services/services.env first")
    sqsh = os.environ["KIT_TEST_BASE_SQSH"]
    work = Path(tempfile.mkdtemp(prefix="bench-slurm-containers-"))
    (work / "slurm.yaml").write_text(
        f"executor: slurm\njob_dir: {work}/jobs\naccount: root\npartition: debug\n"
        f"containers:\n  sqsh: {sqsh}\n  dockerd: dockerd://kit-test-base:latest\n"
        f"env_vars:\n  - DOCKER_HOST={os.environ['DOCKER_HOST']}\n"
    )
    env = {**os.environ, "KIT_HOME": str(work / "kit_home")}
    began = time.perf_counter()
    print(f"{time.strftime('%Y-%m-%d %H:%M')} {os.uname().nodename}, {os.cpu_count()} cores, load {load()}")
    print(f"image: {sqsh} ({Path(sqsh).stat().st_size / 1e6:.0f} MB); work: {work}")
    run_job(work, env, "warmup", "sqsh", None)  # kit's first packing of the code, the first container start

    variants = {"none": None, "sqsh": "sqsh"} | ({} if args.no_dockerd else {"dockerd": "dockerd"})
    single: dict[str, list[dict]] = {v: [] for v in variants}
    for r in range(args.rounds):
        for v in list(variants)[:: 1 if r % 2 == 0 else -1]:
            single[v].append(run_job(work, env, f"one-{v}-{r}", variants[v], None))
            f = single[v][-1]
            print(
                f"round {r} {v:8} wall {f['wall']:6.2f} s  in job {f['in_job']:6.2f} s  "
                f"to command {f['to_cmd']:6.2f} s  load {load()}"
            )

    arrays = {(n, v): [] for n in args.array_sizes for v in ("none", "sqsh")}
    for r in range(args.array_rounds):
        for n, v in list(arrays)[:: 1 if r % 2 == 0 else -1]:
            arrays[(n, v)].append(run_job(work, env, f"arr{n}-{v}-{r}", variants[v], n))
            f = arrays[(n, v)][-1]
            print(
                f"round {r} array {n:3} {v:5} wall {f['wall']:6.2f} s ({f['wall'] / n:.2f} s/element)  "
                f"element in job {f['in_job']:5.2f} s  to command {f['to_cmd']:5.2f} s  load {load()}"
            )
    total = time.perf_counter() - began

    print(f"\none job (`echo`), median (min–max) of {args.rounds} rounds; against `none` within a round")
    print(
        "| image | wall, submit → SUCCEEDED | wall / none | in job (batch step) | in job / none | in job − none "
        "| to command | to command − none |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for v in variants:
        wall, in_job, to_cmd = (span([f[k] for f in single[v]], ".2f") + " s" for k in ("wall", "in_job", "to_cmd"))
        cols = [wall, ratios(single, v, "none", "wall"), in_job, ratios(single, v, "none", "in_job")]
        cols += [diffs(single, v, "none", "in_job"), to_cmd, diffs(single, v, "none", "to_cmd")]
        print(f"| {v} | {' | '.join(cols)} |")

    print(f"\narray jobs, median (min–max) of {args.array_rounds} rounds; sqsh against none within a round")
    print("| N | image | wall, submit → all SUCCEEDED | wall / N | wall / none | element in job | element to command |")
    print("|---|---|---|---|---|---|---|")
    for (n, v), runs in arrays.items():
        same_n = {w: arrays[(n, w)] for w in ("none", "sqsh")}
        cols = [span([f["wall"] for f in runs], ".1f") + " s", span([f["wall"] / n for f in runs], ".2f") + " s"]
        cols += [ratios(same_n, v, "none", "wall")]
        cols += [span([f[k] for f in runs], ".2f") + " s" for k in ("in_job", "to_cmd")]
        print(f"| {n} | {v} | {' | '.join(cols)} |")
    if len(args.array_sizes) >= 2:
        n1, n2 = min(args.array_sizes), max(args.array_sizes)
        marginal = {
            v: [(b["wall"] - a["wall"]) / (n2 - n1) for a, b in zip(arrays[(n1, v)], arrays[(n2, v)], strict=True)]
            for v in ("none", "sqsh")
        }
        diff = [s - n for n, s in zip(marginal["none"], marginal["sqsh"], strict=True)]
        print(f"\nmarginal wall per element, (wall({n2}) - wall({n1})) / {n2 - n1}, median (min–max) over the rounds:")
        print(
            f"none {span(marginal['none'], '.2f')} s, sqsh {span(marginal['sqsh'], '.2f')} s, sqsh − none {span(diff, '+.2f')} s"
        )
    print(f"\ntotal {total:.0f} s; load {load()}")


if __name__ == "__main__":
    main()
