"""GPU and NIC placement: GPU_NIC_CROSS_SOCKET, GPU_NIC_CROSS_NUMA, GPU_NIC_VIA_HOST_BRIDGE and
NO_RDMA_NIC (their words and rules: :mod:`~topoagent.core.findings.catalogue`)."""

from __future__ import annotations

from topoagent.core.analysis.c2c import is_c2c, own_cpu_nic
from topoagent.core.findings.context import Context, given_evidence, nic_label, numa_evidence
from topoagent.core.findings.finding import Evidence, Finding
from topoagent.core.pathclass import PathClass
from topoagent.core.snapshot import host_path
from topoagent.core.topology import Device


def check_gpu_nic_placement(c: Context) -> list[Finding]:
    """GPU_NIC_CROSS_SOCKET / GPU_NIC_CROSS_NUMA / GPU_NIC_VIA_HOST_BRIDGE: a GPU whose best
    RDMA NIC is worse than PXB, so GPUDirect RDMA is off by default."""
    out = []
    for rail in c.rails.rails:
        if rail.nic is None or rail.cls is None or rail.cls <= PathClass.PXB:
            continue
        g, n = c.dev(rail.gpu), c.dev(rail.nic)
        if not n.rdma_capable:
            continue  # no RDMA on the best NIC: GPUDirect is moot (NO_RDMA_NIC says so)
        p = c.path(g.id, n.id)
        ev = numa_evidence(c, g) + numa_evidence(c, n) + given_evidence(c, g, n)
        if rail.cls is PathClass.SYS and not p.locality_known:
            continue  # NUMA_UNKNOWN explains it; the class is only the worst case
        if not p.locality_known and c.offline:
            continue  # the pasted output does not place them (the source status says so)
        if is_c2c(c.topo, g):
            out += _c2c_cross_grace(c, g, n, ev)  # Grace: only a NIC on the other CPU is remote
            continue
        if rail.cls is PathClass.SYS and p.same_socket is False:
            out.append(
                c.finding(
                    "GPU_NIC_CROSS_SOCKET",
                    [g.id, n.id],
                    ev,
                    gpu=g.id,
                    nic=nic_label(n),
                    nic_socket=n.socket,
                    gpu_socket=g.socket,
                )
            )
        elif rail.cls is PathClass.SYS and p.same_socket is None:
            # SYS stated by nvidia-smi (or NUMA nodes known without their sockets): the
            # interconnect is crossed, which one is not known; the worse case is the socket one.
            out.append(
                c.finding(
                    "GPU_NIC_CROSS_SOCKET",
                    [g.id, n.id],
                    ev,
                    say="socket unknown",
                    fix="socket unknown",
                    gpu=g.id,
                    nic=nic_label(n),
                )
            )
        elif rail.cls is PathClass.SYS:
            out.append(
                c.finding(
                    "GPU_NIC_CROSS_NUMA",
                    [g.id, n.id],
                    ev,
                    gpu=g.id,
                    nic=nic_label(n),
                    nic_node=n.numa_node,
                    gpu_node=g.numa_node,
                )
            )
        else:
            out.append(
                c.finding(
                    "GPU_NIC_VIA_HOST_BRIDGE",
                    [g.id, n.id],
                    ev,
                    gpu=g.id,
                    nic=nic_label(n),
                    path=rail.cls.name,
                )
            )
    return out


def _c2c_cross_grace(c: Context, g: Device, n: Device, ev: list[Evidence]) -> list[Finding]:
    """GPU_NIC_CROSS_SOCKET for a GPU on NVLink-C2C whose nearest RDMA NIC hangs off another CPU.

    nvidia-smi prints ``SYS`` between a C2C GPU and every NIC, also those of the GPU's own Grace;
    NCCL calls the path to those ``P2C`` and keeps GPUDirect RDMA on (analysis.c2c).  Only a NIC
    known to hang off another CPU is a cross-socket placement; where the NIC's node is unknown
    the ``SYS`` says nothing of it.
    """
    if own_cpu_nic(c.topo, g, n) is not False:
        return []
    return [
        c.finding(
            "GPU_NIC_CROSS_SOCKET",
            [g.id, n.id],
            ev,
            say="grace",
            fix="grace",
            gpu=g.id,
            gpu_node=g.numa_node,
            nic=nic_label(n),
            nic_node=n.numa_node,
        )
    ]


def check_no_rdma_nic(c: Context) -> list[Finding]:
    """NO_RDMA_NIC: GPUs but no RDMA-capable NIC."""
    if not c.topo.gpus or c.rdma_nics or c.topo.partial_inputs:
        return []  # (an input that shows part of the host cannot show that a NIC is absent)
    nics = [n for n in c.topo.nics if not n.is_vf]
    if c.offline:
        # nvidia-smi lists every RDMA device; lspci shows none, so its NICs are judged by
        # vendor and driver (topoagent.core.paste)
        where = [Evidence("nvidia-smi topo -m", "no NIC rows")] if any(d.label for d in c.topo.gpus) else []
        if any(s.name == "lspci" and s.status != "unavailable" for s in c.topo.sources):
            where.append(Evidence("lspci", "no RDMA device names; RDMA judged from vendor and driver"))
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
