"""A free TCP port for a server to listen on, chosen below the kernel's ephemeral range, so that no outgoing
connection on the host (a client's local port) takes it between the choice and the server's bind. Standard library
only, and run as a file by job scripts (`python3 .../ports.py` prints one), whatever Python the job's image has."""

from __future__ import annotations

import random
import socket

LOWEST = 10000  # below this sit well-known services; above the ephemeral range's start, clients' local ports
_TRIES = 64


def ephemeral_range() -> tuple[int, int]:
    """The kernel's range for outgoing connections' local ports (Linux's default where it cannot be read)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("", port))  # all interfaces, as a server binds 0.0.0.0: one listening on 127.0.0.1 clashes too
        except OSError:
            return False
        return True


def free_port() -> int:
    """A port nothing listens on now, below the ephemeral range (where only another server's choice can take it
    before the bind); the kernel's own choice when that range leaves no room below it."""
    low, _ = ephemeral_range()
    if low - LOWEST >= 1000:
        for port in random.sample(range(LOWEST, low), _TRIES):
            if _bindable(port):
                return port
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    print(free_port())
