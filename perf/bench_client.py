"""Overhead of the generation client (see perf/README.md): requests/s of one generation unit
(`python -m pipeline_kit.inference.generate`, what `kit generate` runs on executor `none`) against requests/s of a
bare asyncio loop over `openai.AsyncOpenAI` at the same concurrency, with the same prompts and max_tokens, against
the same server, measured in the same run.

  python perf/bench_client.py                        # fast stub server (perf/fast_stub_server.py)
  python perf/bench_client.py --server vllm          # vLLM on CPU with the tiny test model
  options: --requests 2000 --concurrency 64 512 --rounds 5 --max_tokens 8 [--no_pin]
  python perf/bench_client.py --answer_tokens 32768 --requests 512 --concurrency 256 --rounds 3
                                                     # reasoning-length samples: 32k tokens each (the stub's)

Three clients, each a fresh process per run:
- `openai`: the baseline, a semaphore + `asyncio.gather` over `AsyncOpenAI(...).chat.completions.create` with the
  SDK's defaults (httpx, 2 retries: vLLM's server drops keep-alive connections idle for 5 s, and a bare loop
  without retries dies on the first reuse of one);
- `openai+aiohttp`: the same loop with `AsyncOpenAI(http_client=...)` on a minimal aiohttp transport sized to the
  concurrency, the transport kit's client uses (a stricter baseline: it shows what LiteLLM itself costs);
- `kit`: the generation unit, `++prompt_config=generic/default` (the prompt is the `problem` field, as above).
Each round runs every client once per concurrency, the order reversed every other round (A B C, C B A, ...).
Figures per run:
- request phase: requests / seconds from the first request to the last answer, measured inside the process (kit:
  the rate its last progress line prints, counted from after the server check and the LiteLLM import; the
  baselines: around their `asyncio.gather`);
- end to end: requests / process wall time (interpreter start, imports, reading the input, writing the output);
- CPU: user + sys seconds of the client process (what the client costs a core, whatever else the machine runs),
  and per 1,000 output tokens;
- peak memory: the client process's maximum resident set (ru_maxrss, from wait4 on that one process).
With --answer_tokens N the stub answers N tokens to every request ("tok " N times, then the answer: 4 characters a
token, as English text; its usage says N).
Ratios are taken within a round (kit / openai, kit / openai+aiohttp, and for CPU baseline / kit, so that above 1
is better for kit in every column), then their median and range over the rounds are printed.
With the stub, the server is pinned to core 1 and the clients to core 0 (taskset; --no_pin to share the cores).
Before the rounds, the stub's own capacity is measured with a raw-socket client, to show it is not the bottleneck,
and 64 requests warm the server up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from pipeline_kit.servers.vllm import CPU_WHOLE_PREFILL, KEEP_ALIVE_S

HERE = Path(__file__).resolve().parent
VLLM_PYTHON = Path("/var/cache/kit-test/venv-vllm/bin/python")
VLLM_MODEL = Path("/var/cache/kit-test/tiny-model")
CLIENTS = ("openai", "openai+aiohttp", "kit")


# ---------------------------------------------------------------------------------------------------- the baselines
def aiohttp_http_client(concurrency: int):
    """An httpx client whose requests go out through one aiohttp session (no httpx connection pool)."""
    import aiohttp
    import httpx

    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency))

    class AiohttpTransport(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            body = await request.aread()
            async with session.request(
                request.method, str(request.url), headers=request.headers, data=body, allow_redirects=False
            ) as resp:
                content = await resp.read()
            headers = [(k, v) for k, v in resp.raw_headers if k.lower() != b"content-encoding"]
            return httpx.Response(resp.status, headers=headers, content=content)

        async def aclose(self) -> None:
            await session.close()

    return httpx.AsyncClient(transport=AiohttpTransport())


async def baseline_requests(
    base_url: str, model: str, prompts: list[str], concurrency: int, max_tokens: int, aiohttp: bool
) -> tuple[list[str], float]:
    from openai import AsyncOpenAI

    http_client = aiohttp_http_client(concurrency) if aiohttp else None
    client = AsyncOpenAI(base_url=base_url, api_key="EMPTY", http_client=http_client)  # SDK default: 2 retries
    semaphore = asyncio.Semaphore(concurrency)

    async def one(prompt: str) -> str:
        async with semaphore:
            resp = await client.chat.completions.create(
                model=model,
                messages=[{"role": "user", "content": prompt}],
                temperature=0.0,
                top_p=0.95,
                max_tokens=max_tokens,
            )
        return resp.choices[0].message.content or ""

    start = time.perf_counter()
    texts = await asyncio.gather(*(one(p) for p in prompts))
    seconds = time.perf_counter() - start
    await client.close()
    return texts, seconds


def baseline_main(argv: list[str]) -> None:
    """The bare loop: read the input, send every prompt at `concurrency`, write the output once at the end."""
    base_url, model, input_file, output_file, concurrency, max_tokens, transport = argv
    records = [json.loads(line) for line in Path(input_file).read_text().splitlines()]
    prompts = [r["problem"] for r in records]  # the same prompt that ++prompt_config=generic/default builds
    texts, seconds = asyncio.run(
        baseline_requests(base_url, model, prompts, int(concurrency), int(max_tokens), transport == "aiohttp")
    )
    lines = (json.dumps({**r, "generation": t}) + "\n" for r, t in zip(records, texts, strict=True))
    Path(output_file).write_text("".join(lines))
    print(json.dumps({"request_phase_s": seconds}))


# ---------------------------------------------------------------------------------------------------- the servers
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, proc: subprocess.Popen, timeout: float, poll: float = 1.0) -> None:
    """Polls GET {url}/models every `poll` seconds until it answers 200."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with code {proc.returncode} before it was ready")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(poll)
    raise SystemExit(f"the server at {url} was not ready after {timeout:.0f} s")


def start_stub(port: int, pin: bool, answer_tokens: int = 0) -> subprocess.Popen:
    argv = [sys.executable, str(HERE / "fast_stub_server.py"), str(port)]
    if answer_tokens:
        argv += ["--filler_tokens", str(answer_tokens), "--completion_tokens", str(answer_tokens)]
    proc = subprocess.Popen((["taskset", "-c", "1"] if pin else []) + argv, stdout=subprocess.PIPE, text=True)
    assert "fast stub server" in proc.stdout.readline()
    return proc


def vllm_ready() -> str | None:
    """Why the vLLM figure cannot be taken now, or None."""
    if not (VLLM_MODEL / "config.json").is_file() or not VLLM_PYTHON.is_file():
        return f"{VLLM_MODEL}/config.json or {VLLM_PYTHON} is missing"
    if subprocess.run([str(VLLM_PYTHON), "-c", "import vllm"], capture_output=True).returncode != 0:
        return f"`import vllm` fails in {VLLM_PYTHON}"
    return None


VLLM_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "HF_HUB_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    # what kit's vLLM command sets: the bare side's server is the same server
    "VLLM_HTTP_TIMEOUT_KEEP_ALIVE": str(KEEP_ALIVE_S),
}
# what kit's vLLM command adds on a CPU (servers/vllm.py): the bare side's server is the same server
VLLM_ARGS = ["--max-model-len", "512", "--dtype", "float32", "--enforce-eager", CPU_WHOLE_PREFILL]


def start_vllm(port: int, log: Path) -> subprocess.Popen:
    argv = [str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(VLLM_MODEL)]
    argv += ["--served-model-name", "tiny", "--host", "127.0.0.1", "--port", str(port), *VLLM_ARGS]
    env = {**os.environ, **VLLM_ENV}
    return subprocess.Popen(argv, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


def stop(proc: subprocess.Popen, group: bool) -> None:
    """SIGTERM to the server (with `group`: to its whole process group, vLLM's engine included), then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig) if group else proc.send_signal(sig)
            proc.wait(timeout=30)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


async def raw_load(port: int, requests: int, connections: int) -> float:
    """Requests/s the stub answers to a minimal keep-alive client (one request in flight per connection)."""
    body = json.dumps({"model": "stub", "messages": [{"role": "user", "content": "What is 0+1?"}]}).encode()
    head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode()
    per_conn = requests // connections

    async def conn() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(per_conn):
            writer.write(head + body)
            headers = await reader.readuntil(b"\r\n\r\n")
            length = int(re.search(rb"Content-Length: (\d+)", headers).group(1))
            await reader.readexactly(length)
        writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(conn() for _ in range(connections)))
    return per_conn * connections / (time.perf_counter() - start)


# ---------------------------------------------------------------------------------------------------- one run each
def timed_run(argv: list[str], pin: bool) -> tuple[subprocess.CompletedProcess, float, float, float]:
    """(result, wall seconds, user + sys CPU seconds, peak resident MiB) of one client process (taskset execs it:
    wait4 on its pid measures it alone)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen((["taskset", "-c", "0"] if pin else []) + argv, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - start
        out.seek(0), err.seek(0)
        res = subprocess.CompletedProcess(argv, proc.returncode, out.read(), err.read())
    if res.returncode != 0:
        raise SystemExit(f"{argv[:4]} failed:\n{res.stderr}")
    return res, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def run_client(who: str, url: str, model: str, inp: Path, out: Path, c: int, max_tokens: int, pin: bool) -> dict:
    n = sum(1 for _ in inp.open())
    if who == "kit":
        argv = [sys.executable, "-m", "pipeline_kit.inference.generate", f"++input_file={inp}", f"++output_file={out}"]
        argv += [f"++server.base_url={url}", f"++server.model={model}", "++prompt_config=generic/default"]
        argv += [f"++max_concurrent_requests={c}", f"++inference.tokens_to_generate={max_tokens}"]
        argv += ["++progress_every=100000", "++rerun_done=true"]  # progress: one line, at the end
        res, wall, cpu, peak = timed_run(argv, pin)
        request_rps = float(re.findall(r"([\d.]+) samples/s", res.stderr)[-1])
    else:
        transport = "aiohttp" if who == "openai+aiohttp" else "httpx"
        argv = [sys.executable, __file__, "--baseline_client", url, model, str(inp), str(out), str(c), str(max_tokens)]
        res, wall, cpu, peak = timed_run([*argv, transport], pin)
        request_rps = n / json.loads(res.stdout.splitlines()[-1])["request_phase_s"]
    tokens = sum(json.loads(line).get("num_generated_tokens", 0) for line in out.open()) if who == "kit" else 0
    return {"request_rps": request_rps, "e2e_rps": n / wall, "wall_s": wall, "cpu_s": cpu, "peak_mib": peak,
            "tokens": tokens}  # fmt: skip


def span(values: list[float], fmt: str) -> str:
    return f"{format(statistics.median(values), fmt)} ({format(min(values), fmt)}–{format(max(values), fmt)})"


def report(results: dict[tuple[int, str], list[dict]], concurrency: list[int], rounds: int) -> None:
    print(f"\nmedian (min–max) over {rounds} rounds; ratios within a round, above 1 = kit better")
    print("| concurrency | figure | openai | openai+aiohttp | kit | kit / openai | kit / openai+aiohttp |")
    print("|---|---|---|---|---|---|---|")
    figures = (("request_rps", "request phase, req/s", ".0f"), ("e2e_rps", "end to end, req/s", ".0f"))
    figures += (("wall_s", "process wall, s", ".2f"), ("cpu_s", "process CPU, s", ".2f"))
    figures += (("peak_mib", "peak resident, MiB", ".0f"),)
    for c in concurrency:
        runs = {who: results[(c, who)] for who in CLIENTS}
        for key, name, fmt in figures:
            cols = [span([r[key] for r in runs[who]], fmt) for who in CLIENTS]
            ratios = []
            for base in ("openai", "openai+aiohttp"):
                pairs = zip(runs[base], runs["kit"], strict=True)
                if key in ("request_rps", "e2e_rps"):
                    ratios.append(span([k[key] / b[key] for b, k in pairs], ".2f"))
                elif key == "cpu_s":
                    ratios.append(span([b[key] / k[key] for b, k in pairs], ".2f"))
                else:
                    ratios.append("")
            print(f"| {c} | {name} | {' | '.join(cols)} | {' | '.join(ratios)} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", choices=["stub", "vllm"], default="stub")
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[64, 512])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--max_tokens", type=int, default=8)
    ap.add_argument("--answer_tokens", type=int, default=0, help="the stub answers this many tokens (0: 4)")
    ap.add_argument("--no_pin", action="store_true", help="do not pin the stub and the clients to separate cores")
    ap.add_argument("--baseline_client", nargs=7, metavar="ARG", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.baseline_client:
        baseline_main(args.baseline_client)
        return

    pin = args.server == "stub" and not args.no_pin and shutil.which("taskset") and (os.cpu_count() or 1) >= 2
    pin = bool(pin)
    work = Path(tempfile.mkdtemp(prefix="bench-client-"))
    inp = work / "in.jsonl"
    inp.write_text("".join(json.dumps({"id": i, "problem": f"What is 0+{i}?"}) + "\n" for i in range(args.requests)))
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    if args.server == "stub":
        server, model = start_stub(port, pin, args.answer_tokens), "stub"
        args.max_tokens = max(args.max_tokens, args.answer_tokens)
        wait_ready(url, server, 30)
        probe = f"import asyncio, bench_client as b; print(asyncio.run(b.raw_load({port}, 6400, 64)))"
        argv = (["taskset", "-c", "0"] if pin else []) + [sys.executable, "-c", probe]
        raw = subprocess.run(argv, cwd=HERE, capture_output=True, text=True, check=True)
        print(f"stub capacity: {float(raw.stdout):.0f} req/s to a raw-socket client (64 connections)")
    else:
        why = vllm_ready()
        if why:
            raise SystemExit(f"vLLM figure pending: {why}")
        server, model = start_vllm(port, work / "vllm.log"), "tiny"
        t = time.monotonic()
        wait_ready(url, server, 900)
        print(f"vLLM ready after {time.monotonic() - t:.0f} s (log: {work / 'vllm.log'})")
    warm = work / "warm.jsonl"  # first requests (vLLM: first batches) and first imports, outside the rounds
    warm.write_text("".join(json.dumps({"id": i, "problem": f"What is 1+{i}?"}) + "\n" for i in range(64)))
    run_client("openai", url, model, warm, work / "out-warm.jsonl", 64, args.max_tokens, pin)
    print(f"server={args.server} requests={args.requests} max_tokens={args.max_tokens} pinned={pin} work={work}")
    results: dict[tuple[int, str], list[dict]] = {(c, who): [] for c in args.concurrency for who in CLIENTS}
    try:
        for r in range(args.rounds):
            for c in args.concurrency:
                for who in CLIENTS if r % 2 == 0 else CLIENTS[::-1]:
                    out = work / f"out-{who}-{c}.jsonl"
                    res = run_client(who, url, model, inp, out, c, args.max_tokens, pin)
                    results[(c, who)].append(res)
                    print(
                        f"round {r + 1} c={c:<4} {who:<15} request phase {res['request_rps']:6.0f} req/s   "
                        f"wall {res['wall_s']:6.2f} s ({res['e2e_rps']:4.0f} req/s end to end)   "
                        f"CPU {res['cpu_s']:6.2f} s",
                        flush=True,
                    )
    finally:
        stop(server, group=args.server == "vllm")
    report(results, args.concurrency, args.rounds)
    if args.answer_tokens:
        for c in args.concurrency:
            for who in CLIENTS:
                per_k = [r["cpu_s"] / (args.requests * args.answer_tokens / 1000) for r in results[(c, who)]]
                print(f"| {c} | {who} | CPU ms per 1,000 output tokens | {span([1000 * v for v in per_k], '.2f')} |")
        kit_tokens = {r["tokens"] for c in args.concurrency for r in results[(c, "kit")]}
        print(
            f"kit's records: {sorted(kit_tokens)} num_generated_tokens in all (expected {args.requests * args.answer_tokens})"
        )


if __name__ == "__main__":
    main()
