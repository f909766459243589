"""NVIDIA's GPU platforms whose PCIe needs a particular ACS, IOMMU grouping and ATS: the three
complex kinds NVIDIA's own tool recognises, and what each requires.

The reference is ``rdma_topo`` (linux-rdma/rdma-core ``kernel-boot/rdma_topo``): its
``pci_device_types`` sort the functions (Grace/Vera root ports, ConnectX/BlueField-3 switch
ports, ConnectX NIC functions, the ConnectX-8 Data Direct DMA function), its
``NVCX_DMA_Complex``, ``NVCX_Inline_Complex`` and ``NVCX_NUMA_Complex`` are the complexes, and
``compute_acs`` and ``check`` say what each needs:

* **Data Direct** (GB300 trays, NVIDIA's Grace Blackwell CX-8 GPUDirect RDMA guide): a Grace root
  port, a ConnectX-8's own switch, a downstream port to the ConnectX-8 **DMA function**
  (15b3:2100) and, two switch levels down, the GPU.  The DMA function pairs with its NIC PF by
  the VPD-R ``V3`` keyword.  The DMA port keeps Completion Redirect on and Request Redirect off
  (``xx110x1``), the GPU port the opposite (``xx101x1``), the root port drops Source Validation
  (``xx111x0``) so that the DMA function and the GPU share one IOMMU group.
* **Inline** (HGX B300: each GPU behind a ConnectX-8 that is also its PCIe switch): bare metal
  (no ATS on the NIC) turns the NIC's port, the GPU's port and the root port fully off
  (``xx000x0``) and keeps NIC and GPU in one IOMMU group; virtualized (ATS on the NIC) adds
  Direct Translated P2P on the NIC's port (``1x111x1``), keeps the kernel default elsewhere and
  NIC and GPU in separate groups.
* **NUMA** (a GB200 tray with ConnectX-7: every GPU and NIC alone on a Grace root port): the
  kernel default everywhere, every PF and GPU in its own IOMMU group, no ATS on a NIC.

Every other ConnectX/BlueField-3 switch port and Grace/Vera root port keeps the kernel default
(``xx111x1``; Vera's ``xx101x1``, whose Completion Redirect is read-only and off), except on an
Inline bare-metal host, where they are turned off too.  A mask reads as rdma_topo and the
kernel's ``pci=config_acs=`` write it: seven characters, bit 6 (Direct Translated P2P) first,
bit 0 (Source Validation) last, ``1`` set, ``0`` clear, ``x`` left as it is
(Documentation/admin-guide/kernel-parameters.txt, ``config_acs``).

:func:`recognise` applies rdma_topo's rules to a host's functions, all or nothing as rdma_topo
does: a host it would refuse ("Unexpected topology structure") is not recognised, and the
reason is kept.  One difference, on purpose: rdma_topo takes a host as NUMA kind when any GPU
hangs directly off any root port (an x86 workstation too); here only a Grace or Vera root
port counts, where NVIDIA documents the kind.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from enum import Enum
from typing import Protocol

import msgspec

from topoagent.core import pci
from topoagent.core.snapshot import ConfigSpace, VpdInfo

__all__ = [
    "KERNEL_DEFAULT",
    "AcsRule",
    "Complex",
    "ComplexKind",
    "Platform",
    "PlatformNode",
    "PlatformRole",
    "PortRole",
    "mask_applied",
    "mask_holds",
    "platform_role",
    "recognise",
]


class PlatformRole(str, Enum):
    """What a function is to NVIDIA's platform tool (rdma_topo's device types)."""

    GRACE_RP = "grace_rp"
    VERA_RP = "vera_rp"
    CX_SWITCH = "cx_switch"
    BF3_SWITCH = "bf3_switch"
    CX_NIC = "cx_nic"
    BF3_NIC = "bf3_nic"
    CX_DMA = "cx_dma"


_ROLES = (
    (pci.GRACE_ROOT_PORTS, PlatformRole.GRACE_RP),
    (pci.VERA_ROOT_PORTS, PlatformRole.VERA_RP),
    (pci.CX_NICS, PlatformRole.CX_NIC),
    (pci.BF3_NICS, PlatformRole.BF3_NIC),
    (pci.CX_DMA, PlatformRole.CX_DMA),
    (pci.BF3_SWITCH_PORTS, PlatformRole.BF3_SWITCH),
    (pci.CX_SWITCH_PORTS, PlatformRole.CX_SWITCH),
)


def platform_role(vendor: int | None, device: int | None) -> PlatformRole | None:
    """The platform role of a function by its ids, or None."""
    ids = (vendor, device)
    return next((role for table, role in _ROLES if ids in table), None)


class ComplexKind(str, Enum):
    """The three platform kinds (rdma_topo's ``TopoType``)."""

    DATA_DIRECT = "data_direct"
    INLINE = "inline"
    NUMA = "numa"

    @property
    def label(self) -> str:
        """How a person names it: ``Data Direct``, ``Inline``, ``NUMA``."""
        return {"data_direct": "Data Direct", "inline": "Inline", "numa": "NUMA"}[self.value]


class PortRole(str, Enum):
    """What a port is to a complex."""

    DMA_PORT = "dma_port"  # Data Direct: the downstream port toward the DMA function
    GPU_PORT = "gpu_port"  # Data Direct, Inline: the shared switch's downstream port toward the GPU
    NIC_PORT = "nic_port"  # Inline: the shared switch's downstream port toward the NIC PF
    ROOT_PORT = "root_port"  # Data Direct, Inline: the complex's root port
    OTHER = "other"  # every other ConnectX/BlueField-3 switch port, Grace/Vera root port


#: The kernel's own ACS setting (Source Validation, Request and Completion Redirect, Upstream
#: Forwarding: drivers/pci/pci.c, pci_std_enable_acs), as a mask.
KERNEL_DEFAULT = "xx111x1"
#: Vera's root ports advertise Completion Redirect read-only and off (rdma_topo, kernel_acs_isolated).
_VERA_DEFAULT = "xx101x1"
_ALL_OFF = "xx000x0"

_WHY = {
    (PortRole.DMA_PORT, "xx110x1"): "Completion Redirect on, Request Redirect off: the DMA function's "
    "requests reach the GPU directly and the GPU's completions come back through the root complex",
    (PortRole.GPU_PORT, "xx101x1"): "Request Redirect on, Completion Redirect off: the GPU's peer "
    "requests go up to the root complex, completions to the DMA function pass directly",
    (PortRole.ROOT_PORT, "xx111x0"): "Source Validation off: the DMA function and the GPU fall into one "
    "IOMMU group, as the GPU driver's GPUDirect check requires",
    (PortRole.NIC_PORT, "1x111x1"): "Direct Translated P2P on: the NIC's ATS-translated requests reach "
    "the GPU directly while the IOMMU still isolates the passed-through functions",
}


def _why(role: PortRole, mask: str, kind: ComplexKind, virt: bool | None) -> str:
    if (role, mask) in _WHY:
        return _WHY[(role, mask)]
    if mask == _ALL_OFF:
        return "ACS fully off on an Inline bare-metal host: the GPU and its NIC talk peer to peer inside the switch"
    if kind is ComplexKind.INLINE and virt:
        return "the kernel default on a virtualized Inline host: the IOMMU isolates every passed-through function"
    return "the kernel default: redirect on, every function isolated in its own IOMMU group"


class AcsRule(msgspec.Struct, frozen=True):
    """What one port's ACS control register must hold on a recognised platform."""

    bdf: str
    #: rdma_topo's mask: seven characters, bit 6 first (``1`` set, ``0`` clear, ``x`` as it is).
    mask: str
    role: PortRole
    #: The complex the port belongs to (:attr:`Complex.id`), None for :attr:`PortRole.OTHER`.
    complex: str | None
    why: str

    def holds(self, control: int) -> bool:
        """Whether ``control`` already holds the mask (rdma_topo's ``combine_acs`` leaves it)."""
        return mask_holds(self.mask, control)

    def applied(self, control: int) -> int:
        """``control`` with the mask's bits set and cleared, the ``x`` bits kept."""
        return mask_applied(self.mask, control)


def mask_applied(mask: str, control: int) -> int:
    """``control`` with a mask applied (rdma_topo's ``combine_acs``)."""
    for bit, ch in enumerate(reversed(mask)):
        if ch == "1":
            control |= 1 << bit
        elif ch == "0":
            control &= ~(1 << bit) & 0xFFFF
    return control


def mask_holds(mask: str, control: int) -> bool:
    """Whether a control register already satisfies a mask."""
    return mask_applied(mask, control) == control


class Complex(msgspec.Struct, frozen=True):
    """One complex: its kind, NIC PFs (the primary first), GPUs, DMA function and ports."""

    id: str
    kind: ComplexKind
    nics: tuple[str, ...]
    gpus: tuple[str, ...]
    dma: str | None = None
    numa_node: int | None = None
    #: The primary NIC's VPD product name, where read.
    name: str | None = None
    #: The ports the complex's rules name (DMA, GPU, NIC and root port), by BDF.
    ports: tuple[str, ...] = ()

    @property
    def members(self) -> tuple[str, ...]:
        """Every function of the complex: NICs, DMA function, GPUs, ports."""
        return (*self.nics, *((self.dma,) if self.dma else ()), *self.gpus, *self.ports)


class Platform(msgspec.Struct, frozen=True):
    """The host's platform kind, its complexes and the ACS every platform port must hold.

    ``kind`` None: no recognised platform (``problem`` says why where one was near: a DMA
    function without a partner, a ConnectX switch without NVIDIA's shape)."""

    kind: ComplexKind | None = None
    #: Inline only: whether the host is set up for virtualization (its NICs expose ATS).
    virt: bool | None = None
    complexes: tuple[Complex, ...] = ()
    acs: tuple[AcsRule, ...] = ()
    #: The kind that was near, and why it was not recognised (rdma_topo's refusal).
    near: ComplexKind | None = None
    problem: str | None = None

    def rule(self, bdf: str | None) -> AcsRule | None:
        """The ACS rule of a port, or None."""
        return next((r for r in self.acs if r.bdf == bdf), None) if bdf is not None else None

    def complex_of(self, bdf: str | None) -> Complex | None:
        """The complex a function belongs to, or None."""
        if bdf is None:
            return None
        return next((c for c in self.complexes if bdf in c.members), None)


class PlatformNode(Protocol):
    """What recognition reads of a function (a :class:`~topoagent.core.topology.Device`):
    ``bdf``, ``parent`` (a bridge's BDF or a root bus), ids and class, NUMA node, config space
    and VPD."""

    @property
    def bdf(self) -> str | None: ...  # noqa: D102 (the class says what each is)
    @property
    def parent(self) -> str | None: ...  # noqa: D102
    @property
    def vendor_id(self) -> int | None: ...  # noqa: D102
    @property
    def device_id(self) -> int | None: ...  # noqa: D102
    @property
    def class_code(self) -> int | None: ...  # noqa: D102
    @property
    def numa_node(self) -> int | None: ...  # noqa: D102
    @property
    def config(self) -> ConfigSpace | None: ...  # noqa: D102
    @property
    def vpd(self) -> VpdInfo | None: ...  # noqa: D102


class _Unrecognised(Exception):
    """The host is near a kind but not of NVIDIA's shape (rdma_topo refuses it)."""


class _Tree:
    """The functions with BDFs, their parents and children, and their platform roles."""

    def __init__(self, nodes: Sequence[PlatformNode]) -> None:
        self.nodes = {n.bdf: n for n in nodes if n.bdf is not None}
        self.kids: dict[str, list[str]] = defaultdict(list)
        for bdf, n in sorted(self.nodes.items()):
            if n.parent in self.nodes:
                self.kids[n.parent].append(bdf)
        self.roles = {b: platform_role(n.vendor_id, n.device_id) for b, n in self.nodes.items()}

    def parent(self, bdf: str | None, role: PlatformRole) -> str | None:
        """The parent of ``bdf`` when it has ``role`` (rdma_topo's check_parent), else None."""
        if bdf is None:
            return None
        up = self.nodes[bdf].parent
        return up if up in self.nodes and self.roles[up] is role else None

    def root(self, bdf: str) -> str | None:
        """The topmost listed ancestor of ``bdf`` (its root port), or None."""
        top = None
        up = self.nodes[bdf].parent
        while up in self.nodes:
            top = up
            up = self.nodes[up].parent
        return top

    def below(self, bdf: str) -> Iterator[str]:
        """Every function below ``bdf``."""
        stack = list(self.kids.get(bdf, ()))
        while stack:
            b = stack.pop()
            yield b
            stack.extend(self.kids.get(b, ()))

    def gpu(self, bdf: str) -> bool:
        """An NVIDIA display-class function (rdma_topo's ``nvgpu``)."""
        n = self.nodes[bdf]
        return n.vendor_id == pci.NVIDIA and n.class_code is not None and n.class_code >> 16 == 0x03

    def of_role(self, role: PlatformRole) -> list[str]:
        return sorted(b for b, r in self.roles.items() if r is role)

    def acs_known_absent(self, bdf: str) -> bool:
        """The port's extended config space was read and holds no ACS capability."""
        cfg = self.nodes[bdf].config
        return cfg is not None and cfg.extended_readable and cfg.acs is None

    def vpd(self, bdf: str) -> VpdInfo | None:
        return self.nodes[bdf].vpd


def _near(tree: _Tree) -> ComplexKind | None:
    """The kind rdma_topo would take the host for (``__detect_topo_type``), Grace/Vera-only for NUMA."""
    if tree.of_role(PlatformRole.CX_DMA):
        return ComplexKind.DATA_DIRECT
    for b in tree.nodes:
        up = tree.nodes[b].parent
        if tree.gpu(b) and up in tree.nodes and tree.roles[up] in (PlatformRole.GRACE_RP, PlatformRole.VERA_RP):
            return ComplexKind.NUMA
    roles = set(tree.roles.values())
    if {PlatformRole.CX_SWITCH, PlatformRole.CX_NIC} <= roles and any(tree.gpu(b) for b in tree.nodes):
        return ComplexKind.INLINE
    return None


# -- Data Direct ------------------------------------------------------------------------------


def _dma_complex(tree: _Tree, dma: str, index: int) -> tuple[Complex, list[AcsRule]]:
    """rdma_topo's ``__get_nvcx_complex`` and ``NVCX_DMA_Complex.compute_acs`` for one DMA function."""
    vpd = tree.vpd(dma)
    v3 = vpd.v3 if vpd is not None else None
    if v3 is None:
        raise _Unrecognised(f"the DMA function {dma} has no VPD V3 keyword (its vpd file unread or without one)")
    pfs = sorted(b for b in tree.of_role(PlatformRole.CX_NIC) if (v := tree.vpd(b)) is not None and v.v3 == v3)
    if not pfs:
        raise _Unrecognised(f"no ConnectX NIC function carries the DMA function {dma}'s VPD V3 {v3!r}")
    dma_port = tree.parent(dma, PlatformRole.CX_SWITCH)
    usp = tree.parent(dma_port, PlatformRole.CX_SWITCH)
    rp = tree.parent(usp, PlatformRole.GRACE_RP)
    if rp is None or usp is None or dma_port is None:
        raise _Unrecognised(f"the DMA function {dma} does not sit two ConnectX switch ports below a Grace root port")
    gpus = [b for b in tree.below(rp) if tree.gpu(b)]
    if len(gpus) != 1:
        raise _Unrecognised(f"{len(gpus)} GPUs below the DMA function {dma}'s root port {rp}, not one")
    gpu = gpus[0]
    dsp2 = tree.parent(gpu, PlatformRole.CX_SWITCH)
    usp2 = tree.parent(dsp2, PlatformRole.CX_SWITCH)
    gpu_port = tree.parent(usp2, PlatformRole.CX_SWITCH)
    if gpu_port is None or tree.parent(gpu_port, PlatformRole.CX_SWITCH) != usp:
        raise _Unrecognised(f"the GPU {gpu} does not sit two switch levels below the DMA function {dma}'s switch")
    if set(tree.below(rp)) != {dma, dma_port, usp, gpu, dsp2, usp2, gpu_port}:
        raise _Unrecognised(f"other functions than the DMA function and its GPU below the root port {rp}")
    for port in (dma_port, gpu_port, rp):
        if tree.acs_known_absent(port):
            raise _Unrecognised(f"the port {port} has no ACS capability")
    cid = f"cx{index}"
    rules = [
        AcsRule(dma_port, "xx110x1", PortRole.DMA_PORT, cid, _WHY[(PortRole.DMA_PORT, "xx110x1")]),
        AcsRule(gpu_port, "xx101x1", PortRole.GPU_PORT, cid, _WHY[(PortRole.GPU_PORT, "xx101x1")]),
        AcsRule(rp, "xx111x0", PortRole.ROOT_PORT, cid, _WHY[(PortRole.ROOT_PORT, "xx111x0")]),
    ]
    name = tree.vpd(pfs[0])
    cx = Complex(
        cid,
        ComplexKind.DATA_DIRECT,
        tuple(pfs),
        (gpu,),
        dma,
        tree.nodes[pfs[0]].numa_node,
        name.name if name is not None else None,
        (dma_port, gpu_port, rp),
    )
    return cx, rules


# -- Inline ---------------------------------------------------------------------------------------


def _inline_complex(tree: _Tree, gpu: str) -> tuple[str, str, str, str, str]:
    """rdma_topo's ``__get_nvcx_inline_complex``: (root port, NIC PF, NIC's port, GPU's port, GPU)."""
    dsp2 = tree.parent(gpu, PlatformRole.CX_SWITCH)
    usp2 = tree.parent(dsp2, PlatformRole.CX_SWITCH)
    dsp1 = tree.parent(usp2, PlatformRole.CX_SWITCH)
    usp1 = tree.parent(dsp1, PlatformRole.CX_SWITCH)
    if usp1 is None:
        raise _Unrecognised(f"the GPU {gpu} does not sit four ConnectX switch levels below a root port")
    rp = tree.root(usp1)
    if rp is None or tree.roles[rp] is not None or tree.nodes[rp].parent in tree.nodes:
        raise _Unrecognised(f"no root port of another kind than Grace/Vera above the GPU {gpu}'s switch {usp1}")
    nic_ports = [p for p in tree.kids.get(usp1, ()) if any(tree.roles[b] is PlatformRole.CX_NIC for b in tree.below(p))]
    gpu_ports = [p for p in tree.kids.get(usp1, ()) if any(tree.gpu(b) for b in tree.below(p))]
    if len(nic_ports) != 1 or len(gpu_ports) != 1:
        raise _Unrecognised(f"the switch {usp1} has {len(nic_ports)} NIC and {len(gpu_ports)} GPU ports, not one each")
    nic = min(b for b in tree.below(usp1) if tree.roles[b] is PlatformRole.CX_NIC)
    for port in (nic_ports[0], gpu_ports[0], rp):
        if tree.acs_known_absent(port):
            raise _Unrecognised(f"the port {port} has no ACS capability")
    return rp, nic, nic_ports[0], gpu_ports[0], gpu


def _inline_virt(tree: _Tree, nics: Iterable[str]) -> bool:
    """rdma_topo's ``__auto_detect_virt``: every complex's NIC exposes ATS (virtualized) or none does."""
    ats = {b: (cfg.ats if (cfg := tree.nodes[b].config) is not None else None) for b in nics}
    if None in ats.values():
        raise _Unrecognised("the NICs' ATS capability is unknown (extended config space not read)")
    if len(set(ats.values())) != 1:
        on = ", ".join(b for b, a in ats.items() if a)
        raise _Unrecognised(f"only some NICs expose ATS ({on}): virtualized or not cannot be told")
    return bool(next(iter(ats.values())))


def _inline(tree: _Tree) -> tuple[list[Complex], list[AcsRule], bool]:
    found = [_inline_complex(tree, g) for g in sorted(b for b in tree.nodes if tree.gpu(b))]
    virt = _inline_virt(tree, [nic for _, nic, _, _, _ in found])
    complexes: list[Complex] = []
    rules: list[AcsRule] = []
    for i, (rp, nic, nic_port, gpu_port, gpu) in enumerate(sorted(found, key=lambda f: f[1])):
        cid = f"cx{i}"
        wanted = (
            ((nic_port, "1x111x1", PortRole.NIC_PORT), (gpu_port, KERNEL_DEFAULT, PortRole.GPU_PORT))
            if virt
            else ((nic_port, _ALL_OFF, PortRole.NIC_PORT), (gpu_port, _ALL_OFF, PortRole.GPU_PORT))
        ) + ((rp, KERNEL_DEFAULT if virt else _ALL_OFF, PortRole.ROOT_PORT),)
        rules.extend(AcsRule(b, m, r, cid, _why(r, m, ComplexKind.INLINE, virt)) for b, m, r in wanted)
        vpd = tree.vpd(nic)
        complexes.append(
            Complex(
                cid,
                ComplexKind.INLINE,
                (nic,),
                (gpu,),
                None,
                tree.nodes[nic].numa_node,
                vpd.name if vpd is not None else None,
                (nic_port, gpu_port, rp),
            )
        )
    return complexes, rules, virt


# -- NUMA ------------------------------------------------------------------------------------------


def _numa(tree: _Tree) -> list[Complex]:
    """rdma_topo's ``__get_nvcx_numa_complex``: per NUMA node with devices, its CX NICs and GPUs."""
    nodes = sorted({n.numa_node for n in tree.nodes.values() if n.numa_node is not None and n.numa_node >= 0})
    complexes = []
    for node in nodes:
        nics = [b for b in tree.of_role(PlatformRole.CX_NIC) if tree.nodes[b].numa_node == node]
        gpus = sorted(b for b in tree.nodes if tree.gpu(b) and tree.nodes[b].numa_node == node)
        if not nics or not gpus:
            raise _Unrecognised(f"NUMA node {node} has {len(nics)} ConnectX NICs and {len(gpus)} GPUs; each needs both")
        vpd = tree.vpd(nics[0])
        complexes.append(
            Complex("", ComplexKind.NUMA, tuple(nics), tuple(gpus), None, node, vpd.name if vpd is not None else None)
        )
    ordered = sorted(complexes, key=lambda c: c.nics[0])
    return [msgspec.structs.replace(c, id=f"cx{i}") for i, c in enumerate(ordered)]


# -- the host ---------------------------------------------------------------------------------------


def _others(tree: _Tree, taken: set[str], kind: ComplexKind, virt: bool | None) -> list[AcsRule]:
    """rdma_topo's ``PCITopo.compute_acs``: every other ConnectX/BlueField-3 switch port and
    Grace/Vera root port with ACS keeps the kernel default (off on an Inline bare-metal host)."""
    out = []
    for b in sorted(tree.nodes):
        role = tree.roles[b]
        if b in taken or role not in (
            PlatformRole.CX_SWITCH,
            PlatformRole.BF3_SWITCH,
            PlatformRole.GRACE_RP,
            PlatformRole.VERA_RP,
        ):
            continue
        cfg = tree.nodes[b].config
        if cfg is not None and cfg.extended_readable and cfg.acs is None:
            continue  # no ACS capability (a switch's upstream port): nothing to hold
        isolated = kind is not ComplexKind.INLINE or virt
        mask = (_VERA_DEFAULT if role is PlatformRole.VERA_RP else KERNEL_DEFAULT) if isolated else _ALL_OFF
        out.append(AcsRule(b, mask, PortRole.OTHER, None, _why(PortRole.OTHER, mask, kind, virt)))
    return out


def _build(tree: _Tree, kind: ComplexKind) -> Platform:
    virt: bool | None = None
    rules: list[AcsRule] = []
    complexes: list[Complex]
    if kind is ComplexKind.DATA_DIRECT:
        built = [_dma_complex(tree, d, 0) for d in tree.of_role(PlatformRole.CX_DMA)]
        built.sort(key=lambda cr: cr[0].nics[0])
        complexes = []
        for i, (c, rs) in enumerate(built):
            cid = f"cx{i}"
            complexes.append(msgspec.structs.replace(c, id=cid))
            rules.extend(msgspec.structs.replace(r, complex=cid) for r in rs)
    elif kind is ComplexKind.INLINE:
        complexes, rules, virt = _inline(tree)
    else:
        complexes = _numa(tree)
    taken = {r.bdf for r in rules}
    rules.extend(_others(tree, taken, kind, virt))
    return Platform(kind, virt, tuple(complexes), tuple(sorted(rules, key=lambda r: r.bdf)))


def recognise(nodes: Sequence[PlatformNode]) -> Platform:
    """The host's platform (:class:`Platform`; empty where there is none), by rdma_topo's rules."""
    tree = _Tree(nodes)
    kind = _near(tree)
    if kind is None:
        return Platform()
    try:
        return _build(tree, kind)
    except _Unrecognised as exc:
        return Platform(near=kind, problem=str(exc))
