"""Rails, the GPU-NIC pairing: SOCKET_WITHOUT_RAIL, NIC_SHARED_WHILE_IDLE and
DRA_PCIE_ROOT_MISMATCH (their words and rules: :mod:`~topoagent.core.findings.catalogue`)."""

from __future__ import annotations

from topoagent.core.analysis.rails import compute_nics
from topoagent.core.findings.context import Context, nic_label
from topoagent.core.findings.finding import Evidence, Finding
from topoagent.core.pathclass import PathClass
from topoagent.core.snapshot import host_path
from topoagent.core.topology import Device


def check_rails(c: Context) -> list[Finding]:
    """SOCKET_WITHOUT_RAIL and NIC_SHARED_WHILE_IDLE."""
    topo, plan = c.topo, c.rails
    out = []
    compute = compute_nics(topo, plan.roles)
    if compute:
        for s in topo.sockets:
            gpus = [g for g in topo.gpus if g.socket == s.id]
            if gpus and not any(n.socket == s.id for n in compute):
                out.append(
                    c.finding(
                        "SOCKET_WITHOUT_RAIL",
                        [g.id for g in gpus],
                        [Evidence(c.attr(g, "numa_node"), str(g.numa_node)) for g in gpus[:8]],
                        socket=s.id,
                        gpus=len(gpus),
                    )
                )
    idle = [n for n in compute if not plan.users(n.id)]
    for n in compute:
        users = plan.users(n.id)
        if len(users) < 2:
            continue
        for other in idle:
            # only paths a source shows: an unshown one's class is a placeholder (a partial paste)
            close = [
                g
                for g in users
                if (to_idle := c.path(g, other.id)).shown
                and (to_shared := c.path(g, n.id)).shown
                and to_idle.cls == to_shared.cls
            ]
            if close:
                out.append(
                    c.finding(
                        "NIC_SHARED_WHILE_IDLE",
                        [*users, n.id, other.id],
                        [Evidence(f"path {g}-{n.id}", c.path(g, n.id).token) for g in users]
                        + [Evidence(f"path {g}-{other.id}", c.path(g, other.id).token) for g in close],
                        users=", ".join(users),
                        nic=nic_label(n),
                        idle=nic_label(other),
                        close=", ".join(close),
                    )
                )
                break
    return out


def check_dra_pcie_root(c: Context) -> list[Finding]:
    """DRA_PCIE_ROOT_MISMATCH: a Kubernetes DRA claim that matches a GPU and a NIC on the
    standard attribute ``resource.kubernetes.io/pcieRoot`` (the root bus, ``pci0000:15``:
    kubernetes ``dynamic-resource-allocation/deviceattribute``) would not give a GPU its rail NIC.

    Two ways: the rail NIC sits under another root (the root is too fine: the match finds no
    NIC, or not this one), or the GPU's root also holds compute NICs farther from the GPU than
    its rail (too coarse: the match may hand it one of those).  Judged for GPUs whose rail is
    within one NUMA node (NODE or better, or a Grace GPU's P2C; SYS is GPU_NIC_CROSS_SOCKET/NUMA's) and where the
    tree names every root (not pasted tool output).
    """
    if c.offline:
        return []
    compute = compute_nics(c.topo, c.rails.roles)
    off: list[tuple[Device, Device, str]] = []
    for rail in c.rails.rails:
        # a Grace GPU's NIC on its own CPU is within one NUMA node too: SYS as nvidia-smi prints it, P2C
        if rail.nic is None or rail.cls is None or (rail.cls > PathClass.NODE and rail.nccl_path is not PathClass.P2C):
            continue
        g, n = c.topo.physical(c.dev(rail.gpu)), c.dev(rail.nic)
        if g.root_bus is None or n.root_bus is None:
            continue
        if n.root_bus != g.root_bus:
            off.append((g, n, f"its rail NIC {nic_label(n)} is under {n.root_bus}, the GPU under {g.root_bus}"))
            continue
        farther = [m for m in compute if m.root_bus == g.root_bus and c.path(g.id, m.id).cls > rail.cls]
        if farther:
            names = ", ".join(f"{m.id} ({c.path(g.id, m.id).token})" for m in farther[:4])
            off.append((g, n, f"{g.root_bus} also holds {names}, farther than its rail NIC {n.id} ({rail.cls.name})"))
    if not off:
        return []
    subjects = list(dict.fromkeys(x for g, n, _ in off for x in (g.id, n.id)))
    return [
        c.finding(
            "DRA_PCIE_ROOT_MISMATCH",
            subjects,
            [
                Evidence(host_path(f"sys/bus/pci/devices/{d.bdf}"), f"../../../devices/{d.root_bus}/...")
                for g, n, _ in off[:4]
                for d in (g, n)
            ],
            gpus=len(off),
            why="; ".join(f"{g.id}: {why}" for g, _, why in off[:4]) + ("; ..." if len(off) > 4 else ""),
        )
    ]
