"""Progress of a generation unit: a bar with samples/s and ETA on a terminal, a line every N seconds otherwise."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total: int, already: int, every_s: float, stream=sys.stderr):
        self.total, self.done, self.every_s, self.stream = total, already, every_s, stream
        self.start_done = already
        self.start = self.last = time.monotonic()
        self.tty = stream.isatty()

    def advance(self) -> None:
        self.done += 1
        now = time.monotonic()
        if self.tty or now - self.last >= self.every_s or self.done == self.total:
            self.last = now
            self._show(now)

    def _show(self, now: float) -> None:
        rate = (self.done - self.start_done) / max(now - self.start, 1e-9)
        eta = (self.total - self.done) / rate if rate > 0 else float("inf")
        stats = f"{self.done}/{self.total} samples, {rate:.1f} samples/s, ETA {eta:.0f} s"
        if self.tty:
            width = 30
            filled = int(width * self.done / max(self.total, 1))
            end = "\n" if self.done == self.total else ""
            self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {stats}{end}")
        else:
            self.stream.write(f"kit generate: {stats}\n")
        self.stream.flush()
