"""NVIDIA's GPU platforms (:mod:`topoagent.core.platform`): ACS_PLATFORM_MISMATCH,
IOMMU_GROUP_PLATFORM, ATS_PLATFORM and PLATFORM_UNRECOGNISED (their words and rules:
:mod:`~topoagent.core.findings.catalogue`).

Each check is one of ``rdma_topo check``'s (linux-rdma/rdma-core ``kernel-boot/rdma_topo``):
the ACS of every port the platform names against the mask it requires (``compute_acs``), the
IOMMU groups of each complex (``NVCX_*_Complex.check``) and the NICs' ATS.  A port in a
recognised complex is judged only here: a redirect the platform requires is no fault
(``ACS_REDIRECT`` leaves it alone).
"""

from __future__ import annotations

from collections import Counter

from topoagent.core.findings.context import Context, sysfs_attr
from topoagent.core.findings.finding import Evidence, Finding, Severity
from topoagent.core.platform import AcsRule, Complex, ComplexKind, PlatformRole, PortRole
from topoagent.core.snapshot import AcsInfo
from topoagent.core.topology import Device

#: The running kernel must be at least this to take ``pci=config_acs=`` (Linux commit
#: 47c8846a49ba, "PCI: Extend ACS configurability", merged for 6.11).
CONFIG_ACS_KERNEL = (6, 11)

_PORT_NAMES = {
    PortRole.DMA_PORT: "the DMA function's port",
    PortRole.GPU_PORT: "the GPU's port",
    PortRole.NIC_PORT: "the NIC's port",
    PortRole.ROOT_PORT: "the root port",
}
_ROLE_NAMES = {
    PlatformRole.GRACE_RP: "the Grace root port",
    PlatformRole.VERA_RP: "the Vera root port",
    PlatformRole.CX_SWITCH: "the ConnectX switch port",
    PlatformRole.BF3_SWITCH: "the BlueField-3 switch port",
}


def _port_name(rule: AcsRule, port: Device) -> str:
    if rule.role in _PORT_NAMES:
        return _PORT_NAMES[rule.role]
    return _ROLE_NAMES.get(port.platform_role, "the port") if port.platform_role else "the port"


def _flags(acs: AcsInfo) -> str:
    return " ".join(f"{name}{'+' if name in acs.enabled() else '-'}" for _, name in acs.BITS)


def _wrong_bits(rule: AcsRule, control: int) -> str:
    """What differs from the mask, in lspci's names: ``CmpltRedir must be on``."""
    out = []
    for bit, ch in enumerate(reversed(rule.mask)):
        have = bool(control >> bit & 1)
        if ch in "01" and have != (ch == "1"):
            out.append(f"{AcsInfo.BITS[bit][1]} must be {'on' if ch == '1' else 'off'}")
    return ", ".join(out)


def _complex_text(c: Context, cx: Complex | None) -> str:
    """``the Data Direct complex cx1 (NIC nic1, DMA other3, GPU gpu0)``, or ``the NUMA platform``."""
    if cx is None:
        kind = c.topo.platform.kind
        return f"the {kind.label if kind else ''} platform".replace("  ", " ")
    parts = [f"NIC {', '.join(_ids(c, cx.nics))}"]
    if cx.dma:
        parts.append(f"DMA function {', '.join(_ids(c, (cx.dma,)))}")
    parts.append(f"GPU {', '.join(_ids(c, cx.gpus))}")
    return f"the {cx.kind.label} complex {cx.id} ({', '.join(parts)})"


def _ids(c: Context, bdfs: tuple[str, ...]) -> list[str]:
    return [d.id if (d := c.topo.by_bdf(b)) is not None else b for b in bdfs]


def _kernel_case(c: Context) -> str:
    """``old kernel`` where the running kernel predates ``config_acs``, else ``""``."""
    release = c.topo.kernel_release
    return "old kernel" if release is not None and release < CONFIG_ACS_KERNEL else ""


def check_platform_acs(c: Context) -> list[Finding]:
    """ACS_PLATFORM_MISMATCH: every platform port whose ACS control register does not hold the
    mask the platform requires (rdma_topo ``check``, the ACS lines)."""
    platform = c.topo.platform
    out = []
    for rule in platform.acs:
        port = c.topo.by_bdf(rule.bdf)
        acs = port.config.acs if port is not None and port.config is not None else None
        if port is None or acs is None or rule.holds(acs.control):
            continue  # unknown ACS is ACS_UNKNOWN's (check_acs)
        cx = next((x for x in platform.complexes if x.id == rule.complex), None)
        kernel = _kernel_case(c)
        out.append(
            c.finding(
                "ACS_PLATFORM_MISMATCH",
                [port.id, *(_ids(c, cx.nics + ((cx.dma,) if cx.dma else ()) + cx.gpus) if cx else ())],
                # the register is the evidence; the mask is the platform's rule (rdma_topo's
                # compute_acs), named in the message, not a second fact
                [Evidence(sysfs_attr(port, "config"), f"ACSCtl: {_flags(acs)}")],
                fix=kernel,
                severity=Severity.CRITICAL if cx else Severity.WARNING,
                port=_port_name(rule, port),
                bdf=rule.bdf,
                where=_complex_text(c, cx),
                control=f"0x{acs.control:04x}",
                wrong=_wrong_bits(rule, acs.control),
                mask=rule.mask,
                why=rule.why,
                release=".".join(map(str, c.topo.kernel_release or ())),
            )
        )
    return out


def _group_evidence(devs: list[Device]) -> list[Evidence]:
    return [
        Evidence(sysfs_attr(d, "iommu_group"), str(d.iommu_group) if d.iommu_group is not None else "absent")
        for d in devs
    ]


def _dd_groups(c: Context, cx: Complex) -> Finding | None:
    """NVCX_DMA_Complex.check: the DMA function and its GPU in one IOMMU group."""
    dma, gpu = c.topo.by_bdf(cx.dma or ""), c.topo.by_bdf(cx.gpus[0])
    if dma is None or gpu is None or (dma.iommu_group is not None and dma.iommu_group == gpu.iommu_group):
        return None
    none = dma.iommu_group is None and gpu.iommu_group is None
    return c.finding(
        "IOMMU_GROUP_PLATFORM",
        [dma.id, gpu.id],
        _group_evidence([dma, gpu]),
        say="no groups" if none else "data direct",
        severity=Severity.WARNING if none else Severity.CRITICAL,
        where=_complex_text(c, cx),
        dma=dma.id,
        gpu=gpu.id,
        groups=f"{dma.iommu_group} and {gpu.iommu_group}",
    )


def _inline_groups(c: Context, cx: Complex, virt: bool) -> Finding | None:
    """NVCX_Inline_Complex.check: NIC and GPU apart when virtualized, together on bare metal."""
    nic, gpu = c.topo.by_bdf(cx.nics[0]), c.topo.by_bdf(cx.gpus[0])
    if nic is None or gpu is None:
        return None
    same = nic.iommu_group == gpu.iommu_group
    if virt and nic.iommu_group is not None and gpu.iommu_group is not None and not same:
        return None
    if not virt and same:
        return None  # (both absent: no IOMMU, nothing to isolate, as rdma_topo passes it)
    return c.finding(
        "IOMMU_GROUP_PLATFORM",
        [nic.id, gpu.id],
        _group_evidence([nic, gpu]),
        say="inline virt" if virt else "inline bare metal",
        severity=Severity.WARNING,
        where=_complex_text(c, cx),
        nic=nic.id,
        gpu=gpu.id,
        groups=f"{nic.iommu_group} and {gpu.iommu_group}",
    )


def _numa_groups(c: Context, cx: Complex) -> Finding | None:
    """NVCX_NUMA_Complex.check: every PF and GPU of the node in its own IOMMU group."""
    devs = [d for b in cx.nics + cx.gpus if (d := c.topo.by_bdf(b)) is not None]
    counts = Counter(d.iommu_group for d in devs)
    shared = [d for d in devs if d.iommu_group is None or counts[d.iommu_group] > 1]
    if not shared:
        return None
    return c.finding(
        "IOMMU_GROUP_PLATFORM",
        [d.id for d in shared],
        _group_evidence(shared),
        say="numa",
        severity=Severity.WARNING,
        where=_complex_text(c, cx),
        devices=", ".join(d.id for d in shared),
        node=cx.numa_node,
    )


def check_platform_iommu(c: Context) -> list[Finding]:
    """IOMMU_GROUP_PLATFORM: the IOMMU grouping each complex kind requires."""
    platform = c.topo.platform
    out: list[Finding | None] = []
    for cx in platform.complexes:
        if cx.kind is ComplexKind.DATA_DIRECT:
            out.append(_dd_groups(c, cx))
        elif cx.kind is ComplexKind.INLINE and platform.virt is not None:
            out.append(_inline_groups(c, cx, platform.virt))
        elif cx.kind is ComplexKind.NUMA:
            out.append(_numa_groups(c, cx))
    return [f for f in out if f is not None]


def check_platform_ats(c: Context) -> list[Finding]:
    """ATS_PLATFORM: a ConnectX NIC of a NUMA-kind (Grace) complex that exposes ATS."""
    out = []
    for cx in c.topo.platform.complexes:
        if cx.kind is not ComplexKind.NUMA:
            continue  # (Inline: the NICs' ATS is what tells virtualized from bare metal)
        for bdf in cx.nics:
            nic = c.topo.by_bdf(bdf)
            if nic is not None and nic.ats:
                out.append(
                    c.finding(
                        "ATS_PLATFORM",
                        [nic.id],
                        [Evidence(sysfs_attr(nic, "config"), "Address Translation Service (ATS) capability present")],
                        nic=nic.id,
                        bdf=bdf,
                        node=cx.numa_node,
                    )
                )
    return out


def check_platform_unrecognised(c: Context) -> list[Finding]:
    """PLATFORM_UNRECOGNISED: a host near one of the kinds whose shape rdma_topo would refuse."""
    platform = c.topo.platform
    if platform.near is None or platform.problem is None:
        return []
    involved = [
        d.id for d in c.topo.devices if d.platform_role is not None and d.bdf is not None and d.bdf in platform.problem
    ]
    return [
        c.finding(
            "PLATFORM_UNRECOGNISED",
            involved,
            [Evidence(f"platform: {platform.near.label}", platform.problem)],
            kind=platform.near.label,
            problem=platform.problem,
        )
    ]
