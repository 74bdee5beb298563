"""TIR-like sessions against a running sandbox server (see perf/README.md, Sandbox): N samples start at random times
over 3 s; each runs a cell that draws a random number, then twice "thinks" (sleeps 0.2-1 s, as a sample generates
between code rounds) and prints that number in its session. Counts the client's replays of lost sessions and the
samples that printed two different numbers (their session was rebuilt by a replay that drew another one).

  python -m pipeline_kit.sandbox.server --port 6130 --max_sessions 16 &
  python perf/sandbox_sessions.py http://127.0.0.1:6130 48"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline_kit.sandbox.client import SandboxClient  # noqa: E402


async def main(address: str, samples: int) -> None:
    replays = []
    client = SandboxClient(address, max_connections=samples, log=lambda m: replays.append(m) if "replayed" in m else 0)

    async def sample(i: int) -> bool:
        session = f"sample-{i}-{time.monotonic_ns()}"
        await asyncio.sleep(random.uniform(0, 3))
        await client.execute("import random\nx = random.random()", session_id=session)
        printed = []
        for _ in range(2):
            await asyncio.sleep(random.uniform(0.2, 1.0))
            printed.append((await client.execute("print(x)", session_id=session))["stdout"])
        await client.delete_session(session)
        return printed[0] != printed[1]

    start = time.perf_counter()
    changed = await asyncio.gather(*(sample(i) for i in range(samples)))
    await client.close()
    print(
        f"{samples} samples: {len(replays)} sessions replayed, {sum(changed)} samples saw their number change, "
        f"{time.perf_counter() - start:.1f} s"
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
