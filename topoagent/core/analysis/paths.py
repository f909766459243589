"""Paths between devices, classed as ``nvidia-smi topo -m`` and NCCL class them.

Best first (:class:`~topoagent.core.pathclass.PathClass`, NCCL's order): ``X`` < ``NV#`` < ``PIX``
< ``PXB`` < ``PHB`` < ``NODE`` < ``SYS`` as nvidia-smi prints them; NCCL's ``C2C`` and ``P2C``
(Grace) are named only where NCCL's view differs (:func:`nccl_path_type`).  The PCIe class
is computed from the tree (the ``nvidia-smi topo -m`` legend; NCCL's model of it in
NVIDIA/nccl src/graph/topo.cc and paths.cc):

* a switch is counted by its upstream port; its downstream ports are part of it;
* a Broadcom PEX88xxx/PEX890xx chip that presents two levels of ports counts as one switch
  exactly when NCCL flattens it (``ncclTopoFlattenBcmSwitches``/``getBcmGen``): subsystem vendor
  Broadcom and subsystem device 0xaxxx on both levels (Gen4), 0x0xxx above and 0x1xxx below
  (Gen5); other subsystem ids keep two switches.  ``nvidia-smi topo -m`` differs here: its legend
  counts bridges and knows no such chip, so it prints PXB for a pair under the two flattened
  levels (a DGX A100's GPU and NIC) where NCCL and this module say PIX;
* root ports vanish: they are the host bridge's ports, so two devices under different root
  ports of one root bus are ``PHB``.

Unknown locality yields the worst class it could be, flagged ``locality_known=False``.  A path
that no source shows -- no stated cell, no tree placing both ends -- is also ``shown=False``: its
class is unknown, and outputs print its cell as ``?`` (:attr:`Path.cell`), never a guess.

A class a source states outright -- a cell of a pasted ``nvidia-smi topo -m``, kept in
:attr:`~topoagent.core.snapshot.Snapshot.given_paths` -- is taken as stated between the two devices it
names.  ``NV#`` says how many NVLinks but not the PCIe class beneath them: that comes from the
tree where one is known (lspci given too), else it is the worst case, ``SYS`` with
``locality_known=False``, as for any unknown locality.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from topoagent.core import pci
from topoagent.core.analysis.c2c import is_c2c, own_cpu_nic, p2c_nic
from topoagent.core.digits import decimal
from topoagent.core.pathclass import XGMI, PathClass
from topoagent.core.pci import DeviceKind
from topoagent.core.platform import ComplexKind
from topoagent.core.topology import BridgeRole, Device, Topology, common_ancestors


class Path(msgspec.Struct, frozen=True):
    """The path between devices ``a`` and ``b`` (ids, ``a`` < ``b`` in device order)."""

    a: str
    b: str
    pcie: PathClass
    nvlinks: int = 0
    #: For SYS: whether the two NUMA nodes share a socket (AMD NPS2/4, Intel SNC).
    same_socket: bool | None = None
    #: False when a NUMA node or the tree was unknown and the class is the worst plausible.
    locality_known: bool = True
    #: False when no source shows the path: no cell states it and no tree places both ends (a
    #: pasted matrix's missing row); ``pcie`` is then a placeholder and :attr:`cell` is ``?``.
    shown: bool = True
    #: Two AMD GPUs joined by XGMI (Infinity Fabric): KFD's io_link of type XGMI, or a pasted
    #: ``rocm-smi``/``amd-smi`` link type.  RCCL treats it as NCCL treats NVLink (its topology
    #: gives XGMI links the type LINK_NVL, ROCm/rccl src/graph/topo.cc), so its class is NV.
    xgmi: bool = False
    #: False for two GPUs whose NVLinks (XGMI for AMD GPUs) no source shows: NVML (or KFD) was
    #: not read and no pasted cell states them.  :attr:`nvlinks` is then 0 for want of
    #: knowing, not a fact, and :attr:`cell` is ``?``: ``nvidia-smi topo -m`` might print
    #: ``NV18`` where the PCIe class alone says ``NODE`` (:mod:`topoagent.core.analysis.unknown`).
    links_known: bool = True

    @property
    def cell(self) -> str:
        """The matrix cell: :attr:`token`, or ``?`` where no source shows the path or the
        NVLinks between two GPUs."""
        return self.token if self.shown and self.links_known else "?"

    @property
    def cls(self) -> PathClass:
        """NV when NVLinks (or XGMI) join the pair, else the PCIe class."""
        return PathClass.NV if self.nvlinks or self.xgmi else self.pcie

    @property
    def token(self) -> str:
        """The legend token (``NV18``, ``PIX``, ``SYS`` ...; ``XGMI`` as the AMD tools name it)."""
        if self.xgmi and not self.nvlinks:
            return XGMI
        return f"NV{self.nvlinks}" if self.nvlinks else self.pcie.token


def switch_of(topo: Topology, bridge: Device) -> str | None:
    """The switch a bridge belongs to, named by its (outermost merged) upstream port.

    Root ports and plain PCI bridges are not switches here (``None`` for root ports).
    """
    if bridge.role is BridgeRole.ROOT_PORT:
        return None
    if bridge.role is BridgeRole.SWITCH_DOWNSTREAM and bridge.parent is not None:
        up = topo.by_bdf(bridge.parent)
        if up is not None and up.role is BridgeRole.SWITCH_UPSTREAM:
            return switch_of(topo, up)
    if bridge.role is BridgeRole.SWITCH_UPSTREAM:
        upper = _flattened_into(topo, bridge)
        if upper is not None:
            return switch_of(topo, upper)
    return bridge.bdf


def _flattened_into(topo: Topology, usp: Device) -> Device | None:
    """The upper level of a Broadcom chip that NCCL flattens this lower level's upstream port
    into, or None.  NCCL sees the switch above as the upstream port two levels up the sysfs path
    (the downstream port between vanishes) and checks only the two upstream ports' ids; a switch
    that has itself been flattened into one above is marked and absorbs nothing more.  In NCCL's
    own topology file the downstream port is already gone: the upper port is the parent."""
    upper = topo.by_bdf(usp.parent) if usp.parent else None
    if upper is not None and upper.role is BridgeRole.SWITCH_DOWNSTREAM:
        upper = topo.by_bdf(upper.parent) if upper.parent else None
    if upper is None or upper.role is not BridgeRole.SWITCH_UPSTREAM:
        return None
    gen = _bcm_gen(upper, 0)
    if not gen or _bcm_gen(usp, 1) != gen or _flattened_into(topo, upper) is not None:
        return None
    return upper


def below_flattened_broadcom(topo: Topology, d: Device) -> bool:
    """Whether a Broadcom level that NCCL flattens lies above ``d``: there ``nvidia-smi topo -m``,
    which counts bridges, may print PXB where NCCL and this module say PIX."""
    for bdf in d.ancestors:
        br = topo.by_bdf(bdf)
        if br is not None and br.role is BridgeRole.SWITCH_UPSTREAM and _flattened_into(topo, br) is not None:
            return True
    return False


def _bcm_gen(d: Device, level: int) -> int:
    return pci.bcm_gen(d.vendor_id, d.device_id, d.subsystem_vendor_id, d.subsystem_device_id, level)


def _switch_names(topo: Topology) -> dict[str, str | None]:
    """Every bridge's :func:`switch_of`, by BDF: computed once per topology (kept in its aside),
    since each of the hundreds of pairs a scan classes asks for the bridges above both ends."""

    def make() -> dict[str, str | None]:
        above = {bdf for d in topo.devices for bdf in d.ancestors}
        return {bdf: switch_of(topo, br) for bdf in above if (br := topo.by_bdf(bdf)) is not None}

    return topo.aside.derive("switch_names", topo, (topo.devices,), make)


def _switches(topo: Topology, bdfs: tuple[str, ...]) -> set[str | None]:
    """The switches of these bridges (a BDF that is no known bridge stands for itself)."""
    names = _switch_names(topo)
    return {names.get(bdf, bdf) for bdf in bdfs}


def pcie_class(topo: Topology, a: Device, b: Device) -> tuple[PathClass, bool]:
    """The PCIe class between two devices and whether locality was known."""
    if a.bdf is not None and b.bdf is not None:
        if a.bdf == b.bdf:
            return PathClass.X, True
        if a.bdf.rsplit(".", 1)[0] == b.bdf.rsplit(".", 1)[0]:
            return PathClass.PIX, True  # two functions of one device
    common = common_ancestors(a, b)
    if common or (a.root_bus is not None and a.root_bus == b.root_bus):
        if common:
            # Switches the path crosses: those of every bridge below the common ancestor on
            # both sides, plus the common ancestor's own.
            crossed = _switches(topo, a.ancestors[common - 1 :]) | _switches(topo, b.ancestors[common - 1 :])
            crossed.discard(None)
            if len(crossed) <= 1:
                return PathClass.PIX, True
            return PathClass.PXB, True
        return PathClass.PHB, True
    return _between_host_bridges(topo, a, b)


def _between_host_bridges(topo: Topology, a: Device, b: Device) -> tuple[PathClass, bool]:
    if is_c2c(topo, a) or is_c2c(topo, b):
        # A GPU on NVLink-C2C has no PCIe path to another root bus: nvidia-smi prints SYS to
        # every NIC, its own Grace's too (analysis.c2c; NCCL's P2C is gdr_by_default's business).
        return PathClass.SYS, a.root_bus is not None and b.root_bus is not None
    if len(topo.nodes) <= 1:
        # One NUMA node: different root buses (or an unknown tree) meet inside it.
        return PathClass.NODE, a.root_bus is not None and b.root_bus is not None
    if a.numa_node is None or b.numa_node is None:
        return PathClass.SYS, False
    if a.numa_node != b.numa_node:
        return PathClass.SYS, True
    return PathClass.NODE, a.root_bus is not None and b.root_bus is not None


def nvlink_count(topo: Topology, a: Device, b: Device) -> int:
    """Bonded NVLinks between two GPUs from NVML: direct links, or links through NVSwitches."""
    ga, gb = a.nvml, b.nvml
    if ga is None or gb is None:
        return 0
    gpu_bdfs = topo.index.nvml_bdfs
    direct = sum(link.count for link in ga.nvlinks if link.peer_bdf == b.bdf)
    sw_a = {link.peer_bdf: link.count for link in ga.nvlinks if link.peer_bdf not in gpu_bdfs}
    sw_b = {link.peer_bdf: link.count for link in gb.nvlinks if link.peer_bdf not in gpu_bdfs}
    # Through NVSwitches every GPU reaches every other at its full NVLink width, as
    # nvidia-smi reports (NV12 on HGX A100, NV18 on HGX H100): the narrower side bounds it.
    via_switch = min(sum(sw_a.values()), sum(sw_b.values())) if set(sw_a) & set(sw_b) else 0
    return direct + via_switch


def _same_socket(a: Device, b: Device) -> bool | None:
    """For a SYS path: whether both ends share a socket; None where a socket is unknown."""
    if a.socket is None or b.socket is None:
        return None
    return a.socket == b.socket


def given_path(topo: Topology, a: Device, b: Device) -> Path | None:
    """The path a source stated between ``a`` and ``b`` (a matrix cell), or None."""
    token = topo.given_token(a, b)
    if token is None:
        return None
    links = decimal(token[2:], digits=4) if token.startswith("NV") else None  # NV#: # NVLinks
    nv = links is not None
    if nv or token == XGMI:
        if a.root_bus is not None and b.root_bus is not None:
            cls, known = pcie_class(topo, a, b)  # the PCIe class beneath, from the lspci tree
        else:
            cls, known = PathClass.SYS, False  # NV#/XGMI alone says nothing of PCIe: the worst case
        same = _same_socket(a, b) if cls is PathClass.SYS and known else None
        return Path(a.id, b.id, cls, links or 0, same, known, xgmi=not nv)
    stated = PathClass.from_token(token)
    if stated is None or stated in (PathClass.X, PathClass.NV):
        return None  # "?" (unreadable), NV# past the NVLink counts, or X off the diagonal: compute instead
    return Path(a.id, b.id, stated, 0, _same_socket(a, b) if stated is PathClass.SYS else None, True)


def path(topo: Topology, a: Device, b: Device) -> Path:
    """The path between two devices: a class a source stated, else computed from the tree
    (and NVML's NVLinks for GPU pairs)."""
    stated = given_path(topo, a, b)
    if stated is not None:
        return stated
    cls, known = pcie_class(topo, a, b)
    # Only a tree shows a path that no source states: without one for both ends (a pasted
    # matrix's missing or unreadable cell), the NUMA nodes alone would be a guess -- NVLinks,
    # switches and host bridges all unseen -- so the class is left unknown.
    shown = (a.root_bus is not None and b.root_bus is not None) or common_ancestors(a, b) > 0
    same_socket = None
    if cls is PathClass.SYS and known and shown:
        same_socket = _same_socket(a, b)
    gpus = a.kind is DeviceKind.GPU and b.kind is DeviceKind.GPU
    links = nvlink_count(topo, a, b) if gpus else 0
    xgmi = gpus and xgmi_linked(a, b)
    return Path(a.id, b.id, cls, links, same_socket, known and shown, shown, xgmi, not gpus or links_read(a, b))


def links_read(a: Device, b: Device) -> bool:
    """Whether the GPU-GPU links between ``a`` and ``b`` are known: NVML's record of both
    NVIDIA GPUs (NVLinks), KFD's of both AMD GPUs (XGMI); GPUs of two vendors share no such
    link, and a GPU that fell off the bus has none to know.  Only NVML and KFD show these
    links: sysfs does not (an NVSwitch in the tree says nothing of how many links a GPU has)."""
    if a.fell_off_bus or b.fell_off_bus or a.vendor_id != b.vendor_id:
        return True
    if a.vendor_id == pci.NVIDIA:
        return a.nvml is not None and b.nvml is not None
    if a.vendor_id == pci.AMD_ATI:
        return a.amd is not None and b.amd is not None
    return True  # no other vendor's GPU links are modelled


def xgmi_linked(a: Device, b: Device) -> bool:
    """Whether KFD gives AMD GPU ``a`` an XGMI io_link to ``b`` (``io_links/N/properties`` type
    11, CRAT_IOLINK_TYPE_XGMI): every GPU of a hive has one to every other, the weight saying
    how many hops (KFD_CRAT_XGMI_WEIGHT, 15 a hop; drivers/gpu/drm/amd/amdkfd/kfd_crat.c)."""
    if a.amd is None or b.bdf is None:
        return False
    return any(link.xgmi and link.peer_bdf == b.bdf for link in a.amd.links)


#: NCCL's default GPUDirect RDMA distance (``netGdrLevel`` in NVIDIA/nccl src/graph/paths.cc
#: ``ncclTopoCheckGdr``: ``NCCL_NET_GDR_C2C ? PATH_P2C : PATH_PXB``, the path type compared as a
#: number): P2C, since NCCL_NET_GDR_C2C is on by default since NCCL 2.27 (0 in 2.26, PXB then).
#: No class lies between PXB and P2C, so only a C2C GPU's P2C path gains by it.  An
#: NCCL_NET_GDR_LEVEL setting replaces the default outright, so PXB or below turns GPUDirect
#: off on a C2C GPU's P2C path.
GDR_DEFAULT_LEVEL = PathClass.P2C


def data_direct_dma(topo: Topology, nic: Device) -> Device | None:
    """The ConnectX-8 Data Direct DMA function of ``nic`` (a NIC PF of a Data Direct complex,
    :mod:`topoagent.core.platform`), or None."""
    c = topo.complex_of(nic)
    if c is None or c.kind is not ComplexKind.DATA_DIRECT or c.dma is None or nic.bdf not in c.nics:
        return None
    return topo.by_bdf(c.dma)


def nccl_path_type(topo: Topology, gpu: Device, nic: Device, p: Path) -> PathClass:
    """The GPU -> NIC path as NCCL classes it: through a Data Direct NIC's DMA function where
    that is within one switch hierarchy (``PXB``: NCCL then also forces a flush,
    src/graph/paths.cc ``ncclTopoNeedFlush``); for a C2C GPU and a NIC on its own CPU ``P2C``
    where the NIC is one of the GPU's local (fastest) NICs, else ``PHB`` (analysis.c2c); else
    the class of ``p`` (``PIX`` ... ``SYS``; ``NV`` never occurs here)."""
    dma = data_direct_dma(topo, nic) if p.shown else None
    if dma is not None:
        via, known = pcie_class(topo, gpu, dma)
        if known and via <= PathClass.PXB:
            return via
    if p.shown and p.cls is PathClass.SYS and own_cpu_nic(topo, gpu, nic):
        return PathClass.P2C if p2c_nic(topo, gpu, nic) else PathClass.PHB
    return p.cls


def gdr_by_default(topo: Topology, gpu: Device, nic: Device, p: Path) -> bool:
    """Whether NCCL, with its defaults, uses GPUDirect RDMA between ``gpu`` and ``nic``: the
    distance test of ``ncclTopoCheckGdr`` (NVIDIA/nccl src/graph/paths.cc), path type at most
    ``netGdrLevel`` (:data:`GDR_DEFAULT_LEVEL`): PXB or better, or P2C for a C2C GPU's NIC on its
    own Grace (NCCL >= 2.27).  Only the
    distance: peer memory, ACS and the IOMMU are findings of their own."""
    return _gdr(p, nccl_path_type(topo, gpu, nic, p))


def _gdr(p: Path, nccl: PathClass) -> bool:
    return p.locality_known and nccl <= GDR_DEFAULT_LEVEL


def nccl_view(topo: Topology, gpu: Device, nic: Device, p: Path | None) -> tuple[PathClass | None, bool | None]:
    """NCCL's view of a GPU -> NIC path for a rail: its class where that differs from ``p``'s
    (``P2C``/``PHB`` on Grace, else None) and the GPUDirect RDMA verdict; ``(None, None)``
    where no source shows the path (its class is a placeholder)."""
    if p is None or not p.shown:
        return None, None
    nccl = nccl_path_type(topo, gpu, nic, p)
    return (nccl if nccl is not p.cls else None), _gdr(p, nccl)


def path_index(paths: tuple[Path, ...]) -> dict[tuple[str, str], Path]:
    """Paths keyed by their two device ids, both ways round."""
    idx: dict[tuple[str, str], Path] = {}
    for p in paths:
        idx[(p.a, p.b)] = p
        idx[(p.b, p.a)] = p
    return idx


#: Physical NICs up to which a scan computes and lists NIC-NIC pairs.  A real server has a few
#: dozen NIC functions at most (a DGX H100: 8 rail + 2x2 storage ports); past this bound the
#: pairs (n * (n - 1) / 2 of them) would be the whole cost of the scan and are left out, counted
#: by :func:`omitted_nic_pairs` (nothing the analysis decides uses them).
NIC_PAIR_LIMIT = 64


def paired_devices(topo: Topology) -> tuple[Device, ...]:
    """The physical GPUs and NICs, in device order: the devices paths are listed between.

    A VF's path class is its PF's (:meth:`Topology.physical`), so VFs are not paired: a host
    whose 16 NICs expose 243 VFs each would otherwise make millions of pairs.
    """
    return tuple(d for d in topo.devices if d.kind in (DeviceKind.GPU, DeviceKind.NIC) and topo.physical(d) is d)


def lists_nic_pairs(nics: int) -> bool:
    """Whether a scan with this many physical NICs lists its NIC-NIC pairs (:data:`NIC_PAIR_LIMIT`)."""
    return nics <= NIC_PAIR_LIMIT


def omitted_nic_pairs(topo: Topology) -> int:
    """How many NIC-NIC pairs :func:`scan_paths` left out (0 within :data:`NIC_PAIR_LIMIT`)."""
    n = sum(1 for d in paired_devices(topo) if d.kind is DeviceKind.NIC)
    return 0 if lists_nic_pairs(n) else n * (n - 1) // 2


def scan_paths(topo: Topology) -> tuple[Path, ...]:
    """The pairs a scan computes, ``a`` before ``b`` in device order: every GPU-GPU and GPU-NIC
    pair of physical functions (what findings, rails and plans use), and every NIC-NIC pair
    while there are at most :data:`NIC_PAIR_LIMIT` physical NICs.  Linear in GPUs x NICs beyond
    that; :func:`pair_path` computes a NIC-NIC pair left out when an output asks for it."""
    devs = paired_devices(topo)
    gpu_at = [i for i, d in enumerate(devs) if d.kind is DeviceKind.GPU]
    nic_pairs = lists_nic_pairs(len(devs) - len(gpu_at))
    out: list[Path] = []
    for i, a in enumerate(devs):
        if a.kind is DeviceKind.GPU or nic_pairs:
            later: Iterable[Device] = devs[i + 1 :]
        else:
            later = (devs[j] for j in gpu_at if j > i)
        out.extend(path(topo, a, b) for b in later)
    return tuple(out)


def pair_path(topo: Topology, idx: Mapping[tuple[str, str], Path], a: Device, b: Device) -> Path:
    """The path between two physical GPUs/NICs: the scan's (``idx``, from :func:`path_index`),
    else computed now (a NIC-NIC pair :func:`scan_paths` left out), ``a``/``b`` in device order."""
    known = idx.get((a.id, b.id))
    if known is not None:
        return known
    at = topo.index.position
    return path(topo, a, b) if at[a.id] < at[b.id] else path(topo, b, a)
