"""What the tools people paste say beyond the tree: GPU_LINK_SLOW_UNDER_LOAD and
GPU_LINK_IDLE_DOWNCLOCKED (``nvidia-smi -q``), P2P_NOT_SUPPORTED (``nvidia-smi topo -p2p``),
NVLINK_INACTIVE (``nvidia-smi nvlink -s`` / ``-R``), NIC_PORT_DOWN (``ibdev2netdev``, ``ibv_devinfo``,
or sysfs's port state) and PCIE_AER_LOGGED (``dmesg``) -- their words and rules:
:mod:`~topoagent.core.findings.catalogue`."""

from __future__ import annotations

from topoagent.core.analysis.rails import NicRole
from topoagent.core.digits import decimal
from topoagent.core.findings.context import Context, given_evidence, nic_label
from topoagent.core.findings.finding import Evidence, Finding, Severity
from topoagent.core.parse.nvsmi_p2p import STATUS
from topoagent.core.parse.nvsmi_query import GEN_GTS
from topoagent.core.pathclass import PathClass
from topoagent.core.snapshot import AerCounts, GivenP2P, host_path
from topoagent.core.topology import Device

__all__ = ["check_aer_logged", "check_gpu_activity", "check_nvlink_inactive", "check_p2p", "check_ports"]

_GEN_OF = {gts: gen for gen, gts in GEN_GTS.items()}


def _gen(gts: float | None) -> str:
    return f"Gen{_GEN_OF[gts]}" if gts in _GEN_OF else f"{gts:g} GT/s" if gts is not None else "?"


def check_gpu_activity(c: Context) -> list[Finding]:
    """GPU_LINK_SLOW_UNDER_LOAD / GPU_LINK_IDLE_DOWNCLOCKED: a GPU whose link ran below its
    maximum generation or width when ``nvidia-smi -q`` read it, busy (a fault) or idle (by
    design: nvidia-smi's ``pcie.link.gen.current`` and ``.width.current`` "may be reduced when
    the GPU is not in use", ``nvidia-smi --help-query-gpu``)."""
    out = []
    for d in c.topo.gpus:
        act, lk = d.activity, d.link
        if act is None or act.busy is None or not _below_max(d):
            continue  # (busy unknown: LINK_SPEED_BELOW_MAX_GPU / LINK_WIDTH_DEGRADED say what is known)
        idle = {True: "Idle clock event reason Active", False: None, None: None}[act.idle_reason]
        util = f"{act.utilization} %" if act.utilization is not None else None
        state = ", ".join(x for x in (act.performance_state, util, idle) if x)
        evidence = [
            Evidence(f"{act.source}: PCIe Generation Current", _gen(lk.current_gts)),
            Evidence(f"{act.source}: PCIe Generation Max", _gen(lk.max_gts)),
            Evidence(f"{act.source}: Link Width Current", _width(lk.current_width)),
            Evidence(f"{act.source}: Link Width Max", _width(lk.max_width)),
        ]
        if act.performance_state is not None:
            evidence.append(Evidence(f"{act.source}: Performance State", act.performance_state))
        if act.utilization is not None:
            evidence.append(Evidence(f"{act.source}: Utilization Gpu", f"{act.utilization} %"))
        if act.virtualization is not None:
            evidence.append(Evidence(f"{act.source}: Virtualization Mode", act.virtualization))
        if act.idle_reason is not None:
            idle_value = "Active" if act.idle_reason else "Not Active"
            evidence.append(Evidence(f"{act.source}: Clocks Event Reasons Idle", idle_value))
        out.append(
            c.finding(
                "GPU_LINK_SLOW_UNDER_LOAD" if act.busy else "GPU_LINK_IDLE_DOWNCLOCKED",
                [d.id],
                evidence,
                fix="guest" if act.busy and act.in_guest else "",
                id=d.id,
                name=d.name,
                link=f"{_gen(lk.current_gts)} {_width(lk.current_width)}",
                max_link=f"{_gen(lk.max_gts)} {_width(lk.max_width)}",
                state=state,
            )
        )
    return out


def _below_max(d: Device) -> bool:
    lk = d.link
    slow = lk.current_gts is not None and lk.max_gts is not None and lk.current_gts < lk.max_gts
    narrow = lk.current_width is not None and lk.max_width is not None and lk.current_width < lk.max_width
    return slow or narrow


def _width(width: int | None) -> str:
    return f"x{width}" if width is not None else "x?"


#: The capabilities whose refusal between GPUs NCCL would connect by P2P is a fault: NCCL's P2P
#: transport reads and writes peer memory (NVIDIA/nccl src/transport/p2p.cc, p2pCanConnect).
_DATA = ("read", "write", "nvlink")


def check_p2p(c: Context) -> list[Finding]:
    """P2P_NOT_SUPPORTED: GPUs NCCL would join by P2P -- NVLinked, or under one PCIe switch
    (PIX/PXB, within NCCL's default P2P level, ``ncclTopoCheckP2p`` in src/graph/paths.cc) --
    whose P2P status the driver reports not OK."""
    by_label = {g.label: g for g in c.topo.gpus if g.label is not None}
    worst: dict[tuple[str, str], GivenP2P] = {}
    for g in c.topo.given_p2p:
        if g.status in ("OK", "U") or g.capability in ("atomics", "prop"):
            continue
        key = (min(g.a, g.b, key=_label_key), max(g.a, g.b, key=_label_key))
        worst.setdefault(key, g)
    out = []
    for (la, lb), g in sorted(worst.items(), key=lambda kv: (_label_key(kv[0][0]), _label_key(kv[0][1]))):
        a, b = by_label.get(la), by_label.get(lb)
        if a is None or b is None:
            continue
        p = c.path(a.id, b.id)
        if not p.shown or p.cls > PathClass.PXB:
            continue  # beyond NCCL's P2P level (or unknown): NCCL would not use P2P there anyway
        linked = p.cls is PathClass.NV
        severity = Severity.CRITICAL if linked and g.capability in _DATA else Severity.WARNING
        if not linked and g.status == "GNS":
            severity = Severity.INFO  # the GPU model has no PCIe P2P: by design (GeForce)
        out.append(
            c.finding(
                "P2P_NOT_SUPPORTED",
                [a.id, b.id],
                [Evidence(g.source, f"{g.status} ({STATUS.get(g.status, '?')})"), *given_evidence(c, a, b)],
                say="nvlink" if linked else ("gpu" if g.status == "GNS" else ""),
                fix="nvlink" if linked else ("gpu" if g.status == "GNS" else ""),
                severity=severity,
                gpu=a.id,
                peer=b.id,
                path=p.token,
                status=g.status,
                meaning=STATUS.get(g.status, "?"),
                capability=g.capability or "capability not shown",
            )
        )
    return out


def _label_key(label: str) -> tuple[int, str]:
    number = decimal(label.lstrip("GPU"))
    return (1 << 30 if number is None else number, label)


def check_nvlink_inactive(c: Context) -> list[Finding]:
    """NVLINK_INACTIVE: a GPU with fewer active NVLinks than the most any GPU of the host has
    (``nvidia-smi nvlink -s`` or ``-R``): the same build gives every GPU the same links."""
    status = c.topo.nvlink_status
    if not status:
        return []
    most = max(s.active for s in status)
    by_label = {g.label: g for g in c.topo.gpus if g.label is not None}
    out = []
    for s in status:
        gpu = by_label.get(s.label)
        if gpu is None or s.active >= most or not s.inactive:
            continue
        out.append(
            c.finding(
                "NVLINK_INACTIVE",
                [gpu.id],
                [Evidence(s.source, f"{s.active} active, inactive: {', '.join(map(str, s.inactive))}")],
                gpu=gpu.id if (gpu.label or "").lower() == gpu.id else f"{gpu.id} ({s.label})",
                active=s.active,
                most=most,
                inactive=len(s.inactive),
            )
        )
    return out


def check_ports(c: Context) -> list[Finding]:
    """NIC_PORT_DOWN: an RDMA NIC none of whose ports is ACTIVE, or whose netdev a tool shows
    down.  NCCL uses only active ports (NVIDIA/nccl src/transport/net_ib.cc, ncclIbInitDevices
    skips a port whose state is not IBV_PORT_ACTIVE)."""
    out = []
    for n in c.rdma_nics:
        states = [(dev, p) for dev, ports in n.rdma_ports.items() for p in ports if p.state is not None]
        down_netdevs = sorted(name for name, up in n.netdev_up.items() if not up)
        active = [p for _, p in states if p.state.upper() == "ACTIVE"]  # type: ignore[union-attr]
        if states and not active:
            # a rail NIC only where GPUs are shown: the RDMA tools alone show none to serve
            compute = c.rails.roles.get(n.id) is NicRole.COMPUTE and bool(c.topo.gpus)
            out.append(
                c.finding(
                    "NIC_PORT_DOWN",
                    [n.id],
                    [Evidence(_port_where(c, n, dev, p.port), p.state) for dev, p in states[:4]],
                    severity=None if compute else Severity.INFO,
                    say="" if compute else "other",
                    nic=nic_label(n),
                    state=", ".join(sorted({str(p.state) for _, p in states})),
                )
            )
        elif down_netdevs and not active:
            out.append(
                c.finding(
                    "NIC_PORT_DOWN",
                    [n.id],
                    [Evidence(f"ibdev2netdev {name}", "Down") for name in down_netdevs[:4]],
                    say="netdev",
                    fix="netdev",
                    severity=Severity.INFO,
                    nic=nic_label(n),
                    netdevs=", ".join(down_netdevs),
                )
            )
    return out


def _port_where(c: Context, n: Device, dev: str, port: int) -> str:
    if c.offline:
        return f"ibdev2netdev/ibv_devinfo {dev} port {port}: state"
    return host_path(f"sys/class/infiniband/{dev}/ports/{port}/state")


def check_aer_logged(c: Context) -> list[Finding]:
    """PCIE_AER_LOGGED: AER events a pasted kernel log holds for a function."""
    out = []
    for d in c.topo.devices:
        if not d.aer_logged:
            continue
        counts = {sev: sum(1 for e in d.aer_logged if e.severity == sev) for sev in AerCounts.SEVERITIES}
        severity = Severity.CRITICAL if counts["fatal"] else Severity.WARNING if counts["nonfatal"] else Severity.INFO
        names = sorted({name for e in d.aer_logged for name in e.errors})
        shown = [e for e in d.aer_logged if e.severity != "correctable"] or list(d.aer_logged)
        out.append(
            c.finding(
                "PCIE_AER_LOGGED",
                [d.id],
                [Evidence(f"dmesg line {e.line}", e.text) for e in shown[:3]],
                say="" if severity > Severity.INFO else "corrected",
                fix="" if severity > Severity.INFO else "corrected",
                severity=severity,
                id=d.id,
                bdf=d.bdf,
                fatal=counts["fatal"],
                nonfatal=counts["nonfatal"],
                corrected=counts["correctable"],
                named=f" ({', '.join(names[:6])})" if names else "",
            )
        )
    return out
