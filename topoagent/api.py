"""The typed API: scan a host (or a fake root) and analyse it.  The CLI is a thin layer on this.

>>> from topoagent.api import scan
>>> result = scan("/")                     # doctest: +SKIP
>>> [p.token for p in result.paths]        # doctest: +SKIP
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from topoagent.analysis.paths import Path, all_paths
from topoagent.hostfs import HostFS
from topoagent.snapshot import Snapshot
from topoagent.sources.sysfs import read_sysfs
from topoagent.topology import Topology, build_topology


@dataclass(frozen=True)
class ScanResult:
    """A scan and everything derived from it."""

    snapshot: Snapshot
    topology: Topology
    paths: tuple[Path, ...]


def read_host(root: str | os.PathLike[str] = "/") -> Snapshot:
    """Read a snapshot of the host tree at ``root``.

    Raises :class:`~topoagent.hostfs.NotAHostTree` when ``root`` holds no sysfs tree; every
    other failure is a probe error inside the snapshot.
    """
    return read_sysfs(HostFS(root))


def analyse(snapshot: Snapshot) -> ScanResult:
    """Build the topology of a snapshot and analyse it (pure)."""
    topo = build_topology(snapshot)
    return ScanResult(snapshot=snapshot, topology=topo, paths=all_paths(topo))


def scan(root: str | os.PathLike[str] = "/") -> ScanResult:
    """Read and analyse the host at ``root``."""
    return analyse(read_host(root))
