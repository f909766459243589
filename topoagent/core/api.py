"""The typed API: one orchestration for every command, and the calls API users make.

>>> from topoagent.core.api import scan
>>> result = scan("/")                          # doctest: +SKIP
>>> result.path("gpu0", "nic0").token           # doctest: +SKIP
'PIX'

:func:`run` is the one orchestration: ``scan``, ``plan``, ``exec``, ``draw``, ``vms`` and the
daemon all get their :class:`~topoagent.core.result.ScanResult` from it.  It runs the registered
sources (:data:`SOURCES`) that the inputs call for, times each, and hands
the snapshot to the pure :func:`~topoagent.core.result.analyse`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import msgspec

from topoagent.core.findings.crosscheck import compare
from topoagent.core.inputs import NVML_AUTO, Inputs
from topoagent.core.paste import collect as paste_collect
from topoagent.core.paste import read_offline as read
from topoagent.core.read import Collection, cache, nvml, sysfs, tools
from topoagent.core.read.archive import resolve_root
from topoagent.core.result import ScanResult, analyse, with_timings
from topoagent.core.snapshot import Snapshot

__all__ = [
    "SOURCES",
    "Inputs",
    "ScanResult",
    "Source",
    "analyse",
    "collect",
    "read_host",
    "read_offline",
    "run",
    "scan",
]


class Source(msgspec.Struct, frozen=True):
    """A source of evidence: its name (in timings and statuses), what it does, when it runs."""

    name: str
    collect: Callable[[Collection], None]
    wanted: Callable[[Inputs], bool]


#: The sources, in the order they run: the primary one (sysfs, or pasted text) sets the
#: snapshot, the others enrich it.
SOURCES: tuple[Source, ...] = (
    Source("sysfs", sysfs.collect, lambda i: not i.offline),
    Source("cache", cache.collect, lambda i: not i.offline),
    Source("offline", paste_collect, lambda i: i.offline),
    Source("nvml", nvml.collect, nvml.wanted),
    Source("cross-check", tools.collect, lambda i: i.cross_check),
)


def collect(inputs: Inputs) -> tuple[Collection, dict[str, float]]:
    """Run every source the inputs call for; the collection and each source's seconds.

    Raises :class:`~topoagent.core.errors.TopoagentError` when nothing can be read (a root that is
    no sysfs tree, pasted text that holds no tool output); every other failure is a probe error
    or a source status inside the snapshot.
    """
    c = Collection(inputs)
    timings: dict[str, float] = {}
    for source in SOURCES:
        if source.wanted(inputs):
            start = time.perf_counter()
            source.collect(c)
            timings[source.name] = time.perf_counter() - start
    return c, timings


def run(inputs: Inputs) -> ScanResult:
    """Read what ``inputs`` names and analyse it: the one path from inputs to a result."""
    c, timings = collect(inputs)
    tool_findings = None
    if c.views:
        tool_findings = compare(c.views)
    start = time.perf_counter()
    result = analyse(c.require_snapshot(), tool_findings=tool_findings)
    timings["analyse"] = time.perf_counter() - start
    return with_timings(result, timings)


def scan(root: str | os.PathLike[str] = "/", *, nvml: Any = NVML_AUTO) -> ScanResult:
    """Read and analyse the host tree at ``root`` (``nvml`` as in :class:`Inputs`): a directory,
    or a capture archive (``topoagent capture``), read into memory for this scan (never
    unpacked to disk) and named by its own path in the result."""
    return run(Inputs(root=resolve_root(os.fspath(root)), nvml=nvml))


def read_host(root: str | os.PathLike[str] = "/", *, nvml: Any = NVML_AUTO) -> Snapshot:
    """The snapshot of the host tree at ``root`` (a directory or a capture archive, as
    :func:`scan` reads it), not analysed."""
    c, _ = collect(Inputs(root=resolve_root(os.fspath(root)), nvml=nvml))
    return c.require_snapshot()


def read_offline(
    nvidia_smi_topo: str | None = None, lspci_tree: str | None = None, lspci_verbose: str | None = None
) -> Snapshot:
    """The snapshot of pasted ``nvidia-smi topo -m`` / ``lspci -tv`` / ``lspci -vvv`` text."""
    return read(nvidia_smi_topo, lspci_tree, lspci_verbose)
