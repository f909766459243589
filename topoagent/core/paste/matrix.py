"""The facts of a parsed ``nvidia-smi topo -m``: labelled devices and their path classes.

GPUs and NICs by label (``GPU0``, ``NIC3``), no BDF, no tree; the path class of every pair
verbatim (:class:`~topoagent.core.snapshot.GivenPath`); a GPU's CPU affinity and, where it is one
node, its NUMA node; the NICs' RDMA names from the ``NIC Legend``; Grace GPU memory nodes from
``GPU NUMA ID``.  NUMA nodes are those the GPUs name, their CPUs the union of those GPUs' CPU
affinities; sockets are unknown.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from itertools import combinations

from topoagent.core.cpuset import CpuSet
from topoagent.core.digits import decimal
from topoagent.core.parse.nvsmi_topo import TopoDevice, TopoMatrix
from topoagent.core.pci import NVIDIA
from topoagent.core.snapshot import (
    GivenPath,
    GpuMemoryNode,
    NumaNode,
    PciFunction,
    ProbeError,
    Snapshot,
    SourceStatus,
)

__all__ = ["snapshot_from_topo_matrix", "summary"]


def _single_node(text: str | None) -> int | None:
    """The node of a NUMA Affinity naming exactly one node (``3``); None for lists, N/A."""
    return decimal(text, digits=4) if text is not None else None


def _listed_nodes(text: str | None) -> set[int]:
    """The nodes of a list-valued NUMA Affinity (``0-3``, ``0,3-9``); empty where it is none
    (or not a list of at most 1024 nodes)."""
    if not text:
        return set()
    try:
        nodes = CpuSet.parse(text)
    except ValueError:  # CpuSetError: not a list of nodes
        return set()
    return set(nodes) if len(nodes) <= 1024 else set()


def _cpu_node(d: TopoDevice) -> int | None:
    """The node of a GPU's CPUs: its ``NUMA Affinity`` when that is one node; on Grace (a
    numeric ``GPU NUMA ID``), the lowest node of the list (``0,3-9,11-17``: node 0).

    Grace's firmware numbers the CPU nodes first and the CPU-less memory nodes of the GPUs
    after them (GH200/GB200: GPU NUMA IDs 2, 10, 18, 26; the nodes between are the MIG memory
    partitions' reserve), so the one CPU node of a C2C GPU's list is its lowest.  Elsewhere a
    list names nodes of equal standing and no one node is the GPU's.
    """
    single = _single_node(d.numa_affinity)
    if single is not None or d.gpu_numa_id is None or not d.numa_affinity:
        return single
    first = d.numa_affinity.split(",")[0].split("-")[0]
    return _single_node(first)


def summary(warnings: Iterable[str], limit: int = 3) -> str:
    """Warnings as one line: the count, the first ``limit``, and how many more."""
    ws = list(warnings)
    shown = "; ".join(ws[:limit])
    more = f"; … {len(ws) - limit} more" if len(ws) > limit else ""
    return f"{len(ws)} warning(s): {shown}{more}"


def snapshot_from_topo_matrix(m: TopoMatrix) -> Snapshot:
    """The facts of a parsed ``nvidia-smi topo -m``: labelled devices and their path classes."""
    fns: list[PciFunction] = []
    # A NUMA Affinity column exists where any GPU's cell was read: a GPU without one printed N/A.
    numa_column = any(d.numa_affinity is not None for d in m.devices if d.kind == "gpu")
    listed: set[int] = set()  # the nodes a list-valued NUMA Affinity names: the host has them
    for d in m.devices:
        if d.kind == "gpu":
            numa = _cpu_node(d)
            said = None
            if numa is None:
                said = d.numa_affinity or ("N/A" if numa_column else "not printed (no NUMA Affinity column)")
                listed |= _listed_nodes(d.numa_affinity)
            fns.append(
                PciFunction(
                    bdf=None,
                    label=d.label,
                    kind="gpu",
                    # nvidia-smi lists NVIDIA GPUs only; the model is not in the matrix.
                    vendor_id=NVIDIA,
                    name="NVIDIA GPU (model not in the matrix)",
                    numa_node=numa,
                    numa_source="nvidia-smi" if numa is not None else None,
                    numa_said=said,
                    local_cpus=d.cpu_affinity,
                )
            )
        else:
            # A NIC row is an RDMA device: nvidia-smi lists NICs through ibverbs.
            fns.append(
                PciFunction(
                    bdf=None,
                    label=d.label,
                    kind="nic",
                    name="RDMA NIC",
                    rdma_names=(d.rdma_name,) if d.rdma_name else (),
                    rdma=True,
                )
            )

    given: list[GivenPath] = []
    for i, j in combinations(range(len(m.devices)), 2):
        token = m.cells[i][j] if m.cells[i][j] != "?" else m.cells[j][i]
        if token != "?":
            # SOC (old drivers' SYS, whose legend names CPU sockets) is kept as printed
            printed = "SOC" if m.legacy_soc and token == "SYS" else None
            given.append(GivenPath(m.devices[i].label, m.devices[j].label, token, printed))

    cpus_of: dict[int, CpuSet] = defaultdict(CpuSet)
    for f in fns:
        if f.numa_node is not None:
            cpus_of[f.numa_node] |= f.local_cpus or CpuSet()
    nodes = {n: NumaNode(id=n, cpus=c if c else None) for n, c in cpus_of.items()}
    for n in sorted(listed):
        nodes.setdefault(n, NumaNode(id=n, cpus=None))  # named by a GPU's list, CPUs not given
    memory = []
    for d in m.devices:
        if d.kind == "gpu" and d.gpu_numa_id is not None:
            memory.append(GpuMemoryNode(bdf=None, node=d.gpu_numa_id, label=d.label))
            # GPU NUMA ID names the node of the GPU's own memory (Grace): a node without CPUs.
            nodes.setdefault(d.gpu_numa_id, NumaNode(id=d.gpu_numa_id, cpus=CpuSet()))

    warnings = list(m.warnings)
    errors = tuple(ProbeError(path=f"nvidia-smi topo -m {s.where}", error=s.why) for s in m.skipped)
    if errors:
        warnings.append(f"{len(errors)} line range(s) of the paste not read (listed among the lost probes)")
    status = SourceStatus("nvidia-smi", "partial" if warnings else "ok", summary(warnings) if warnings else None)
    return Snapshot(
        hostname=None,
        root=None,
        numa_nodes=tuple(nodes[n] for n in sorted(nodes)),
        pci=tuple(fns),
        gpu_memory_nodes=tuple(memory),
        sources=(status,),
        given_paths=tuple(given),
        probe_errors=errors,
        partial_inputs=("nvidia-smi topo -m: the author left columns out ('...')",) if m.elided else (),
    )
