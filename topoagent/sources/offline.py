"""Snapshots from pasted tool output: ``nvidia-smi topo -m``, ``lspci -tv`` and ``lspci -vvv``.

Pure conversions: the parsed text in, a :class:`~topoagent.snapshot.Snapshot` out, never a
path or a host file (reading the files is the CLI's and :func:`topoagent.api.read_offline`'s
job).  A snapshot made here has ``root = None``: the kernel's state (loaded modules, command
line, IOMMU types, CPU topology) is unknown, not empty, and the analysis treats it so.

What each source gives:

* the matrix: GPUs and NICs by label (``GPU0``, ``NIC3``), no BDF, no tree; the path class of
  every pair verbatim (:class:`~topoagent.snapshot.GivenPath`); a GPU's CPU affinity and, where
  it is one node, its NUMA node; the NICs' RDMA names from the ``NIC Legend``; Grace GPU memory
  nodes from ``GPU NUMA ID``.  NUMA nodes are those the GPUs name, their CPUs the union of those
  GPUs' CPU affinities; sockets are unknown.
* ``lspci -tv``: the tree (``sysfs_path``-like strings are built from the nesting, so the
  ancestry code that reads sysfs paths works unchanged) and device names (ids with ``-tvnn``).
* ``lspci -vvv``: class, ids (``-nn``), driver, ``NUMA node``, link (``LnkCap`` = max,
  ``LnkSta`` = current), port type and ACS, as a :class:`~topoagent.snapshot.ConfigSpace`.
  Without a tree, parents come from the bridges' ``Bus: secondary=…, subordinate=…`` lines.

Given both a matrix and lspci, :func:`merge` names lspci's functions by the matrix's labels.
ASSUMPTION (stated in the source status): the matrix lists GPUs and NICs in PCI bus order --
GPU0 is the first NVIDIA GPU function in BDF order (nvidia-smi's own enumeration order), NIC0 the
first RDMA-capable NIC function (mlx5_N are numbered in probe order, which is bus order on
every host seen; bonded ports break it).  Counts that do not agree are refused rather than
matched halfway.
"""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from itertools import combinations
from typing import TypeVar

from topoagent import pciids
from topoagent.bdf import bdf_key
from topoagent.cpuset import CpuSet
from topoagent.errors import InputError
from topoagent.parsers.configspace import PORT_TYPES
from topoagent.parsers.lspci import LspciFunction, LspciTreeNode
from topoagent.parsers.nvsmi_topo import TopoMatrix
from topoagent.snapshot import (
    ConfigSpace,
    GivenPath,
    GpuMemoryNode,
    LinkInfo,
    NumaNode,
    PciFunction,
    Snapshot,
    SourceStatus,
)
from topoagent.sources import Collection

T = TypeVar("T")

__all__ = [
    "MATCH_ASSUMPTION",
    "OfflineInputError",
    "collect",
    "combine",
    "merge",
    "read_offline",
    "snapshot_from_lspci",
    "snapshot_from_topo_matrix",
]

NVIDIA = 0x10DE
MELLANOX = 0x15B3
AMAZON = 0x1D0F
EFA_DEVICES = frozenset({0xEFA0, 0xEFA1, 0xEFA2, 0xEFA3})
#: Drivers that always register an RDMA device for their NIC.
RDMA_DRIVERS = frozenset({"mlx5_core", "mlx4_core", "efa"})

MATCH_ASSUMPTION = (
    "GPUs and NICs matched to lspci by PCI bus order (GPU0 = first NVIDIA GPU function by BDF, "
    "NIC0 = first RDMA-capable NIC function): an assumption, not read from the host"
)


class OfflineInputError(InputError):
    """Pasted output that cannot be used: text a parser rejects, or outputs that cannot
    describe one host together (counts that disagree).

    ``input`` names the argument at fault (``nvidia_smi_topo``, ``lspci_tree``,
    ``lspci_verbose``), None when the fault lies between them.
    """

    def __init__(self, message: str, input: str | None = None) -> None:  # noqa: A002
        super().__init__(message)
        self.input = input


# --------------------------------------------------------------------------------------------
# nvidia-smi topo -m


def _single_node(text: str | None) -> int | None:
    """The node of a NUMA Affinity naming exactly one node (``3``); None for lists, N/A."""
    return int(text) if text is not None and text.isdigit() else None


def _summary(warnings: Iterable[str], limit: int = 3) -> str:
    ws = list(warnings)
    shown = "; ".join(ws[:limit])
    more = f"; … {len(ws) - limit} more" if len(ws) > limit else ""
    return f"{len(ws)} warning(s): {shown}{more}"


def snapshot_from_topo_matrix(m: TopoMatrix) -> Snapshot:
    """The facts of a parsed ``nvidia-smi topo -m``: labelled devices and their path classes."""
    fns: list[PciFunction] = []
    for d in m.devices:
        if d.kind == "gpu":
            numa = _single_node(d.numa_affinity)
            fns.append(PciFunction(
                bdf=None, label=d.label, kind="gpu",
                # nvidia-smi lists NVIDIA GPUs only; the model is not in the matrix.
                vendor_id=NVIDIA, name="NVIDIA GPU (model not in the matrix)",
                numa_node=numa, numa_source="nvidia-smi" if numa is not None else None,
                local_cpus=d.cpu_affinity,
            ))
        else:
            # A NIC row is an RDMA device: nvidia-smi lists NICs through ibverbs.
            fns.append(PciFunction(
                bdf=None, label=d.label, kind="nic", name="RDMA NIC",
                rdma_names=(d.rdma_name,) if d.rdma_name else (), rdma=True,
            ))

    given: list[GivenPath] = []
    for i, j in combinations(range(len(m.devices)), 2):
        token = m.cells[i][j] if m.cells[i][j] != "?" else m.cells[j][i]
        if token != "?":
            given.append(GivenPath(m.devices[i].label, m.devices[j].label, token))

    cpus_of: dict[int, CpuSet] = defaultdict(CpuSet)
    for f in fns:
        if f.numa_node is not None:
            cpus_of[f.numa_node] |= f.local_cpus or CpuSet()
    nodes = {n: NumaNode(id=n, cpus=c if c else None) for n, c in cpus_of.items()}
    memory = []
    for d in m.devices:
        if d.kind == "gpu" and d.gpu_numa_id is not None:
            memory.append(GpuMemoryNode(bdf=None, node=d.gpu_numa_id, label=d.label))
            # GPU NUMA ID names the node of the GPU's own memory (Grace): a node without CPUs.
            nodes.setdefault(d.gpu_numa_id, NumaNode(id=d.gpu_numa_id, cpus=CpuSet()))

    warnings = list(m.warnings)
    status = SourceStatus("nvidia-smi", "partial" if warnings else "ok",
                          _summary(warnings) if warnings else None)
    return Snapshot(
        hostname=None, root=None, numa_nodes=tuple(nodes[n] for n in sorted(nodes)),
        pci=tuple(fns), gpu_memory_nodes=tuple(memory), sources=(status,), given_paths=tuple(given),
    )


# --------------------------------------------------------------------------------------------
# lspci

#: lspci's class names (pci.ids) -> class and subclass, for output without ``-nn``.
LSPCI_CLASSES = {
    "Non-VGA unclassified device": 0x0000,
    "SCSI storage controller": 0x0100,
    "IDE interface": 0x0101,
    "RAID bus controller": 0x0104,
    "SATA controller": 0x0106,
    "Serial Attached SCSI controller": 0x0107,
    "Non-Volatile memory controller": 0x0108,
    "Mass storage controller": 0x0180,
    "Ethernet controller": 0x0200,
    "Token ring network controller": 0x0201,
    "Infiniband controller": 0x0207,
    "Fabric controller": 0x0208,
    "Network controller": 0x0280,
    "VGA compatible controller": 0x0300,
    "XGA compatible controller": 0x0301,
    "3D controller": 0x0302,
    "Display controller": 0x0380,
    "Audio device": 0x0403,
    "Memory controller": 0x0580,
    "RAM memory": 0x0500,
    "Host bridge": 0x0600,
    "ISA bridge": 0x0601,
    "PCI bridge": 0x0604,
    "Semi-transparent PCI-to-PCI bridge": 0x0609,
    "Bridge": 0x0680,
    "System peripheral": 0x0880,
    "IOMMU": 0x0806,
    "Co-processor": 0x0B40,
    "USB controller": 0x0C03,
    "SMBus": 0x0C05,
    "InfiniBand": 0x0C06,
    "Serial bus controller": 0x0C80,
    "Encryption controller": 0x1080,
    "Signal processing controller": 0x1180,
    "Processing accelerators": 0x1200,
    "Unassigned class": 0xFF00,
}

#: Vendor names as lspci prints them (pci.ids), for output without ``-nn``.
LSPCI_VENDORS = (
    ("NVIDIA Corporation", NVIDIA),
    ("Mellanox Technologies", MELLANOX),
    ("Amazon.com, Inc.", AMAZON),
    ("Intel Corporation", 0x8086),
    ("Broadcom / LSI", 0x1000),
    ("Broadcom Inc. and subsidiaries", 0x14E4),
    ("PLX Technology, Inc.", 0x10B5),
    ("Advanced Micro Devices, Inc. [AMD/ATI]", 0x1002),
    ("Advanced Micro Devices, Inc. [AMD]", 0x1022),
    ("ASPEED Technology, Inc.", 0x1A03),
    ("Matrox Electronics Systems Ltd.", 0x102B),
    ("Samsung Electronics Co Ltd", 0x144D),
    ("Red Hat, Inc.", 0x1AF4),
    ("VMware", 0x15AD),
)

_PORT_CODES = {name: code for code, name in PORT_TYPES.items()}
_NVIDIA_GPU_CHIP = re.compile(r"\b(?:G[KMPVAHB][0-9]{3}|TU[0-9]{3}|AD[0-9]{3}|GB[0-9]{3})")
_NOT_A_GPU = re.compile(r"NVSwitch|Audio|USB|UCSI|Serial|SMBus|Bridge", re.IGNORECASE)
_NIC_NAME = re.compile(r"ConnectX|Infiniband|InfiniBand|Ethernet|Network Connection|NetXtreme|"
                       r"Elastic Fabric Adapter|BlueField")
_NVME_NAME = re.compile(r"NVMe|Non-Volatile memory")


def _vendor_from_name(text: str | None) -> int | None:
    if not text:
        return None
    return next((vid for name, vid in LSPCI_VENDORS if text.startswith(name)), None)


def _kind_from_name(text: str | None, vendor: int | None, device: int | None) -> str | None:
    """What a function is from its name alone (``lspci -tv`` has no class): GPU, NIC, NVMe.

    Used only where no class is known, and said so in the source status.
    """
    known = pciids.DEVICES.get((vendor, device)) if vendor is not None and device is not None else None
    text = " ".join(t for t in (text, known) if t)
    if not text:
        return None
    if _NVME_NAME.search(text):
        return "nvme"
    if _NIC_NAME.search(text):
        return "nic"
    if vendor == NVIDIA and not _NOT_A_GPU.search(text) and (known or _NVIDIA_GPU_CHIP.search(text)):
        return "gpu"
    return None


def _is_nic_class(class16: int | None) -> bool:
    return class16 is not None and (class16 >> 8 == 0x02 or class16 == 0x0C06)


def _rdma_capable(class16: int | None, kind: str | None, vendor: int | None, device: int | None,
                  driver: str | None) -> bool:
    """An RDMA-capable NIC by what lspci shows (there is no /sys/class/infiniband in lspci).

    InfiniBand controllers, every Mellanox/NVIDIA ConnectX/BlueField NIC function (RoCE when
    in Ethernet mode), AWS EFA, and functions bound to mlx4/mlx5/efa.  Broadcom and Intel NICs
    are RDMA-capable only with bnxt_re/irdma loaded, which lspci does not show: not counted.
    """
    if not (_is_nic_class(class16) or (class16 is None and kind == "nic")):
        return False
    return (class16 == 0x0207 or vendor == MELLANOX or (vendor == AMAZON and device in EFA_DEVICES)
            or driver in RDMA_DRIVERS)


def _walk_tree(tree: Iterable[LspciTreeNode]) -> Iterator[tuple[LspciTreeNode, str]]:
    """Every node with its sysfs-like path (``pci0000:00/0000:00:01.0/0000:01:00.0``)."""
    def walk(node: LspciTreeNode, prefix: str) -> Iterator[tuple[LspciTreeNode, str]]:
        path = f"{prefix}/{node.bdf}"
        yield node, path
        for child in node.children:
            yield from walk(child, path)

    for root in tree:
        yield from walk(root, f"pci{root.bdf.rsplit(':', 1)[0]}")


def _split_bdf(bdf: str) -> tuple[str, int]:
    dom, bus, _ = bdf.split(":")
    return dom, int(bus, 16)


def _paths_from_bus_numbers(fns: tuple[LspciFunction, ...]) -> dict[str, str | None]:
    """Sysfs-like paths from the bridges' bus numbers (``lspci -vvv`` without a tree).

    A function's parent is the bridge whose secondary bus is the function's bus.  With no such
    bridge, it sits on a root bus -- unless a listed bridge's bus range covers its bus, which
    means its own bridge is missing from the listing (``lspci -s``): then its place is unknown
    (None), never a shortened chain that would make the path look better than it is.
    """
    bridges = [f for f in fns if f.secondary_bus is not None and f.subordinate_bus is not None]
    by_secondary: dict[tuple[str, int], str | None] = {}
    for b in bridges:
        key = (_split_bdf(b.bdf)[0], b.secondary_bus)  # type: ignore[arg-type]
        by_secondary[key] = None if key in by_secondary else b.bdf  # two claims: unknown

    def covered(dom: str, bus: int) -> bool:
        return any(_split_bdf(b.bdf)[0] == dom and b.secondary_bus <= bus <= b.subordinate_bus  # type: ignore[operator]
                   for b in bridges)

    out: dict[str, str | None] = {}

    def path(bdf: str, depth: int = 0) -> str | None:
        if bdf in out:
            return out[bdf]
        dom, bus = _split_bdf(bdf)
        key = (dom, bus)
        if depth > 64:
            return None  # a loop in corrupt bus numbers
        if key in by_secondary:
            parent = by_secondary[key]
            up = path(parent, depth + 1) if parent is not None and parent != bdf else None
            result = f"{up}/{bdf}" if up is not None else None
        elif covered(dom, bus):
            result = None
        else:
            result = f"pci{dom}:{bus:02x}/{bdf}"
        out[bdf] = result
        return result

    for f in fns:
        path(f.bdf)
    return out


def _config(v: LspciFunction, class16: int | None) -> ConfigSpace:
    readable = v.capabilities_readable is True
    bridge = v.secondary_bus is not None or class16 in (0x0604, 0x0609)
    link = LinkInfo(v.link_gts, v.link_width, v.link_max_gts, v.link_max_width)
    return ConfigSpace(
        # lspci shows the extended capabilities (ACS) only with the whole space readable
        size=4096 if readable else 64,
        header_type=1 if bridge else None,
        pcie_port_type=_PORT_CODES.get(v.port_type) if v.port_type else None,
        link=link if link.known else None,
        secondary_bus=v.secondary_bus,
        subordinate_bus=v.subordinate_bus,
        extended_readable=readable,
        acs=v.acs,
    )


def _virtfns(verbose: tuple[LspciFunction, ...]) -> dict[str, str]:
    """VF BDF -> PF BDF from the PFs' SR-IOV capability (routing ID + offset + n * stride)."""
    out: dict[str, str] = {}
    for pf in verbose:
        s = pf.sriov
        if s is None or not s.num_vfs or s.vf_offset is None or s.vf_stride is None:
            continue
        dom, bus, devfn = pf.bdf.split(":")
        dev, fn = devfn.split(".")
        rid = int(bus, 16) << 8 | int(dev, 16) << 3 | int(fn)
        for n in range(s.num_vfs):
            r = rid + s.vf_offset + n * s.vf_stride
            if r <= 0xFFFF:
                out[f"{dom}:{r >> 8:02x}:{(r >> 3) & 0x1F:02x}.{r & 7}"] = pf.bdf
    return out


def snapshot_from_lspci(
    tree: tuple[LspciTreeNode, ...] | None, verbose: tuple[LspciFunction, ...] | None
) -> Snapshot:
    """The facts of parsed ``lspci -tv`` and/or ``lspci -vvv`` output (either may be None)."""
    tree_nodes: dict[str, tuple[LspciTreeNode, str]] = {}
    for node, path in _walk_tree(tree or ()):
        tree_nodes.setdefault(node.bdf, (node, path))
    verbose_by = {f.bdf: f for f in verbose or ()}
    bus_paths = _paths_from_bus_numbers(tuple(verbose_by.values())) if verbose and not tree else {}
    physfn = _virtfns(tuple(verbose_by.values()))
    bdfs = list(dict.fromkeys([*tree_nodes, *verbose_by]))

    fns: list[PciFunction] = []
    named_only = not_in_tree = placed_nowhere = 0
    for bdf in bdfs:
        t, path = tree_nodes.get(bdf, (None, None))
        v = verbose_by.get(bdf)
        if tree:
            not_in_tree += path is None
        elif bdf in bus_paths:
            path = bus_paths[bdf]
            placed_nowhere += path is None
        class16 = None
        if v is not None:
            class16 = v.class_code if v.class_code is not None else LSPCI_CLASSES.get(v.class_name)
        if class16 is None and t is not None and t.is_bridge:
            class16 = 0x0604  # lspci -t draws a bus range only behind a bridge
        desc = (v.description if v is not None else None) or (t.description if t is not None else None)
        vendor = (v.vendor_id if v is not None else None) or (t.vendor_id if t is not None else None) \
            or _vendor_from_name(desc)
        device = (v.device_id if v is not None else None) or (t.device_id if t is not None else None)
        kind = None
        if class16 is None:
            kind = _kind_from_name(desc, vendor, device)
            named_only += kind is not None
        driver = v.driver if v is not None else None
        rdma = _rdma_capable(class16, kind, vendor, device, driver)
        known_name = vendor is not None and device is not None and (vendor, device) in pciids.DEVICES
        fns.append(PciFunction(
            bdf=bdf,
            sysfs_path=path,
            class_code=class16 << 8 if class16 is not None else None,
            vendor_id=vendor,
            device_id=device,
            subsystem_vendor_id=v.subsystem_vendor_id if v is not None else None,
            subsystem_device_id=v.subsystem_device_id if v is not None else None,
            numa_node=v.numa_node if v is not None else None,
            numa_source="lspci" if v is not None and v.numa_node is not None else None,
            link=LinkInfo(v.link_gts, v.link_width, v.link_max_gts, v.link_max_width) if v is not None else LinkInfo(),
            driver=driver,
            iommu_group=v.iommu_group if v is not None else None,
            physfn=physfn.get(bdf),
            sriov_totalvfs=v.sriov.total_vfs if v is not None and v.sriov is not None else None,
            sriov_numvfs=v.sriov.num_vfs if v is not None and v.sriov is not None else None,
            config=_config(v, class16) if v is not None else None,
            # pciids' name where it has one (as a live scan names it), lspci's otherwise
            name=None if known_name else desc,
            kind=kind,
            rdma=True if rdma else None,
        ))

    warnings = []
    if verbose is None:
        warnings.append("no lspci -vvv: links, NUMA nodes and ACS unknown")
    if named_only:
        warnings.append(f"kind of {named_only} function(s) inferred from device names (no class in lspci -t)")
    if tree is None and verbose is not None:
        warnings.append("no lspci -tv: parents from the bridges' bus numbers")
    if placed_nowhere:
        warnings.append(f"{placed_nowhere} function(s) placed nowhere: their bridge is not in the listing")
    if not_in_tree:
        warnings.append(f"{not_in_tree} function(s) of lspci -vvv are not in the tree")
    denied = sum(1 for f in verbose or () if f.capabilities_readable is False)
    if denied:
        warnings.append(f"capabilities <access denied> on {denied} function(s) (lspci run without root): "
                        "links, port types and ACS unknown there")
    nodes = sorted({f.numa_node for f in fns if f.numa_node is not None})
    status = SourceStatus("lspci", "partial" if warnings else "ok", "; ".join(warnings) or None)
    return Snapshot(
        hostname=None, root=None,
        # lspci names a device's node, never the node's CPUs
        numa_nodes=tuple(NumaNode(id=n, cpus=None) for n in nodes),
        pci=tuple(fns), sources=(status,),
    )


# --------------------------------------------------------------------------------------------
# both


def _class16(f: PciFunction) -> int | None:
    return f.class_code >> 8 if f.class_code is not None else None


def _is_nvidia_gpu(f: PciFunction) -> bool:
    c = _class16(f)
    gpu = (c is not None and c >> 8 == 0x03) or (c is None and f.kind == "gpu")
    return gpu and f.vendor_id in (NVIDIA, None)


def _is_nic(f: PciFunction) -> bool:
    c = _class16(f)
    return _is_nic_class(c) or (c is None and f.kind == "nic")


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
            "function(s): not the same host, or lspci was filtered (-s); give them separately")
    pairs: list[tuple[PciFunction, PciFunction]] = list(zip(m_gpus, l_gpus))
    notes = []
    if m_nics:
        candidates = _nic_candidates(ordered)
        fit = next(((how, fs) for how, fs in candidates if len(fs) == len(m_nics)), None)
        if fit is None and any(fs for _, fs in candidates):
            counts = ", ".join(f"{len(fs)} {how}" for how, fs in candidates)
            raise OfflineInputError(
                f"the nvidia-smi matrix has {len(m_nics)} NIC(s) but lspci shows {counts}: "
                "cannot match them; give the outputs separately")
        if fit is not None and fit[1]:
            pairs += list(zip(m_nics, fit[1]))
            if fit[0] != candidates[0][0]:
                notes.append(f"NICs matched to the {fit[0]}")

    by_bdf: dict[str, PciFunction] = {}
    for m, f in pairs:
        numa, source = f.numa_node, f.numa_source
        if numa is None and m.numa_node is not None:
            numa, source = m.numa_node, m.numa_source
        elif numa is not None and m.numa_node is not None and numa != m.numa_node:
            notes.append(f"{m.label}: NUMA node {m.numa_node} in the matrix, {numa} in lspci (lspci kept)")
        by_bdf[f.bdf] = dataclasses.replace(  # type: ignore[index]
            f, label=m.label, rdma_names=m.rdma_names, rdma=m.rdma or f.rdma,
            local_cpus=m.local_cpus if m.local_cpus is not None else f.local_cpus,
            numa_node=numa, numa_source=source,
        )
    matched = {m.label for m, _ in pairs}
    pci = tuple(by_bdf.get(f.bdf, f) for f in lspci.pci) + tuple(  # type: ignore[arg-type]
        f for f in matrix.pci if f.label not in matched)

    bdf_of = {m.label: f.bdf for m, f in pairs}
    memory = tuple(dataclasses.replace(g, bdf=bdf_of.get(g.label)) for g in matrix.gpu_memory_nodes)
    nodes = {n.id: n for n in lspci.numa_nodes}
    nodes.update({n.id: n for n in matrix.numa_nodes if n.cpus is not None or n.id not in nodes})

    status = []
    for s in matrix.sources:
        if s.name == "nvidia-smi" and pairs:
            detail = "; ".join([MATCH_ASSUMPTION, *notes] + ([s.detail] if s.detail else []))
            s = dataclasses.replace(s, detail=detail)
        status.append(s)
    return dataclasses.replace(
        matrix, pci=pci, numa_nodes=tuple(nodes[n] for n in sorted(nodes)), gpu_memory_nodes=memory,
        sources=tuple(status) + lspci.sources,
    )


def combine(
    matrix: TopoMatrix | None,
    tree: tuple[LspciTreeNode, ...] | None,
    verbose: tuple[LspciFunction, ...] | None,
) -> Snapshot:
    """The snapshot of any combination of parsed outputs (at least one)."""
    lspci = snapshot_from_lspci(tree, verbose) if tree is not None or verbose is not None else None
    if matrix is None:
        if lspci is None:
            raise OfflineInputError("no output given")
        return lspci
    m = snapshot_from_topo_matrix(matrix)
    return m if lspci is None else merge(m, lspci)




def read_offline(nvidia_smi_topo: str | None = None, lspci_tree: str | None = None,
                 lspci_verbose: str | None = None) -> Snapshot:
    """A snapshot from pasted tool output instead of a host tree: the *texts* of
    ``nvidia-smi topo -m``, ``lspci -tv`` and ``lspci -vvv`` (any combination, at least one).

    Raises :class:`OfflineInputError` for text that is not that output (``input`` names the
    argument; the parser's error is its ``__cause__``), for blank text, and for outputs that
    cannot be one host.
    """
    from topoagent.parsers.lspci import parse_lspci_tree, parse_lspci_verbose
    from topoagent.parsers.nvsmi_topo import parse_topo_matrix

    def parse(name: str, text: str | None, parser: Callable[[str], T]) -> T | None:
        if text is None:
            return None
        if not text.strip():
            raise OfflineInputError("empty", input=name)
        try:
            return parser(text)
        except InputError as exc:
            raise OfflineInputError(str(exc), input=name) from exc

    return combine(parse("nvidia_smi_topo", nvidia_smi_topo, parse_topo_matrix),
                   parse("lspci_tree", lspci_tree, parse_lspci_tree),
                   parse("lspci_verbose", lspci_verbose, parse_lspci_verbose))


def collect(c: Collection) -> None:
    """The primary source of an offline scan: the snapshot of the pasted outputs."""
    i = c.inputs
    c.snapshot = read_offline(i.nvidia_smi_topo_text, i.lspci_tree_text, i.lspci_verbose_text)
