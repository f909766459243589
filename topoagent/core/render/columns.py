"""Plain-text columns, for the renderers that print a table for a person (plan, vms)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["columns"]


def columns(rows: Sequence[Sequence[str]]) -> list[str]:
    """Each row as one line, cells left-aligned to their column's widest, two spaces apart."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
