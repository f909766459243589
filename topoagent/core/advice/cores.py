"""Whole cores: CPU sets cut at core boundaries, so SMT siblings always stay together.

A core is the set of its hardware threads (``topology/thread_siblings_list``).  Cores are
ordered as hwloc numbers them logically (``lstopo -l``, "Core L#"): by package, then by their
first thread, which is also the order Slurm's ``gres.conf`` ``Cores=`` counts in.  Where the
kernel did not say which threads share a core, each CPU is its own core.

Pure functions of values; nothing here reads the host.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from topoagent.core.cpuset import CpuSet
from topoagent.core.errors import InputError
from topoagent.core.snapshot import Cpu

__all__ = [
    "Split",
    "complexes_in",
    "cores_in",
    "host_cores",
    "logical_cores",
    "reserve",
    "split_cores",
    "split_units",
    "threads_known",
]

_NO_PACKAGE = 1 << 30


def host_cores(cpus: Sequence[Cpu]) -> tuple[CpuSet, ...]:
    """Every core of the host, in hwloc's logical order (package, then first thread)."""
    package = {c.id: c.package for c in cpus}
    seen: set[int] = set()
    cores: list[CpuSet] = []
    for c in sorted(cpus, key=lambda x: x.id):
        if c.id in seen:
            continue
        core = c.siblings if c.siblings is not None and c.id in c.siblings else CpuSet((c.id,))
        seen.update(core)
        cores.append(core)
    return tuple(sorted(cores, key=lambda k: (_pkg(package.get(k.first or 0)), k.first or 0)))


def threads_known(cpus: Sequence[Cpu]) -> bool:
    """Whether every CPU's core (its thread siblings) is known, so sets can be cut at cores."""
    return bool(cpus) and all(c.siblings is not None for c in cpus)


def _pkg(p: int | None) -> int:
    return _NO_PACKAGE if p is None else p


def cores_in(cores: Sequence[CpuSet], cpus: CpuSet) -> tuple[CpuSet, ...]:
    """The cores that ``cpus`` touches, each cut down to the threads ``cpus`` holds (a
    cpuset that allows one thread of a core gives that thread alone: never widened).

    CPUs that belong to no known core (the core list is incomplete) come last, one each.
    """
    out = [core & cpus for core in cores if core & cpus]
    known = CpuSet().union(*cores) if cores else CpuSet()
    out.extend(CpuSet((c,)) for c in cpus - known)
    return tuple(out)


def reserve(cores: Sequence[CpuSet], count: int) -> tuple[CpuSet, tuple[CpuSet, ...]]:
    """Set aside the first ``count`` cores (for the OS and daemons): (reserved, the rest).

    At least one core is always left: a reservation never takes a node's last core.
    """
    if count <= 0 or not cores:
        return CpuSet(), tuple(cores)
    take = min(count, len(cores) - 1)
    return CpuSet().union(*cores[:take]), tuple(cores[take:])


class Split(msgspec.Struct, frozen=True):
    """``parts`` disjoint sets of whole cores; ``shared`` when there were fewer cores than
    parts, so some parts share a core (round robin) rather than get none."""

    parts: tuple[CpuSet, ...]
    shared: bool = False


def split_cores(cores: Sequence[CpuSet], parts: int) -> Split:
    """Cut ``cores`` (in order) into ``parts`` runs of whole cores, as even as possible; the
    remainder goes to the first parts.  With fewer cores than parts, each part gets one core
    round robin and ``shared`` is set: a part is never empty while there is a core.
    """
    if parts <= 0:
        raise InputError("parts must be positive")
    n = len(cores)
    if n == 0:
        return Split(tuple(CpuSet() for _ in range(parts)))
    if n < parts:
        return Split(tuple(cores[i % n] for i in range(parts)), shared=True)
    each, extra = divmod(n, parts)
    sizes = [each + (1 if j < extra else 0) for j in range(parts)]
    out, start = [], 0
    for size in sizes:
        out.append(CpuSet().union(*cores[start : start + size]))
        start += size
    return Split(tuple(out))


def complexes_in(cores: Sequence[CpuSet], domains: Sequence[CpuSet]) -> tuple[CpuSet, ...]:
    """``cores`` grouped by the L3 domain (core complex) holding each: one set per domain that
    holds any of them, the union of those cores, in the order the cores come; a core in no
    known domain is a group of its own."""
    groups: dict[int, list[CpuSet]] = {}
    for core in cores:
        home = next((i for i, d in enumerate(domains) if core & d), None)
        groups.setdefault(home if home is not None else -1 - len(groups), []).append(core)
    return tuple(CpuSet().union(*members) for members in groups.values())


def split_units(units: Sequence[CpuSet], parts: int, cores: Sequence[CpuSet]) -> Split:
    """Cut ``units`` (core complexes, in order) into ``parts``: runs of whole units where there
    are at least as many units as parts (:func:`split_cores` on the units); otherwise the parts
    are spread over the units as evenly as they go (the first units take one more) and the
    parts on one unit share out its whole ``cores`` -- a part never straddles two units."""
    if len(units) >= parts or not units:
        return split_cores(units, parts)
    each, extra = divmod(parts, len(units))
    out: list[CpuSet] = []
    shared = False
    for j, unit in enumerate(units):
        piece = split_cores(cores_in(cores, unit), each + (1 if j < extra else 0))
        out.extend(piece.parts)
        shared = shared or piece.shared
    return Split(tuple(out), shared)


def logical_cores(cores: Sequence[CpuSet], cpus: CpuSet) -> CpuSet:
    """The logical indices (hwloc "Core L#", Slurm's ``Cores=``) of the cores ``cpus`` touches."""
    return CpuSet(i for i, core in enumerate(cores) if core & cpus)
