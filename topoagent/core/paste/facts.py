"""The facts of the tool outputs that enrich a host rather than draw it: each function here
takes a snapshot and one parsed output and returns the snapshot with that output's facts
joined in, and the notes on how they were joined.

* ``nvidia-smi -q``: each GPU's BDF, PCI ids, model and link (current and maximum generation
  and width), and whether it was busy.  Joined to the GPUs by BDF; to a matrix's ``GPU0`` …
  by nvidia-smi's own index (both list GPUs in one enumeration); added where no GPU is known.
* ``numactl -H``: every node's CPUs, memory and distances (the kernel's, as numactl reads them).
* ``ibdev2netdev`` / ``ibv_devinfo``: RDMA devices, their ports' state and their netdevs,
  joined to NICs by RDMA name (``-v`` adds the PCI function: joined by BDF).
* ``nvidia-smi topo -p2p``: each GPU pair's P2P status, by label.
* ``nvidia-smi nvlink -s`` / ``-R``: each GPU's active and inactive NVLinks, by label.
* ``dmesg``: AER events, by BDF (a function the rest does not show is added with what the
  log says of it: driver, ids).

Pure: no file is read here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import msgspec

from topoagent.core import pci
from topoagent.core.bdf import bdf_key
from topoagent.core.parse.dmesg_aer import AerEvent
from topoagent.core.parse.numactl import NumactlReport
from topoagent.core.parse.nvsmi_nvlink import NvlinkGpu
from topoagent.core.parse.nvsmi_p2p import P2PMatrix
from topoagent.core.parse.nvsmi_query import GEN_GTS, GpuQuery, QueryReport
from topoagent.core.parse.rdma_tools import IbPort
from topoagent.core.snapshot import (
    AerLogged,
    GivenP2P,
    GpuActivity,
    LinkInfo,
    NetDevice,
    NumaNode,
    NvlinkStatus,
    PciFunction,
    RdmaDevice,
    RdmaPort,
    Snapshot,
)

__all__ = [
    "apply_aer",
    "apply_nvlink",
    "apply_p2p",
    "apply_query",
    "apply_numactl",
    "apply_rdma",
    "gpu_labels",
    "is_gpu",
    "with_labelled_gpus",
]

#: The name a matrix gives a GPU it knows no model of (topoagent.core.paste.matrix).
_NO_MODEL = "NVIDIA GPU (model not in the matrix)"


def is_gpu(f: PciFunction) -> bool:
    """A GPU function, by class (display) or by what its source said."""
    c = pci.class16(f.class_code)
    return (c is not None and c >> 8 == 0x03) or (c is None and f.kind == "gpu")


def _replace_pci(snap: Snapshot, fns: Iterable[PciFunction], **changes: object) -> Snapshot:
    return msgspec.structs.replace(snap, pci=tuple(fns), **changes)


# -- nvidia-smi -q ----------------------------------------------------------------------------


def _query_link(q: GpuQuery) -> LinkInfo:
    return LinkInfo(
        current_gts=GEN_GTS.get(q.gen_current) if q.gen_current else None,
        current_width=q.width_current,
        max_gts=GEN_GTS.get(q.gen_max) if q.gen_max else None,
        max_width=q.width_max,
    )


def _query_where(q: GpuQuery) -> str:
    if q.bdf is None:
        return f"nvidia-smi -q block {q.index} (lines {min(q.lines.values(), default=0)}-)"
    dom, rest = q.bdf.split(":", 1)
    return f"nvidia-smi -q GPU {int(dom, 16):08X}:{rest.upper()}"


def _with_query(f: PciFunction, q: GpuQuery) -> PciFunction:
    """``f`` with what the query says of it; facts another source gave are kept."""
    link = _query_link(q)
    joined = f.link.filled_from(link) if f.link.known else link
    return msgspec.structs.replace(
        f,
        bdf=q.bdf or f.bdf,
        name=q.name if f.name in (None, _NO_MODEL) and q.name else f.name,
        vendor_id=f.vendor_id if f.vendor_id is not None else q.vendor_id,
        device_id=f.device_id if f.device_id is not None else q.device_id,
        subsystem_vendor_id=f.subsystem_vendor_id if f.subsystem_vendor_id is not None else q.subsystem_vendor_id,
        subsystem_device_id=f.subsystem_device_id if f.subsystem_device_id is not None else q.subsystem_device_id,
        link=joined,
        link_source=f.link_source if f.link.known else (_query_where(q) if link.known else None),
        activity=GpuActivity(
            q.performance_state, q.utilization, _query_where(q), idle_reason=q.idle, virtualization=q.virtualization
        ),
    )


def _query_function(q: GpuQuery, whole: bool) -> PciFunction:
    """A GPU only the query shows: labelled ``GPU<i>`` where its block's place is nvidia-smi's
    index (the paste holds every attached GPU), else by its bus id alone."""
    label = f"GPU{q.index}" if whole else None
    return _with_query(PciFunction(bdf=q.bdf, label=label, kind="gpu", vendor_id=pci.NVIDIA, class_code=None), q)


def apply_query(snap: Snapshot, report: QueryReport) -> tuple[Snapshot, list[str]]:
    """``snap`` with the GPUs of a ``nvidia-smi -q``: joined by BDF; to a matrix's ``GPU<i>`` by
    index only where the query holds every attached GPU and as many as the matrix (then its
    i-th block is nvidia-smi's GPU i); else each is a GPU of its own, at its bus id."""
    queries = list(report.gpus)
    by_bdf = {q.bdf: q for q in queries if q.bdf is not None}
    gpus = [f for f in snap.pci if is_gpu(f)]
    notes: list[str] = []
    labelled = {f.label: f for f in gpus if f.bdf is None and f.label is not None}
    if labelled and report.whole and len(labelled) == len(queries) and not any(f.bdf in by_bdf for f in gpus):
        # A matrix's GPU<i> is nvidia-smi's index i, the order of -q's blocks (one enumeration).
        by_label = {f"GPU{q.index}": q for q in queries}
        fns = [_with_query(f, by_label[f.label]) if f.label in by_label and f in gpus else f for f in snap.pci]
        notes.append("GPUs joined to nvidia-smi -q by nvidia-smi's index (GPU<i> is the i-th -q block)")
    else:
        fns = [_with_query(f, by_bdf[f.bdf]) if f.bdf in by_bdf else f for f in snap.pci]
        known = {f.bdf for f in snap.pci}
        added = [q for q in queries if q.bdf is None or q.bdf not in known]
        if added and labelled:
            held = f"{len(queries)} of the host's {max(report.attached)}" if report.attached else str(len(queries))
            notes.append(
                f"nvidia-smi -q holds {held} GPU(s), the matrix {len(labelled)} without a bus id: "
                "not joined by position (a block's place in a paste is no GPU's index); each is a GPU of its own"
            )
        elif added and gpus:
            notes.append(
                f"nvidia-smi -q names {len(added)} GPU(s) the other outputs do not show (first: {added[0].bdf})"
            )
        fns += [_query_function(q, report.whole) for q in added]
    driver = snap.driver_version or report.driver_version
    return _replace_pci(snap, fns, driver_version=driver), notes


# -- numactl -H -------------------------------------------------------------------------------


def apply_numactl(snap: Snapshot, report: NumactlReport) -> Snapshot:
    """``snap`` with ``numactl -H``'s nodes: their CPUs, memory and distances replace what the
    other outputs implied (a matrix's CPU affinities, lspci's node numbers)."""
    ids = sorted({n.id for n in snap.numa_nodes} | {n.id for n in report.nodes})
    given = {n.id: n for n in report.nodes}
    old = {n.id: n for n in snap.numa_nodes}
    order = tuple(ids)
    nodes = []
    for i in ids:
        g = given.get(i)
        if g is None:
            nodes.append(old[i])
            continue
        nodes.append(
            NumaNode(
                id=i,
                cpus=g.cpus if g.cpus is not None else (old[i].cpus if i in old else None),
                memory_bytes=g.size_bytes if g.size_bytes is not None else (old[i].memory_bytes if i in old else None),
                distances=report.distance_row(i, order),
                cpus_file="numactl -H" if g.cpus is not None else (old[i].cpus_file if i in old else None),
            )
        )
    return msgspec.structs.replace(snap, numa_nodes=tuple(nodes))


# -- ibdev2netdev, ibv_devinfo ----------------------------------------------------------------


def apply_rdma(snap: Snapshot, ports: Iterable[IbPort]) -> tuple[Snapshot, list[str]]:
    """``snap`` with the RDMA devices, ports and netdevs the tools list.  A device the paste
    names by BDF (``ibdev2netdev -v``) is that function's; a matrix's NIC of the same RDMA name
    takes the BDF.  Where no other output lists a NIC, each RDMA device is a NIC of its own
    (its ids from the part or ``vendor_part_id``), placed nowhere."""
    notes: list[str] = []
    by_dev: dict[str, list[IbPort]] = defaultdict(list)
    for p in ports:
        by_dev[p.device].append(p)
    bdf_of = {d: next((p.bdf for p in ps if p.bdf), None) for d, ps in by_dev.items()}
    fns = list(snap.pci)
    alone = not any(f.kind == "nic" or pci.is_nic_class(pci.class16(f.class_code)) for f in fns)
    for dev, bdf in bdf_of.items():
        at = next((i for i, f in enumerate(fns) if f.bdf is None and dev in f.rdma_names), None)
        if bdf is not None and at is not None:  # a matrix's NIC named by its legend: the same RDMA device
            fns[at] = msgspec.structs.replace(fns[at], bdf=bdf)
        elif (bdf is not None and not any(f.bdf == bdf for f in fns)) or (bdf is None and at is None and alone):
            fns.append(_rdma_function(dev, bdf, by_dev[dev]))
    fns = _with_physfns(fns)
    rdma = list(snap.rdma)
    netdevs = list(snap.netdevs)
    named = {r.name for r in rdma}
    for dev, ps in by_dev.items():
        bdf = bdf_of[dev]
        merged = _ports(ps)
        if dev not in named:
            rdma.append(RdmaDevice(dev, bdf, merged))
        for p in ps:
            if p.netdev and not any(n.name == p.netdev for n in netdevs):
                netdevs.append(NetDevice(p.netdev, bdf, rdma=None if bdf else dev, up=p.netdev_up))
    unjoined = [d for d, b in bdf_of.items() if b is None and not any(d in f.rdma_names for f in fns)]
    if unjoined:
        notes.append(
            f"{len(unjoined)} RDMA device(s) named by no other output and without a PCI address "
            f"(first: {unjoined[0]}): their ports are listed but joined to no NIC"
        )
    return msgspec.structs.replace(snap, pci=tuple(fns), rdma=tuple(rdma), netdevs=tuple(netdevs)), notes


def _rdma_function(dev: str, bdf: str | None, ps: list[IbPort]) -> PciFunction:
    """The NIC function behind an RDMA device the tools name: its ids where a part or
    ``vendor_part_id`` states them, named as the PCI tables name them."""
    vendor = next((p.vendor_id for p in ps if p.vendor_id is not None), None)
    device = next((p.device_id for p in ps if p.device_id is not None), None)
    known = pci.known_device(vendor, device)
    return PciFunction(
        bdf=bdf,
        kind="nic",
        rdma=True,
        vendor_id=vendor,
        device_id=device,
        name=pci.device_name(vendor, device, None) if known else "RDMA NIC",
        rdma_names=(dev,),
    )


def _with_physfns(fns: list[PciFunction]) -> list[PciFunction]:
    """``fns`` with each pasted VF (a VF's id: ``ConnectX-5 Virtual Function``) that has no
    physical function yet given the nearest physical function before it on its bus: an SR-IOV
    PF's VFs follow it (First VF Offset, PCIe Base Specification 9.3.3.10)."""
    pf_of: dict[str, str] = {}
    last_pf: dict[tuple[str, int | None], str] = {}  # (domain:bus, vendor) -> the last PF seen
    for bdf, f in sorted(((f.bdf, f) for f in fns if f.bdf is not None), key=lambda bf: bdf_key(bf[0])):
        bus = (bdf[: bdf.rindex(":")], f.vendor_id)
        if not pci.is_vf_id(f.vendor_id, f.device_id):
            last_pf[bus] = bdf
        elif f.physfn is None and bus in last_pf:
            pf_of[bdf] = last_pf[bus]
    return [msgspec.structs.replace(f, physfn=pf_of[f.bdf]) if f.bdf in pf_of else f for f in fns]


def _ports(ps: list[IbPort]) -> tuple[RdmaPort, ...]:
    """One record per port number: the IB state, link layer and rate from whichever line gave them."""
    by_port: dict[int, dict[str, object]] = {}
    for p in ps:
        slot = by_port.setdefault(p.port, {"state": None, "link_layer": None, "rate_gbps": None})
        for key in slot:
            if slot[key] is None:
                slot[key] = getattr(p, key)
    return tuple(RdmaPort(n, **v) for n, v in sorted(by_port.items()))  # type: ignore[arg-type]


# -- labels: how the per-GPU outputs name GPUs ------------------------------------------------


def gpu_labels(snap: Snapshot) -> tuple[Snapshot, str | None]:
    """``snap`` with every GPU labelled as nvidia-smi (and rocm-smi) number them, where none is:
    ``GPU<i>`` in PCI bus order -- nvidia-smi's default order (``CUDA_DEVICE_ORDER=PCI_BUS_ID``)
    and the order amd-smi and rocm-smi sort GPUs in (by BDF).  Returns the note that says so,
    or None where labels were already given."""
    gpus = [f for f in snap.pci if is_gpu(f)]
    if not gpus or any(f.label for f in gpus):
        return snap, None
    order = sorted((f for f in gpus if f.bdf is not None), key=lambda f: bdf_key(f.bdf))  # type: ignore[arg-type]
    label = {f.bdf: f"GPU{i}" for i, f in enumerate(order)}
    fns = [msgspec.structs.replace(f, label=label[f.bdf]) if f.bdf in label else f for f in snap.pci]
    return _replace_pci(snap, fns), "GPUs numbered GPU0 … in PCI bus order, as nvidia-smi and rocm-smi number them"


def with_labelled_gpus(snap: Snapshot, labels: Iterable[str]) -> Snapshot:
    """``snap`` with an NVIDIA GPU known only by its label for each of ``labels`` no GPU has
    (a ``-p2p`` or ``nvlink -s`` output given without the matrix or query naming the GPUs)."""
    have = {f.label for f in snap.pci if is_gpu(f)}
    missing = [lb for lb in dict.fromkeys(labels) if lb not in have]
    if not missing:
        return snap
    added = tuple(PciFunction(bdf=None, label=lb, kind="gpu", vendor_id=pci.NVIDIA, name=_NO_MODEL) for lb in missing)
    return _replace_pci(snap, (*snap.pci, *added))


def apply_p2p(snap: Snapshot, matrix: P2PMatrix, where: str) -> Snapshot:
    """``snap`` with a ``-p2p`` matrix's status of every ordered GPU pair (by label)."""
    snap = with_labelled_gpus(snap, matrix.labels)
    cap = matrix.capability
    given = list(snap.given_p2p)
    for i, a in enumerate(matrix.labels):
        for j, b in enumerate(matrix.labels):
            cell = matrix.cells[i][j]
            if i == j or cell == "?":
                continue
            line = matrix.row_lines.get(a)
            source = f"{where} {a}/{b}" + (f" (line {line})" if line else "")
            given.append(GivenP2P(a, b, cell, cap, source))
    return msgspec.structs.replace(snap, given_p2p=tuple(given))


def apply_nvlink(snap: Snapshot, gpus: Iterable[NvlinkGpu]) -> Snapshot:
    """``snap`` with ``nvidia-smi nvlink -s``'s and ``-R``'s links of each GPU (by label
    ``GPU<index>``), one record per GPU however many outputs list it: a link is active where
    any shows it so (a speed, a remote device)."""
    by_index: dict[int, list[NvlinkGpu]] = defaultdict(list)
    for g in gpus:
        by_index[g.index].append(g)
    snap = with_labelled_gpus(snap, (f"GPU{i}" for i in by_index))
    status = list(snap.nvlink_status)
    for i, gs in by_index.items():
        speeds = dict(s for g in gs for s in g.speeds)
        remote = dict(r for g in gs for r in g.remote)
        links = sorted(speeds.keys() | remote.keys())
        first = gs[0]
        how = "-s" if first.speeds or not first.remote else "-R"
        status.append(
            NvlinkStatus(
                f"GPU{i}",
                tuple(speeds.values()),
                tuple(sorted({n for g in gs for n in g.inactive} - set(links))),
                f"nvidia-smi nvlink {how} GPU {i} (line {first.line})",
                remote=tuple(remote.values()),
                links=tuple(links),
            )
        )
    return msgspec.structs.replace(snap, nvlink_status=tuple(status))


# -- dmesg ------------------------------------------------------------------------------------

#: The driver a kernel log names -> what the function is (class code).
_DRIVER_CLASS = {
    "nvidia": 0x030200,
    "amdgpu": 0x038000,
    "mlx5_core": 0x020700,
    "mlx4_core": 0x020700,
    "bnxt_en": 0x020000,
    "ice": 0x020000,
    "nvme": 0x010802,
    "pcieport": 0x060400,
}


def apply_aer(snap: Snapshot, events: Iterable[AerEvent]) -> Snapshot:
    """``snap`` with each function's logged AER events; a function no other output shows is
    added with the driver and ids the log gives."""
    by_bdf: dict[str, list[AerEvent]] = defaultdict(list)
    for e in events:
        by_bdf[e.bdf].append(e)
    fns = list(snap.pci)
    known = {f.bdf for f in fns}
    for bdf, evs in by_bdf.items():
        if bdf in known:
            continue
        first = next((e for e in evs if e.driver), evs[0])
        fns.append(
            PciFunction(
                bdf=bdf,
                driver=first.driver,
                vendor_id=first.vendor_id,
                device_id=first.device_id,
                class_code=_DRIVER_CLASS.get(first.driver or ""),
            )
        )
    out = []
    for f in fns:
        evs = by_bdf.get(f.bdf or "", [])
        if evs:
            logged = tuple(AerLogged(e.severity, e.type, e.errors, e.line, e.text) for e in evs)
            f = msgspec.structs.replace(f, aer_logged=f.aer_logged + logged)
        out.append(f)
    return _replace_pci(snap, out)
