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


def read_offline(
    nvidia_smi_topo: str | None = None,
    lspci_tree: str | None = None,
    lspci_verbose: str | None = None,
) -> Snapshot:
    """A snapshot from pasted tool output instead of a host tree: the *texts* of
    ``nvidia-smi topo -m``, ``lspci -tv`` and ``lspci -vvv`` (any combination, at least one).

    Raises :class:`~topoagent.sources.offline.OfflineInputError` for text that is not that
    output (``input`` names the argument; the parser's error is its ``__cause__``), for blank
    text, and for outputs that cannot be one host.  Where a matrix and an lspci tree both give a
    pair's class and disagree, the source status says so: the two were matched by PCI bus order
    (an assumption).
    """
    from topoagent.parsers.lspci import LspciParseError, parse_lspci_tree, parse_lspci_verbose
    from topoagent.parsers.nvsmi_topo import TopoParseError, parse_topo_matrix
    from topoagent.sources.offline import OfflineInputError, combine

    def parse(name: str, text: str | None, parser: Any) -> Any:
        if text is None:
            return None
        if not text.strip():
            raise OfflineInputError("empty", input=name)
        try:
            return parser(text)
        except (TopoParseError, LspciParseError) as exc:
            raise OfflineInputError(str(exc), input=name) from exc

    matrix = parse("nvidia_smi_topo", nvidia_smi_topo, parse_topo_matrix)
    tree = parse("lspci_tree", lspci_tree, parse_lspci_tree)
    verbose = parse("lspci_verbose", lspci_verbose, parse_lspci_verbose)
    snap = combine(matrix, tree, verbose)
    if matrix is not None and (tree is not None or verbose is not None):
        snap = _check_matched_paths(snap)
    return snap


def _check_matched_paths(snap: Snapshot) -> Snapshot:
    """Compare the matrix's cells with the classes the lspci tree gives for the same pairs."""
    from topoagent.analysis.paths import PathClass, pcie_class

    topo = build_topology(snap)
    devs = [d for d in topo.devices if d.label is not None and d.root_bus is not None]
    differ = []
    for i, a in enumerate(devs):
        for b in devs[i + 1:]:
            token = topo.given_token(a, b)
            if token is None or token not in PathClass.__members__ or token in ("X", "NV"):
                continue  # NV# hides the PCIe class; "?" says nothing
            cls, known = pcie_class(topo, a, b)
            if known and cls.name != token:
                differ.append(f"{a.label}/{b.label} {token} in the matrix, {cls.name} from lspci")
    if not differ:
        return snap
    note = (f"matrix and lspci disagree on {len(differ)} pair(s) ({'; '.join(differ[:3])}"
            f"{'; …' if len(differ) > 3 else ''}): the bus-order match may be wrong; the matrix's classes are used")
    sources = tuple(
        dataclasses.replace(s, status="partial", detail=f"{s.detail}; {note}" if s.detail else note)
        if s.name == "nvidia-smi" else s
        for s in snap.sources
    )
    return dataclasses.replace(snap, sources=sources)


def analyse(snapshot: Snapshot) -> ScanResult:
    """Build the topology of a snapshot and analyse it (pure)."""
    topo = build_topology(snapshot)
    paths = all_paths(topo)
    rails = plan_rails(topo, paths)
    return ScanResult(snapshot, topo, paths, rails, find_all(topo, paths, rails), make_plan(topo, rails))


def scan(root: str | os.PathLike[str] = "/", *, nvml: Any = "auto") -> ScanResult:
    """Read and analyse the host at ``root``."""
    return analyse(read_host(root, nvml=nvml))



def cross_check(result: ScanResult, *, runners: dict[str, Any] | None = None, timeout: float = 10.0) -> ScanResult:
    """Compare a live scan with ``nvidia-smi topo -m`` and ``lspci -vvv`` run on this host.

    Tools that are missing or fail are source statuses (``unavailable``), not errors; every
    disagreement is a ``SOURCES_DISAGREE`` finding naming both sources.  ``runners`` maps
    ``"nvidia-smi"``/``"lspci"`` to callables returning a ``ToolResult`` (tests).
    """
    from topoagent.analysis.crosscheck import against_lspci, against_nvidia_smi
    from topoagent.analysis.findings import sort_findings
    from topoagent.parsers.lspci import LspciParseError, parse_lspci_verbose
    from topoagent.parsers.nvsmi_topo import TopoParseError, parse_topo_matrix
    from topoagent.snapshot import SourceStatus
    from topoagent.sources import tools

    checks = {
        "nvidia-smi": (tools.nvidia_smi_topo, lambda text: against_nvidia_smi(topo, result.paths, parse_topo_matrix(text))),
        "lspci": (tools.lspci_verbose, lambda text: against_lspci(topo, parse_lspci_verbose(text))),
    }
    topo = result.topology
    statuses, found = [], []
    for name, (default_run, compare) in checks.items():
        out = (runners or {}).get(name, lambda: default_run(timeout=timeout))()
        command = " ".join(out.argv)
        if out.error is not None:
            statuses.append(SourceStatus(name, "unavailable", f"{command}: {out.error}"))
            continue
        try:
            found += compare(out.stdout)
        except (TopoParseError, LspciParseError) as exc:
            statuses.append(SourceStatus(name, "error", f"{command}: {exc}"))
            continue
        statuses.append(SourceStatus(name, "ok", f"cross-checked: {command}"))
    snap = dataclasses.replace(result.snapshot, sources=result.snapshot.sources + tuple(statuses))
    return dataclasses.replace(result, snapshot=snap, findings=sort_findings(result.findings + tuple(found)))
