"""PCIe links and faults: LINK_WIDTH_DEGRADED, LINK_SPEED_DEGRADED, LINK_SPEED_BELOW_MAX_GPU,
FELL_OFF_BUS and PCIE_AER_ERRORS (their words and rules: :mod:`~topoagent.core.findings.catalogue`)."""

from __future__ import annotations

from topoagent.core.analysis import links
from topoagent.core.analysis.rails import NicRole
from topoagent.core.findings.context import Context, fmt, link_evidence, sysfs_attr
from topoagent.core.findings.finding import Evidence, Finding, Severity
from topoagent.core.pci import DeviceKind
from topoagent.core.snapshot import AerCounts
from topoagent.core.topology import BridgeRole, Device

_CHECK_LINK_KINDS = (DeviceKind.GPU, DeviceKind.NIC, DeviceKind.NVME, DeviceKind.ACCELERATOR)


def check_links(c: Context) -> list[Finding]:
    """LINK_WIDTH_DEGRADED / LINK_SPEED_DEGRADED / LINK_SPEED_BELOW_MAX_GPU from one reading.

    Judged against the link's capability (:func:`topoagent.core.analysis.links.capability`, the lower
    of both ends' maxima): below it is a fault; at it but below the device's own maximum, the
    slot is what limits the device (info)."""
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
        parent = c.topo.by_bdf(d.parent) if d.parent else None
        if lk.current_width is not None and lk.max_width is not None and lk.current_width < lk.max_width:
            evidence = link_evidence(c, d, ("current_link_width", "current_width"), ("max_link_width", "max_width"))
            capped = not width_low  # the port above is no wider than the link is now
            if capped and parent is not None:
                evidence.append(Evidence(c.attr(parent, "max_link_width"), fmt(parent.link.max_width)))
            out.append(
                c.finding(
                    "LINK_WIDTH_DEGRADED",
                    [d.id],
                    evidence,
                    say="slot" if capped else "",
                    fix="slot" if capped else "",
                    severity=Severity.INFO if capped else None,
                    id=d.id,
                    name=d.name,
                    width=lk.current_width,
                    max_width=lk.max_width,
                    percent=100 * lk.current_width // lk.max_width,
                    slot_width=cap.width,
                )
            )
        if lk.current_gts is not None and lk.max_gts is not None and lk.current_gts < lk.max_gts:
            slot_max = parent.link.max_gts if parent is not None else None
            capped = not speed_low and slot_max is not None
            evidence = link_evidence(c, d, ("current_link_speed", "current_gts"), ("max_link_speed", "max_gts"))
            if capped:
                evidence.append(Evidence(c.attr(parent, "max_link_speed"), fmt(slot_max)))  # type: ignore[arg-type]
            other = d.kind is not DeviceKind.GPU  # a GPU's own code: it slows its link at idle
            out.append(
                c.finding(
                    "LINK_SPEED_DEGRADED" if other else "LINK_SPEED_BELOW_MAX_GPU",
                    [d.id],
                    evidence,
                    say="slot" if capped and other else "",
                    fix="slot" if capped else "",
                    severity=Severity.INFO if capped and other else None,
                    id=d.id,
                    name=d.name,
                    speed=lk.current_gts,
                    max_speed=lk.max_gts,
                    slot_speed=slot_max,
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
