"""CPU sets in the kernel's two spellings: lists (``0-3,8``) and hex masks (``00ff,0000000f``)."""

from __future__ import annotations

from collections.abc import Iterable


class CpuSetError(ValueError):
    """Text that is neither a CPU list nor a CPU mask."""


def parse_cpulist(text: str) -> frozenset[int]:
    """Parse the kernel's list format (``0-3,8,10-11``; empty means no CPU)."""
    cpus: set[int] = set()
    for chunk in text.strip().split(","):
        chunk = chunk.strip()
        if not chunk:
            continue
        lo, sep, hi = chunk.partition("-")
        try:
            if sep:
                first, last = int(lo), int(hi)
                if last < first:
                    raise CpuSetError(f"bad CPU range {chunk!r}")
                cpus.update(range(first, last + 1))
            else:
                cpus.add(int(lo))
        except ValueError as exc:
            raise CpuSetError(f"bad CPU list {text!r}") from exc
    return frozenset(cpus)


def parse_cpumask(text: str) -> frozenset[int]:
    """Parse the kernel's hex mask (comma-separated 32-bit words, most significant first)."""
    digits = text.strip().replace(",", "")
    if not digits:
        return frozenset()
    try:
        value = int(digits, 16)
    except ValueError as exc:
        raise CpuSetError(f"bad CPU mask {text!r}") from exc
    return frozenset(i for i in range(value.bit_length()) if value >> i & 1)


def format_cpulist(cpus: Iterable[int]) -> str:
    """Format CPUs in the kernel's list format, ranges merged (``""`` for none)."""
    ordered = sorted(set(cpus))
    out: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)
