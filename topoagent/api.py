"""The typed API: scan a host (or a fake root) and analyse it.  The CLI is a thin layer on this.

>>> from topoagent.api import scan
>>> result = scan("/")                     # doctest: +SKIP
>>> [p.token for p in result.paths]        # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

from topoagent.analysis.findings import Finding, Severity, find_all
from topoagent.analysis.paths import Path, all_paths
from topoagent.analysis.rails import RailPlan, plan_rails
from topoagent.advice.plan import Plan, make_plan
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
    rails: RailPlan
    findings: tuple[Finding, ...]
    plan: Plan

    def worst(self) -> Severity | None:
        """The most severe finding's severity, or None when there are none."""
        return max((f.severity for f in self.findings), default=None)


def read_host(root: str | os.PathLike[str] = "/", *, nvml: Any = "auto") -> Snapshot:
    """Read a snapshot of the host tree at ``root``.

    ``nvml``: ``"auto"`` asks NVML (nvidia-ml-py) only when scanning the live host (``/``),
    since NVML always describes the machine it runs on, never a fake root; ``None``/``False``
    skips it; a module-like object is used as ``pynvml`` (recordings in tests).

    Raises :class:`~topoagent.hostfs.NotAHostTree` when ``root`` holds no sysfs tree; every
    other failure is a probe error inside the snapshot.
    """
    snap = read_sysfs(HostFS(root))
    live = os.path.realpath(os.fspath(root)) == "/"
    if nvml == "auto":
        nvml = True if live else None
    if not nvml:
        return snap
    from topoagent.sources.nvml import probe_nvml

    probe = probe_nvml(None if nvml is True else nvml)
    return dataclasses.replace(
        snap,
        nvml_gpus=probe.gpus,
        driver_version=probe.driver_version,
        sources=snap.sources + (probe.source,),
        probe_errors=snap.probe_errors + probe.errors,
    )


def analyse(snapshot: Snapshot) -> ScanResult:
    """Build the topology of a snapshot and analyse it (pure)."""
    topo = build_topology(snapshot)
    paths = all_paths(topo)
    rails = plan_rails(topo, paths)
    return ScanResult(snapshot, topo, paths, rails, find_all(topo, paths, rails), make_plan(topo, rails))


def scan(root: str | os.PathLike[str] = "/", *, nvml: Any = "auto") -> ScanResult:
    """Read and analyse the host at ``root``."""
    return analyse(read_host(root, nvml=nvml))
