"""GPU and NIC placement: GPU_NIC_CROSS_SOCKET, GPU_NIC_CROSS_NUMA, GPU_NIC_VIA_HOST_BRIDGE,
GPU_NIC_VIA_PXN and NO_RDMA_NIC (their words and rules: :mod:`~topoagent.core.findings.catalogue`)."""

from __future__ import annotations

from topoagent.core.analysis.c2c import is_c2c, own_cpu_nic
from topoagent.core.analysis.paths import Path, nccl_path_type
from topoagent.core.analysis.rails import Rail
from topoagent.core.findings.context import Context, given_evidence, nic_label, numa_evidence
from topoagent.core.findings.finding import Evidence, Finding
from topoagent.core.pathclass import PathClass
from topoagent.core.snapshot import host_path
from topoagent.core.topology import Device


def check_gpu_nic_placement(c: Context) -> list[Finding]:
    """GPU_NIC_CROSS_SOCKET / GPU_NIC_CROSS_NUMA / GPU_NIC_VIA_HOST_BRIDGE: a GPU whose rail
    NIC is worse than PXB, so GPUDirect RDMA is off by default; GPU_NIC_VIA_PXN where NCCL
    reaches it through an NVLinked peer instead (analysis.ncclnet)."""
    return [f for rail in c.rails.rails if (f := _rail_finding(c, rail)) is not None]


def _rail_finding(c: Context, rail: Rail) -> Finding | None:
    if rail.nic is None or rail.cls is None:
        return None
    g, n = c.dev(rail.gpu), c.dev(rail.nic)
    if not n.rdma_capable:
        return None  # no RDMA on the best NIC: GPUDirect is moot (NO_RDMA_NIC says so)
    if rail.nccl_path is PathClass.PXN and rail.pxn_via is not None:
        return _via_pxn(c, g, n, c.dev(rail.pxn_via))
    if rail.cls <= PathClass.PXB:
        return None
    p = c.path(g.id, n.id)
    if not p.locality_known and (rail.cls is PathClass.SYS or c.offline):
        return None  # NUMA_UNKNOWN explains it (the class is only the worst case), or the paste does not place them
    # A node the input does not give proves nothing: only known ones are evidence (the weakest
    # line bounds the severity, and "unknown" is no line of proof).
    ev = [e for d in (g, n) if d.numa_node is not None for e in numa_evidence(c, d)] + given_evidence(c, g, n)
    if not ev:
        ev = _cell(c, g, n, p)  # a pasted tree's path (an inference from where it places both)
    if is_c2c(c.topo, g):
        return _c2c_cross_grace(c, g, n, ev)  # Grace: only a NIC on the other CPU is remote
    if rail.cls is PathClass.SYS:
        return _across(c, g, n, p, ev)
    say = "" if c.flat is None else "guest" if c.flat.proven else "guest suggested"
    return c.finding(
        "GPU_NIC_VIA_HOST_BRIDGE",
        [g.id, n.id],
        ev,
        say=say,
        gpu=g.id,
        nic=nic_label(n),
        path=rail.cls.name,
    )


def _across(c: Context, g: Device, n: Device, p: Path, ev: list[Evidence]) -> Finding:
    """A SYS rail: across sockets only where the input proves sockets (a host tree's packages,
    or an old matrix's ``SOC`` that no other cell contradicts); else across NUMA nodes, at that
    code's severity, naming what is unknown."""
    if p.same_socket is False:
        return c.finding(
            "GPU_NIC_CROSS_SOCKET",
            [g.id, n.id],
            ev,
            gpu=g.id,
            nic=nic_label(n),
            nic_socket=n.socket,
            gpu_socket=g.socket,
        )
    if p.same_socket is True:
        return c.finding(
            "GPU_NIC_CROSS_NUMA",
            [g.id, n.id],
            ev,
            gpu=g.id,
            nic=nic_label(n),
            nic_node=n.numa_node,
            gpu_node=g.numa_node,
        )
    if c.topo.soc_legend:
        why = _soc_contradiction(c, n)
        if why is None:
            return c.finding("GPU_NIC_CROSS_SOCKET", [g.id, n.id], ev, say="soc", gpu=g.id, nic=nic_label(n))
    else:
        why = (
            "whether that is another socket is unknown from this input: nvidia-smi prints SYS between "
            "NUMA nodes of one socket too (AMD NPS2/NPS4, Intel SNC)"
        )
    if n.numa_node is not None and g.numa_node is not None and n.numa_node != g.numa_node:
        where = f"NUMA node {n.numa_node}, the GPU on node {g.numa_node}"
    elif g.numa_node is not None:
        where = f"another NUMA node than the GPU's node {g.numa_node} (the NIC's node is not shown)"
    else:
        where = "another NUMA node (the nodes are not given)"
    return c.finding(
        "GPU_NIC_CROSS_NUMA", [g.id, n.id], ev, say="socket unknown", gpu=g.id, nic=nic_label(n), where=where, why=why
    )


def _soc_contradiction(c: Context, n: Device) -> str | None:
    """Why an old matrix's ``SOC`` does not place ``n`` on another socket: it is SOC to the GPUs
    of every CPU set the matrix shows (two or more), and a NIC cannot hang off another socket
    than all of them (IBM's Minsky printed SOC from its NIC to all four GPUs).  None where the
    SOC cells agree with one socket for the NIC."""
    sets = {g.local_cpus for g in c.topo.gpus if g.local_cpus}
    soc_sets = {
        g.local_cpus for g in c.topo.gpus if g.local_cpus and c.topo.given_token(g, n) == "SYS" and g.label is not None
    }
    if len(sets) >= 2 and soc_sets == sets:
        return (
            f"the old legend's SOC names CPU sockets, but {nic_label(n)} is SOC to the GPUs of every CPU set "
            f"({len(sets)}), so it cannot be on another socket than all of them: its socket is unknown"
        )
    return None


def _via_pxn(c: Context, g: Device, n: Device, via: Device) -> Finding:
    """GPU_NIC_VIA_PXN: the rail is the NIC's local GPU's, reached over NVLink (analysis.ncclnet)."""
    direct, hop, peer = c.path(g.id, n.id), c.path(g.id, via.id), c.path(via.id, n.id)
    ev = _cell(c, g, n, direct) + _cell(c, g, via, hop) + _cell(c, via, n, peer)
    return c.finding(
        "GPU_NIC_VIA_PXN",
        [g.id, n.id, via.id],
        ev,
        gpu=g.id,
        nic=nic_label(n),
        via=via.id,
        path=direct.cls.name,
        peer_path=nccl_path_type(c.topo, via, n, peer).name,  # P2C for a Grace GPU's own NIC
        nvlinks=hop.token,
    )


def _cell(c: Context, a: Device, b: Device, p: Path) -> list[Evidence]:
    """A path as evidence: the pasted cell where one states it, else the tree's class."""
    return given_evidence(c, a, b) or [Evidence(f"path {a.id}-{b.id}", p.token)]


def _c2c_cross_grace(c: Context, g: Device, n: Device, ev: list[Evidence]) -> Finding | None:
    """GPU_NIC_CROSS_SOCKET for a GPU on NVLink-C2C whose nearest RDMA NIC hangs off another CPU.

    nvidia-smi prints ``SYS`` between a C2C GPU and every NIC, also those of its own Grace;
    NCCL calls the path to those ``P2C`` and keeps GPUDirect RDMA on (analysis.c2c).  Only a NIC
    known to hang off another CPU is a cross-socket placement; where the NIC's node is unknown
    the ``SYS`` says nothing of it.
    """
    if own_cpu_nic(c.topo, g, n) is not False:
        return None
    return c.finding(
        "GPU_NIC_CROSS_SOCKET",
        [g.id, n.id],
        ev,
        say="grace",
        gpu=g.id,
        gpu_node=g.numa_node,
        nic=nic_label(n),
        nic_node=n.numa_node,
    )


def check_no_rdma_nic(c: Context) -> list[Finding]:
    """NO_RDMA_NIC: GPUs but no RDMA-capable NIC, where the input lists every NIC the host has.

    A partial input proves no absence: a filtered or cut lspci listing (``lspci | grep``,
    ``-s``, ``-d 10de:``, an elided tree), a matrix alone (nvidia-smi lists the RDMA NICs it
    knows and never AWS EFA), a capture without ``/sys/class``."""
    if not c.topo.gpus or c.rdma_nics or not c.topo.lists_every_nic:
        return []
    nics = [n for n in c.topo.nics if not n.is_vf]
    if c.offline:
        # lspci shows no RDMA device names, so its NICs are judged by vendor, name and driver
        where = [Evidence("lspci", "every function listed; RDMA judged from vendor, name and driver")]
    else:
        where = [Evidence(host_path("sys/class/infiniband"), "absent or empty")]
    return [
        c.finding(
            "NO_RDMA_NIC",
            [g.id for g in c.topo.gpus],
            where
            + [
                Evidence(c.attr(n, "class"), f"0x{n.class_code:06x}" if n.class_code is not None else None)
                for n in nics
            ],
            gpus=len(c.topo.gpus),
        )
    ]
