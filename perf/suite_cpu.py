"""Where the test suite's CPU goes: every process that ran, its CPU time (the kernel's process accounting) and what
it was (its command line, sampled while it ran), summed by kind and by test.

    apt-get install -y acct                  # accton: the kernel writes one record per process that exits
    touch /tmp/pacct && accton /tmp/pacct
    python perf/suite_cpu.py sample /tmp/pids.tsv &      # new processes' command lines, every 0.5 s
    python -m pytest -q tests                            # the run to account for
    accton off; kill %1
    python perf/suite_cpu.py report /tmp/pacct /tmp/pids.tsv

A process shorter than the sampling interval has no command line of its own: it counts as its nearest sampled
ancestor's kind, else by its name. Daemons that outlive the run (slurmd, dockerd) have no record.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import struct
import time
from pathlib import Path

# struct acct_v3 (linux/acct.h): 64 bytes; CPU times are comp_t (13-bit mantissa, base-8 exponent) in 1/100 s
ACCT_V3 = struct.Struct("<BBHIIIIIIf8H16s")
KINDS = [
    (r"pipeline_kit[./]training|\btrl\b", "trainer"),
    (r"pipeline_kit[./]inference[./]generate|client_forkserver", "generation client"),
    (r"vllm\.entrypoints|VLLM::|venv-vllm/bin/python -c from multiprocessing", "vLLM server"),
    (r"pipeline_kit[./]servers", "kit's transformers/reward servers"),
    (r"pipeline_kit[./]sandbox|sandbox_server", "sandbox"),
    (r"pipeline_kit[./](grading|evaluation)", "grading"),
    (r"/kit (\S+)", "kit {}"),
    (r"xdist|pytest", "pytest workers (tests run in-process)"),
    (r"slurm|srun|sbatch|sacct|squeue|scontrol|mariadb|munge", "Slurm"),
    (r"docker|containerd|runc", "Docker"),
    (r"enroot|squashfs|pyxis", "enroot"),
    (r"chrom", "Chromium"),
]
TEST_DIR = re.compile(r"popen-gw\d+/([^/ ]+)")


def sample(out: Path, interval: float) -> None:
    seen: set[tuple[str, str]] = set()
    with out.open("w", buffering=1) as f:
        while True:
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                    key = (pid, fields[19])  # pid and start time: a reused pid is a new process
                    if key in seen:
                        continue
                    seen.add(key)
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                except (OSError, IndexError):
                    continue
                f.write(f"{pid}\t{fields[1]}\t{fields[19]}\t{cmd[:300]}\n")
            time.sleep(interval)


def comp_t(value: int) -> int:
    return (value & 0x1FFF) << (3 * (value >> 13))


def kind_of(text: str) -> str | None:
    for pattern, name in KINDS:
        if m := re.search(pattern, text):
            return name.format(*m.groups())
    return None


def report(pacct: Path, pids: Path, only_kind: str | None = None, rows: int = 20) -> None:
    boot = next(int(line.split()[1]) for line in open("/proc/stat") if line.startswith("btime"))
    seen = collections.defaultdict(list)  # pid -> [(start, ppid, cmdline)]
    for line in pids.read_text(errors="replace").splitlines():
        parts = line.split("\t", 3)
        if len(parts) == 4:
            seen[int(parts[0])].append((boot + int(parts[2]) / 100, int(parts[1]), parts[3]))

    def nearest(pid: int, at: float):
        found = seen.get(pid, ())
        return min(found, key=lambda s: abs(s[0] - at)) if found else None

    by_kind, count, by_test = collections.Counter(), collections.Counter(), collections.Counter()
    tests_count = collections.Counter()
    data = pacct.read_bytes()
    for i in range(0, len(data) - ACCT_V3.size + 1, ACCT_V3.size):
        rec = ACCT_V3.unpack_from(data, i)
        pid, ppid, start, utime, stime, comm = rec[6], rec[7], rec[8], rec[10], rec[11], rec[18]
        cpu = (comp_t(utime) + comp_t(stime)) / 100
        own = nearest(pid, start)
        own = own if own and abs(own[0] - start) < 3 else None
        kind = kind_of(own[2]) if own else None
        test = TEST_DIR.search(own[2]) if own else None
        kind = kind or kind_of(comm.split(b"\0")[0].decode(errors="replace"))
        parent, at = (own[1], own[0]) if own else (ppid, start)
        for _ in range(12):  # up the sampled ancestry, for what is still unknown
            if (kind and test) or parent <= 1 or not (anc := nearest(parent, at)):
                break
            kind = kind or kind_of(anc[2])
            test = test or TEST_DIR.search(anc[2])
            parent, at = anc[1], anc[0]
        kind = kind or "other: " + comm.split(b"\0")[0].decode(errors="replace")
        by_kind[kind] += cpu
        count[kind] += 1
        if only_kind is None or kind == only_kind:
            by_test[test[1] if test else "(no test folder)"] += cpu
            tests_count[test[1] if test else "(no test folder)"] += 1
    total = sum(by_kind.values())
    print(f"{sum(count.values())} processes, {total / 60:.1f} CPU-min")
    for kind, cpu in by_kind.most_common(25):
        print(f"{cpu / 60:7.2f} CPU-min {100 * cpu / total:5.1f}% {count[kind]:7d} processes  {kind}")
    print(f"by test (its tmp_path folder){f', {only_kind} only' if only_kind else ''}:")
    for test, cpu in by_test.most_common(rows):
        print(f"{cpu / 60:7.2f} CPU-min {tests_count[test]:7d} processes  {test}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    s = sub.add_parser("sample", help="write new processes' command lines to OUT until killed")
    s.add_argument("out", type=Path)
    s.add_argument("--interval", type=float, default=0.5)
    r = sub.add_parser("report", help="CPU by kind and by test")
    r.add_argument("pacct", type=Path)
    r.add_argument("pids", type=Path)
    r.add_argument("--kind", help="count only processes of this kind in the by-test table (e.g. 'generation client')")
    r.add_argument("--rows", type=int, default=20, help="rows of the by-test table")
    args = parser.parse_args()
    if args.what == "sample":
        sample(args.out, args.interval)
    else:
        report(args.pacct, args.pids, args.kind, args.rows)


if __name__ == "__main__":
    main()
