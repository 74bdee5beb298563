"""Sandbox throughput and latency (see BENCHMARKS.md): `print(1+1)` at a fixed concurrency, stateless (a fresh
isolated execution each) and stateful (cells of long-lived sessions), against the real server
(`python -m pipeline_kit.sandbox.server`), once per isolation setting so that each layer's cost shows.

  python benchmarks/bench_sandbox.py [--requests 1500] [--concurrency 8] [--rounds 2] [--settings full,no-net_ns,...]

Settings: `full` (every layer), one layer switched off at a time, and `bare` (all off: a fork server with output
capture and nothing else). Per setting and round, a new server; 50 warm-up requests; then `--requests` requests by
a load generator in this process (aiohttp, one connection per request in flight). Stateful: `--concurrency`
sessions, each running its share of cells one after another. Figures: executions/s over the whole batch, p50 and
p95 latency (request sent -> JSON parsed), and the ratio to `full` measured in the same round."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LAYERS = ["user_ns", "net_ns", "pid_ns", "mount_ns", "rlimits", "memory_cgroup"]
ALL = ["full", *(f"no-{layer}" for layer in LAYERS), "bare"]


def isolation_arg(setting: str) -> str:
    return ",".join(f"no-{layer}" for layer in LAYERS) if setting == "bare" else setting


def start_server(setting: str, port: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pipeline_kit.sandbox.server",
            "--port",
            str(port),
            "--isolation",
            isolation_arg(setting),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
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
            async with http.post(url + "/execute", json={"code": "print(1+1)"}, headers=headers) as resp:
                body = await resp.json()
            latencies.append(time.perf_counter() - start)
            if body.get("stdout") != "2\n":
                raise RuntimeError(f"unexpected answer: {body}")

        async def worker(index: int, count: int) -> None:
            session = f"bench-{index}-{time.monotonic_ns()}" if stateful else None
            for _ in range(count):
                await one(session)

        shares = [n // concurrency + (1 if i < n % concurrency else 0) for i in range(concurrency)]
        start = time.perf_counter()
        await asyncio.gather(*(worker(i, c) for i, c in enumerate(shares)))
        return time.perf_counter() - start, latencies


def measure(setting: str, args: argparse.Namespace, port: int) -> dict:
    proc = start_server(setting, port)
    url = f"http://127.0.0.1:{port}"
    try:
        asyncio.run(load(url, 50, args.concurrency, False))
        out = {}
        for mode in ("stateless", "stateful"):
            wall, lat = asyncio.run(load(url, args.requests, args.concurrency, mode == "stateful"))
            lat.sort()
            out[mode] = {
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
    args = ap.parse_args()
    settings = args.settings.split(",")
    results: dict[str, list[dict]] = {s: [] for s in settings}
    for r in range(args.rounds):
        order = settings if r % 2 == 0 else list(reversed(settings))
        for setting in order:
            results[setting].append(measure(setting, args, args.port))
            m = results[setting][-1]
            print(
                f"round {r + 1} {setting:12s} stateless {m['stateless']['rate']:6.1f}/s "
                f"p50 {m['stateless']['p50']:5.1f} ms p95 {m['stateless']['p95']:5.1f} ms | stateful "
                f"{m['stateful']['rate']:6.1f}/s p50 {m['stateful']['p50']:5.1f} ms p95 {m['stateful']['p95']:5.1f} ms",
                flush=True,
            )
    print(f"\nmedian over {args.rounds} rounds, {args.requests} requests at concurrency {args.concurrency}:")
    print("| setting | stateless exec/s | p50 ms | p95 ms | vs full | stateful exec/s | p50 ms | p95 ms | vs full |")
    print("|---|---|---|---|---|---|---|---|---|")
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
                f"{statistics.median(ratios):.2f}×",
            ]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
