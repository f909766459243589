"""Findings: what is wrong with a host's placement, with evidence and a remedy.

Every check is a pure function of the analysed host; codes are stable and never reused.  The
catalogue with one example each is ``docs/findings.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import IntEnum

import msgspec

from topoagent.core.analysis import links
from topoagent.core.analysis.c2c import is_c2c, own_cpu_nic
from topoagent.core.analysis.paths import Path, path_index
from topoagent.core.analysis.rails import NicRole, Rails
from topoagent.core.pathclass import PathClass
from topoagent.core.pci import DeviceKind
from topoagent.core.snapshot import (
    UNPRIVILEGED,
    AcsInfo,
    ConfigSpace,
    host_path,
    no_extended_reason,
)
from topoagent.core.topology import BridgeRole, Device, Node, Topology, common_ancestors, id_key


class Severity(IntEnum):
    """How bad a finding is; ordered, so ``>=`` compares with ``--fail-on``."""

    INFO = 0
    WARNING = 1
    CRITICAL = 2

    @property
    def label(self) -> str:
        """The severity's name as the JSON contract spells it (``critical``)."""
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        """A severity from its name (``warning`` -> WARNING)."""
        return cls[text.upper()]


class Evidence(msgspec.Struct, frozen=True):
    """A fact that proves a finding: where it was read and what it said."""

    path: str
    value: str | None


class Finding(msgspec.Struct, frozen=True):
    """A fault found on the host: stable ``code``, ``severity``, ``subjects`` (device ids),
    a one-sentence ``message``, the ``evidence`` that proves it and a concrete ``remedy``."""

    code: str
    severity: Severity
    subjects: tuple[str, ...]
    message: str
    evidence: tuple[Evidence, ...]
    remedy: str


#: Stable codes and their default severities.  Never renumber or reuse a code.
CATALOGUE: dict[str, Severity] = {
    "GPU_NIC_CROSS_SOCKET": Severity.CRITICAL,
    "GPU_NIC_CROSS_NUMA": Severity.WARNING,
    "GPU_NIC_VIA_HOST_BRIDGE": Severity.WARNING,
    "NO_RDMA_NIC": Severity.INFO,
    "NO_PEER_MEMORY": Severity.WARNING,
    "ACS_REDIRECT": Severity.CRITICAL,
    "ACS_UNKNOWN": Severity.INFO,
    "IOMMU_TRANSLATING": Severity.WARNING,
    "LINK_WIDTH_DEGRADED": Severity.WARNING,
    "LINK_SPEED_DEGRADED": Severity.WARNING,
    "LINK_SPEED_BELOW_MAX_GPU": Severity.INFO,
    "NUMA_UNKNOWN": Severity.WARNING,
    "NUMA_CPULIST_MISMATCH": Severity.WARNING,
    "SOCKET_WITHOUT_RAIL": Severity.WARNING,
    "NIC_SHARED_WHILE_IDLE": Severity.WARNING,
    "CPU_LESS_NUMA_NODE": Severity.INFO,
    "NUMA_NODES_OVERLAP": Severity.WARNING,
    "NVLINK_P2P_DISABLED": Severity.CRITICAL,
    "VM_FLAT_PCI_TREE": Severity.INFO,
    "SOURCES_DISAGREE": Severity.WARNING,  # raised by analysis.crosscheck
    "DRA_PCIE_ROOT_MISMATCH": Severity.WARNING,
    "FELL_OFF_BUS": Severity.CRITICAL,  # warning for a device that is no GPU or rail NIC
    "PCIE_AER_ERRORS": Severity.CRITICAL,  # warning for non-fatal errors only
    # raised by analysis.expect against an expected topology (scan --expect, fleet)
    "EXPECT_DEVICE_MISSING": Severity.CRITICAL,
    "EXPECT_DEVICE_EXTRA": Severity.WARNING,
    "EXPECT_PLACEMENT": Severity.CRITICAL,
    "EXPECT_LINK": Severity.WARNING,
    "EXPECT_PATH": Severity.CRITICAL,
    "EXPECT_STATE": Severity.CRITICAL,
}

_GDR = "GPUDirect RDMA is off by default (NCCL_NET_GDR_LEVEL=PXB): every byte is staged through host memory"


def sysfs_attr(d: Device, attr: str) -> str:
    """The sysfs path of a device attribute, as evidence names it."""
    return host_path(f"sys/bus/pci/devices/{d.bdf}/{attr}")


#: Where a sysfs attribute's value is printed in pasted tool output.
_LSPCI_FIELDS = {
    "numa_node": "NUMA node",
    "config": "ACSCtl",
    "class": "class",
    "current_link_width": "LnkSta",
    "current_link_speed": "LnkSta",
    "max_link_width": "LnkCap",
    "max_link_speed": "LnkCap",
}
_NVSMI_FIELDS = {"numa_node": "NUMA Affinity", "local_cpulist": "CPU Affinity"}


def evidence_path(topo: Topology, d: Device, attr: str) -> str:
    """Where a device's attribute was read: its sysfs file, or the pasted output it came from
    (``lspci 0000:19:08.0: ACSCtl``, ``nvidia-smi topo -m GPU3: NUMA Affinity``)."""
    if topo.from_host_tree:
        return sysfs_attr(d, attr)
    if d.bdf is None:
        return f"nvidia-smi topo -m {d.label}: {_NVSMI_FIELDS.get(attr, attr)}"
    if d.label is not None and d.numa_source == "nvidia-smi" and attr in _NVSMI_FIELDS:
        return f"nvidia-smi topo -m {d.label}: {_NVSMI_FIELDS[attr]}"
    return f"lspci {d.bdf}: {_LSPCI_FIELDS.get(attr, attr)}"


class _Ctx:
    def __init__(self, topo: Topology, paths: tuple[Path, ...], rails: Rails) -> None:
        self.topo = topo
        self.paths = paths
        self.idx = path_index(paths)
        self.rails = rails

    def dev(self, ident: str) -> Device:
        """The device with this id (it exists: ids come from the topology)."""
        d = self.topo.by_id(ident)
        assert d is not None
        return d

    def path(self, a: str, b: str) -> Path:
        """The path between two GPUs/NICs by id; a VF's path is its PF's (as in scan_paths)."""
        pa, pb = self.topo.physical(self.dev(a)), self.topo.physical(self.dev(b))
        return self.idx[(pa.id, pb.id)]

    def finding(
        self,
        code: str,
        subjects: Iterable[str],
        message: str,
        evidence: Iterable[Evidence],
        remedy: str,
        severity: Severity | None = None,
    ) -> Finding:
        """A finding with the catalogue's severity unless one is given."""
        return Finding(
            code,
            severity if severity is not None else CATALOGUE[code],
            tuple(subjects),
            message,
            tuple(evidence),
            remedy,
        )

    @property
    def rdma_nics(self) -> list[Device]:
        """Physical RDMA-capable NICs."""
        return [n for n in self.topo.nics if n.rdma_capable and not n.is_vf]

    @property
    def offline(self) -> bool:
        """Built from pasted tool output, not a host tree (:mod:`topoagent.core.paste`)."""
        return not self.topo.from_host_tree

    def attr(self, d: Device, attr: str) -> str:
        """Where a device's attribute was read (sysfs file or pasted output)."""
        return evidence_path(self.topo, d, attr)


def _nic_label(n: Device) -> str:
    names = n.rdma_devices or n.netdevs
    return f"{n.id} ({', '.join(names)})" if names else n.id


def _lost(c: _Ctx, suffix: str) -> str | None:
    """The probe error of the file whose host path ends with ``suffix``, if it was lost."""
    return next((e.error for e in c.topo.probe_errors if e.path.endswith(suffix)), None)


def _numa_evidence(c: _Ctx, d: Device) -> list[Evidence]:
    if not c.offline:
        # A node the parser refused (-2, 0x1, a NUL) is a lost probe quoting the file, not -1.
        lost = None if d.numa_node is not None else _lost(c, f"/{d.bdf}/numa_node")
        value = str(d.numa_node) if d.numa_node is not None else (lost or "-1")
        return [Evidence(sysfs_attr(d, "numa_node"), value)]
    if d.kind is DeviceKind.NIC and d.bdf is None or (d.numa_source == "nvidia-smi" and d.kind is DeviceKind.NIC):
        # nvidia-smi prints no affinity for NICs: the node, if any, follows a GPU's (topology)
        return [
            Evidence(
                f"nvidia-smi topo -m {d.label}: NUMA node via its paths to GPUs",
                str(d.numa_node) if d.numa_node is not None else "unknown",
            )
        ]
    return [Evidence(c.attr(d, "numa_node"), str(d.numa_node) if d.numa_node is not None else "unknown")]


def _given_evidence(c: _Ctx, a: Device, b: Device) -> list[Evidence]:
    token = c.topo.given_token(a, b)
    return [Evidence(f"nvidia-smi topo -m {a.label}/{b.label}", token)] if token is not None else []


# -- GPU <-> NIC placement ---------------------------------------------------------------------


def check_gpu_nic_placement(c: _Ctx) -> list[Finding]:
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
        ev = _numa_evidence(c, g) + _numa_evidence(c, n) + _given_evidence(c, g, n)
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
                    f"{g.id}'s nearest RDMA NIC {_nic_label(n)} is on socket {n.socket}, the GPU on socket {g.socket}: "
                    f"traffic crosses the socket interconnect and {_GDR}.",
                    ev,
                    "Move the NIC (or the GPU) to a slot on the same socket, under the GPU's PCIe switch; "
                    "until then bind the rank to the NIC's socket only if it is host-memory bound.",
                )
            )
        elif rail.cls is PathClass.SYS and p.same_socket is None:
            # SYS stated by nvidia-smi (or NUMA nodes known without their sockets): the
            # interconnect is crossed, which one is not known; the worse case is the socket one.
            out.append(
                c.finding(
                    "GPU_NIC_CROSS_SOCKET",
                    [g.id, n.id],
                    f"{g.id}'s nearest RDMA NIC {_nic_label(n)} is reached only across the SMP interconnect "
                    f"(socket unknown from this source): {_GDR}.",
                    ev,
                    "Move the NIC (or the GPU) under the GPU's PCIe switch, on the same socket and NUMA node; "
                    "check the host's sockets (lscpu, or a live topoagent scan) to tell a cross-socket "
                    "from a cross-node placement.",
                )
            )
        elif rail.cls is PathClass.SYS:
            out.append(
                c.finding(
                    "GPU_NIC_CROSS_NUMA",
                    [g.id, n.id],
                    f"{g.id}'s nearest RDMA NIC {_nic_label(n)} is on NUMA node {n.numa_node}, the GPU on node "
                    f"{g.numa_node} of the same socket: {_GDR}.",
                    ev,
                    "Place the NIC under the same PCIe switch as the GPU, or use NPS1/SNC off in the BIOS so "
                    "both share a NUMA node; set NCCL_NET_GDR_LEVEL=SYS only after measuring.",
                )
            )
        else:
            out.append(
                c.finding(
                    "GPU_NIC_VIA_HOST_BRIDGE",
                    [g.id, n.id],
                    f"{g.id} reaches its nearest RDMA NIC {_nic_label(n)} only through the CPU "
                    f"({rail.cls.name}): {_GDR}.",
                    ev,
                    "Put GPU and NIC under one PCIe switch for GPUDirect RDMA; NCCL_NET_GDR_LEVEL=PHB forces it "
                    "through the host bridge, which is slower than a switch and worth measuring first.",
                )
            )
    return out


def _c2c_cross_grace(c: _Ctx, g: Device, n: Device, ev: list[Evidence]) -> list[Finding]:
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
            f"{g.id} reaches its CPU (NUMA node {g.numa_node}) over NVLink-C2C, but its nearest RDMA NIC "
            f"{_nic_label(n)} hangs off the other CPU (node {n.numa_node}): the direct path crosses the "
            "CPU-to-CPU link with GPUDirect RDMA off (NCCL's P2C default covers only a NIC of the GPU's own "
            "CPU), so NCCL stages through host memory or routes through an NVLinked GPU of the other Grace "
            "(PXN), which then carries that GPU's traffic too.",
            ev,
            "Give each GPU's ranks a NIC of the GPU's own Grace (NCCL_IB_HCA, or the NIC order of the "
            "node's rail plan); a Grace with no RDMA NIC of its own needs one.",
        )
    ]


def check_no_rdma_nic(c: _Ctx) -> list[Finding]:
    """NO_RDMA_NIC: GPUs but no RDMA-capable NIC."""
    if not c.topo.gpus or c.rdma_nics:
        return []
    nics = [n for n in c.topo.nics if not n.is_vf]
    if c.offline:
        # nvidia-smi lists every RDMA device; lspci shows none, so its NICs are judged by
        # vendor and driver (topoagent.core.paste)
        where = [Evidence("nvidia-smi topo -m", "no NIC rows")] if any(d.label for d in c.topo.gpus) else []
        where.append(Evidence("lspci", "no RDMA device names; RDMA judged from vendor and driver"))
    else:
        where = [Evidence(host_path("sys/class/infiniband"), "absent or empty")]
    return [
        c.finding(
            "NO_RDMA_NIC",
            [g.id for g in c.topo.gpus],
            f"{len(c.topo.gpus)} GPU(s) but no RDMA-capable NIC: traffic between hosts goes through host memory "
            "over TCP sockets.",
            where
            + [
                Evidence(c.attr(n, "class"), f"0x{n.class_code:06x}" if n.class_code is not None else None)
                for n in nics
            ],
            "Fine for a single-node box; for multi-node training add an InfiniBand/RoCE NIC per GPU pair "
            "under the GPUs' PCIe switches.",
        )
    ]


def check_peer_memory(c: _Ctx) -> list[Finding]:
    """NO_PEER_MEMORY: NVIDIA GPUs and RDMA NICs without a peer-memory module."""
    nvidia = [g for g in c.topo.gpus if g.vendor_id == 0x10DE]
    if not nvidia or not c.rdma_nics or c.topo.peer_memory is not False:
        return []  # (None: pasted tool output does not say which modules are loaded)
    return [
        c.finding(
            "NO_PEER_MEMORY",
            [g.id for g in nvidia] + [n.id for n in c.rdma_nics],
            "NVIDIA GPUs and RDMA NICs are present but no peer-memory module is loaded "
            "(no nvidia_peermem, nv_peer_mem or memory_peers): unless DMA-BUF is in use, NCCL logs "
            "'GPU Direct RDMA Disabled' and inter-node bandwidth drops several-fold.",
            [
                Evidence(host_path(p), "absent")
                for p in ("sys/module/nvidia_peermem", "sys/module/nv_peer_mem", "sys/kernel/mm/memory_peers")
            ],
            "modprobe nvidia_peermem (and list it in /etc/modules-load.d/), or use DMA-BUF: kernel >= 5.12, "
            "the open GPU kernel module and a recent rdma-core (NCCL uses it when available).",
        )
    ]


# -- PCIe faults ------------------------------------------------------------------------------


def _path_bridges(c: _Ctx, a: Device, b: Device) -> list[Device]:
    """Bridges where peer traffic between a and b turns round: from their common ancestor down."""
    common = common_ancestors(a, b)
    if not common:
        return []
    bdfs = dict.fromkeys(a.ancestors[common - 1 :] + b.ancestors[common - 1 :])
    return [d for bdf in bdfs if (d := c.topo.by_bdf(bdf)) is not None]


def check_acs(c: _Ctx) -> list[Finding]:
    """ACS_REDIRECT / ACS_UNKNOWN: ACS on the bridges of GPU peer paths (PIX/PXB)."""
    redirect: dict[str, set[str]] = {}
    unknown: dict[str, set[str]] = {}
    acs_of: dict[str, AcsInfo] = {}
    for p in c.paths:
        a, b = c.dev(p.a), c.dev(p.b)
        if DeviceKind.GPU not in (a.kind, b.kind) or p.pcie > PathClass.PXB or p.pcie is PathClass.X:
            continue
        for br in _path_bridges(c, a, b):
            cfg = br.config
            if cfg is not None and cfg.acs is not None:
                if cfg.acs.redirects_p2p:
                    redirect.setdefault(br.id, set()).update((a.id, b.id))
                    acs_of[br.id] = cfg.acs
            elif cfg is None or not cfg.extended_readable:
                unknown.setdefault(br.id, set()).update((a.id, b.id))
    out = []

    def by_bdf(ident: str) -> str:
        return c.dev(ident).bdf or ""

    for bid, devs in sorted(redirect.items(), key=lambda kv: by_bdf(kv[0])):
        br = c.dev(bid)
        acs = acs_of[bid]
        flags = " ".join(f"{name}{'+' if name in acs.enabled() else '-'}" for _, name in acs.BITS)
        redirects = ", ".join(n for n in acs.enabled() if n in ("ReqRedir", "CmpltRedir", "EgressCtrl"))
        out.append(
            c.finding(
                "ACS_REDIRECT",
                [bid, *sorted(devs, key=id_key)],
                f"ACS on {br.role.value.replace('_', ' ') if br.role else 'bridge'} {br.bdf} redirects peer-to-peer "
                f"traffic up to the root complex ({redirects}): "
                "GPUDirect P2P/RDMA below it will hang or crawl.",
                [Evidence(c.attr(br, "config"), f"ACSCtl: {flags}")],
                f"Disable ACS redirect in the BIOS, or boot with pci=disable_acs_redir={br.bdf} (persistent); "
                f"for a test only: setpci -s {br.bdf} ECAP_ACS+6.w=0000 (lost at reboot).",
            )
        )
    if unknown and c.offline:
        ids = sorted(unknown, key=by_bdf)
        out.append(
            c.finding(
                "ACS_UNKNOWN",
                ids,
                f"ACS state of {len(ids)} bridge(s) on GPU paths is unknown: lspci -vvv as root shows it "
                "(ACSCtl), and the output given does not.",
                [
                    Evidence(
                        c.attr(c.dev(i), "config"),
                        "capabilities not listed (<access denied> or not -vvv)"
                        if c.dev(i).config
                        else "not in lspci -vvv",
                    )
                    for i in ids[:8]
                ],
                "Run sudo lspci -vvv on the host and pass it with --lspci-verbose.",
            )
        )
    elif unknown:
        ids = sorted(unknown, key=by_bdf)
        reasons = {no_extended_reason(c.dev(i).config) for i in ids}
        unprivileged = no_extended_reason(None) in reasons or UNPRIVILEGED in reasons
        out.append(
            c.finding(
                "ACS_UNKNOWN",
                ids,
                f"ACS state of {len(ids)} bridge(s) on GPU paths is unknown: {'; '.join(sorted(reasons))}.",
                [Evidence(sysfs_attr(c.dev(i), "config"), _config_size(c.dev(i).config)) for i in ids[:8]],
                "Run topoagent scan as root (or with CAP_SYS_ADMIN) to read ACS control registers."
                if unprivileged
                else "Nothing to do on this host: a bridge without PCIe extended config space has no ACS to "
                "set (a VM's emulated bridge: ACS is the hypervisor host's to check).",
            )
        )
    return out


def _config_size(cfg: ConfigSpace | None) -> str:
    return f"{cfg.size} bytes readable" if cfg is not None else "unreadable"


def check_iommu(c: _Ctx) -> list[Finding]:
    """IOMMU_TRANSLATING: GPUs/RDMA NICs behind a translating IOMMU without ``iommu=pt``."""
    cmdline = (c.topo.kernel_cmdline or "").split()
    if "iommu=pt" in cmdline or "intel_iommu=off" in cmdline or "amd_iommu=off" in cmdline:
        return []
    if not c.topo.gpus:
        return []  # the hazard is GPU peer-to-peer DMA; a translating IOMMU is normal elsewhere
    hit = [
        d
        for d in c.topo.devices
        if (d.kind is DeviceKind.GPU or (d.kind is DeviceKind.NIC and d.rdma_capable))
        and d.iommu_type in ("DMA", "DMA-FQ")
    ]
    if not hit:
        return []
    return [
        c.finding(
            "IOMMU_TRANSLATING",
            [d.id for d in hit],
            f"The IOMMU translates DMA for {len(hit)} GPU/NIC function(s) and iommu=pt is not set: "
            "peer-to-peer transfers can hang or corrupt data, and every DMA pays a translation.",
            [Evidence(host_path("proc/cmdline"), c.topo.kernel_cmdline)]
            + [Evidence(host_path(f"sys/kernel/iommu_groups/{d.iommu_group}/type"), d.iommu_type) for d in hit[:8]],
            "Boot with iommu=pt (plus intel_iommu=on or amd_iommu=on if you need VFIO), then reboot.",
        )
    ]


_CHECK_LINK_KINDS = (DeviceKind.GPU, DeviceKind.NIC, DeviceKind.NVME, DeviceKind.ACCELERATOR)


def _link_evidence(c: _Ctx, d: Device, *attrs: tuple[str, str]) -> list[Evidence]:
    """Evidence from ``d``'s link: per (sysfs attribute, LinkInfo field) pair, the field's value."""
    return [Evidence(c.attr(d, a), _fmt(getattr(d.link, f))) for a, f in attrs]


def check_links(c: _Ctx) -> list[Finding]:
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
        if not links.meaningful(d):
            continue  # its link registers mean nothing (topoagent.core.quirks)
        lk = d.link
        cap = links.capability(c.topo, d)
        width_low, speed_low = links.shortfall(lk.current_gts, lk.current_width, cap)
        parent = c.topo.by_bdf(d.parent) if d.parent else None
        if lk.current_width is not None and lk.max_width is not None and lk.current_width < lk.max_width:
            evidence = _link_evidence(c, d, ("current_link_width", "current_width"), ("max_link_width", "max_width"))
            capped = not width_low  # the port above is no wider than the link is now
            if capped and parent is not None:
                evidence.append(Evidence(c.attr(parent, "max_link_width"), _fmt(parent.link.max_width)))
            out.append(
                c.finding(
                    "LINK_WIDTH_DEGRADED",
                    [d.id],
                    f"{d.id} {d.name} trained at x{lk.current_width} of x{lk.max_width}: "
                    f"{100 * lk.current_width // lk.max_width}% of its PCIe bandwidth"
                    + (f" (its slot is only x{cap.width})." if capped else "."),
                    evidence,
                    (
                        "Move the device to a slot as wide as it is, if its bandwidth matters."
                        if capped
                        else "Reseat the card or riser, check the slot's wiring (an x16 slot wired x8) and the BIOS "
                        "bifurcation setting; the width does not change at idle, so this is not power saving."
                    ),
                    severity=Severity.INFO if capped else None,
                )
            )
        if lk.current_gts is not None and lk.max_gts is not None and lk.current_gts < lk.max_gts:
            slot_max = parent.link.max_gts if parent is not None else None
            capped = not speed_low and slot_max is not None
            evidence = _link_evidence(c, d, ("current_link_speed", "current_gts"), ("max_link_speed", "max_gts"))
            if capped:
                evidence.append(Evidence(c.attr(parent, "max_link_speed"), _fmt(slot_max)))  # type: ignore[arg-type]
            if d.kind is DeviceKind.GPU:
                out.append(
                    c.finding(
                        "LINK_SPEED_BELOW_MAX_GPU",
                        [d.id],
                        f"{d.id} link runs at {lk.current_gts:g} of {lk.max_gts:g} GT/s; GPUs drop link speed at idle, "
                        "so this is only a fault if it stays there under load.",
                        evidence,
                        "Re-check under load (e.g. during nvbandwidth or a training step); if it stays low, "
                        "check the slot and riser."
                        + (f" The slot itself tops out at {slot_max:g} GT/s." if capped else ""),
                    )
                )
            else:
                out.append(
                    c.finding(
                        "LINK_SPEED_DEGRADED",
                        [d.id],
                        f"{d.id} {d.name} link runs at {lk.current_gts:g} of {lk.max_gts:g} GT/s"
                        + (
                            f" (its slot supports only {slot_max:g} GT/s)."
                            if capped
                            else "; NICs and switches do not downclock at idle."
                        ),
                        evidence,
                        (
                            "Move the device to a slot of its own generation."
                            if capped
                            else "Reseat the device, check risers/retimers and the BIOS PCIe generation setting."
                        ),
                        severity=Severity.INFO if capped else None,
                    )
                )
    return out


def _fmt(v: object) -> str | None:
    return None if v is None else f"{v:g}" if isinstance(v, float) else str(v)


# -- NUMA ------------------------------------------------------------------------------------


def check_numa(c: _Ctx) -> list[Finding]:
    """NUMA_UNKNOWN, NUMA_CPULIST_MISMATCH and CPU_LESS_NUMA_NODE."""
    topo = c.topo
    out = []
    multi = topo.multi_node
    placed = [d for d in topo.devices if d.kind in (DeviceKind.GPU, DeviceKind.NIC) and not d.is_vf]
    unknown = [d for d in placed if d.numa_node is None]
    if unknown and multi and c.offline:
        out.append(
            c.finding(
                "NUMA_UNKNOWN",
                [d.id for d in unknown],
                f"{len(unknown)} GPU/NIC function(s) have no known NUMA node in the output given, on a multi-node "
                "host: their affinity cannot be derived (a NIC's node follows a GPU's only through a PIX, PXB, PHB "
                "or NODE path).",
                [e for d in unknown[:8] for e in _numa_evidence(c, d)],
                "Give lspci -vvv too (it prints each function's NUMA node); if the host itself reports none "
                "(numa_node = -1), update the BIOS/firmware (_PXM/SRAT) or set NCCL_TOPO_FILE.",
                severity=Severity.INFO,
            )
        )  # a gap in the output given, not (yet) a fault of the host
    elif unknown and (multi or (topo.virtualized and topo.gpus)):
        vm = bool(topo.virtualized)
        out.append(
            c.finding(
                "NUMA_UNKNOWN",
                [d.id for d in unknown],
                f"{len(unknown)} GPU/NIC function(s) report no NUMA node (numa_node = -1)"
                + (
                    " on a multi-node host: their path classes are assumed SYS and affinity cannot be derived."
                    if multi
                    else " in a VM: the host's placement is hidden from this guest."
                ),
                [e for d in unknown[:8] for e in _numa_evidence(c, d)],
                (
                    "Expose the host NUMA layout to the VM (VMware numa.nodeAffinity / vNUMA, libvirt <numatune> and "
                    "guest NUMA cells with the devices' host nodes) or give NCCL an NCCL_TOPO_FILE built on the host."
                    if vm
                    else "Update the BIOS/firmware (the _PXM/SRAT tables give PCI locality) or set "
                    "NCCL_TOPO_FILE; bind by measured locality meanwhile."
                ),
                severity=Severity.WARNING if multi else Severity.INFO,
            )
        )
    for d in placed:
        if d.numa_source != "numa_node" or d.local_cpus is None:
            continue
        node = topo.node(d.numa_node)
        local = d.local_cpus
        if node is None or not node.cpus or local == topo.all_cpus or local & node.cpus:
            continue
        out.append(
            c.finding(
                "NUMA_CPULIST_MISMATCH",
                [d.id],
                f"{d.id} says NUMA node {d.numa_node} (CPUs {node.cpulist}) but its local CPUs are {d.local_cpus}: "
                "firmware tables disagree, so affinity from either may be wrong.",
                _numa_evidence(c, d)
                + [
                    Evidence(sysfs_attr(d, "local_cpulist"), str(d.local_cpus)),
                    Evidence(host_path(f"sys/devices/system/node/node{node.id}/cpulist"), node.cpulist),
                ],
                "Report to the platform vendor (ACPI _PXM vs SRAT); measure which CPUs are local "
                "(e.g. nvbandwidth or ib_write_bw with numactl) and bind by that.",
            )
        )
    out.extend(_check_overlap(c))
    out.extend(_check_cpu_less(c))
    return out


def _check_cpu_less(c: _Ctx) -> list[Finding]:
    """CPU_LESS_NUMA_NODE: nodes with memory and no CPUs, grouped by the CPU node to bind to;
    a GPU's own memory (Grace) is named as such.  A node without memory either (Grace's empty
    nodes for MIG memory partitions, ``memory_bytes`` 0) holds nothing to bind to: left out."""
    groups: dict[tuple[int | None, bool], list[Node]] = {}
    for n in c.topo.nodes:
        if n.cpu_less and n.memory_bytes != 0:
            groups.setdefault((n.nearest_cpu_node, n.gpu is not None), []).append(n)
    out = []
    for (target, gpu_memory), nodes in sorted(
        groups.items(), key=lambda kv: (kv[0][0] is None, kv[0][0] or 0, kv[0][1])
    ):
        ids = [n.id for n in nodes]
        names = ", ".join(str(i) for i in ids)
        bind = f"bind CPUs to node {target} instead" if target is not None else "no node has CPUs"
        what = (
            f"are the own memory of {', '.join(str(n.gpu) for n in nodes)} (GPU memory onlined as a NUMA node, "
            "Grace's C2C or POWER9's NVLink: nvidia-smi's GPU NUMA ID) and have no CPUs"
            if gpu_memory
            else "have memory but no CPUs (GPU memory on Grace, CXL or HBM)"
        )
        out.append(
            c.finding(
                "CPU_LESS_NUMA_NODE",
                [f"node{i}" for i in ids],
                f"NUMA node(s) {names} {what}: binding a process's CPUs there fails; {bind}.",
                [_node_cpus_evidence(c, i) for i in ids[:8]]
                if not c.offline
                else [Evidence("nvidia-smi topo -m: GPU NUMA ID", str(i)) for i in ids[:8]],
                f"numactl --cpunodebind={target} (memory may still go to node {ids[0]} with --membind or "
                "--preferred if that is the point)."
                if target is not None
                else "Check that CPUs are online (/sys/devices/system/cpu/online).",
            )
        )
    return out


def _node_cpus_evidence(c: _Ctx, node: int) -> Evidence:
    """A node's CPUs as the file they were read from holds them (``cpulist``, or ``cpumap``
    and the CPUs' node links where the kernel or a failed read left no list)."""
    n = c.topo.node(node)
    name = n.cpus_file if n is not None and n.cpus_file else "cpulist"
    cpus = n.cpus if n is not None and n.cpus_known else None
    if n is not None and n.cpus_file == "cpu/cpu*/node*":
        return Evidence(host_path(f"sys/devices/system/cpu/cpu*/node{node}"), str(cpus))
    text = "" if cpus is None else (cpus.mask() if name == "cpumap" else str(cpus))
    return Evidence(host_path(f"sys/devices/system/node/node{node}/{name}"), text)


def _check_overlap(c: _Ctx) -> list[Finding]:
    """NUMA_NODES_OVERLAP: nodes whose CPU lists share CPUs (a buggy SRAT), so no CPU set
    places a device on one node and binding "to a node" binds to the others' CPUs too."""
    owner: dict[int, int] = {}  # CPU -> the first node claiming it: linear in CPUs, not nodes^2
    overlapping: set[int] = set()
    for n in c.topo.nodes:
        for cpu in n.cpus:
            first = owner.setdefault(cpu, n.id)
            if first != n.id:
                overlapping.update((first, n.id))
    shared = sorted(overlapping)
    if not shared:
        return []
    return [
        c.finding(
            "NUMA_NODES_OVERLAP",
            [f"node{i}" for i in shared],
            f"NUMA nodes {', '.join(str(i) for i in shared)} claim the same CPUs: the firmware's SRAT is "
            "inconsistent, so device placement by CPUs and per-node binding are unreliable.",
            [_node_cpus_evidence(c, i) for i in shared[:8]],
            "Update the BIOS/firmware (ACPI SRAT); until then bind by socket (physical_package_id) and measure "
            "locality (numactl --hardware, nvbandwidth).",
        )
    ]


# -- rails -----------------------------------------------------------------------------------


def check_rails(c: _Ctx) -> list[Finding]:
    """SOCKET_WITHOUT_RAIL and NIC_SHARED_WHILE_IDLE."""
    topo, plan = c.topo, c.rails
    out = []
    compute = [n for n in topo.nics if plan.roles.get(n.id) is NicRole.COMPUTE]
    if compute:
        for s in topo.sockets:
            gpus = [g for g in topo.gpus if g.socket == s.id]
            if gpus and not any(n.socket == s.id for n in compute):
                out.append(
                    c.finding(
                        "SOCKET_WITHOUT_RAIL",
                        [g.id for g in gpus],
                        f"Socket {s.id} has {len(gpus)} GPU(s) but no compute NIC: its GPUs' network traffic "
                        "crosses to another socket.",
                        [Evidence(c.attr(g, "numa_node"), str(g.numa_node)) for g in gpus[:8]],
                        "Add a NIC on this socket (ideally one per GPU switch) or keep this socket's GPUs to "
                        "intra-node work.",
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
                        f"{', '.join(users)} share {_nic_label(n)} while {_nic_label(other)}, as close to "
                        f"{', '.join(close)}, serves no GPU.",
                        [Evidence(f"path {g}-{n.id}", c.path(g, n.id).token) for g in users]
                        + [Evidence(f"path {g}-{other.id}", c.path(g, other.id).token) for g in close],
                        f"Check why {_nic_label(other)} is slower (link width or speed, port rate): NCCL, like this "
                        "pairing, prefers the faster NIC. Do not set NCCL_IB_HCA per rank to force it: NCCL needs "
                        "the same value on every rank of a node (NVIDIA/nccl#1478).",
                    )
                )
                break
    return out


def check_nvlink_p2p(c: _Ctx) -> list[Finding]:
    """NVLINK_P2P_DISABLED: NVLinked GPUs whose NVML P2P status is not OK."""
    out = []
    for p in c.paths:
        if not p.nvlinks:
            continue
        a, b = c.dev(p.a), c.dev(p.b)
        rec = a.nvml
        if rec is not None and b.bdf in rec.p2p_not_ok:
            out.append(
                c.finding(
                    "NVLINK_P2P_DISABLED",
                    [a.id, b.id],
                    f"{a.id} and {b.id} share {p.nvlinks} NVLinks but NVML reports P2P not OK: NCCL aborts with "
                    "a hardware error or falls back to host memory.",
                    [Evidence(f"nvml:nvmlDeviceGetP2PStatus({a.bdf},{b.bdf},READ)", "not OK")],
                    "Check nvidia-smi nvlink -s and nvidia-smi -q (fabric manager state on NVSwitch systems: "
                    "systemctl status nvidia-fabricmanager); reset the GPUs or reboot.",
                )
            )
    return out


def _faults_matter(c: _Ctx, d: Device) -> bool:
    """A GPU or a rail (compute) NIC: losing it stops the jobs of the node."""
    return d.kind is DeviceKind.GPU or c.rails.roles.get(d.id) is NicRole.COMPUTE


def _functions(c: _Ctx) -> list[Device]:
    """The devices with a PCI address (what sysfs lists: fell off the bus, AER)."""
    return [d for d in c.topo.devices if d.bdf is not None]


def check_fell_off_bus(c: _Ctx) -> list[Finding]:
    """FELL_OFF_BUS: a listed function whose config space reads all ones (no SR-IOV VF)."""
    out = []
    for d in _functions(c):
        if not d.fell_off_bus:
            continue
        out.append(
            c.finding(
                "FELL_OFF_BUS",
                [d.id],
                f"{d.id} ({d.bdf}, {d.name}) "
                "no longer answers on the PCIe bus: its config space reads all ones (for an NVIDIA GPU, Xid 79); "
                "the kernel still lists it with the ids it read at boot.",
                [
                    Evidence(sysfs_attr(d, "config"), "vendor id 0xffff (all ones)"),
                    Evidence(sysfs_attr(d, "vendor"), f"0x{d.vendor_id:04x}" if d.vendor_id is not None else None),
                    Evidence(sysfs_attr(d, "device"), f"0x{d.device_id:04x}" if d.device_id is not None else None),
                ],
                "Drain the node; check dmesg for Xid 79 / AER and the slot's power and riser; a reset or "
                "reseat usually needs a reboot (echo 1 > /sys/bus/pci/devices/BDF/remove, then rescan, "
                "works only where the slot supports it).",
                None if _faults_matter(c, d) else Severity.WARNING,
            )
        )
    return out


def check_aer(c: _Ctx) -> list[Finding]:
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
                f"{d.kind.value} {d.id} ({d.bdf}) counted {fatal} fatal and {aer.total('nonfatal')} non-fatal "
                f"uncorrectable PCIe errors since boot{' (' + ', '.join(named[:6]) + ')' if named else ''}.",
                [
                    Evidence(sysfs_attr(d, name), f"TOTAL_ERR_{total} {aer.total(sev)}")
                    for name, sev, total in (
                        ("aer_dev_fatal", "fatal", "FATAL"),
                        ("aer_dev_nonfatal", "nonfatal", "NONFATAL"),
                    )
                    if aer.total(sev)
                ],
                "Check dmesg for the AER report and the device's link; fatal errors reset the link "
                "(the device may have dropped off): reseat or replace the card, cable or riser.",
                None if fatal else Severity.WARNING,
            )
        )
    return out


def check_vm_flat(c: _Ctx) -> list[Finding]:
    """VM_FLAT_PCI_TREE: a guest whose GPUs all sit on the root bus."""
    topo = c.topo
    if not topo.virtualized or len(topo.gpus) < 2:
        return []
    if any(g.ancestors for g in topo.gpus):
        return []
    return [
        c.finding(
            "VM_FLAT_PCI_TREE",
            [g.id for g in topo.gpus],
            "The hypervisor presents every GPU on the root bus: the guest sees PHB between all devices "
            "and cannot see the host's PCIe switches.",
            [Evidence(sysfs_attr(g, ""), g.parent) for g in topo.gpus[:8]],
            "Give NCCL the host's topology with NCCL_TOPO_FILE (generated on the host), or pass through "
            "the switch hierarchy (e.g. QEMU pcie-root-port/x3130 switches mirroring the host).",
        )
    ]


def check_dra_pcie_root(c: _Ctx) -> list[Finding]:
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
    compute = [n for n in c.topo.nics if not n.is_vf and c.rails.roles.get(n.id) is NicRole.COMPUTE]
    off: list[tuple[Device, Device, str]] = []
    for rail in c.rails.rails:
        # a Grace GPU's NIC on its own CPU is within one NUMA node too: SYS as nvidia-smi prints it, P2C
        if rail.nic is None or rail.cls is None or (rail.cls > PathClass.NODE and rail.nccl_path is not PathClass.P2C):
            continue
        g, n = c.topo.physical(c.dev(rail.gpu)), c.dev(rail.nic)
        if g.root_bus is None or n.root_bus is None:
            continue
        if n.root_bus != g.root_bus:
            off.append((g, n, f"its rail NIC {_nic_label(n)} is under {n.root_bus}, the GPU under {g.root_bus}"))
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
            f"A DRA claim matching GPU and NIC on resource.kubernetes.io/pcieRoot would not give {len(off)} GPU(s) "
            f"their rail NIC: {'; '.join(f'{g.id}: {why}' for g, _, why in off[:4])}"
            + ("; ..." if len(off) > 4 else "")
            + ".",
            [
                Evidence(host_path(f"sys/bus/pci/devices/{d.bdf}"), f"../../../devices/{d.root_bus}/...")
                for g, n, _ in off[:4]
                for d in (g, n)
            ],
            "Pair GPU and NIC on another attribute in the claim (resource.kubernetes.io/numaNode, or a "
            "driver attribute naming the PCIe switch), or pick the NIC by its pciBusID from "
            "topoagent plan --format rails; matching on pcieRoot fits hosts with one GPU and its NIC per root.",
        )
    ]


CHECKS: tuple[Callable[[_Ctx], list[Finding]], ...] = (
    check_gpu_nic_placement,
    check_no_rdma_nic,
    check_peer_memory,
    check_acs,
    check_iommu,
    check_links,
    check_numa,
    check_rails,
    check_nvlink_p2p,
    check_vm_flat,
    check_dra_pcie_root,
    check_fell_off_bus,
    check_aer,
)


def find_all(topo: Topology, paths: tuple[Path, ...], rails: Rails) -> tuple[Finding, ...]:
    """Every finding, most severe first, then by code and subjects (deterministic)."""
    c = _Ctx(topo, paths, rails)
    return sort_findings(f for check in CHECKS for f in check(c))


def sort_findings(found: Iterable[Finding]) -> tuple[Finding, ...]:
    """Most severe first, then by code and subjects: the one order every output uses."""
    return tuple(sorted(found, key=lambda f: (-f.severity, f.code, [id_key(s) for s in f.subjects])))
