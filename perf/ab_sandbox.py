"""Interleaved A/B of one sandbox worker without HTTP (see perf/README.md, Sandbox): each NAME=REPO:SETTING gets a
one-worker pool of the code in REPO (a checkout, e.g. `git archive main` unpacked) in a process of its own; every
round runs a batch of `print(1+1)` executions on each pool, in a new random order, so that a shared machine's load
drifts over all of them alike. Prints the median ms per execution, the worker's and its children's CPU time per
execution, and for each pair within one REPO the median of the per-round ratios.

  python perf/ab_sandbox.py ROUNDS BATCH main-full=/tmp/main:full main-bare=/tmp/main:bare new-full=.:full ...

SETTING is `full`, `bare` (every layer off) or an --isolation value."""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import time


def drive(setting: str) -> None:
    """One pool; reads a batch size per line on stdin, answers {"times", "cpu", "n"} per batch."""
    from pipeline_kit.sandbox.isolation import Layers
    from pipeline_kit.sandbox.limits import Limits
    from pipeline_kit.sandbox.pool import WorkerPool

    bare = ",".join(f"no-{name}" for name in Layers.switchable())
    pool = WorkerPool(1, Layers.parse(bare if setting == "bare" else setting))
    pool.start()
    message = {"kind": "run", "language": "python", "timeout": 10, "cpu_seconds": 10, "limits": Limits().as_dict()}
    worker = pool.workers[0].process.pid

    def cpu() -> float:  # the worker's user + system time and its reaped children's
        fields = open(f"/proc/{worker}/stat").read().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")

    def one() -> None:
        (code_r, code_w), (in_r, in_w), (out_r, out_w), (err_r, err_w), (st_r, st_w) = (os.pipe() for _ in range(5))
        pool.send(dict(message), [code_r, in_r, out_w, err_w, st_w])
        for fd in (code_r, in_r, out_w, err_w, st_w):
            os.close(fd)
        os.write(code_w, b"print(1+1)")
        for fd in (code_w, in_w):
            os.close(fd)
        out, status = os.read(out_r, 100), b""
        while chunk := os.read(st_r, 4096):
            status += chunk
        for fd in (out_r, err_r, st_r):
            os.close(fd)
        if out != b"2\n" or b'"exit_code": 0' not in status:
            raise RuntimeError(f"unexpected: {out!r} {status!r}")

    print("ready", flush=True)
    for line in sys.stdin:
        times, start = [], cpu()
        for _ in range(int(line)):
            t = time.perf_counter()
            one()
            times.append(time.perf_counter() - t)
        time.sleep(0.05)
        one()  # by now the batch's last supervisor has been reaped, its CPU time counted
        print(json.dumps({"times": times, "cpu": cpu() - start, "n": len(times) + 1}), flush=True)
    pool.close()


def main() -> None:
    rounds, batch = int(sys.argv[1]), int(sys.argv[2])
    procs, repos = {}, {}
    for spec in sys.argv[3:]:
        name, target = spec.split("=")
        repo, setting = target.split(":", 1)
        repo = repos[name] = os.path.abspath(repo)
        procs[name] = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--drive", setting],
            cwd=repo,
            env={**os.environ, "PYTHONPATH": repo},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert procs[name].stdout.readline().strip() == "ready", name
    medians: dict[str, list[float]] = {name: [] for name in procs}
    times: dict[str, list[float]] = {name: [] for name in procs}
    cpu = {name: [0.0, 0] for name in procs}
    for _ in range(rounds):
        for name in random.sample(list(procs), len(procs)):
            procs[name].stdin.write(f"{batch}\n")
            procs[name].stdin.flush()
            answer = json.loads(procs[name].stdout.readline())
            times[name] += answer["times"]
            medians[name].append(statistics.median(answer["times"]))
            cpu[name][0] += answer["cpu"]
            cpu[name][1] += answer["n"]
    for proc in procs.values():
        proc.stdin.close()
        proc.wait()
    print("| pool | ms / execution | CPU ms / execution |\n|---|---|---|")
    for name in procs:
        print(f"| {name} | {1000 * statistics.median(times[name]):.2f} | {1000 * cpu[name][0] / cpu[name][1]:.2f} |")
    names = list(procs)
    for a in names:
        for b in names[names.index(a) + 1 :]:
            if repos[a] == repos[b]:
                ratio = statistics.median(x / y for x, y in zip(medians[a], medians[b], strict=True))
                print(f"{a} / {b}: {ratio:.3f} (median of the per-round ratios of ms per execution)")


if __name__ == "__main__":
    if sys.argv[1] == "--drive":
        drive(sys.argv[2])
    else:
        main()
