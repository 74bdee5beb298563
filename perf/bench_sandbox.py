"""Sandbox throughput and latency (see perf/README.md): `print(1+1)` at a fixed concurrency, stateless (a fresh
isolated execution each) and stateful (cells of long-lived sessions), against the real server
(`python -m pipeline_kit.sandbox.server`), once per isolation setting so that each layer's cost shows.

  python perf/bench_sandbox.py [--requests 1500] [--concurrency 8] [--rounds 2] [--settings full,no-net_ns,...]
  python perf/bench_sandbox.py --settings full,bare --batch 150 [--runs 3]   # stateless, settings interleaved
  python perf/bench_sandbox.py --settings full@/tmp/old,full,bare --batch 150 # another checkout's server beside

Settings: `full` (every layer), one layer switched off at a time, and `bare` (all off: a fork server with output
capture and nothing else). Per setting and round, a new server; 50 warm-up requests; then `--requests` requests by
a load generator in this process (aiohttp, one connection per request in flight). Stateful: `--concurrency`
sessions, each running its share of cells one after another. Figures: executions/s over the whole batch, p50 and
p95 latency (request sent -> JSON parsed), the machine's busy CPU per execution (/proc/stat: every process and the
kernel's threads) and the ratio to `full` measured in the same round.

With --batch N (stateless only): every setting's server starts at once and they take turns, N requests each, so
that the machine's drift (10-25 % from one minute to the next on this VM) falls on each alike: full ÷ bare then
varied 0.888-0.912 over 9 runs, against 0.84-0.98 one setting after the other. A setting may name a checkout
(`full@PATH`) to compare two versions of kit in one run.

Servers start with `--preload ''` (no module imported ahead), as when issue 36 measured full against bare; a setting
ending in `+preload` runs the server's default instead (numpy and sympy imported before the workers serve).
`--code sympy` sends a small sympy solve, as tool-using math models write, instead of `print(1+1)`:

  python perf/bench_sandbox.py --settings full,full+preload --batch 50 --requests 100 --code sympy"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# this checkout's kit, also in this process (the worker table): not the one installed in the venv, which may be
# another checkout's
sys.path.insert(0, str(REPO))

from pipeline_kit.sandbox.isolation import Layers  # noqa: E402

LAYERS = Layers.switchable()
ALL = ["full", *(f"no-{layer}" for layer in LAYERS), "bare"]
# --code: what each request runs, and the stdout it must answer
CODES = {
    "print": ("print(1+1)", "2\n"),
    "sympy": ("from sympy import symbols, solve\nx = symbols('x')\nprint(solve(x**2 - 5*x + 6, x))", "[2, 3]\n"),
}
CODE = CODES["print"]


def isolation_arg(setting: str) -> str:
    return ",".join(f"no-{layer}" for layer in LAYERS) if setting == "bare" else setting


def start_server(setting: str, port: int) -> subprocess.Popen:
    """`setting`, or `setting@CHECKOUT`: the server of another checkout of kit (to compare two versions in one run);
    either ending in `+preload`: the server's default --preload."""
    preload = setting.endswith("+preload")
    setting, _, checkout = setting.removesuffix("+preload").partition("@")
    env = {**os.environ, "PYTHONPATH": checkout} if checkout else None
    argv = [sys.executable, "-m", "pipeline_kit.sandbox.server", "--port", str(port)]
    argv += ["--isolation", isolation_arg(setting)] + ([] if preload else ["--preload", ""])
    proc = subprocess.Popen(argv, cwd=checkout or REPO, env=env, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if "serving on" not in line:
        raise RuntimeError(f"server did not start: {line}")
    return proc


async def load(url: str, n: int, concurrency: int, stateful: bool) -> tuple[float, list[float]]:
    import aiohttp

    latencies: list[float] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as http:

        async def one(session: str | None) -> None:
            headers = {"X-Session-ID": session} if session else {}
            start = time.perf_counter()
            async with http.post(url + "/execute", json={"code": CODE[0]}, headers=headers) as resp:
                body = await resp.json()
            latencies.append(time.perf_counter() - start)
            if body.get("stdout") != CODE[1]:
                raise RuntimeError(f"unexpected answer: {body}")

        async def worker(index: int, count: int) -> None:
            session = f"bench-{index}-{time.monotonic_ns()}" if stateful else None
            for _ in range(count):
                await one(session)

        shares = [n // concurrency + (1 if i < n % concurrency else 0) for i in range(concurrency)]
        start = time.perf_counter()
        await asyncio.gather(*(worker(i, c) for i, c in enumerate(shares)))
        return time.perf_counter() - start, latencies


def machine_cpu() -> tuple[float, float]:
    """(busy, idle) CPU seconds of the whole machine so far, from /proc/stat: busy counts every process and the
    kernel's own threads and interrupts (where namespaces are torn down), so a difference over a batch is what the
    batch cost the machine, wherever it ran."""
    with open("/proc/stat") as f:
        user, nice, system, idle, iowait, irq, softirq = (int(v) for v in f.readline().split()[1:8])
    tick = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / tick, (idle + iowait) / tick


def measured_load(url: str, n: int, concurrency: int, stateful: bool) -> tuple[float, list[float], float, float]:
    """`load`, with the machine's busy and idle CPU seconds (`machine_cpu`) over it."""
    before = machine_cpu()
    wall, latencies = asyncio.run(load(url, n, concurrency, stateful))
    busy, idle = (after - start for after, start in zip(machine_cpu(), before, strict=True))
    return wall, latencies, busy, idle


def worker_latency(setting: str, n: int) -> float:
    """Median ms of one `print(1+1)` handed straight to one worker (no HTTP), one after another: the cost of
    the isolation set-up itself, with the server's request handling taken out."""
    import json

    from pipeline_kit.sandbox.limits import Limits
    from pipeline_kit.sandbox.pool import WorkerPool

    pool = WorkerPool(1, Layers.parse(isolation_arg(setting)))
    pool.start()
    times = []
    try:
        for _ in range(n):
            start = time.perf_counter()
            fds = [os.pipe() for _ in range(5)]  # code, stdin, stdout, stderr, status
            message = {"kind": "run", "language": "python", "timeout": 10, "cpu_seconds": 10}
            pool.send(
                {**message, "limits": Limits().as_dict()}, [fds[0][0], fds[1][0], fds[2][1], fds[3][1], fds[4][1]]
            )
            for r, w in fds:
                os.close(r if r in (fds[0][0], fds[1][0]) else w)
            os.write(fds[0][1], b"print(1+1)")
            os.close(fds[0][1])
            os.close(fds[1][1])
            out = os.read(fds[2][0], 100)
            status = b""
            while chunk := os.read(fds[4][0], 4096):  # to end of file: the supervisor is done with it
                status += chunk
            for fd in (fds[2][0], fds[3][0], fds[4][0]):
                os.close(fd)
            times.append(time.perf_counter() - start)
            report = json.loads(status.splitlines()[-1])
            if out != b"2\n" or report.get("exit_code") != 0:
                raise RuntimeError(f"unexpected: {out!r} {report}")
    finally:
        pool.close()
    return statistics.median(times) * 1000


def interleaved(settings: list[str], args: argparse.Namespace) -> dict[str, dict]:
    """Stateless only: every setting's server up at once, and batches of `--batch` requests sent to each in turn
    (the order reversed every other pass) until each got `--requests` x `--rounds`. This VM's speed drifts by 10-25 %
    from one minute to the next; batches of a second or so put that drift on every setting alike."""
    ports = {s: args.port + i for i, s in enumerate(settings)}
    totals = {s: {"wall": 0.0, "busy": 0.0, "idle": 0.0} for s in settings}
    servers = []
    try:
        for s, port in ports.items():
            servers.append(start_server(s, port))
            asyncio.run(load(f"http://127.0.0.1:{port}", 50, args.concurrency, False))
        passes = args.requests * args.rounds // args.batch
        for p in range(passes):
            for s in settings if p % 2 == 0 else settings[::-1]:
                wall, _, busy, idle = measured_load(f"http://127.0.0.1:{ports[s]}", args.batch, args.concurrency, False)
                t = totals[s]
                t["wall"], t["busy"], t["idle"] = t["wall"] + wall, t["busy"] + busy, t["idle"] + idle
    finally:
        for proc in servers:
            proc.terminate()
            proc.wait()
    n = args.batch * passes
    return {
        s: {"rate": n / t["wall"], "cpu_ms": t["busy"] / n * 1000, "idle": t["idle"] / (t["busy"] + t["idle"])}
        for s, t in totals.items()
    }


def print_interleaved(settings: list[str], args: argparse.Namespace) -> None:
    runs = [interleaved(settings, args) for _ in range(args.runs)]
    print(
        f"stateless, interleaved: {args.runs} run(s), each {args.requests * args.rounds // args.batch} passes of "
        f"{args.batch} requests a setting at concurrency {args.concurrency}"
    )
    first = settings[0]
    print(f"| setting | exec/s per run | vs {first} | machine CPU ms / execution | minus {first} | idle |")
    print("|---|---|---|---|---|---|")
    for s in settings:
        rates = ", ".join(f"{r[s]['rate']:.0f}" for r in runs)
        ratios = ", ".join(f"{r[s]['rate'] / r[first]['rate']:.3f}" for r in runs)
        cpu = ", ".join(f"{r[s]['cpu_ms']:.2f}" for r in runs)
        extra = ", ".join(f"{r[s]['cpu_ms'] - r[first]['cpu_ms']:+.2f}" for r in runs)
        idle = ", ".join(f"{r[s]['idle']:.0%}" for r in runs)
        print(f"| {s} | {rates} | {ratios} | {cpu} | {extra} | {idle} |")


def measure(setting: str, args: argparse.Namespace, port: int) -> dict:
    proc = start_server(setting, port)
    url = f"http://127.0.0.1:{port}"
    try:
        asyncio.run(load(url, 50, args.concurrency, False))
        out = {}
        for mode in ("stateless", "stateful"):
            wall, lat, busy, idle = measured_load(url, args.requests, args.concurrency, mode == "stateful")
            lat.sort()
            out[mode] = {
                "cpu_ms": busy / args.requests * 1000,
                "idle": idle / (busy + idle),
                "rate": args.requests / wall,
                "p50": statistics.median(lat) * 1000,
                "p95": lat[int(0.95 * (len(lat) - 1))] * 1000,
            }
        return out
    finally:
        proc.terminate()
        proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=1500)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--settings", default=",".join(ALL))
    ap.add_argument("--port", type=int, default=6123)
    ap.add_argument("--worker_runs", type=int, default=300)
    ap.add_argument("--only_worker", action="store_true", help="skip the HTTP load (the worker table only)")
    ap.add_argument("--batch", type=int, default=0, help="stateless only, the settings interleaved in batches of this")
    ap.add_argument("--runs", type=int, default=3, help="with --batch: independent interleaved runs")
    ap.add_argument("--code", choices=sorted(CODES), default="print", help="what each request runs (HTTP only)")
    args = ap.parse_args()
    global CODE
    CODE = CODES[args.code]
    settings = args.settings.split(",")
    if args.batch:
        print_interleaved(settings, args)
        return
    if any("@" in s or "+preload" in s for s in settings) or args.code != "print":
        ap.error("setting@CHECKOUT, setting+preload and --code need --batch (the worker table runs print(1+1) here)")
    results: dict[str, list[dict]] = {s: [] for s in settings}
    for r in range(0 if args.only_worker else args.rounds):
        order = settings if r % 2 == 0 else list(reversed(settings))
        for setting in order:
            results[setting].append(measure(setting, args, args.port))
            m = results[setting][-1]
            print(
                f"round {r + 1} {setting:12s} stateless {m['stateless']['rate']:6.1f}/s "
                f"p50 {m['stateless']['p50']:5.1f} ms p95 {m['stateless']['p95']:5.1f} ms "
                f"CPU {m['stateless']['cpu_ms']:4.2f} ms/exec idle {m['stateless']['idle']:4.0%} | stateful "
                f"{m['stateful']['rate']:6.1f}/s p50 {m['stateful']['p50']:5.1f} ms p95 {m['stateful']['p95']:5.1f} ms",
                flush=True,
            )
    print(f"\none worker, no HTTP, {args.worker_runs} executions one after another (median ms per execution):")
    print("| setting | ms / execution | minus bare |")
    print("|---|---|---|")
    latency = {s: statistics.median(worker_latency(s, args.worker_runs) for _ in range(args.rounds)) for s in settings}
    for setting in settings:
        extra = latency[setting] - latency["bare"] if "bare" in latency else float("nan")
        print(f"| {setting} | {latency[setting]:.2f} | {extra:+.2f} |")
    if args.only_worker:
        return
    print(f"\nmedian over {args.rounds} rounds, {args.requests} requests at concurrency {args.concurrency}:")
    print(
        "| setting | stateless exec/s | p50 ms | p95 ms | CPU ms | vs full | stateful exec/s | p50 ms | p95 ms | CPU ms "
        "| vs full |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for setting in settings:
        row = [setting]
        for mode in ("stateless", "stateful"):
            rates = [m[mode]["rate"] for m in results[setting]]
            full = results.get("full") or results[setting]
            ratios = [m[mode]["rate"] / f[mode]["rate"] for m, f in zip(results[setting], full, strict=True)]
            row += [
                f"{statistics.median(rates):.0f}",
                f"{statistics.median(m[mode]['p50'] for m in results[setting]):.1f}",
                f"{statistics.median(m[mode]['p95'] for m in results[setting]):.1f}",
                f"{statistics.median(m[mode]['cpu_ms'] for m in results[setting]):.2f}",
                f"{statistics.median(ratios):.2f}×",
            ]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
