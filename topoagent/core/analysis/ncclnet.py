"""NCCL's network device for each GPU, and its PXN relays: the one model of ``ncclTopoGetLocalNet``
and ``ncclTopoGetLocalGpu`` on the topology NCCL builds.

Rails (:mod:`topoagent.core.analysis.rails`), the PXN finding, the plan and the NCCL topology
file all ask :class:`NetChoice`; no other code chooses a GPU's NET.  NVIDIA/nccl 2.30
``src/graph/topo.cc`` and ``paths.cc``:

* **Paths.**  A path's bandwidth is the narrowest link on it (``ncclTopoSetPaths``): a PCIe link
  is ``width * speed / 80`` GB/s (``ncclTopoAddPci``, speeds per lane from ``kvDictPciGen``, the
  lower of the device's and its port's ``max_link_speed``, a width of 0 read as 16), a NET link
  its port speed (Mb/s / 8000), and a hop between CPUs ``ncclTopoGetInterCpuBw``'s figure (AMD
  16, Intel 6/10/22/40 GB/s by generation, Arm 6, POWER 32).  So a GPU behind the SMP
  interconnect sees every NIC of the other CPU at the same bandwidth, whatever the NICs'
  speeds.  A GPU on NVLink-C2C (Grace) reaches its CPU over C2C, whose bandwidth NVML alone
  knows: it is left out of the minimum (:mod:`topoagent.core.analysis.c2c`).  NCCL has no NODE:
  its PHB covers it.  A path no source shows ranks as SYS.  Where the input gives no bandwidth
  (pasted output without link widths or port rates) every path has the same, and the path type
  alone decides: the same rule, not another one.
* **Local NETs** (``ncclTopoGetLocal``): a GPU's NETs with the **highest path bandwidth**, and
  among those the **best path type**; a NET's local GPUs by the same rule from its side.
* **Spreading** (``ncclTopoGetLocalNetType``): with ``localGpuCount`` the GPUs local to the first
  of its local NETs, GPU ``dev`` (its CUDA index) takes ``localNets[mirrorBits(dev %
  localGpuCount, n) % n]`` on channel 0 (``mirrorBits`` only when ``n`` is a power of two:
  ``topo.h``), and the next ``DIVUP(n, localGpuCount) - 1`` NETs on the following channels
  (``NCCL_NETDEVS_POLICY=AUTO``, the default).
* **Local GPU** (``ncclTopoGetLocalGpu``): of a NET's local GPUs, the first, channel by channel
  up to ``MAXCHANNELS``, whose NET on that channel is this one; none where no GPU's channels
  reach it.
* **PXN** (``ncclTopoComputePaths``, ``NCCL_PXN_DISABLE=0`` by default since 2.12): for each NET
  in turn and each GPU, NCCL routes the GPU to the NET through the NET's local GPU (asked afresh
  as the paths change) when that peer's path is ``PATH_PXB`` or better (``PATH_P2C`` with
  ``NCCL_PXN_C2C=1``, the default), the peer reaches the GPU over NVLink (``PATH_NVL``: direct
  or through NVSwitches), and the peer's path is faster or the GPU's own is worse than
  ``PATH_PXN`` (PHB or SYS).  The GPU's path becomes ``PATH_PXN`` at the peer's bandwidth, and
  the rules above rank it as any other: PXN (7) before PHB (8).  Distance only, as
  :func:`topoagent.core.analysis.paths.gdr_by_default`: peer memory, ACS and the IOMMU are
  findings of their own; and the NVLink leg is taken as no narrower than the peer's path (its
  bandwidth, ``SMxx_NVLINK_BW`` per link, needs the GPU's SM, which a scan does not carry).
* **Order.**  NCCL numbers its GPUs and NETs depth first through the tree it fuses
  (``ncclTopoGetSystem``, ``ncclTopoFuseXml``): rank 0's tree (its GPU, then every NET in the
  net plugin's order, RDMA devices as the kernel numbers them), then each other rank's GPU.
  So the first GPU's CPU comes first, then the CPUs the NETs walk to, and inside a CPU the first
  GPU's branch, then the NETs' branches, each device nested as :func:`nccl_nesting` says.
* **Data Direct.**  A ConnectX-8 with a Data Direct DMA function is a NET at that function
  (:func:`net_functions`): NCCL's IB plugin with ``NCCL_IB_DATA_DIRECT=1``, the default, lists
  only ``<dev>_dma``, whose PCI path is the DMA function's (``mlx5dv_get_data_direct_sysfs_path``;
  src/transport/net_ib/init.cc); with ``=2`` it lists the NIC's own function first, then the
  ``_dma`` one; with ``=0`` the NIC's own only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from topoagent.core.analysis.c2c import is_c2c, own_cpu_nic
from topoagent.core.analysis.nicspeed import nic_bandwidth_gbps
from topoagent.core.analysis.paths import Path, data_direct_dma, nccl_path_type
from topoagent.core.digits import decimal
from topoagent.core.pathclass import PathClass
from topoagent.core.topology import BridgeRole, Device, Topology, common_ancestors, id_key

__all__ = ["DMA_SUFFIX", "MAXCHANNELS", "NetChoice", "nccl_nesting", "nccl_net_choice", "nccl_order", "net_functions"]

#: What NCCL's IB plugin appends to an RDMA device's name for its Data Direct NET
#: (src/transport/net_ib/init.cc: ``snprintf(devName, ..., "%s_dma", ...)``).
DMA_SUFFIX = "_dma"
#: NCCL's channel count bound (src/include/device.h ``MAXCHANNELS``): ``ncclTopoGetLocalGpu``
#: tries every channel before it gives up.
MAXCHANNELS = 64
#: The worst path a peer may have to the NET for PXN: ``PATH_P2C`` with ``NCCL_PXN_C2C=1``.
_PXN_PEER_LEVEL = PathClass.P2C

#: GB/s per lane x 80 (NCCL's ``kvDictPciGen``: 100 Mb/s units with the encoding's cost); an
#: unknown speed falls back to 60 (Gen3), as ``kvConvertToInt`` does.
_LANE = {2.5: 15, 5.0: 30, 8.0: 60, 16.0: 120, 32.0: 240, 64.0: 480}
_LANE_FALLBACK = 60
#: ``src/graph/topo.h``: AMD_BW, BDW/SKL/SRP/ERP_QPI_BW, ARM_BW, P9_BW.
_AMD_BW, _BDW_BW, _SKL_BW, _SRP_BW, _ERP_BW, _ARM_BW, _P9_BW = 16.0, 6.0, 10.0, 22.0, 40.0, 6.0, 32.0


def _mirror_bits(val: int, pow2: int) -> int:
    """NCCL's ``mirrorBits``: ``val``'s bits reversed within ``log2(pow2)`` bits."""
    mirror, b, mb = 0, 1, pow2 >> 1
    while b < pow2:
        if val & b:
            mirror |= mb
        b, mb = b << 1, mb >> 1
    return mirror


def _link_bw(topo: Topology, d: Device) -> float:
    """The bandwidth NCCL gives the PCIe link from ``d`` up to its port (``ncclTopoAddPci``)."""
    port = topo.by_bdf(d.parent) if d.parent else None
    speeds = [s for s in (d.link.max_gts, port.link.max_gts if port is not None else None) if s is not None]
    lane = _LANE.get(min(speeds), _LANE_FALLBACK) if speeds else _LANE_FALLBACK
    # A function on a root bus has no port file to read: NCCL's min with it gives width 0, read as 16.
    widths = [d.link.max_width, port.link.max_width if port is not None else 0]
    width = min(w or 0 for w in widths) or 16
    return width * lane / 80.0


def _inter_cpu_bw(topo: Topology) -> float | None:
    """NCCL's bandwidth between two CPUs (``ncclTopoGetInterCpuBw``), by the first CPU's identity;
    None where it is unknown (pasted output)."""
    ident = topo.cpu_identity
    if ident is None or ident.arch is None:
        return None
    if ident.arch == "arm64":
        return _ARM_BW
    if ident.arch.startswith("ppc"):
        return _P9_BW
    if ident.vendor == "AuthenticAMD":
        return _AMD_BW
    if ident.vendor == "GenuineIntel":
        family = decimal(ident.familyid or "") or 0
        model = decimal(ident.modelid or "") or 0
        if family != 6:
            return _BDW_BW
        return _ERP_BW if model >= 0xCF else _SRP_BW if model >= 0x8F else _SKL_BW if model >= 0x55 else _BDW_BW
    return None


def _link_bws(topo: Topology) -> dict[str, float]:
    """Every device's :func:`_link_bw`, by id: once per topology (kept in its aside), since the
    GPU x NIC pairs NCCL ranks share their links."""
    return topo.aside.derive(
        "nccl_link_bw", topo, (topo.devices,), lambda: {d.id: _link_bw(topo, d) for d in topo.devices}
    )


def _upstream_ports(topo: Topology) -> dict[str, tuple[tuple[int, Device], ...]]:
    """Each device's switch upstream ports above it, with their depth (index in its ancestors),
    by id: once per topology."""

    def make() -> dict[str, tuple[tuple[int, Device], ...]]:
        out: dict[str, tuple[tuple[int, Device], ...]] = {}
        for d in topo.devices:
            ports = ((i, topo.by_bdf(bdf)) for i, bdf in enumerate(d.ancestors))
            out[d.id] = tuple((i, br) for i, br in ports if br is not None and br.role is BridgeRole.SWITCH_UPSTREAM)
        return out

    return topo.aside.derive("nccl_upstream_ports", topo, (topo.devices,), make)


def _path_bw(
    topo: Topology, gpu: Device, nic: Device, p: Path, reach: Device | None = None, nic_gbps: float | None = None
) -> float:
    """The bandwidth of NCCL's path from ``gpu`` to the NET of ``nic`` (reached at ``reach``: the
    NIC, or its Data Direct DMA function), GB/s: the narrowest link on it (``nic_gbps``: the
    NIC's speed where the caller knows it already)."""
    end = reach or nic
    links = [(nic_bandwidth_gbps(nic) if nic_gbps is None else nic_gbps) / 8.0]
    if not (gpu.root_bus and end.root_bus):
        return links[0]  # no tree (pasted output): the NIC's speed alone
    bws, ups = _link_bws(topo), _upstream_ports(topo)
    common = common_ancestors(gpu, end)
    shared = any(i < common for i, _ in ups[gpu.id])
    below = common if shared else 0  # meeting in a switch, else at the CPU
    c2c_up = is_c2c(topo, gpu) and not shared
    if not c2c_up:  # a C2C GPU reaches its CPU over C2C: that link's bandwidth is NVML's
        links.append(bws[gpu.id])
        links.extend(bws[u.id] for i, u in ups[gpu.id] if i >= below)
    links.append(bws[end.id])
    links.extend(bws[u.id] for i, u in ups[end.id] if i >= below)
    if p.pcie is PathClass.SYS and not shared and not own_cpu_nic(topo, gpu, end):
        # (nvidia-smi's SYS from a C2C GPU to its own CPU's NIC crosses no CPU link)
        sys_bw = _inter_cpu_bw(topo)
        if sys_bw is not None:
            links.append(sys_bw)
    return min(links)


def _nccl_type(topo: Topology, gpu: Device, nic: Device, p: Path) -> PathClass:
    """The path type NCCL ranks by: its own (P2C, Data Direct's PXB), NODE as its PHB, and an
    unshown path the worst."""
    if not p.shown:
        return PathClass.SYS
    t = nccl_path_type(topo, gpu, nic, p)
    return PathClass.PHB if t is PathClass.NODE else t


def _nccl_parent(d: Device) -> str | None:
    """The BDF of the function NCCL nests ``d`` under, None for the <cpu>: two levels up the
    sysfs path, unless that walk reaches the root bus first (``ncclTopoGetXmlFromSys``; a switch
    is known by its upstream port, root ports vanish)."""
    return d.ancestors[-2] if len(d.ancestors) >= 2 else None


def nccl_nesting(topo: Topology, d: Device) -> tuple[int, tuple[Device, ...]]:
    """Where NCCL's XML puts ``d``: the numaid of its <cpu> (that of the topmost function, -1
    where unknown) and the <pci> elements from below that <cpu> down to ``d``."""
    chain = [d]
    while (up := _nccl_parent(chain[-1])) is not None and (dev := topo.by_bdf(up)) is not None:
        chain.append(dev)
    top = chain[-1].numa_node
    return (top if top is not None else -1), tuple(reversed(chain))


def _net_order(topo: Topology, nets: Sequence[Device]) -> list[Device]:
    """The NICs in the net plugin's order (its device index): by RDMA device (else netdev) name as
    the kernel numbers them, ``mlx5_10`` after ``mlx5_9``; unnamed ones (pasted output) in PCI order."""

    def key(n: Device) -> tuple[int, str, int, int]:
        names = n.rdma_devices or n.netdevs
        head, num = id_key(names[0]) if names else ("", 0)
        return (0 if names else 1), head, num, topo.index.position[n.id]

    return sorted(nets, key=key)


def net_functions(topo: Topology, nic: Device, *, every_mode: bool = False) -> tuple[Device, ...]:
    """The PCI functions NCCL's IB plugin places ``nic``'s NETs at (module docstring, Data
    Direct): its Data Direct DMA function where it has one, else the NIC; with ``every_mode``
    each function some ``NCCL_IB_DATA_DIRECT`` places it at, in the order ``=2`` lists them (the
    NIC, then its DMA function)."""
    dma = data_direct_dma(topo, nic)
    if dma is None:
        return (nic,)
    return (nic, dma) if every_mode else (dma,)


def nccl_order(
    topo: Topology, gpus: Sequence[Device], nets: Sequence[Device], *, every_mode: bool = False
) -> list[Device]:
    """The GPUs and the NETs' functions (:func:`net_functions`) in the order NCCL numbers them:
    depth first through the tree it fuses (``ncclTopoGetSystem``).  Rank 0's tree is its GPU,
    then every NET in :func:`_net_order`, each walked up from sysfs (``ncclTopoGetXmlFromSys``),
    which inserts a ``<pci>`` among its siblings in bus-id order (NVIDIA/nccl#820) and adds a
    ``<cpu>`` after the others; each other rank adds its GPU's new elements after their
    siblings (``ncclTopoFuseXml`` appends).  ``every_mode``: a Data Direct NIC's own function and
    its DMA function both, as ``NCCL_IB_DATA_DIRECT=2`` lists them, an order each other mode
    keeps (what a topology file holds, for NCCL to keep what its plugin lists)."""
    # (two NICs of one ConnectX-8 may share a DMA function: its <nic> holds both NETs)
    placed = list(
        {f.id: f for n in _net_order(topo, nets) for f in net_functions(topo, n, every_mode=every_mode)}.values()
    )
    cpus: dict[int, tuple[int, str]] = {}
    made: dict[str, int] = {}  # each <pci>'s device id -> the rank whose tree first holds it
    keys: dict[str, tuple[tuple[int, str], ...]] = {}
    for rank, devices in enumerate([[*gpus[:1], *placed], *([g] for g in gpus[1:])]):
        for d in devices:
            node, chain = nccl_nesting(topo, d)
            cpu = cpus.setdefault(node, (rank, f"{len(cpus):06d}"))
            keys[d.id] = (cpu, *((made.setdefault(x.id, rank), x.bdf or "") for x in chain))
    return sorted((d for d in [*gpus, *placed] if d.id in keys), key=lambda d: keys[d.id])


class NetChoice:
    """NCCL's view of every GPU -> NET path: (bandwidth, type) per pair after PXN, the local NETs
    and channels of each GPU, the local GPU of each NET, and the PXN relays (module docstring).

    ``gpus`` in CUDA order (their index is NCCL's ``dev``), ``nets`` the NICs NCCL is given."""

    def __init__(
        self, topo: Topology, gpus: Sequence[Device], nets: Sequence[Device], idx: Mapping[tuple[str, str], Path]
    ) -> None:
        at = {d.id: i for i, d in enumerate(nccl_order(topo, gpus, nets))}
        self.topo = topo
        self.dev = {g.id: i for i, g in enumerate(gpus)}
        self.gpus = sorted(gpus, key=lambda d: at[d.id])
        plugin = {d.id: i for i, d in enumerate(_net_order(topo, nets))}
        self.nets = sorted(nets, key=lambda d: (at[net_functions(topo, d)[0].id], plugin[d.id]))
        #: NET -> GPU (its local GPUs), which PXN leaves alone; and GPU -> NET, PXN applied
        self._from_net: dict[tuple[str, str], tuple[float, PathClass]] = {}
        self._unshown: set[tuple[str, str]] = set()
        gbps = {n.id: nic_bandwidth_gbps(n) for n in self.nets}
        for g in self.gpus:
            own = topo.physical(g)
            for n in self.nets:
                p = idx[(own.id, n.id)]
                if p.shown:
                    bw = _path_bw(topo, own, n, p, net_functions(topo, n)[0], gbps[n.id])
                else:
                    bw = gbps[n.id] / 8.0
                    self._unshown.add((g.id, n.id))
                self._from_net[(g.id, n.id)] = (bw, _nccl_type(topo, own, n, p))
        self._rank = dict(self._from_net)
        self._via: dict[tuple[str, str], str] = {}
        self._channels: dict[str, list[str]] = {}
        self._pxn(idx)

    @staticmethod
    def _best(pairs: list[tuple[str, tuple[float, PathClass]]]) -> list[str]:
        """``ncclTopoGetLocal``: the highest bandwidth, then the best type."""
        if not pairs:
            return []
        top = max(bw for _, (bw, _) in pairs)
        best = min(t for _, (bw, t) in pairs if bw == top)
        return [k for k, (bw, t) in pairs if bw == top and t == best]

    def local(self, gpu: str) -> list[str]:
        """The GPU's local NETs (ids), in NET order."""
        return self._best([(n.id, self._rank[(gpu, n.id)]) for n in self.nets])

    def local_gpus(self, net: str) -> list[str]:
        """The GPUs local to a NET, in GPU order."""
        return self._best([(g.id, self._from_net[(g.id, net)]) for g in self.gpus])

    def channels(self, gpu: str) -> list[str]:
        """The NETs ``gpu``'s channels use, channel 0's first (``ncclTopoGetLocalNetType``);
        channel ``c`` takes the ``c % len``-th."""
        if gpu not in self._channels:
            nets, used = self.local(gpu), []
            if nets:
                count = max(len(self.local_gpus(nets[0])), 1)
                base = self.dev[gpu] % count
                if len(nets) & (len(nets) - 1) == 0:
                    base = _mirror_bits(base, len(nets))
                used = [nets[(base + c) % len(nets)] for c in range(-(-len(nets) // count))]
            self._channels[gpu] = used
        return self._channels[gpu]

    def local_gpu(self, net: str) -> str | None:
        """``ncclTopoGetLocalGpu``: the NET's local GPU, or None."""
        near = [(g, self.channels(g)) for g in self.local_gpus(net)]
        # each GPU's channels repeat: past the longest cycle no channel finds another
        for c in range(min(MAXCHANNELS, max((len(used) for _, used in near), default=0))):
            found = next((g for g, used in near if used and used[c % len(used)] == net), None)
            if found is not None:
                return found
        return None

    def via(self, gpu: str, net: str) -> str | None:
        """The peer GPU NCCL relays ``gpu``'s traffic to ``net`` through (PXN), or None."""
        return self._via.get((gpu, net))

    def _pxn(self, idx: Mapping[tuple[str, str], Path]) -> None:
        """``ncclTopoComputePaths``'s PXN pass (module docstring), NET by NET, GPU by GPU."""
        phys = {g.id: self.topo.physical(g).id for g in self.gpus}

        def nvlinked(a: str, b: str) -> bool:
            p = idx.get((phys[a], phys[b]))
            return p is not None and p.shown and p.nvlinks > 0

        if not any(nvlinked(a.id, b.id) for a in self.gpus for b in self.gpus if a is not b):
            return
        for n in self.nets:
            peer: str | None = None
            stale = True
            for g in self.gpus:
                if stale:
                    peer, stale = self.local_gpu(n.id), False
                if peer is None or peer == g.id or (g.id, n.id) in self._unshown or (peer, n.id) in self._unshown:
                    continue
                (bw, own), (peer_bw, peer_type) = self._rank[(g.id, n.id)], self._rank[(peer, n.id)]
                if peer_type <= _PXN_PEER_LEVEL and nvlinked(peer, g.id) and (peer_bw > bw or own > PathClass.PXN):
                    self._rank[(g.id, n.id)] = (peer_bw, PathClass.PXN)
                    self._via[(g.id, n.id)] = peer
                    self._channels.pop(g.id, None)
                    stale = True


def nccl_net_choice(topo: Topology, nets: Sequence[Device], idx: Mapping[tuple[str, str], Path]) -> NetChoice:
    """NCCL's choice for every GPU among ``nets`` (the NICs NCCL is given)."""
    return NetChoice(topo, topo.gpus, nets, idx)
