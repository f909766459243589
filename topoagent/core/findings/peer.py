"""Peer-to-peer DMA: NO_PEER_MEMORY, ACS_REDIRECT, ACS_UNKNOWN and IOMMU_TRANSLATING (their
words and rules: :mod:`~topoagent.core.findings.catalogue`)."""

from __future__ import annotations

from topoagent.core.analysis.peermem import peermem_need
from topoagent.core.analysis.unknown import acs_unknown, peer_bridges
from topoagent.core.findings.context import Context, config_size, sysfs_attr
from topoagent.core.findings.finding import Evidence, Finding, Severity
from topoagent.core.parse.segment import NCCL_XML
from topoagent.core.pathclass import PathClass
from topoagent.core.pci import DeviceKind
from topoagent.core.platform import ComplexKind
from topoagent.core.snapshot import UNPRIVILEGED, AcsInfo, host_path, no_extended_reason
from topoagent.core.topology import BridgeRole, Device, id_key


def check_peer_memory(c: Context) -> list[Finding]:
    """NO_PEER_MEMORY: GPUs that use GPUDirect RDMA by NCCL's defaults, no peer-memory module
    and no DMA-BUF: the verdict ``fix peermem`` gives too (analysis.peermem).

    Not on a Data Direct platform: NCCL reaches a ConnectX-8 through its DMA function only over
    DMA-BUF (``ncclMlx5dvDmaBufCapable``, NVIDIA/nccl src/transport/net_ib/init.cc), never
    through a peer-memory module, so loading one changes nothing there."""
    if c.topo.platform.kind is ComplexKind.DATA_DIRECT:
        return []
    need = peermem_need(c.topo, c.rails)
    if not need.needed:
        return []
    nics = dict.fromkeys(r.nic for g in need.gpus if (r := c.rails.rail(g)) is not None and r.nic is not None)
    dmabuf = c.topo.dmabuf
    return [
        c.finding(
            "NO_PEER_MEMORY",
            [*need.gpus, *nics],
            [
                Evidence(host_path(p), "absent")
                for p in ("sys/module/nvidia_peermem", "sys/module/nv_peer_mem", "sys/kernel/mm/memory_peers")
            ]
            + _dmabuf_evidence(c),
            say="" if dmabuf is False else "dmabuf unknown",
            gpus=len(need.gpus),
        )
    ]


def _dmabuf_evidence(c: Context) -> list[Evidence]:
    """The two facts DMA-BUF depends on, as read."""
    release, open_module = c.topo.kernel_release, c.topo.nvidia_open_module
    return [
        Evidence(host_path("proc/sys/kernel/osrelease"), f"{release[0]}.{release[1]}" if release else "unknown"),
        Evidence(
            host_path("proc/driver/nvidia/version"),
            {True: "open kernel module", False: "proprietary kernel module", None: "unknown"}[open_module],
        ),
    ]


def _redirecting(c: Context) -> tuple[dict[str, set[str]], dict[str, AcsInfo]]:
    """The bridges of GPU peer paths (PIX/PXB) whose ACS redirects, with the devices whose
    traffic turns there, and their ACS.  A port the host's platform names
    (:mod:`topoagent.core.platform`) is judged by its own rule, not here."""
    redirect: dict[str, set[str]] = {}
    acs_of: dict[str, AcsInfo] = {}
    platform = c.topo.platform
    for p in c.paths:
        if p.pcie > PathClass.PXB or p.pcie is PathClass.X:
            continue  # (most pairs: judged without looking their devices up)
        a, b = c.dev(p.a), c.dev(p.b)
        if DeviceKind.GPU not in (a.kind, b.kind):
            continue
        for br in peer_bridges(c.topo, a, b):
            cfg = br.config
            if cfg is not None and cfg.acs is not None:
                # a platform port is judged by its rule; on a host near a platform that is not
                # recognised, a ConnectX/Grace port by none (its platform may require the redirect)
                mine = platform.rule(br.bdf) is not None or (platform.near is not None and br.platform_role)
                if cfg.acs.redirects_p2p and not mine:
                    redirect.setdefault(br.id, set()).update((a.id, b.id))
                    acs_of[br.id] = cfg.acs
    return redirect, acs_of


def _unseen_redirects(c: Context, seen: set[str]) -> list[tuple[Device, AcsInfo]]:
    """In pasted ``lspci -vvv``: switch downstream and root ports whose ACS redirects and whose link
    is up (``LnkSta`` shows lanes: something answers below) while the excerpt shows no GPU path
    through them: nothing below them -- a ``grep`` or ``-s`` may have left the GPU out -- or a GPU
    whose peers the excerpt does not show.  A port with devices shown below it and no GPU among
    them carries no GPU traffic, and an empty slot none at all.  A port of a kind NVIDIA's
    platforms set up with redirect on (a ConnectX/BlueField-3 switch port, a Grace/Vera root port)
    is left alone: its platform may require just that."""
    if not c.offline:
        return []
    return [
        (d, acs)
        for d in c.topo.devices
        if d.role in (BridgeRole.SWITCH_DOWNSTREAM, BridgeRole.ROOT_PORT)
        and d.id not in seen
        and d.platform_role is None
        and _no_gpu_path_shown(c, d)
        and (d.link.current_width or 0) > 0
        and d.config is not None
        and (acs := d.config.acs) is not None
        and acs.redirects_p2p
    ]


def _no_gpu_path_shown(c: Context, port: Device) -> bool:
    """Nothing shown below ``port``, or one GPU and no GPU or NIC beside it to be its peer."""
    below = [d for d in c.topo.devices if port.bdf in d.ancestors]
    ends = [d for d in below if d.kind in (DeviceKind.GPU, DeviceKind.NIC) and not d.is_vf]
    return not below or (len(ends) == 1 and ends[0].kind is DeviceKind.GPU)


def _acs_finding(c: Context, br: Device, acs: AcsInfo, devs: set[str], *, unseen: bool = False) -> Finding:
    flags = " ".join(f"{name}{'+' if name in acs.enabled() else '-'}" for _, name in acs.BITS)
    redirects = ", ".join(n for n in acs.enabled() if n in ("ReqRedir", "CmpltRedir", "EgressCtrl"))
    return c.finding(
        "ACS_REDIRECT",
        [br.id, *sorted(devs, key=id_key)],
        [Evidence(c.attr(br, "config"), f"ACSCtl: {flags}")],
        say="no gpu seen" if unseen else "",
        severity=Severity.INFO if unseen else None,
        bridge=br.role.value.replace("_", " ") if br.role else "bridge",
        bdf=br.bdf,
        redirects=redirects,
    )


def check_acs(c: Context) -> list[Finding]:
    """ACS_REDIRECT / ACS_UNKNOWN: ACS on the bridges of GPU peer paths (PIX/PXB) that redirects;
    the bridges GPU traffic crosses whose ACS is unknown (:func:`~topoagent.core.analysis.unknown.acs_unknown`,
    the one list every output's unknown facts say)."""
    redirect, acs_of = _redirecting(c)

    def by_bdf(ident: str) -> str:
        return c.dev(ident).bdf or ""

    out = [
        _acs_finding(c, c.dev(b), acs_of[b], devs) for b, devs in sorted(redirect.items(), key=lambda kv: by_bdf(kv[0]))
    ]
    unknown = acs_unknown(c.topo, c.paths)
    ids = unknown.subjects if unknown is not None else ()
    seen = {*redirect, *ids}
    for br, acs in _unseen_redirects(c, seen):
        out.append(_acs_finding(c, br, acs, set(), unseen=True))
    if ids and c.offline:
        out.append(
            c.finding(
                "ACS_UNKNOWN",
                ids,
                [Evidence(c.attr(c.dev(i), "config"), _pasted_acs(c.dev(i))) for i in ids[:8]],
                say="pasted",
                fix="pasted",
                bridges=len(ids),
            )
        )
    elif ids:
        reasons = {no_extended_reason(c.dev(i).config) for i in ids}
        unprivileged = no_extended_reason(None) in reasons or UNPRIVILEGED in reasons
        out.append(
            c.finding(
                "ACS_UNKNOWN",
                ids,
                [Evidence(sysfs_attr(c.dev(i), "config"), config_size(c.dev(i).config)) for i in ids[:8]],
                fix="" if unprivileged else "no extended space",
                bridges=len(ids),
                reasons="; ".join(sorted(reasons)),
            )
        )
    return out


def check_iommu(c: Context) -> list[Finding]:
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
            [Evidence(host_path("proc/cmdline"), c.topo.kernel_cmdline)]
            + [Evidence(host_path(f"sys/kernel/iommu_groups/{d.iommu_group}/type"), d.iommu_type) for d in hit[:8]],
            functions=len(hit),
        )
    ]


def _pasted_acs(d: Device) -> str:
    """Why a pasted bridge's ACS is unknown, as its source shows it."""
    if d.numa_source == NCCL_XML.evidence:
        return "an NCCL topology holds no ACS"
    return "capabilities not listed (<access denied> or not -vvv)" if d.config else "not in lspci -vvv"
