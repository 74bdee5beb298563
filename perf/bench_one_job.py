"""Many units in one job (issue 26, part 0; see perf/README.md): `kit generate` of P problems x S seeds, greedy,
in ONE job on executor none, against a bare `openai.AsyncOpenAI` loop sending the same P x S requests (same seeds,
same concurrency), side by side against the same CPU vLLM server (the tiny test model), then `kit generate` again
with every unit done.

  python perf/bench_one_job.py                                     # kit = this checkout
  python perf/bench_one_job.py --tree before=/tmp/main-tree --tree after=.   # two kit trees, same run
  python perf/bench_one_job.py --cli_only                          # issue 36: the bare loop and the CLI only
  python perf/bench_one_job.py --with_server                       # issue 36: each side starts its own server
  options: --problems 500 --seeds 4 --max_tokens 12 --concurrency 512 --rounds 3 [--server stub]

Each kit tree is run two ways, with this checkout's .venv and PYTHONPATH=TREE (another tree's code, this venv's
packages): `NAME` is the CLI, `.venv/bin/kit generate` (parsing, planning, nemo-run, the job's process, its imports,
the requests, the final files); `NAME:job` is the job's own command alone, `python -m pipeline_kit.inference.generate
++output_dir=... ++units=[rs0,...]`, what the CLI runs on none. Every run is a fresh process, timed start to exit. The clients alternate within a round, the order reversed every
other round; ratios are taken within a round (bare seconds / kit seconds: 1 = as fast as the bare loop).
With `--with_server` (issue 36 part 2's case: kit starts the server, and overlaps its own start with the server's)
no server is shared: each run starts the same CPU vLLM server (same Python, argv settings and environment) and stops
it at its end. The bare side is one driver process: it starts vLLM, imports the OpenAI SDK while vLLM loads, polls
/v1/models every 0.5 s (as kit's job does), runs the bare loop, writes the files and stops the server (SIGTERM to its
process group, waiting for its exit); kit is `kit generate --server_type=vllm --model=...`, timed to the CLI's exit
(its job stops the server too).

Each run also says when its first answer came back, from its process's start (kit: the first line of an
in-progress file, the folder polled every 10 ms), and for the CLI its launch: from its start to the job's start
($KIT_JOB_START, the `job_started_at` of the job's figures file).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import bench_client  # noqa: E402  (the servers: start_vllm, start_stub, wait_ready, stop)
import bytecode_cache  # noqa: E402  (perf/: .pyc files as a user has them)

BIN = Path(sys.executable).parent  # kit and python of the venv this script runs in


async def bare_requests(url: str, model: str, prompts: list[str], seeds: int, concurrency: int, max_tokens: int):
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=url, api_key="EMPTY")  # SDK defaults (httpx, 2 retries), as in bench_client.py
    semaphore = asyncio.Semaphore(concurrency)

    async def one(prompt: str, seed: int) -> str:
        async with semaphore:
            resp = await client.chat.completions.create(
                model=model,
                messages=[{"role": "user", "content": prompt}],
                temperature=0.0,
                top_p=0.95,
                max_tokens=max_tokens,
                seed=seed,
            )
        if not FIRST_ANSWER:
            FIRST_ANSWER.append(time.time())
        return resp.choices[0].message.content or ""

    texts = await asyncio.gather(*(one(p, s) for s in range(seeds) for p in prompts))
    await client.close()
    return texts


def bare_main(argv: list[str]) -> None:
    """The bare loop: every (seed, problem) request at `concurrency`, then one output file per seed."""
    url, model, input_file, output_dir, seeds, concurrency, max_tokens = argv
    records = [json.loads(line) for line in Path(input_file).read_text().splitlines()]
    prompts = [r["problem"] for r in records]  # the prompt ++prompt_config=generic/default builds
    texts = asyncio.run(bare_requests(url, model, prompts, int(seeds), int(concurrency), int(max_tokens)))
    print(f"first answer at {FIRST_ANSWER[0]:.3f}")
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    for s in range(int(seeds)):
        part = texts[s * len(records) : (s + 1) * len(records)]
        lines = (json.dumps({**r, "generation": t}) + "\n" for r, t in zip(records, part, strict=True))
        (out / f"output-rs{s}.jsonl").write_text("".join(lines))


FIRST_ANSWER: list[float] = []  # in the bare loop's process: the epoch of its first answer


def bare_with_server_main(argv: list[str]) -> None:
    """The bare side with its own server: start vLLM, import the SDK while it loads, poll every 0.5 s, run the loop,
    stop the server (its process group) and wait for it."""
    port, log, input_file, output_dir, seeds, concurrency, max_tokens = argv
    server = bench_client.start_vllm(int(port), Path(log))
    import openai  # noqa: F401  (while vLLM loads)

    url = f"http://127.0.0.1:{port}/v1"
    try:
        bench_client.wait_ready(url, server, 900, poll=0.5)  # as often as kit's job polls
        print(f"server ready at {time.time():.3f}")
        bare_main([url, "tiny", input_file, output_dir, seeds, concurrency, max_tokens])
    finally:
        bench_client.stop(server, group=True)


def first_line(folder: Path | None, proc: subprocess.Popen) -> float | None:
    """Polls `folder` every 10 ms while `proc` runs: the epoch when an in-progress file first held a line."""
    while folder is not None and proc.poll() is None:
        for path in folder.glob("*.in-progress") if folder.is_dir() else ():
            try:
                if path.stat().st_size > 0:
                    return time.time()
            except FileNotFoundError:
                pass
        time.sleep(0.01)
    return None


def timed(argv: list[str], env: dict | None = None, cwd: Path | None = None, watch: Path | None = None):
    """(wall seconds, output, epoch at start, epoch of the first in-progress line in `watch` or None) of one
    process; its CPU seconds (user + sys, its children included) go to CPU."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start, epoch = time.perf_counter(), time.time()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
    first = first_line(watch, proc)
    stdout, stderr = proc.communicate()
    res = subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:3])} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}")
    return wall, res.stdout + res.stderr, epoch, first


CPU: list[float] = []  # the CPU seconds of each timed process, in order


def job_start(job_dir: Path, after: float) -> float:
    """The start ($KIT_JOB_START) of the newest job whose figures file says it started after `after` (epoch)."""
    starts = []
    for path in job_dir.glob("logs/*/*/measurements/*.json"):
        started = json.loads(path.read_text()).get("job_started_at")
        if started is not None and started >= after:
            starts.append(started)
    return min(starts) if starts else float("nan")


def check_outputs(out: Path, problems: int, seeds: int) -> None:
    for s in range(seeds):
        lines = (out / f"output-rs{s}.jsonl").read_text().splitlines()
        ids = [json.loads(line)["id"] for line in lines]
        if ids != list(range(problems)):
            raise SystemExit(f"{out}/output-rs{s}.jsonl: {len(ids)} lines, not ids 0..{problems - 1} in order")


def main() -> None:
    bytecode_cache.enable()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", choices=["stub", "vllm"], default="vllm")
    ap.add_argument("--problems", type=int, default=500)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--max_tokens", type=int, default=12)
    ap.add_argument("--concurrency", type=int, default=512)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tree", action="append", metavar="NAME=PATH", help="a kit tree to run (repeatable)")
    ap.add_argument("--cli_only", action="store_true", help="no NAME:job runs (the job's command alone)")
    ap.add_argument("--with_server", action="store_true", help="each run starts (and stops) its own vLLM server")
    ap.add_argument("--bare_client", nargs=7, metavar="ARG", help=argparse.SUPPRESS)
    ap.add_argument("--bare_with_server", nargs=7, metavar="ARG", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.bare_client:
        bare_main(args.bare_client)
        return
    if args.bare_with_server:
        bare_with_server_main(args.bare_with_server)
        return

    trees = dict(t.split("=", 1) for t in (args.tree or [f"kit={ROOT}"]))
    work = Path(tempfile.mkdtemp(prefix="bench-one-job-"))
    inp = work / "in.jsonl"
    inp.write_text("".join(json.dumps({"id": i, "problem": f"What is 0+{i}?"}) + "\n" for i in range(args.problems)))
    (work / "configs").mkdir()
    (work / "configs" / "local-procs.yaml").write_text(f"executor: none\njob_dir: {work / 'jobs'}\n")
    port = bench_client.free_port()
    url = f"http://127.0.0.1:{port}/v1"
    server = None
    if args.with_server:
        why = bench_client.vllm_ready()
        if why:
            raise SystemExit(f"vLLM figure pending: {why}")
        model = "tiny"
        env = [f"{k}={v}" for k, v in bench_client.VLLM_ENV.items()]
        env += [f"KIT_SERVER_PYTHON={bench_client.VLLM_PYTHON}", f"KIT_CLIENT_PYTHON={BIN / 'python'}"]
        lines = "".join(f"  - {e}\n" for e in env)
        (work / "configs" / "local-procs.yaml").write_text(
            f"executor: none\njob_dir: {work / 'jobs'}\nenv_vars:\n{lines}"
        )
        server_flags = ["--server_type=vllm", f"--model={bench_client.VLLM_MODEL}"]
        server_flags += [f"--server_args={' '.join(bench_client.VLLM_ARGS)}"]
    elif args.server == "stub":
        server, model = bench_client.start_stub(port, pin=False), "stub"
        bench_client.wait_ready(url, server, 30)
        server_flags = ["--server_type=openai", f"--server_address={url}", f"--model={model}"]
    else:
        why = bench_client.vllm_ready()
        if why:
            raise SystemExit(f"vLLM figure pending: {why}")
        server, model = bench_client.start_vllm(port, work / "vllm.log"), "tiny"
        t = time.monotonic()
        bench_client.wait_ready(url, server, 900)
        print(f"vLLM ready after {time.monotonic() - t:.0f} s (log: {work / 'vllm.log'})", flush=True)
        server_flags = ["--server_type=openai", f"--server_address={url}", f"--model={model}"]
    kit = [str(BIN / "kit"), "generate", "--cluster=local-procs", f"--config_dir={work / 'configs'}"]
    kit += [*server_flags, f"--input_file={inp}"]
    kit += [f"--num_random_seeds={args.seeds}", "++prompt_config=generic/default", "++inference.temperature=0"]
    kit += [f"++max_concurrent_requests={args.concurrency}", f"++inference.tokens_to_generate={args.max_tokens}"]
    kit += ["++progress_every=100000"]
    units = ",".join(f"rs{seed}" for seed in range(args.seeds))
    job = [str(BIN / "python"), "-m", "pipeline_kit.inference.generate", f"++input_file={inp}"]
    job += [f"++server.base_url={url}", f"++server.model={model}", f"++units=[{units}]", *kit[-5:]]
    rest = [str(args.seeds), str(args.concurrency), str(args.max_tokens)]
    if args.with_server:
        if not args.cli_only:
            raise SystemExit("--with_server runs the CLI only: add --cli_only")
        bare = [sys.executable, __file__, "--bare_with_server", str(port), str(work / "vllm-bare.log"), str(inp)]
    else:
        bare = [sys.executable, __file__, "--bare_client", url, model, str(inp)]
    # first requests (vLLM: first batches) and first imports, outside the rounds
    timed([*bare, str(work / "warm"), "1", "64", str(args.max_tokens)])
    load = os.getloadavg()
    print(f"server={args.server} problems={args.problems} seeds={args.seeds} max_tokens={args.max_tokens} "
          f"concurrency={args.concurrency} trees={trees} work={work} load={load[0]:.2f}", flush=True)  # fmt: skip
    clients = ["bare", *trees, *([] if args.cli_only else [f"{name}:job" for name in trees])]
    results: dict[str, list[float]] = {c: [] for c in clients}
    cpu: dict[str, list[float]] = {c: [] for c in clients}
    reruns: dict[str, list[float]] = {c: [] for c in clients if c != "bare"}
    firsts: dict[str, list[float]] = {c: [] for c in clients}  # process start -> first answer
    launches: dict[str, list[float]] = {c: [] for c in trees}  # CLI start -> the job's start
    loads: list[float] = []
    try:
        for r in range(args.rounds):
            loads.append(os.getloadavg()[0])
            for who in clients if r % 2 == 0 else clients[::-1]:
                out = work / f"out-{who}-{r}"
                if who == "bare":
                    wall, log, began, _ = timed([*bare, str(out), *rest])
                    cpu[who].append(CPU[-1])
                    firsts[who].append(float(log.split("first answer at ")[1].split()[0]) - began)
                    line = f"round {r + 1} {who:<8} {wall:6.2f} s  CPU {CPU[-1]:5.1f} s  first answer {firsts[who][-1]:.2f} s"
                else:
                    name = who.removesuffix(":job")
                    env = {**os.environ, "PYTHONPATH": trees[name], "KIT_HOME": str(work / f"home-{name}" / ".kit")}
                    command = [*job, f"++output_dir={out}"] if who.endswith(":job") else [*kit, f"--output_dir={out}"]
                    # run outside any git checkout: no code of the user's to package
                    wall, log, began, first = timed(command, env, cwd=work, watch=out)
                    cpu[who].append(CPU[-1])
                    firsts[who].append(first - began if first is not None else float("nan"))
                    again, *_ = timed(command, env, cwd=work)
                    reruns[who].append(again)
                    checks = log.count("ready after")  # the server check: once per unit before, once per job after
                    line = (
                        f"round {r + 1} {who:<8} {wall:6.2f} s  CPU {cpu[who][-1]:5.1f} s  first answer "
                        f"{firsts[who][-1]:.2f} s  (server checks: {checks}; done rerun {again:.2f} s"
                    )
                    if who in launches:
                        launches[who].append(job_start(work / "jobs", began) - began)
                        line += f"; launch {launches[who][-1]:.2f} s"
                    line += ")"
                check_outputs(out, args.problems, args.seeds)
                results[who].append(wall)
                if who != "bare" and len(results["bare"]) == r + 1:
                    line += f"  bare / kit {results['bare'][r] / wall:.3f}x"
                print(line, flush=True)
            if r % 2 == 1:  # the bare loop ran last: the ratios of this round
                for who in clients[1:]:
                    print(f"round {r + 1} {who:<8} bare / kit {results['bare'][r] / results[who][r]:.3f}x", flush=True)
    finally:
        if server is not None:
            bench_client.stop(server, group=args.server == "vllm")
    n = args.problems * args.seeds
    print(f"\n{n} requests; median (min-max) over {args.rounds} rounds; load (1 min) at round starts: {loads}")
    for who in clients:
        ws = results[who]
        line = f"{who:<8} {statistics.median(ws):.2f} s ({min(ws):.2f}-{max(ws):.2f}), {n / statistics.median(ws):.0f} req/s"
        line += f", CPU {statistics.median(cpu[who]):.1f} s ({min(cpu[who]):.1f}-{max(cpu[who]):.1f})"
        line += f", first answer {statistics.median(firsts[who]):.2f} s ({min(firsts[who]):.2f}-{max(firsts[who]):.2f})"
        if who in launches:
            ls = launches[who]
            line += f", launch {statistics.median(ls):.2f} s ({min(ls):.2f}-{max(ls):.2f})"
        if who != "bare":
            ratios = [b / k for b, k in zip(results["bare"], ws, strict=True)]
            line += f"; bare / kit {statistics.median(ratios):.3f}x ({min(ratios):.3f}-{max(ratios):.3f})"
            rr = reruns[who]
            line += f"; done rerun {statistics.median(rr):.2f} s ({min(rr):.2f}-{max(rr):.2f})"
        print(line)


if __name__ == "__main__":
    main()
