"""The facts of a parsed ``rocm-smi --showtopo`` or ``amd-smi topology``: AMD GPUs and what
the tables state of each pair.

The GPUs are labelled as the tools number them (``GPU0`` …, BDF order), with their BDF where
amd-smi printed it and their NUMA node where rocm-smi did.  A pair's link type becomes a path
the source states (:class:`~topoagent.core.snapshot.GivenPath`), only where it says one:

* ``XGMI``: the pair is joined by Infinity Fabric (token ``XGMI``, NCCL's NV class as RCCL
  treats it); the PCIe path beneath stays unknown unless a tree is given too;
* ``PCIE`` with 3 hops: across CPU NUMA nodes -- nvidia-smi's ``SYS`` exactly;
* ``PCIE`` with 2 hops: over PCIe inside one NUMA node, which switch or host bridge unsaid, so
  no class is stated (the tree, where given, decides).
"""

from __future__ import annotations

from topoagent.core import pci
from topoagent.core.parse.amd_topo import AmdPair, AmdTopology
from topoagent.core.pathclass import XGMI
from topoagent.core.snapshot import GivenPath, NumaNode, PciFunction, ProbeError, Snapshot, SourceStatus

__all__ = ["given_token", "snapshot_from_amd"]


def given_token(p: AmdPair) -> str | None:
    """The path class a pair's tables state, or None where they state none (see the module)."""
    if p.link == "XGMI":
        return XGMI
    if p.link == "PCIE" and p.hops == 3:
        return "SYS"
    return None


def snapshot_from_amd(t: AmdTopology) -> Snapshot:
    """The snapshot of one tool's tables (``t.tool``: ``rocm-smi`` or ``amd-smi``)."""
    fns = tuple(
        PciFunction(
            bdf=g.bdf,
            label=g.label,
            kind="gpu",
            vendor_id=pci.AMD_ATI,
            name="AMD GPU (model not in the output)",
            numa_node=g.numa_node,
            numa_source=t.tool if g.numa_node is not None else None,
        )
        for g in t.gpus
    )
    given = tuple(GivenPath(p.a, p.b, tok) for p in t.pairs if (tok := given_token(p)) is not None)
    nodes = sorted({g.numa_node for g in t.gpus if g.numa_node is not None})
    unsaid = sum(1 for p in t.pairs if given_token(p) is None)
    notes = []
    if unsaid:
        notes.append(
            f"{unsaid} GPU pair(s) over PCIe inside one NUMA node (or of no link type): their PCIe path is unknown "
            "without a tree (give lspci -tv too)"
        )
    errors = tuple(ProbeError(path=f"{t.tool} {s.where}", error=s.why) for s in t.skipped)
    return Snapshot(
        hostname=None,
        root=None,
        numa_nodes=tuple(NumaNode(id=n, cpus=None) for n in nodes),
        pci=fns,
        sources=(SourceStatus(t.tool, "partial" if notes else "ok", "; ".join(notes) or None),),
        probe_errors=errors,
        given_paths=given,
    )
