"""One snapshot from a matrix snapshot and an lspci snapshot of the same host.

ASSUMPTION (stated in the source status): the matrix lists GPUs and NICs in PCI bus order --
GPU0 is the first NVIDIA GPU function in BDF order (nvidia-smi's own enumeration order), NIC0 the
first RDMA-capable NIC function (mlx5_N are numbered in probe order, which is bus order on
every host seen; bonded ports break it).  Counts that do not agree are refused rather than
matched halfway.
"""

from __future__ import annotations

import msgspec

from topoagent.core import pci
from topoagent.core.bdf import bdf_key
from topoagent.core.errors import OfflineInputError
from topoagent.core.snapshot import PciFunction, Snapshot

__all__ = ["MATCH_ASSUMPTION", "merge"]

MATCH_ASSUMPTION = (
    "GPUs and NICs matched to lspci by PCI bus order (GPU0 = first NVIDIA GPU function by BDF, "
    "NIC0 = first RDMA-capable NIC function): an assumption, not read from the host"
)


def _is_nvidia_gpu(f: PciFunction) -> bool:
    c = pci.class16(f.class_code)
    gpu = (c is not None and c >> 8 == 0x03) or (c is None and f.kind == "gpu")
    return gpu and f.vendor_id in (pci.NVIDIA, None)


def _is_nic(f: PciFunction) -> bool:
    c = pci.class16(f.class_code)
    return pci.is_nic_class(c) or (c is None and f.kind == "nic")


def _nic_candidates(fns: list[PciFunction]) -> list[tuple[str, list[PciFunction]]]:
    """Ways to list lspci's NICs in the matrix's order, most likely first."""
    nics = [f for f in fns if _is_nic(f)]
    rdma = [f for f in nics if f.rdma]
    return [
        ("RDMA-capable physical functions", [f for f in rdma if f.physfn is None]),
        ("RDMA-capable functions", rdma),
        ("physical NIC functions", [f for f in nics if f.physfn is None]),
    ]


def merge(matrix: Snapshot, lspci: Snapshot) -> Snapshot:
    """One snapshot from a matrix snapshot and an lspci snapshot of the same host.

    Matrix devices are matched to lspci functions by PCI bus order (see the module's
    docstring); a matched function keeps lspci's facts and takes the matrix's label, RDMA
    names, CPU affinity, and NUMA node where lspci has none.  A kind lspci shows none of stays
    as the matrix's BDF-less devices.  Raises :class:`OfflineInputError` when lspci shows some
    GPUs (or NICs) but not as many as the matrix.
    """
    ordered = sorted(lspci.pci, key=lambda f: bdf_key(f.bdf))  # type: ignore[arg-type]
    m_gpus = [f for f in matrix.pci if f.kind == "gpu"]
    m_nics = [f for f in matrix.pci if f.kind == "nic"]
    l_gpus = [f for f in ordered if _is_nvidia_gpu(f)]
    if l_gpus and len(l_gpus) != len(m_gpus):
        raise OfflineInputError(
            f"the nvidia-smi matrix has {len(m_gpus)} GPU(s) but lspci shows {len(l_gpus)} NVIDIA GPU "
            "function(s): not the same host, or lspci was filtered (-s); give them separately"
        )
    # No pairs when lspci shows no NVIDIA GPU (checked above: otherwise the counts agree).
    pairs: list[tuple[PciFunction, PciFunction]] = list(zip(m_gpus, l_gpus, strict=False))
    notes = []
    if m_nics:
        candidates = _nic_candidates(ordered)
        fit = next(((how, fs) for how, fs in candidates if len(fs) == len(m_nics)), None)
        if fit is None and any(fs for _, fs in candidates):
            counts = ", ".join(f"{len(fs)} {how}" for how, fs in candidates)
            raise OfflineInputError(
                f"the nvidia-smi matrix has {len(m_nics)} NIC(s) but lspci shows {counts}: "
                "cannot match them; give the outputs separately"
            )
        if fit is not None and fit[1]:
            pairs += list(zip(m_nics, fit[1], strict=True))
            if fit[0] != candidates[0][0]:
                notes.append(f"NICs matched to the {fit[0]}")

    by_bdf: dict[str, PciFunction] = {}
    for m, f in pairs:
        numa, source = f.numa_node, f.numa_source
        if numa is None and m.numa_node is not None:
            numa, source = m.numa_node, m.numa_source
        elif numa is not None and m.numa_node is not None and numa != m.numa_node:
            notes.append(f"{m.label}: NUMA node {m.numa_node} in the matrix, {numa} in lspci (lspci kept)")
        by_bdf[f.bdf] = msgspec.structs.replace(  # type: ignore[index]
            f,
            label=m.label,
            rdma_names=m.rdma_names,
            rdma=m.rdma or f.rdma,
            local_cpus=m.local_cpus if m.local_cpus is not None else f.local_cpus,
            numa_node=numa,
            numa_source=source,
        )
    matched = {m.label for m, _ in pairs}
    pci = tuple(by_bdf.get(f.bdf, f) for f in lspci.pci) + tuple(  # type: ignore[arg-type]
        f for f in matrix.pci if f.label not in matched
    )

    bdf_of = {m.label: f.bdf for m, f in pairs}
    memory = tuple(msgspec.structs.replace(g, bdf=bdf_of.get(g.label)) for g in matrix.gpu_memory_nodes)
    nodes = {n.id: n for n in lspci.numa_nodes}
    nodes.update({n.id: n for n in matrix.numa_nodes if n.cpus is not None or n.id not in nodes})

    status = []
    for s in matrix.sources:
        if s.name == "nvidia-smi" and pairs:
            detail = "; ".join([MATCH_ASSUMPTION, *notes] + ([s.detail] if s.detail else []))
            s = msgspec.structs.replace(s, detail=detail)
        status.append(s)
    return msgspec.structs.replace(
        matrix,
        pci=pci,
        numa_nodes=tuple(nodes[n] for n in sorted(nodes)),
        gpu_memory_nodes=memory,
        sources=tuple(status) + lspci.sources,
        probe_errors=matrix.probe_errors + lspci.probe_errors,
        partial_inputs=matrix.partial_inputs + lspci.partial_inputs,
        virtualized=lspci.virtualized,  # an emulated root complex lspci shows (pci.emulated_platform)
        lists_every_nic=lspci.lists_every_nic,  # the matrix lists only the RDMA NICs nvidia-smi knows
    )
