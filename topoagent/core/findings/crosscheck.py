"""Cross-check a scan against what ``nvidia-smi topo -m`` and ``lspci -vvv`` say of the same host.

Pure: takes the parsed tool outputs and the scan; every disagreement becomes a
``SOURCES_DISAGREE`` finding whose evidence names both sources.  GPUs are matched by NVML's
index -> bus id where NVML answered, else by PCI bus order (nvidia-smi's own order); NICs by
RDMA device name.  A GPU's link *speed* is not compared: idle GPUs retrain between two reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from topoagent.core.analysis.paths import Path, below_flattened_broadcom, pair_path, path_index
from topoagent.core.digits import is_decimal
from topoagent.core.findings.catalogue import finding
from topoagent.core.findings.context import sysfs_attr
from topoagent.core.findings.finding import Evidence, Finding
from topoagent.core.pathclass import PathClass
from topoagent.core.pci import DeviceKind
from topoagent.core.snapshot import host_path
from topoagent.core.topology import Topology

if TYPE_CHECKING:  # the parsed views arrive as values; the parsers are not needed to compare
    from topoagent.core.parse.lspci_verbose import LspciFunction
    from topoagent.core.parse.nvsmi_topo import TopoMatrix

CODE = "SOURCES_DISAGREE"


def _finding(subjects: Iterable[str], say: str, evidence: list[Evidence], **fields: object) -> Finding:
    return finding(CODE, subjects, evidence, say=say, fix="", host=None, severity=None, **fields)


def _matrix_ids(topo: Topology, m: TopoMatrix) -> dict[str, str]:
    """Matrix label -> device id."""
    ids: dict[str, str] = {}
    by_index = {g.index: g.bdf for g in topo.nvml_gpus}
    gpus = [d for d in m.devices if d.kind == "gpu"]
    for i, d in enumerate(gpus):
        dev = topo.by_bdf(by_index[i]) if i in by_index else (topo.gpus[i] if i < len(topo.gpus) else None)
        if dev is not None:
            ids[d.label] = dev.id
    rdma = {name: n.id for n in topo.nics for name in n.rdma_devices}
    for d in m.devices:
        if d.kind == "nic" and d.rdma_name in rdma:
            ids[d.label] = rdma[d.rdma_name]
    return ids


def against_nvidia_smi(topo: Topology, paths: tuple[Path, ...], m: TopoMatrix) -> list[Finding]:
    """Findings where ``nvidia-smi topo -m`` disagrees with the scan: devices it lists that
    sysfs does not show, path classes, and NUMA affinity."""
    idx = path_index(paths)
    nvlinks_known = any(p.nvlinks for p in paths)
    ids = _matrix_ids(topo, m)
    out: list[Finding] = []
    labels = [d.label for d in m.devices]
    missing = [label for label in labels if label not in ids]
    if missing:
        out.append(
            _finding(
                missing,
                "missing",
                [
                    Evidence("nvidia-smi topo -m", " ".join(labels)),
                    Evidence(
                        host_path("sys/bus/pci/devices"),
                        f"{len(topo.gpus)} GPU(s), {sum(len(n.rdma_devices) for n in topo.nics)} RDMA device(s)",
                    ),
                ],
                labels=", ".join(missing),
            )
        )
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            if a not in ids or b not in ids or ids[a] == ids[b]:
                continue
            da, db = topo.by_id(ids[a]), topo.by_id(ids[b])
            if da is None or db is None:
                continue
            pa, pb = topo.physical(da), topo.physical(db)  # a VF's path is its PF's
            if pa is pb or not {pa.kind, pb.kind} <= {DeviceKind.GPU, DeviceKind.NIC}:
                continue
            p = pair_path(topo, idx, pa, pb)  # NIC-NIC: computed now
            theirs, ours = m.cell(a, b), p.token
            if theirs == "?" or theirs == ours:
                continue
            stated = PathClass.from_token(theirs)
            if stated is PathClass.NV and not nvlinks_known:
                continue  # NVLink without NVML here: sysfs alone only knows the PCIe class
            if (stated, p.cls) == (PathClass.PXB, PathClass.PIX) and (
                below_flattened_broadcom(topo, pa) or below_flattened_broadcom(topo, pb)
            ):
                continue  # one Broadcom chip shown as two levels: NCCL's PIX, nvidia-smi's PXB
            out.append(
                _finding(
                    [ids[a], ids[b]],
                    "path",
                    [Evidence(f"nvidia-smi topo -m: {a}/{b}", theirs), Evidence(f"sysfs: {ids[a]}/{ids[b]}", ours)],
                    a=a,
                    b=b,
                    theirs=theirs,
                    id_a=ids[a],
                    id_b=ids[b],
                    ours=ours,
                )
            )
    for d in m.devices:
        dev = topo.by_id(ids.get(d.label, ""))
        if dev is None or d.numa_affinity is None or not is_decimal(d.numa_affinity):
            continue
        if dev.numa_node is not None and int(d.numa_affinity) != dev.numa_node:
            out.append(
                _finding(
                    [dev.id],
                    "nvidia-smi numa",
                    [
                        Evidence(f"nvidia-smi topo -m: {d.label} NUMA Affinity", d.numa_affinity),
                        Evidence(sysfs_attr(dev, "numa_node"), str(dev.numa_node)),
                    ],
                    label=d.label,
                    theirs=d.numa_affinity,
                    id=dev.id,
                    ours=dev.numa_node,
                )
            )
    return out


def against_lspci(topo: Topology, functions: tuple[LspciFunction, ...]) -> list[Finding]:
    """Findings where ``lspci -vvv`` disagrees with sysfs: NUMA node and current link width."""
    out: list[Finding] = []
    for f in functions:
        dev = topo.by_bdf(f.bdf)
        if dev is None:
            continue
        if (
            f.numa_node is not None
            and dev.numa_node is not None
            and dev.numa_source == "numa_node"
            and f.numa_node != dev.numa_node
        ):
            out.append(
                _finding(
                    [dev.id],
                    "lspci numa",
                    [
                        Evidence(f"lspci -vvv: {f.bdf} NUMA node", str(f.numa_node)),
                        Evidence(sysfs_attr(dev, "numa_node"), str(dev.numa_node)),
                    ],
                    bdf=f.bdf,
                    theirs=f.numa_node,
                    ours=dev.numa_node,
                )
            )
        ours = dev.link.current_width
        if dev.kind is not DeviceKind.BRIDGE and f.link_width is not None and ours is not None and f.link_width != ours:
            out.append(
                _finding(
                    [dev.id],
                    "lspci width",
                    [
                        Evidence(f"lspci -vvv: {f.bdf} LnkSta", f"x{f.link_width}"),
                        Evidence(sysfs_attr(dev, "current_link_width"), str(ours)),
                    ],
                    bdf=f.bdf,
                    theirs=f.link_width,
                    ours=ours,
                )
            )
    return out


def compare(views: Mapping[str, Any]) -> Callable[[Topology, tuple[Path, ...]], list[Finding]]:
    """The comparison of a scan with other tools' parsed outputs (``views``: ``nvidia-smi``
    -> :class:`TopoMatrix`, ``lspci`` -> lspci functions), for :func:`topoagent.core.result.analyse`."""

    def findings(topo: Topology, paths: tuple[Path, ...]) -> list[Finding]:
        """The cross-check findings for one analysed host."""
        out: list[Finding] = []
        if "nvidia-smi" in views:
            out += against_nvidia_smi(topo, paths, views["nvidia-smi"])
        if "lspci" in views:
            out += against_lspci(topo, views["lspci"])
        return out

    return findings
