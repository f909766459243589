"""PCIe links and faults: LINK_WIDTH_DEGRADED, LINK_SPEED_DEGRADED, LINK_SPEED_BELOW_MAX_GPU,
FELL_OFF_BUS and PCIE_AER_ERRORS (their words and rules: :mod:`~topoagent.core.findings.catalogue`)."""

from __future__ import annotations

from topoagent.core.analysis import links
from topoagent.core.analysis.rails import NicRole
from topoagent.core.findings.context import Context, link_evidence, sysfs_attr
from topoagent.core.findings.finding import Evidence, Finding, Severity
from topoagent.core.pci import DeviceKind
from topoagent.core.snapshot import AerCounts
from topoagent.core.topology import BridgeRole, Device

_CHECK_LINK_KINDS = (DeviceKind.GPU, DeviceKind.NIC, DeviceKind.NVME, DeviceKind.ACCELERATOR)


def check_links(c: Context) -> list[Finding]:
    """LINK_WIDTH_DEGRADED / LINK_SPEED_DEGRADED / LINK_SPEED_BELOW_MAX_GPU from one reading.

    Judged against the link's capability (:func:`topoagent.core.analysis.links.capability`, the lower
    of both ends' maxima): below it is a fault; at it, the link runs as fast as its two ends
    allow, whatever the device's own maximum, and nothing is raised."""
    out = []
    for d in c.topo.devices:
        if d.kind not in _CHECK_LINK_KINDS and d.role is not BridgeRole.SWITCH_UPSTREAM:
            continue
        if d.is_vf:
            continue  # VFs mirror their PF's link
        if d.kind is DeviceKind.GPU and d.activity is not None and d.activity.busy is not None:
            continue  # the tool said whether it was busy: GPU_LINK_SLOW_UNDER_LOAD / _IDLE_DOWNCLOCKED judge it
        if not links.meaningful(d):
            continue  # its link registers mean nothing (topoagent.core.quirks)
        lk = d.link
        cap = links.capability(c.topo, d)
        width_low, speed_low = links.shortfall(lk.current_gts, lk.current_width, cap)
        # At its capability but below its own maximum, the slot (the port above) is what limits
        # the device (a Gen6 ConnectX-8 below a Gen5 root port, an x16 card in an x8 slot): its
        # evidence shows no fault, so there is no finding (the tree prints the link, max beside it).
        if width_low and lk.current_width is not None and lk.max_width is not None:
            out.append(
                c.finding(
                    "LINK_WIDTH_DEGRADED",
                    [d.id],
                    link_evidence(c, d, ("current_link_width", "current_width"), ("max_link_width", "max_width")),
                    id=d.id,
                    name=d.name,
                    width=lk.current_width,
                    max_width=lk.max_width,
                    percent=100 * lk.current_width // lk.max_width,
                )
            )
        if speed_low and lk.current_gts is not None and lk.max_gts is not None:
            other = d.kind is not DeviceKind.GPU  # a GPU's own code: it slows its link at idle
            out.append(
                c.finding(
                    "LINK_SPEED_DEGRADED" if other else "LINK_SPEED_BELOW_MAX_GPU",
                    [d.id],
                    link_evidence(c, d, ("current_link_speed", "current_gts"), ("max_link_speed", "max_gts")),
                    id=d.id,
                    name=d.name,
                    speed=lk.current_gts,
                    max_speed=lk.max_gts,
                )
            )
    return out


def _faults_matter(c: Context, d: Device) -> bool:
    """A GPU or a rail (compute) NIC: losing it stops the jobs of the node."""
    return d.kind is DeviceKind.GPU or c.rails.roles.get(d.id) is NicRole.COMPUTE


def _functions(c: Context) -> list[Device]:
    """The devices with a PCI address (what sysfs lists: fell off the bus, AER)."""
    return [d for d in c.topo.devices if d.bdf is not None]


def check_fell_off_bus(c: Context) -> list[Finding]:
    """FELL_OFF_BUS: a listed function whose config space reads all ones (no SR-IOV VF)."""
    out = []
    for d in _functions(c):
        if not d.fell_off_bus:
            continue
        out.append(
            c.finding(
                "FELL_OFF_BUS",
                [d.id],
                [
                    Evidence(sysfs_attr(d, "config"), "vendor id 0xffff (all ones)"),
                    Evidence(sysfs_attr(d, "vendor"), f"0x{d.vendor_id:04x}" if d.vendor_id is not None else None),
                    Evidence(sysfs_attr(d, "device"), f"0x{d.device_id:04x}" if d.device_id is not None else None),
                ],
                severity=None if _faults_matter(c, d) else Severity.WARNING,
                id=d.id,
                bdf=d.bdf,
                name=d.name,
            )
        )
    return out


def check_aer(c: Context) -> list[Finding]:
    """PCIE_AER_ERRORS: uncorrectable (fatal or non-fatal) AER errors counted on a function."""
    out = []
    for d in _functions(c):
        aer = d.aer
        if aer is None or not (aer.total("fatal") or aer.total("nonfatal")):
            continue
        fatal = aer.total("fatal")
        named = [f"{name} {n}" for sev, name, n in aer.errors if sev != "correctable"]
        out.append(
            c.finding(
                "PCIE_AER_ERRORS",
                [d.id],
                [
                    Evidence(sysfs_attr(d, name), f"{total} {aer.total(sev)}")
                    for name, sev, total in AerCounts.FILES
                    if sev != "correctable" and aer.total(sev)
                ],
                severity=None if fatal else Severity.WARNING,
                kind=d.kind.value,
                id=d.id,
                bdf=d.bdf,
                fatal=fatal,
                nonfatal=aer.total("nonfatal"),
                named=" (" + ", ".join(named[:6]) + ")" if named else "",
            )
        )
    return out
