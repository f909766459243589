"""CPU sets: the one type for a set of logical CPUs, and the kernel's two spellings of one.

The kernel writes CPU sets as lists (``0-3,8``: ``cpulist``, ``local_cpulist``,
``Cpus_allowed_list``) and as hex masks (``00ff,0000000f``: ``local_cpus``, ``cpumap``).
:class:`CpuSet` stores a set as one integer bit mask: immutable, hashable, compact (a
512-CPU node is 64 bytes, not 512 objects) and fast to intersect.

Parsing is bounded: no CPU id may reach :data:`MAX_CPUS`, so text such as ``0-999999999`` is
refused instead of exhausting memory.  Linux's own ceiling is ``NR_CPUS`` = 8192
(``CONFIG_MAXSMP``, arch/x86/Kconfig); the bound leaves room above it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from typing import Any

from topoagent.core.digits import decimal, is_hex
from topoagent.core.errors import InputError

__all__ = ["MAX_CPUS", "CpuSet", "CpuSetError", "format_cpulist", "parse_cpulist", "parse_cpumask"]

#: CPU ids must be below this.  Linux allows at most 8192 (CONFIG_NR_CPUS with MAXSMP).
MAX_CPUS = 16384


class CpuSetError(InputError):
    """Text that is neither a CPU list nor a CPU mask, or names a CPU past :data:`MAX_CPUS`."""


class CpuSet(AbstractSet[int]):
    """An immutable set of CPU ids.  ``str()`` gives the kernel's list format (``0-3,8``).

    Compares equal to a ``set``/``frozenset`` of the same ids, and hashes like one.
    """

    __slots__ = ("_cached_hash", "_mask")
    _mask: int
    _cached_hash: int | None

    def __init__(self, cpus: Iterable[int] = ()) -> None:
        if isinstance(cpus, CpuSet):
            mask = cpus._mask
        else:
            mask = 0
            for c in cpus:
                if not 0 <= c < MAX_CPUS:
                    raise CpuSetError(f"CPU {c} out of range (0..{MAX_CPUS - 1})")
                mask |= 1 << c
        self._mask = mask
        self._cached_hash = None

    @classmethod
    def _of_mask(cls, mask: int) -> CpuSet:
        out = cls.__new__(cls)
        out._mask = mask
        out._cached_hash = None
        return out

    # -- parsing --------------------------------------------------------------------------
    @classmethod
    def parse(cls, text: str) -> CpuSet:
        """The kernel's list format (``0-3,8,10-11``; empty text is the empty set)."""
        mask = 0
        for chunk in text.strip().split(","):
            chunk = chunk.strip()
            if not chunk:
                continue
            lo, sep, hi = chunk.partition("-")
            first, last = _cpu_id(lo, text), (_cpu_id(hi, text) if sep else None)
            if last is None:
                mask |= 1 << first
                continue
            if last < first:
                raise CpuSetError(f"bad CPU range {chunk!r}")
            mask |= ((1 << (last - first + 1)) - 1) << first
        return cls._of_mask(mask)

    @classmethod
    def parse_mask(cls, text: str) -> CpuSet:
        """The kernel's hex mask (comma-separated 32-bit words, most significant first)."""
        digits = text.strip().replace(",", "")
        if not digits:
            return cls._of_mask(0)
        if len(digits) > MAX_CPUS // 4 + 8 or not is_hex(digits):
            raise CpuSetError(f"bad CPU mask {text[:80]!r}")
        value = int(digits, 16)
        if value >> MAX_CPUS:
            raise CpuSetError(f"CPU mask names CPUs past {MAX_CPUS - 1}")
        return cls._of_mask(value)

    # -- set protocol ---------------------------------------------------------------------
    def __contains__(self, cpu: object) -> bool:
        return isinstance(cpu, int) and cpu >= 0 and bool(self._mask >> cpu & 1)

    def __iter__(self) -> Iterator[int]:
        mask = self._mask
        while mask:
            low = mask & -mask
            yield low.bit_length() - 1
            mask ^= low

    def __len__(self) -> int:
        return self._mask.bit_count()

    def __bool__(self) -> bool:
        return self._mask != 0

    def _other(self, other: Any) -> int | None:
        if isinstance(other, CpuSet):
            return other._mask
        if isinstance(other, AbstractSet):
            try:
                return CpuSet(other)._mask
            except (CpuSetError, TypeError):
                return None
        return None

    def __and__(self, other: AbstractSet[Any]) -> CpuSet:
        m = self._other(other)
        return NotImplemented if m is None else CpuSet._of_mask(self._mask & m)

    def __or__(self, other: AbstractSet[Any]) -> CpuSet:
        m = self._other(other)
        return NotImplemented if m is None else CpuSet._of_mask(self._mask | m)

    def __sub__(self, other: AbstractSet[Any]) -> CpuSet:
        m = self._other(other)
        return NotImplemented if m is None else CpuSet._of_mask(self._mask & ~m)

    __rand__ = __and__
    __ror__ = __or__

    def __le__(self, other: AbstractSet[Any]) -> bool:
        m = self._other(other)
        return NotImplemented if m is None else self._mask & ~m == 0

    def __lt__(self, other: AbstractSet[Any]) -> bool:
        m = self._other(other)
        return NotImplemented if m is None else (self._mask & ~m == 0 and self._mask != m)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, CpuSet):
            return self._mask == other._mask
        if isinstance(other, AbstractSet):
            return self._other(other) == self._mask and len(other) == len(self)
        return NotImplemented

    def __hash__(self) -> int:
        if self._cached_hash is None:
            self._cached_hash = hash(frozenset(self))  # equal to an equal frozenset's hash
        return self._cached_hash

    def union(self, *others: Iterable[int]) -> CpuSet:
        """This set with every CPU of ``others`` added."""
        mask = self._mask
        for o in others:
            mask |= CpuSet(o)._mask
        return CpuSet._of_mask(mask)

    # -- text -----------------------------------------------------------------------------
    def __str__(self) -> str:
        """The kernel's list format, ranges merged (``""`` for no CPU)."""
        out: list[str] = []
        mask, pos = self._mask, 0
        while mask:
            skip = (mask & -mask).bit_length() - 1
            mask >>= skip
            pos += skip
            run = (~mask & (mask + 1)).bit_length() - 1  # length of the run of ones
            out.append(str(pos) if run == 1 else f"{pos}-{pos + run - 1}")
            mask >>= run
            pos += run
        return ",".join(out)

    def mask(self) -> str:
        """The kernel's hex mask spelling (``cpumap``): 32-bit words, most significant first."""
        words, mask = [], self._mask
        while True:
            words.append(f"{mask & 0xFFFFFFFF:08x}")
            mask >>= 32
            if not mask:
                return ",".join(reversed(words))

    def __repr__(self) -> str:
        return f"CpuSet({str(self)!r})"

    @property
    def first(self) -> int | None:
        """The lowest CPU id, or None for the empty set."""
        return (self._mask & -self._mask).bit_length() - 1 if self._mask else None


def _cpu_id(text: str, whole: str) -> int:
    t = text.strip()
    value = decimal(t, digits=6)  # ASCII digits only: "²" and "١" are no CPU ids
    if value is None:
        raise CpuSetError(f"bad CPU list {whole[:80]!r}")
    if value >= MAX_CPUS:
        raise CpuSetError(f"CPU {value} out of range (0..{MAX_CPUS - 1}) in {whole[:80]!r}")
    return value


def parse_cpulist(text: str) -> CpuSet:
    """Parse the kernel's list format (``0-3,8,10-11``; empty means no CPU)."""
    return CpuSet.parse(text)


def parse_cpumask(text: str) -> CpuSet:
    """Parse the kernel's hex mask (comma-separated 32-bit words, most significant first)."""
    return CpuSet.parse_mask(text)


def format_cpulist(cpus: Iterable[int]) -> str:
    """Format CPUs in the kernel's list format, ranges merged (``""`` for none)."""
    return str(cpus if isinstance(cpus, CpuSet) else CpuSet(cpus))
