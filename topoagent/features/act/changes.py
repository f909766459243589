"""Changes to a running host, planned as values: what, where, current -> proposed.

Pure: every planner takes the current state (read by :mod:`topoagent.core.read`) and the scan's
result and returns :class:`HostChange` values; nothing is written here.  A change names its
device by stable key (BDF) in ``label``, as the journal requires.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from topoagent.core.analysis.locality import switch_node_mismatches
from topoagent.core.analysis.paths import Path
from topoagent.core.cpuset import CpuSet
from topoagent.core.frozen import FrozenMap
from topoagent.core.parse.configspace import ConfigSpaceError, parse_config_space
from topoagent.core.pathclass import PathClass
from topoagent.core.pci import ACS_P2P_REDIRECT_MASK, DeviceKind
from topoagent.core.platform import KERNEL_DEFAULT, ComplexKind, PlatformRole
from topoagent.core.snapshot import AcsInfo
from topoagent.core.topology import Device, Topology, common_ancestors

#: Kinds of change and the value each holds: a CPU list, a 16-bit register as ``0x....``,
#: a file's text (None: no file), a module state (``loaded`` / ``absent``).
IRQ, THREAD, PCI_CONFIG, FILE, MODULE = "irq", "thread", "pci_config", "file", "module"

PEERMEM_MODULE = "nvidia_peermem"
PEERMEM_CONF = "etc/modules-load.d/nvidia-peermem.conf"


class HostChange(msgspec.Struct, frozen=True):
    """One change to make on the host: ``kind`` of thing, ``target`` (irq, tid, bdf+offset,
    path, module), the value now and the value proposed, a stable ``label`` and a sentence for
    people.  (A change observed between two scans is a daemon's
    :class:`~topoagent.features.daemon.changes.ScanChange`.)"""

    kind: str
    target: FrozenMap[str, Any]
    before: str | None
    after: str | None
    label: str
    what: str
    note: str | None = None


# -- process affinity -------------------------------------------------------------------------


def thread_changes(
    pid: int, threads: Sequence[tuple[int, CpuSet]], cpus: CpuSet, starts: Mapping[int, int | None] | None = None
) -> tuple[HostChange, ...]:
    """Bind every thread of ``pid`` to ``cpus`` (threads already there are left alone).  A
    thread's start time (``starts``), where known, goes in its target: undo then knows a
    reused tid from the thread it changed."""
    starts = starts or {}
    return tuple(
        HostChange(
            THREAD,
            FrozenMap({"pid": pid, "tid": tid, **({"start": s} if (s := starts.get(tid)) is not None else {})}),
            str(now),
            str(cpus),
            f"pid {pid}",
            f"pid {pid} thread {tid} CPU affinity",
        )
        for tid, now in threads
        if now != cpus
    )


# -- IRQ affinity ---------------------------------------------------------------------------------


def irq_changes(
    topo: Topology, nics: Sequence[Device], irqs: Mapping[str, Sequence[tuple[int, CpuSet | None]]]
) -> tuple[tuple[HostChange, ...], tuple[str, ...]]:
    """Move each NIC's MSI/MSI-X IRQs onto the CPUs of the NIC's NUMA node.

    ``irqs`` maps a NIC id to its (irq, current affinity) pairs.  Returns the changes and
    one line for each NIC left alone (no known node, no IRQs, or a node its switch siblings
    contradict: NUMA_SWITCH_MISMATCH, where either node may be the wrong one and moving the
    IRQs could send them to the other socket).
    """
    changes, skipped = [], []
    disputed = {m.device: m for m in switch_node_mismatches(topo)}
    for nic in nics:
        names = ", ".join(nic.rdma_devices + nic.netdevs) or nic.id
        node = topo.node(nic.numa_node)
        if nic.id in disputed:
            m = disputed[nic.id]
            skipped.append(
                f"{nic.id} ({names}, {nic.key}): its NUMA node {m.node} disagrees with the node {m.siblings_node} of "
                f"every other device below its PCIe switch (NUMA_SWITCH_MISMATCH): which is right is unknown, so "
                "its IRQs are left alone"
            )
            continue
        if node is None or not node.cpus:
            skipped.append(f"{nic.id} ({names}, {nic.key}): NUMA node unknown, its IRQs are left alone")
            continue
        mine = irqs.get(nic.id, ())
        if not mine:
            skipped.append(f"{nic.id} ({names}, {nic.key}): no MSI/MSI-X IRQs listed")
            continue
        for irq, now in mine:
            if now == node.cpus:
                continue
            changes.append(
                HostChange(
                    IRQ,
                    FrozenMap({"irq": irq}),
                    None if now is None else str(now),
                    str(node.cpus),
                    nic.key,
                    f"IRQ {irq} of {nic.id} ({names}) -> node {node.id}",
                )
            )
    return tuple(changes), tuple(skipped)


# -- ACS ------------------------------------------------------------------------------------------


def _control_offset(acs: AcsInfo | None) -> int | None:
    return acs.offset + 6 if acs is not None and acs.offset is not None else None


def peer_path_bridges(topo: Topology, paths: Sequence[Path]) -> dict[str, set[str]]:
    """Bridges on GPU-GPU and GPU-NIC peer paths that stay below the root complex (PIX, PXB),
    from the pair's common ancestor down: bridge BDF -> the devices whose traffic turns there."""
    out: dict[str, set[str]] = {}
    for p in paths:
        a, b = topo.by_id(p.a), topo.by_id(p.b)
        if a is None or b is None or DeviceKind.GPU not in (a.kind, b.kind):
            continue
        if p.pcie == PathClass.X or p.pcie > PathClass.PXB:
            continue
        common = common_ancestors(a, b)  # a PIX/PXB pair shares its root bus
        if not common:
            continue
        for bdf in dict.fromkeys(a.ancestors[common - 1 :] + b.ancestors[common - 1 :]):
            out.setdefault(bdf, set()).update((a.id, b.id))
    return out


class AcsPlan(msgspec.Struct, frozen=True):
    """The ACS fix: changes to make, bridges refused (with why), the kernel parameter that makes
    the same change at every boot, and notes a person needs (a kernel without ``config_acs``,
    IOMMU groups that change only at boot)."""

    changes: tuple[HostChange, ...]
    refused: tuple[str, ...]
    kernel_parameter: str | None
    notes: tuple[str, ...] = ()


#: NVIDIA's rdma_topo writes the platform's boot ACS here (``write-grub-acs --output``'s default,
#: a Debian-style ``/etc/default/grub.d`` drop-in that update-grub sources): one file for both tools.
GRUB_ACS_CONF = "etc/default/grub.d/config-acs.cfg"
_GRUB_HEAD = "# Generated by topoagent fix acs (as rdma_topo write-grub-acs): ACS settings for GPUDirect RDMA"
_ISOLATING = 0b011101  # SrcValid, ReqRedir, CmpltRedir, UpstreamFwd: what isolates a passthrough device


def _acs_now(bdf: str, data: bytes | None) -> tuple[AcsInfo | None, str | None]:
    """A bridge's ACS as its config bytes hold it now, or why it cannot be read."""
    if data is None or len(data) < 0x104:
        return None, f"{bdf}: ACS not readable (extended config space needs root)"
    try:
        return parse_config_space(data).acs, None
    except ConfigSpaceError as exc:
        return None, f"{bdf}: config space unreadable ({exc})"


def _vfio_below(topo: Topology, bdf: str) -> list[Device]:
    return [d for d in topo.devices if bdf in d.ancestors and d.driver == "vfio-pci"]


def _acs_change(bridge: Device, acs: AcsInfo, new: int, why: str) -> HostChange | None:
    """The change of one ACS control register, or None where it already holds ``new``."""
    offset = _control_offset(acs)
    if offset is None or new == acs.control:
        return None
    changed = acs.control ^ new
    parts = [f"{'set' if new >> b & 1 else 'clear'} {n}" for b, n in AcsInfo.BITS if changed >> b & 1]
    role = bridge.role.value.replace("_", " ") if bridge.role else "bridge"
    return HostChange(
        PCI_CONFIG,
        FrozenMap({"bdf": bridge.bdf, "offset": offset}),
        f"0x{acs.control:04x}",
        f"0x{new:04x}",
        bridge.bdf or bridge.key,
        f"ACS control of {role} {bridge.bdf} ({', '.join(parts)}; {why})",
    )


def _generic_acs(
    topo: Topology, paths: Sequence[Path], configs: Mapping[str, bytes | None]
) -> tuple[list[HostChange], list[str], list[str]]:
    """Today's rule off the platform's ports: clear P2P redirect on the bridges of GPU peer paths."""
    changes, refused, bdfs = [], [], []
    platform = topo.platform
    for bdf, devs in sorted(peer_path_bridges(topo, paths).items()):
        bridge = topo.by_bdf(bdf)
        if bridge is None or platform.rule(bdf) is not None:
            continue
        acs, why = _acs_now(bdf, configs.get(bdf))
        if why is not None:
            refused.append(why)
            continue
        if acs is None or not acs.redirects_p2p:
            continue
        if platform.near is not None and bridge.platform_role is not None:
            refused.append(
                f"{bdf}: the host looks like NVIDIA's {platform.near.label} platform but not of its shape "
                "(PLATFORM_UNRECOGNISED), and that platform may require this redirect: left as it is"
            )
            continue
        vfio = _vfio_below(topo, bdf)
        if vfio:
            refused.append(
                f"{bdf}: {', '.join(d.key for d in vfio)} below it is bound to vfio-pci; ACS isolates "
                "that passthrough device, so it is left on"
            )
            continue
        change = _acs_change(bridge, acs, acs.control & ~ACS_P2P_REDIRECT_MASK, f"peers: {', '.join(sorted(devs))}")
        if change is not None:
            changes.append(change)
            bdfs.append(bdf)
    return changes, refused, bdfs


def _platform_acs(topo: Topology, configs: Mapping[str, bytes | None]) -> tuple[list[HostChange], list[str]]:
    """Every platform port to the mask its platform requires (rdma_topo ``setpci-acs``)."""
    changes, refused = [], []
    for rule in topo.platform.acs:
        bridge = topo.by_bdf(rule.bdf)
        if bridge is None:
            continue
        acs, why = _acs_now(rule.bdf, configs.get(rule.bdf))
        if why is not None or acs is None:
            refused.append(why or f"{rule.bdf}: no ACS capability")
            continue
        new = rule.applied(acs.control)
        vfio = _vfio_below(topo, rule.bdf)
        if vfio and acs.control & _ISOLATING & ~new:
            refused.append(
                f"{rule.bdf}: {', '.join(d.key for d in vfio)} below it is bound to vfio-pci and the platform's "
                f"{rule.mask} would end its isolation: left as it is"
            )
            continue
        change = _acs_change(bridge, acs, new, f"the platform requires {rule.mask}")
        if change is not None:
            changes.append(change)
    return changes, refused


def config_acs_value(topo: Topology) -> str:
    """The ``pci=config_acs=`` value of the host's platform: ``mask@BDF`` of every port whose
    mask is not the kernel's own for it, by BDF, ``;``-separated (rdma_topo ``write-grub-acs``)."""
    defaults = {PlatformRole.VERA_RP: "xx101x1"}
    entries = []
    for rule in sorted(topo.platform.acs, key=lambda r: r.bdf):
        port = topo.by_bdf(rule.bdf)
        own = (
            defaults.get(port.platform_role, KERNEL_DEFAULT)
            if port is not None and port.platform_role
            else KERNEL_DEFAULT
        )
        if rule.mask != own:
            entries.append(f"{rule.mask}@{rule.bdf}")
    return ";".join(entries)


def booted_with(topo: Topology) -> str | None:
    """The ``pci=config_acs=`` value the running kernel was booted with (quotes taken off), or None."""
    for arg in (topo.kernel_cmdline or "").split():
        if arg.startswith("pci=config_acs="):
            return arg[len("pci=config_acs=") :].strip('"')
    return None


def grub_acs_text(value: str) -> str:
    """The grub drop-in that boots with ``pci=config_acs=<value>``: the value in escaped double
    quotes, since ``;`` ends a command in grub.cfg (rdma_topo writes the same line)."""
    return f'{_GRUB_HEAD}\nGRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX pci=config_acs=\\"{value}\\""\n'


def grub_acs_change(topo: Topology, conf_now: str | None) -> HostChange | None:
    """Write the platform's boot ACS as the grub drop-in (:data:`GRUB_ACS_CONF`), or None where
    the platform needs no boot parameter or the drop-in already says it."""
    value = config_acs_value(topo) if topo.platform.kind is not None else ""
    if not value or booted_with(topo) == value:
        return None  # nothing to set at boot, or the running kernel was booted with just that
    after = grub_acs_text(value)
    if conf_now == after:
        return None
    return HostChange(
        FILE,
        FrozenMap({"path": GRUB_ACS_CONF}),
        conf_now,
        after,
        "/" + GRUB_ACS_CONF,
        f"/{GRUB_ACS_CONF}: boot with the platform's ACS (pci=config_acs=)",
    )


def _acs_notes(topo: Topology, changes: Sequence[HostChange]) -> tuple[str, ...]:
    """What a person must know about a platform's ACS fix."""
    platform = topo.platform
    if platform.kind is None or not changes:
        return ()
    notes = []
    release = topo.kernel_release
    shown = ".".join(map(str, release)) if release else None
    wanted = config_acs_value(topo)
    if not wanted or booted_with(topo) == wanted:
        pass  # the boot parameter is not needed, or in place: the kernel's release does not matter
    elif release is not None and release < (6, 11):
        notes.append(
            f"The running kernel ({shown}) predates pci=config_acs= (Linux 6.11): the boot parameter takes effect "
            "only once a kernel that has it boots (NVIDIA's guide names the 6.14-nvidia kernels); until then the "
            "run-time change lasts until reboot."
        )
    elif release is not None and release < (6, 13):
        notes.append(
            f"Linux {shown} sets only the first device of a pci=config_acs= list unless it carries the fix "
            "'PCI/ACS: Fix pci=config_acs= parameter' (Linux 6.13, backported to stable kernels)."
        )
    if any(r.mask.endswith("0") for r in platform.acs) or platform.kind is ComplexKind.DATA_DIRECT:
        notes.append(
            "IOMMU groups are formed at boot: the run-time change does not regroup devices; reboot with the boot "
            "parameter for the groups the platform needs."
        )
    if platform.kind is ComplexKind.DATA_DIRECT and any(c.kind == PCI_CONFIG for c in changes):
        notes.append(
            "Until then the GPU driver checks the IOMMU groups before GPUDirect RDMA through a DMA function, and "
            "refuses it unless NVreg_GrdmaPciTopoCheckOverride=1 (which, rdma_topo warns, lets unprivileged users "
            "trigger platform RAS errors)."
        )
    cmdline = (topo.kernel_cmdline or "").split()
    stale = [a for a in cmdline if a.startswith(("pci=disable_acs_redir", "pci=noacs", "pcie_acs_override"))]
    if stale:
        notes.append(f"Remove {' '.join(stale)} from the kernel command line: it undoes the platform's ACS at boot.")
    return tuple(notes)


def acs_plan(
    topo: Topology, paths: Sequence[Path], configs: Mapping[str, bytes | None], *, grub_now: str | None = None
) -> AcsPlan:
    """The ACS fix.  ``configs`` holds each bridge's config bytes as read now; ``grub_now`` the
    grub drop-in's text (None: absent).

    On a recognised NVIDIA platform (:mod:`topoagent.core.platform`) every platform port is set
    to the mask its platform requires (bits set as well as cleared, never a required bit cleared)
    and the same masks become the ``pci=config_acs=`` boot parameter, a grub drop-in; elsewhere
    ACS P2P redirect (ReqRedir, CmpltRedir, EgressCtrl) is cleared on the bridges of GPU peer
    paths and ``pci=disable_acs_redir=`` is the boot parameter.

    Refuses everything inside a VM (the hypervisor's ACS is not the guest's to change), and a
    change that would end the isolation of a device bound to vfio-pci below the bridge.
    """
    if topo.virtualized:
        return AcsPlan(
            (),
            ("this host is a virtual machine: ACS belongs to the hypervisor; change it on the host, not in the guest",),
            None,
        )
    changes, refused, bdfs = _generic_acs(topo, paths, configs)
    platform_changes, platform_refused = _platform_acs(topo, configs)
    grub = grub_acs_change(topo, grub_now)
    all_changes = [*platform_changes, *changes, *((grub,) if grub is not None else ())]
    param = f"pci=disable_acs_redir={';'.join(bdfs)}" if bdfs else None
    return AcsPlan(tuple(all_changes), tuple(platform_refused + refused), param, _acs_notes(topo, all_changes))


# -- peer memory -----------------------------------------------------------------------------------


def peermem_changes(module_loaded: bool, conf_now: str | None, *, live: bool) -> tuple[HostChange, ...]:
    """Load nvidia_peermem now (live host only) and list it in /etc/modules-load.d for boots."""
    out = []
    if live and not module_loaded:
        out.append(
            HostChange(
                MODULE,
                FrozenMap({"module": PEERMEM_MODULE}),
                "absent",
                "loaded",
                PEERMEM_MODULE,
                f"modprobe {PEERMEM_MODULE}",
            )
        )
    want = PEERMEM_MODULE + "\n"
    if conf_now is None or PEERMEM_MODULE not in conf_now.split():
        after = want if conf_now is None else conf_now.rstrip("\n") + "\n" + want
        out.append(
            HostChange(
                FILE,
                FrozenMap({"path": PEERMEM_CONF}),
                conf_now,
                after,
                "/" + PEERMEM_CONF,
                f"/{PEERMEM_CONF}: load {PEERMEM_MODULE} at boot",
            )
        )
    return tuple(out)
