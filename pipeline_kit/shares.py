"""Cutting a list into n consecutive shares whose lengths differ by at most one: how jobs share generation units
and how GenSelect's tournament cuts its windows (a rerun must cut them the same way)."""

from __future__ import annotations


def even_shares(items: list, n: int) -> list[list]:
    """`items` in `n` consecutive shares whose lengths differ by at most one (the longer ones first)."""
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(items[start:end])
        start = end
    return out
