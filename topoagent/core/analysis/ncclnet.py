"""Which network device NCCL gives each GPU: ``ncclTopoGetLocalNet`` on the topology NCCL builds.

NVIDIA/nccl ``src/graph/topo.cc``:

* ``ncclTopoGetLocal`` keeps a GPU's NETs with the **highest path bandwidth**, and among those the
  **best path type**: bandwidth first.  A path's bandwidth is the narrowest link on it
  (``paths.cc``, ``ncclTopoSetPaths``): a PCIe link is ``width * speed / 80`` GB/s
  (``ncclTopoAddPci``, speeds per lane from ``kvDictPciGen``, the lower of the device's and its
  port's ``max_link_speed``, a width of 0 read as 16), a NET link its port speed (Mb/s / 8000),
  and a hop between CPUs ``ncclTopoGetInterCpuBw``'s figure (AMD 16, Intel 6/10/22/40 GB/s by
  generation, Arm 6, POWER 32).  So a GPU behind the SMP interconnect sees every NIC of the
  other CPU at the same bandwidth, whatever the NICs' speeds.
* ``ncclTopoGetLocalNetType`` then spreads GPUs over equally local NETs: with ``localGpuCount``
  the GPUs local to the first of them, GPU ``dev`` (its CUDA index) takes
  ``localNets[mirrorBits(dev % localGpuCount, n) % n]`` on channel 0 (``mirrorBits`` only when
  ``n`` is a power of two: ``topo.h``), and the next ``DIVUP(n, localGpuCount) - 1`` NETs on the
  following channels.

NCCL has no NODE: its PHB covers it, so two NICs NODE and PHB from a GPU are a tie.  NETs come in
the order NCCL's system lists them: by CPU (in the order the GPUs' CPUs appear), then by PCI
address.  A GPU on NVLink-C2C (Grace) reaches its CPU over C2C, whose bandwidth NVML alone knows:
it is left out of the minimum, as the other links decide (:mod:`topoagent.core.analysis.c2c`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from topoagent.core.analysis.c2c import is_c2c, own_cpu_nic
from topoagent.core.analysis.nicspeed import nic_bandwidth_gbps
from topoagent.core.analysis.paths import Path, nccl_path_type, nccl_reach
from topoagent.core.digits import decimal
from topoagent.core.pathclass import PathClass
from topoagent.core.topology import BridgeRole, Device, Topology, common_ancestors

__all__ = ["NetChoice", "inter_cpu_bw", "local_nets", "mirror_bits", "nccl_net_choice", "path_bw"]

#: GB/s per lane x 80 (NCCL's ``kvDictPciGen``: 100 Mb/s units with the encoding's cost); an
#: unknown speed falls back to 60 (Gen3), as ``kvConvertToInt`` does.
_LANE = {2.5: 15, 5.0: 30, 8.0: 60, 16.0: 120, 32.0: 240, 64.0: 480}
_LANE_FALLBACK = 60
#: ``src/graph/topo.h``: AMD_BW, BDW/SKL/SRP/ERP_QPI_BW, ARM_BW, P9_BW.
_AMD_BW, _BDW_BW, _SKL_BW, _SRP_BW, _ERP_BW, _ARM_BW, _P9_BW = 16.0, 6.0, 10.0, 22.0, 40.0, 6.0, 32.0


def mirror_bits(val: int, pow2: int) -> int:
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


def inter_cpu_bw(topo: Topology) -> float | None:
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


def path_bw(
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
        sys_bw = inter_cpu_bw(topo)
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


def _cpu_order(topo: Topology) -> dict[int | None, int]:
    """The order of NCCL's CPU nodes: NUMA nodes as the GPUs (in PCI order) first name them."""
    order: dict[int | None, int] = {}
    for d in (*topo.gpus, *topo.nics):
        order.setdefault(d.numa_node, len(order))
    return order


class NetChoice:
    """NCCL's view of every GPU -> NET path: (bandwidth, type) per pair, the local NETs of each
    GPU, and channel 0's NET."""

    def __init__(
        self, topo: Topology, gpus: Sequence[Device], nets: Sequence[Device], idx: Mapping[tuple[str, str], Path]
    ) -> None:
        cpu = _cpu_order(topo)
        self.topo = topo
        self.gpus = list(gpus)
        self.nets = sorted(nets, key=lambda n: (cpu.get(n.numa_node, len(cpu)), topo.index.position[n.id]))
        self.rank: dict[tuple[str, str], tuple[float, PathClass]] = {}
        gbps = {n.id: nic_bandwidth_gbps(n) for n in self.nets}
        for g in self.gpus:
            own = topo.physical(g)
            for n in self.nets:
                p = idx[(own.id, n.id)]
                reach = nccl_reach(topo, own, n, p)
                bw = path_bw(topo, own, n, p, reach, gbps[n.id]) if p.shown else gbps[n.id] / 8.0
                self.rank[(g.id, n.id)] = (bw, _nccl_type(topo, own, n, p))

    def _best(self, pairs: list[tuple[str, tuple[float, PathClass]]]) -> list[str]:
        """``ncclTopoGetLocal``: the highest bandwidth, then the best type."""
        if not pairs:
            return []
        top = max(bw for _, (bw, _) in pairs)
        best = min(t for _, (bw, t) in pairs if bw == top)
        return [k for k, (bw, t) in pairs if bw == top and t == best]

    def local(self, gpu: str) -> list[str]:
        """The GPU's local NETs (ids), in NET order."""
        return self._best([(n.id, self.rank[(gpu, n.id)]) for n in self.nets])

    def local_gpus(self, net: str) -> list[str]:
        """The GPUs local to a NET (the same rule from the NET's side)."""
        return self._best([(g.id, self.rank[(g.id, net)]) for g in self.gpus])

    def channels(self, gpu: str) -> list[str]:
        """The NETs ``gpu``'s channels use, channel 0's first (``ncclTopoGetLocalNetType`` with the
        default ``NCCL_NETDEVS_POLICY=AUTO``: ``DIVUP(localNetCount, localGpuCount)`` NETs per GPU)."""
        nets = self.local(gpu)
        if not nets:
            return []
        dev = next(i for i, g in enumerate(self.topo.gpus) if g.id == gpu)
        count = max(len(self.local_gpus(nets[0])), 1)
        base = dev % count
        if len(nets) & (len(nets) - 1) == 0:
            base = mirror_bits(base, len(nets))
        per = -(-len(nets) // count)
        return [nets[(base + c) % len(nets)] for c in range(per)]

    def pick(self, gpu: str) -> str | None:
        """Channel 0's NET of ``gpu``, or None."""
        used = self.channels(gpu)
        return used[0] if used else None


def nccl_net_choice(topo: Topology, nets: Sequence[Device], idx: Mapping[tuple[str, str], Path]) -> NetChoice:
    """NCCL's choice for every GPU among ``nets`` (the NICs NCCL is given)."""
    return NetChoice(topo, topo.gpus, nets, idx)


def local_nets(choice: NetChoice, gpu: str) -> list[str]:
    """The GPU's local NETs, in NET order (``ncclTopoGetLocal``)."""
    return choice.local(gpu)
