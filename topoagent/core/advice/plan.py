"""Placement plans: per GPU, the NUMA node, CPUs, NICs and environment a rank should use.

A plan is a value; making one changes nothing.  CPU sets are always intersected with the
caller's allowed CPUs (a Slurm or container cpuset), never widened (REFERENCE §6.9).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from topoagent.core import pci
from topoagent.core.advice.cores import (
    Split,
    complexes_in,
    cores_in,
    host_cores,
    reserve,
    split_cores,
    split_units,
    threads_known,
)
from topoagent.core.analysis.paths import nccl_view, path_index
from topoagent.core.analysis.rails import NicRole
from topoagent.core.cpuset import MAX_CPUS, CpuSet
from topoagent.core.errors import InputError
from topoagent.core.findings import Finding, Severity
from topoagent.core.frozen import FrozenMap
from topoagent.core.pathclass import PathClass
from topoagent.core.snapshot import active_port

if TYPE_CHECKING:
    from topoagent.core.analysis.paths import Path
    from topoagent.core.analysis.rails import Rails
    from topoagent.core.topology import Device, Topology


class PlanError(InputError):
    """Options no plan can be made under (ranks per GPU out of range, more groups than GPUs)."""


class RailNic(msgspec.Struct, frozen=True):
    """A GPU's rail NIC as a rank uses it: RDMA devices and port (``UCX_NET_DEVICES=mlx5_0:1``),
    netdevs and the path class.

    The one rail-NIC type of the model: ``plan --format json`` encodes it through its own contract
    struct (:class:`topoagent.features.plan.report.RailNic`), whose shape differs (``remote``
    as a field, no ``driver``, the classes as tokens).
    """

    nic: str
    key: str
    bdf: str | None
    rdma: tuple[str, ...]
    port: int | None
    netdevs: tuple[str, ...]
    #: Path class GPU -> NIC as nvidia-smi prints it (``PIX`` ... ``SYS``); None where no source
    #: shows the path.
    cls: PathClass | None
    numa_node: int | None
    socket: int | None
    driver: str | None = None
    #: The path as NCCL classes it where that differs from ``cls``: for a Grace GPU's NIC on its
    #: own CPU ``P2C`` (one of its fastest NICs) or ``PHB`` (a slower one), for a ConnectX-8 Data
    #: Direct NIC ``PXB`` (at its DMA function); ``cls`` is then SYS, as nvidia-smi prints it
    #: (analysis.c2c, analysis.paths); ``PXN`` where NCCL relays through an NVLinked peer GPU
    #: near the NIC (analysis.ncclnet).
    nccl_path: PathClass | None = None
    #: Whether NCCL uses GPUDirect RDMA to this NIC by default (analysis.paths.gdr_by_default).
    gdr: bool | None = None

    @property
    def remote(self) -> bool:
        """Reached only across the SMP interconnect (SYS): a NIC on another node or socket --
        not one NCCL sees nearer (a Grace GPU's NIC on its own CPU, P2C or PHB; a ConnectX-8
        Data Direct NIC reached at its DMA function, PXB), nor one NCCL reaches over NVLink
        through a peer GPU near it (PXN)."""
        return self.cls is PathClass.SYS and self.nccl_path in (None, PathClass.SYS)

    @property
    def token(self) -> str | None:
        """``cls`` as nvidia-smi prints it (``PIX`` ... ``SYS``), None where unknown."""
        return self.cls.token if self.cls is not None else None


class SplitGroup(msgspec.Struct, frozen=True):
    """One of ``--split N`` disjoint groups: GPUs, their CPUs and NICs, for one job/tenant.

    ``crosses`` says what the group straddles when the host does not divide evenly
    (``NUMA nodes 0 and 1 (sockets 0 and 1)``); None for a NUMA-local group.
    """

    index: int
    gpus: tuple[str, ...]
    cuda_visible_devices: str
    numa_nodes: tuple[int | None, ...]
    cpus: CpuSet
    nics: tuple[str, ...]
    crosses: str | None = None


class GpuPlan(msgspec.Struct, frozen=True):
    """One GPU's placement: its NUMA-local CPUs, rail NICs and the environment for its ranks."""

    gpu: str
    bdf: str | None
    #: PCI-bus-order index: what CUDA_VISIBLE_DEVICES means with CUDA_DEVICE_ORDER=PCI_BUS_ID.
    cuda_index: int
    numa_node: int | None
    cpus: CpuSet | None
    nics: tuple[str, ...]
    env: FrozenMap[str, str] = msgspec.field(default_factory=FrozenMap)
    numactl: str | None = None
    # Filled by plan_for (the `plan`/`exec` commands); the scan's summary leaves them empty.
    #: The GPU's stable key (BDF).
    key: str | None = None
    socket: int | None = None
    #: The rail NICs of ``nics``, with the names a launcher needs.
    rails: tuple[RailNic, ...] = ()
    #: One disjoint set of whole cores per rank of this GPU (``--ranks-per-gpu``).
    rank_cpus: tuple[CpuSet, ...] = ()
    #: Findings about this GPU or its rail NICs, and the plan's own notes (CPUSET_EMPTY ...).
    notes: tuple[Any, ...] = ()
    #: False where a finding makes the GPU unusable (the scan's ``unusable``: FELL_OFF_BUS): it
    #: gets no rank, no CPU share, no place in a NUMA or split group.
    usable: bool = True


class NumaGroup(msgspec.Struct, frozen=True):
    """GPUs that share a NUMA node: one mask per node for per-socket jobs."""

    numa_node: int | None
    gpus: tuple[str, ...]
    cuda_visible_devices: str
    cpus: CpuSet | None


class Plan(msgspec.Struct, frozen=True):
    """Every GPU's placement and the NUMA groups; plan_for adds the caller's limits, ranks and notes."""

    gpus: tuple[GpuPlan, ...]
    numa_groups: tuple[NumaGroup, ...]
    # Filled by plan_for.
    #: The caller's allowed CPUs every set was intersected with (None: unknown).
    allowed: CpuSet | None = None
    #: Cores kept back for the OS and daemons (``--reserve-cores``).
    reserved: CpuSet = CpuSet()
    ranks_per_gpu: int = 1
    split: tuple[SplitGroup, ...] = ()
    #: The plan's own notes (Finding values with PLAN_CODES codes).
    notes: tuple[Any, ...] = ()
    #: The host's cores in logical order (for counting threads and Slurm's Cores=).
    cores: tuple[CpuSet, ...] = ()
    #: Whether ``cores`` knows which threads share a core (False: pasted text; sets not cut).
    threads_known: bool = True
    #: How the CPU shares were cut (:data:`BIND_MODES`): ``core-complex`` only where the host's
    #: L3 domains were known; otherwise ``numa``, with a CORE_COMPLEX_UNKNOWN note.
    bind: str = "numa"


def gpu_cpus(topo: Topology, gpu: Device) -> CpuSet | None:
    """The CPUs local to a GPU: its node's, else its socket's, else its own local CPU list."""
    node = topo.node(gpu.numa_node)
    if node is not None and node.cpus:
        return node.cpus
    if gpu.socket is not None:
        sock = next((s for s in topo.sockets if s.id == gpu.socket), None)
        if sock is not None and sock.cpus:
            return sock.cpus
    if gpu.local_cpus is not None:
        local = gpu.local_cpus
        if local and local != topo.all_cpus:
            return local
    return None


def base_plan(topo: Topology, rails: Rails) -> Plan:
    """The scan's summary plan: per GPU its local CPUs within the allowed CPUs, its rail NICs
    and the CUDA/NCCL variables; the GPUs grouped by NUMA node."""
    allowed = topo.allowed_cpus
    plans = []
    for index, g in enumerate(topo.gpus):
        local = gpu_cpus(topo, g)
        cpus = local if local is not None else allowed
        if cpus is not None and allowed is not None:
            cpus = cpus & allowed
        rail = rails.rail(g.id)
        nics = rail.nics if rail else ()
        env = base_env(index, rocm_index(topo, g))
        env.update(node_hca_env(topo, rails))
        ucx = [
            ucx_device(name, nic_port(d))
            for n in nics
            if (d := topo.by_id(n)) is not None and d.driver != "efa"
            for name in d.rdma_devices
        ]
        if ucx:
            env["UCX_NET_DEVICES"] = ",".join(ucx)
        node = topo.node(g.numa_node)
        numactl = f"numactl --cpunodebind={node.id} --membind={node.id}" if node is not None and node.cpus else None
        plans.append(GpuPlan(g.id, g.bdf, index, g.numa_node, cpus, nics, FrozenMap(env), numactl))
    groups: dict[int | None, list[GpuPlan]] = {}
    for p in plans:
        groups.setdefault(p.numa_node, []).append(p)
    numa_groups = []
    for node_id, members in sorted(groups.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        cpus = CpuSet().union(*(m.cpus for m in members if m.cpus)) if any(m.cpus for m in members) else None
        numa_groups.append(
            NumaGroup(node_id, tuple(m.gpu for m in members), ",".join(str(m.cuda_index) for m in members), cpus)
        )
    return Plan(tuple(plans), tuple(numa_groups))


# -- the plan a job uses: `topoagent plan`, `exec` -------------------------------------------
#
# base_plan above is the scan's summary (``recommendations`` in the scan JSON).  The plan
# below adds what a launcher needs: each rail NIC's RDMA and netdev names, whole-core CPU
# shares per rank, reserved cores, the split of the host into jobs, and the notes that say
# what is wrong with a GPU's placement.  Both are values; neither changes anything.


class PlanOptions(msgspec.Struct, frozen=True):
    """What the person asked of a plan.

    ``allowed``: the caller's allowed CPUs; None = the tree's record of them
    (``Cpus_allowed_list`` of the scanning process).  Never widened.
    ``reserve_cores``: whole cores per NUMA node kept for the OS and daemons.
    ``ranks_per_gpu``: ranks sharing one GPU, each with its own whole cores.
    ``split``: cut the host into this many disjoint GPU groups (0: no split).
    ``gpus``: the GPUs (ids) a node's cores are shared among -- a job's allocated GPUs;
    None: all of them.  The others keep their node's CPUs but get no rank share.
    ``bind``: ``numa`` (a node's whole cores shared out in runs) or ``core-complex`` (whole
    L3 domains -- AMD CCDs -- shared out, as torchrun's ``--numa-binding=core-complex`` binds).
    """

    allowed: CpuSet | None = None
    reserve_cores: int = 0
    ranks_per_gpu: int = 1
    split: int = 0
    gpus: tuple[str, ...] | None = None
    bind: str = "numa"


#: How ``bind`` cuts a node's CPUs: runs of whole cores, or whole core complexes (L3 domains).
BIND_MODES = ("numa", "core-complex")


#: Codes of the notes a plan adds to the scan's findings (same Finding shape).
PLAN_CODES = {
    "CORE_COMPLEX_UNKNOWN": "warning",
    "CORES_UNKNOWN": "warning",
    "CPUSET_EMPTY": "critical",
    "RANKS_SHARE_CORES": "warning",
    "SPLIT_CROSSES_NUMA": "warning",
    "SPLIT_UNEVEN": "info",
}


def nic_port(nic: Device) -> int | None:
    """The port a rank uses on a NIC's RDMA devices (:func:`topoagent.core.snapshot.active_port`),
    1 where their ports were not read; None for a NIC without RDMA."""
    port = active_port(p for ports in nic.rdma_ports.values() for p in ports)
    return port if port is not None else (1 if nic.rdma_devices else None)


def ucx_device(rdma: str, port: int | None) -> str:
    """One UCX_NET_DEVICES entry: ``DEVICE:PORT`` (``mlx5_0:1``, as in the UCX FAQ), port 1
    when unknown."""
    return f"{rdma}:{port or 1}"


def _rail_nic(topo: Topology, gpu: Device, nic: Device, path: Path | None, *, pxn: bool = False) -> RailNic:
    """``pxn``: the pairing routes this GPU to ``nic`` through an NVLinked peer (its rail's
    ``nccl_path`` is PXN): GPUDirect RDMA is on from the peer's memory (analysis.ncclnet)."""
    cls = path.cls if path is not None and path.shown else None
    nccl, gdr = (PathClass.PXN, True) if pxn else nccl_view(topo, gpu, nic, path)
    return RailNic(
        nic.id,
        nic.key,
        nic.bdf,
        nic.rdma_devices,
        nic_port(nic),
        nic.netdevs,
        cls,
        nic.numa_node,
        nic.socket,
        nic.driver,
        nccl,
        gdr,
    )


def node_hca_env(topo: Topology, rails: Rails) -> dict[str, str]:
    """``NCCL_IB_HCA`` for every rank of the node: the RDMA devices of all its compute NICs.

    The same value on every local rank: NCCL fuses the ranks' topologies and requires it
    (NVIDIA/nccl#1478, "You should not set NCCL_IB_HCA differently on each rank"); NCCL then
    gives each GPU its nearest NIC itself.  Storage and management ports (analysis/rails.py
    roles) are left out.  ``=`` makes NCCL match names exactly (src/transport/net_ib.cc: a
    leading ``^`` excludes, ``=`` then matches whole names, so ``mlx5_1`` leaves ``mlx5_10``
    out); no ``:port``, so every port of a listed device stays usable.  EFA devices are named
    to NCCL by the aws-ofi-nccl plugin, not NCCL_IB_HCA.  {} where the node has none.
    """
    names = [
        name
        for n in topo.nics
        if rails.roles.get(n.id) is NicRole.COMPUTE and n.driver != "efa"
        for name in n.rdma_devices
    ]
    return {"NCCL_IB_HCA": "=" + ",".join(dict.fromkeys(names))} if names else {}


def rail_env(rails: tuple[RailNic, ...]) -> dict[str, str]:
    """``UCX_NET_DEVICES`` naming a rank's own rail ports (``mlx5_0:1``), nearest first.

    Per rank, unlike NCCL_IB_HCA (see :func:`node_hca_env`): UCX uses the devices a rank
    lists.  ``NCCL_SOCKET_IFNAME`` is left unset (:data:`SOCKET_IFNAME_NOTE`).
    """
    ucx = [ucx_device(name, r.port) for r in rails if r.driver != "efa" for name in r.rdma]
    return {"UCX_NET_DEVICES": ",".join(ucx)} if ucx else {}


#: Why the env leaves NCCL_SOCKET_IFNAME unset.  NCCL's own choice (src/misc/socket.cc
#: ncclFindInterfaces) takes interfaces from getifaddrs -- only those with an address -- ``ib*``
#: first, then any but docker/lo; a name given outright that has no address stops NCCL's
#: bootstrap, and the snapshot does not record addresses.
SOCKET_IFNAME_NOTE = (
    "NCCL_SOCKET_IFNAME left unset: NCCL picks an interface that has an address "
    "(ib* first, then any but docker/lo); topoagent does not know which have one"
)


def omp_env(cpus: CpuSet, cores: tuple[CpuSet, ...]) -> dict[str, str]:
    """OpenMP for a rank bound to ``cpus``: one thread per whole core, placed on cores."""
    n = len(cores_in(cores, cpus))
    return {"OMP_NUM_THREADS": str(max(n, 1)), "OMP_PLACES": "cores"} if cpus else {}


def _finding(code: str, subjects: tuple[str, ...], message: str, remedy: str) -> Any:
    return Finding(code, Severity.parse(PLAN_CODES[code]), subjects, message, (), remedy)


class _Sharing(msgspec.Struct):
    """What every step of :func:`plan_for` shares: the host's cores, whether threads are known,
    the CPUs allowed, the core complexes a ``core-complex`` plan cuts by, and the notes so far."""

    cores: tuple[CpuSet, ...]
    whole: bool
    allowed: CpuSet | None
    domains: tuple[CpuSet, ...] | None
    options: PlanOptions
    notes: list[Any]

    def cut(self, units: tuple[CpuSet, ...], parts: int) -> Split:
        """Whole cores in runs, or whole core complexes (``--bind core-complex``)."""
        if self.domains is None:
            return split_cores(units, parts)
        return split_units(complexes_in(units, self.domains), parts, self.cores)


def plan_for(
    topo: Topology,
    base: Plan,
    *,
    paths: tuple[Path, ...],
    findings: tuple[Finding, ...],
    pairing: Rails,
    options: PlanOptions = PlanOptions(),
    unusable: Mapping[str, tuple[str, ...]] = FrozenMap(),
) -> Plan:
    """The plan of a scanned host under ``options``.  Pure.

    ``base`` is the scan's default plan (:func:`base_plan`), ``paths``, ``findings``,
    ``pairing`` (its rails) and ``unusable`` (the GPUs a finding makes unusable, and its codes)
    the scan's: its parts, not the :class:`~topoagent.core.result.ScanResult` (advice sits
    below it).  An unusable GPU keeps its row, marked, but gets no rank and no CPU share: its
    node's cores go to the node's other GPUs, and the groups leave it out.

    Per GPU: ``cpus`` = its NUMA node's CPUs, intersected with the allowed CPUs, minus the
    reserved cores; ``rank_cpus`` = ``ranks_per_gpu`` disjoint sets of whole cores from the
    GPU's share of its node (a node's cores are divided among its GPUs first, so ranks of
    different GPUs never overlap).  An empty intersection is a CPUSET_EMPTY note (critical),
    never a fallback to all CPUs.
    """
    _check(options)
    if unusable:  # a node's cores are shared among its usable GPUs only
        wanted = options.gpus if options.gpus is not None else tuple(g.gpu for g in base.gpus)
        options = msgspec.structs.replace(options, gpus=tuple(g for g in wanted if g not in unusable))
    w = _sharing(topo, base, options)
    usable, reserved = _usable(base, w)
    share = _shares(base, usable, w)
    by_pair = path_index(paths)
    gpus = [
        _gpu_for(topo, g, usable.get(_group(g), ()), share[g.gpu], by_pair, findings, pairing, w)
        if g.gpu not in unusable
        else _unusable(topo, g, findings, pairing, w.options.ranks_per_gpu)
        for g in base.gpus
    ]
    groups = []
    for ng in base.numa_groups:
        members = [p for p in gpus if p.gpu in ng.gpus and p.usable]
        if members:
            groups.append(
                msgspec.structs.replace(
                    ng,
                    gpus=tuple(m.gpu for m in members),
                    cuda_visible_devices=",".join(str(m.cuda_index) for m in members),
                    cpus=CpuSet().union(*(m.cpus for m in members if m.cpus)),
                )
            )
    split_groups: tuple[SplitGroup, ...] = ()
    if options.split:
        split_groups, split_notes = split_host(topo, tuple(g for g in gpus if g.usable), share, options.split)
        w.notes.extend(split_notes)
    return Plan(
        tuple(gpus),
        tuple(groups),
        allowed=w.allowed,
        reserved=reserved,
        ranks_per_gpu=options.ranks_per_gpu,
        split=split_groups,
        notes=tuple(w.notes),
        cores=w.cores,
        threads_known=w.whole,
        bind="numa" if w.domains is None else "core-complex",
    )


def _check(options: PlanOptions) -> None:
    if not 1 <= options.ranks_per_gpu <= MAX_CPUS:  # each rank gets cores; work grows with ranks
        raise PlanError(f"ranks_per_gpu must be 1..{MAX_CPUS}")
    if options.bind not in BIND_MODES:
        raise PlanError(f"bind must be one of {', '.join(BIND_MODES)}")


def _sharing(topo: Topology, base: Plan, options: PlanOptions) -> _Sharing:
    """The host's cores, the allowed CPUs (the caller's and the tree's record, never widened)
    and what is known of threads and core complexes, with the notes that say what is not."""
    recorded = topo.allowed_cpus
    allowed = (
        recorded if options.allowed is None else (options.allowed if recorded is None else options.allowed & recorded)
    )
    notes: list[Any] = []
    # Which threads share a core is unknown (pasted nvidia-smi text, no thread_siblings_list):
    # CPUs 0-19 and 40-59 are usually hyperthreads of the same 20 cores, so nothing is cut
    # below the sets the evidence shows -- a node's GPUs all get its whole set.
    whole = threads_known(topo.cpus)
    if not whole and base.gpus:
        notes.append(
            _finding(
                "CORES_UNKNOWN",
                tuple(g.gpu for g in base.gpus),
                "Which CPUs are hyperthreads of one core is unknown (no thread siblings in the evidence): "
                "GPUs that share a NUMA node get its whole CPU set, ranks are not given cores of their own, "
                "OMP_NUM_THREADS is left unset" + (" and no cores are reserved" if options.reserve_cores else "") + ".",
                "Plan from the host itself (or a capture, which records thread_siblings_list) to share "
                "whole cores out among GPUs and ranks.",
            )
        )
    domains = complex_domains(topo, options, whole, tuple(g.gpu for g in base.gpus), notes)
    return _Sharing(host_cores(topo.cpus), whole, allowed, domains, options, notes)


def _group(g: GpuPlan) -> int | str | None:
    """The group whose cores a GPU shares: its NUMA node, or (unknown node: pasted text without
    NUMA Affinity) its CPU set."""
    return g.numa_node if g.numa_node is not None or g.cpus is None else str(g.cpus)


def _usable(base: Plan, w: _Sharing) -> tuple[dict[int | str | None, tuple[CpuSet, ...]], CpuSet]:
    """Per group, the allowed whole cores left once ``reserve_cores`` are held back; and those held."""
    reserved = CpuSet()
    usable: dict[int | str | None, tuple[CpuSet, ...]] = {}
    for g in base.gpus:
        if _group(g) in usable:
            continue
        local = g.cpus  # already node ∩ tree's allowed
        if local is None:
            usable[_group(g)] = ()
            continue
        if w.allowed is not None:
            local = local & w.allowed
        held, rest = reserve(cores_in(w.cores, local), w.options.reserve_cores if w.whole else 0)
        reserved = reserved | held
        usable[_group(g)] = rest
    return usable, reserved


def _shares(base: Plan, usable: dict[int | str | None, tuple[CpuSet, ...]], w: _Sharing) -> dict[str, CpuSet]:
    """Each GPU's share of its group's usable cores (the job's GPUs only; the others get none)."""
    by_node: dict[int | str | None, list[GpuPlan]] = {}
    for g in base.gpus:
        if w.options.gpus is None or g.gpu in w.options.gpus:
            by_node.setdefault(_group(g), []).append(g)
    share: dict[str, CpuSet] = {g.gpu: CpuSet() for g in base.gpus}
    for node, members in by_node.items():
        node_cores = usable.get(node, ())
        if not w.whole:
            for g in members:
                share[g.gpu] = CpuSet().union(*node_cores)
            continue
        split = w.cut(node_cores, len(members)) if node_cores else None
        for i, g in enumerate(members):
            share[g.gpu] = split.parts[i] if split is not None else CpuSet()
        if split is not None and split.shared:
            w.notes.append(
                _finding(
                    "RANKS_SHARE_CORES",
                    tuple(g.gpu for g in members),
                    f"NUMA node {node} has {len(node_cores)} allowed core(s) for {len(members)} GPU(s): "
                    "their ranks share cores.",
                    "Give the job more of the node's cores (or reserve fewer), or run fewer GPUs' ranks on it.",
                )
            )
    return share


def _gpu_for(
    topo: Topology,
    g: GpuPlan,
    node_cores: tuple[CpuSet, ...],
    share: CpuSet,
    by_pair: Mapping[tuple[str, str], Path],
    findings: tuple[Finding, ...],
    pairing: Rails,
    w: _Sharing,
) -> GpuPlan:
    """One GPU's plan: its usable CPUs, rail NICs, rank CPU sets, environment and notes."""
    d = topo.by_id(g.gpu)
    assert d is not None
    cpus = CpuSet().union(*node_cores) if node_cores else CpuSet()
    rail = pairing.rail(g.gpu)
    # a PXN rail's NICs are all ones NCCL reaches through a peer (analysis.rails.pair_rails)
    relayed = rail.nics if rail is not None and rail.nccl_path is PathClass.PXN else ()
    rails = tuple(
        _rail_nic(topo, topo.physical(d), n, by_pair.get((d.id, n.id)), pxn=n.id in relayed)
        for nid in g.nics
        if (n := topo.by_id(nid)) is not None
    )
    ranks = w.options.ranks_per_gpu
    own = cores_in(w.cores, share)
    split = w.cut(own, ranks) if w.whole else Split(tuple(share for _ in range(ranks)))
    gpu_notes = [*_about(topo, g, findings, pairing), *_gpu_notes(g, cpus, own, split, w)]
    env = base_env(g.cuda_index, rocm_index(topo, d))
    env.update(node_hca_env(topo, pairing))
    env.update(rail_env(rails))
    w.notes.extend(n for n in gpu_notes if n.code in PLAN_CODES)
    return msgspec.structs.replace(
        g,
        key=d.key,
        socket=d.socket,
        cpus=cpus,
        rails=rails,
        rank_cpus=split.parts if cpus else tuple(CpuSet() for _ in range(ranks)),
        env=FrozenMap(env),
        notes=tuple(gpu_notes),
    )


def _about(topo: Topology, g: GpuPlan, findings: tuple[Finding, ...], pairing: Rails) -> list[Finding]:
    """The scan's findings about a GPU: those naming it, and those about one of its rail NICs
    alone (its AER errors, a fall off the bus: they stop the GPU's network traffic) -- not one
    that names the NIC with another GPU, which is that GPU's placement."""
    rail = pairing.rail(g.gpu)
    nics = set(rail.nics) if rail is not None else set()

    def gpu(ident: str) -> bool:
        d = topo.by_id(ident)
        return d is not None and d.kind is pci.DeviceKind.GPU

    return [
        f for f in findings if g.gpu in f.subjects or (nics & set(f.subjects) and not any(gpu(s) for s in f.subjects))
    ]


def _unusable(topo: Topology, g: GpuPlan, findings: tuple[Finding, ...], pairing: Rails, ranks: int) -> GpuPlan:
    """An unusable GPU's row: its node and NICs as they are, no CPUs, no rank CPUs, the findings."""
    return msgspec.structs.replace(
        g,
        cpus=CpuSet(),
        rank_cpus=tuple(CpuSet() for _ in range(ranks)),
        notes=tuple(_about(topo, g, findings, pairing)),
        usable=False,
    )


def _gpu_notes(g: GpuPlan, cpus: CpuSet, own: tuple[CpuSet, ...], split: Split, w: _Sharing) -> list[Any]:
    """CPUSET_EMPTY where none of the GPU's CPUs is allowed; RANKS_SHARE_CORES where its ranks
    outnumber its cores."""
    options = w.options
    if not cpus:
        where = f"NUMA node {g.numa_node}" if g.numa_node is not None else "its local CPUs"
        return [
            _finding(
                "CPUSET_EMPTY",
                (g.gpu,),
                f"None of {g.gpu}'s CPUs ({where}: {g.cpus if g.cpus is not None else 'unknown'}) are allowed "
                f"to the caller (allowed: {w.allowed if w.allowed is not None else 'unknown'})"
                + (f" once {options.reserve_cores} core(s) per node are reserved" if options.reserve_cores else "")
                + ": no CPU set can be planned for it.",
                "Run the job with a cpuset that includes the GPU's NUMA node (Slurm: --gres-flags=enforce-binding "
                "or --cpu-bind=ldoms), or choose a GPU local to the CPUs you were given.",
            )
        ]
    if split.shared:
        return [
            _finding(
                "RANKS_SHARE_CORES",
                (g.gpu,),
                f"{g.gpu}'s share of NUMA node {g.numa_node} has {len(own)} core(s) "
                f"for {options.ranks_per_gpu} rank(s): some ranks share a core.",
                "Use fewer ranks per GPU, fewer reserved cores, or a larger cpuset.",
            )
        ]
    return []


def complex_domains(
    topo: Topology, options: PlanOptions, whole: bool, gpus: tuple[str, ...], notes: list[Any]
) -> tuple[CpuSet, ...] | None:
    """The L3 domains a ``core-complex`` plan cuts by; None for a ``numa`` plan, or where the
    domains (or which threads share a core) are unknown -- then a CORE_COMPLEX_UNKNOWN note
    says the plan fell back to runs of whole cores."""
    if options.bind != "core-complex":
        return None
    domains = topo.l3_domains
    if domains and whole:
        return domains
    if gpus:
        why = (
            "the kernel names no L3 cache domains (no cpu*/cache/index3/shared_cpu_list)"
            if not domains
            else "which CPUs are hyperthreads of one core is unknown"
        )
        notes.append(
            _finding(
                "CORE_COMPLEX_UNKNOWN",
                gpus,
                f"--bind core-complex: {why}, so each GPU's CPUs are shared out in runs of whole cores "
                "of its NUMA node instead (--bind numa).",
                "Plan from the host itself (or a capture of it, which records the cache files); on a VM, "
                "the hypervisor may hide the L3 layout.",
            )
        )
    return None


def base_env(cuda_index: int, rocm_index: int | None = None) -> dict[str, str]:
    """The device variables of a GPU's ranks.  An NVIDIA GPU: CUDA's, in PCI bus order (as
    nvidia-smi numbers GPUs).  An AMD GPU (``rocm_index``: its place among KFD's GPU nodes,
    the order ROCm numbers devices in): ``ROCR_VISIBLE_DEVICES``, the variable AMD recommends
    on Linux (ROCm docs, "GPU isolation techniques"; RCCL and every ROCm runtime honour it),
    and ``HIP_VISIBLE_DEVICES=0``: HIP numbers the devices ROCm leaves visible from 0, so the
    rank's GPU is 0, whatever an inherited HIP/CUDA mask said."""
    if rocm_index is not None:
        return {"ROCR_VISIBLE_DEVICES": str(rocm_index), "HIP_VISIBLE_DEVICES": "0"}
    return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": str(cuda_index)}


#: The variables ``base_env`` may set, by what they mean: the device list of the runtime.
VISIBLE_VARS = ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")


def rocm_index(topo: Topology, gpu: Device) -> int | None:
    """An AMD GPU's ROCm device index: its first KFD node's place among KFD's GPU nodes (ROCr
    enumerates agents in KFD's node order), else its place among the host's AMD GPUs in PCI
    order; None for a GPU of another vendor."""
    if gpu.vendor_id != pci.AMD_ATI:
        return None
    order = [g.bdf for g in topo.amd_gpus]
    if gpu.bdf in order:
        return order.index(gpu.bdf)
    amd = [g.id for g in topo.gpus if g.vendor_id == pci.AMD_ATI]
    return amd.index(gpu.id)


def visible_var(topo: Topology) -> str:
    """The device-list variable a host's plan speaks of: ROCm's on a host of AMD GPUs only."""
    gpus = topo.gpus
    return "ROCR_VISIBLE_DEVICES" if gpus and all(g.vendor_id == pci.AMD_ATI for g in gpus) else "CUDA_VISIBLE_DEVICES"


def rank_env(plan: Plan, local_rank: int) -> tuple[GpuPlan, CpuSet, dict[str, str]]:
    """The GPU, CPU set and environment of one local rank (``rank // ranks_per_gpu`` is the
    GPU in PCI order among the usable ones: an unusable GPU gets no rank).  Raises
    ``IndexError`` for a rank the host has no GPU for."""
    if local_rank < 0:
        raise IndexError(f"local rank {local_rank} is negative")
    k = plan.ranks_per_gpu
    index, sub = divmod(local_rank, k)
    usable = [g for g in plan.gpus if g.usable]
    if index >= len(usable):
        lost = len(plan.gpus) - len(usable)
        raise IndexError(
            f"local rank {local_rank} needs GPU {index} ({k} rank(s) per GPU), but the host has {len(usable)} GPU(s)"
            + (f" usable ({lost} unusable: no rank)" if lost else "")
        )
    return gpu_rank_env(plan, usable[index], sub)


def gpu_rank_env(plan: Plan, g: GpuPlan, sub: int = 0) -> tuple[GpuPlan, CpuSet, dict[str, str]]:
    """The CPU set and environment of rank ``sub`` (0-based) of GPU ``g``."""
    cpus = g.rank_cpus[sub] if sub < len(g.rank_cpus) else CpuSet()
    env = dict(g.env)
    env.update(omp_env(cpus, plan.cores or ()))
    if not plan.threads_known:  # the count of cores is unknown: the OpenMP runtime counts them
        env.pop("OMP_NUM_THREADS", None)
    return g, cpus, env


def split_host(
    topo: Topology, gpus: tuple[GpuPlan, ...], share: dict[str, CpuSet], n: int
) -> tuple[tuple[SplitGroup, ...], list[Any]]:
    """Cut the host's GPUs into ``n`` disjoint groups, NUMA-local where the host allows.

    GPUs are taken node by node in PCI order; group sizes differ by at most one.  A group's
    CPUs are its GPUs' core shares (so groups on one node never overlap), its NICs their
    rails.  Groups that straddle nodes are named in a SPLIT_CROSSES_NUMA note.
    """
    if n < 1:
        raise PlanError("split needs at least one group")
    if n > len(gpus):
        raise PlanError(f"cannot split {len(gpus)} GPU(s) into {n} groups")
    order = sorted(gpus, key=lambda g: (g.numa_node is None, g.numa_node or 0, g.cuda_index))
    size, extra = divmod(len(order), n)
    notes: list[Any] = []
    groups, start = [], 0
    for i in range(n):
        members = order[start : start + size + (1 if i < extra else 0)]
        start += len(members)
        nodes = tuple(dict.fromkeys(m.numa_node for m in members))
        crosses = None
        if len(nodes) > 1:
            socks = tuple(dict.fromkeys(m.socket for m in members))
            crosses = f"NUMA nodes {' and '.join(str(x) for x in nodes)}" + (
                f" (sockets {' and '.join(str(s) for s in socks)})" if len(socks) > 1 else " (one socket)"
            )
            notes.append(
                _finding(
                    "SPLIT_CROSSES_NUMA",
                    tuple(m.gpu for m in members),
                    f"Group {i} ({', '.join(m.gpu for m in members)}) crosses {crosses}: {len(gpus)} GPUs on "
                    f"{len({g.numa_node for g in gpus})} node(s) do not divide into {n} NUMA-local groups.",
                    "Choose a split that divides each node's GPUs evenly, or accept this group's traffic across "
                    "the interconnect.",
                )
            )
        nics = tuple(dict.fromkeys(r.nic for m in members for r in m.rails))
        groups.append(
            SplitGroup(
                i,
                tuple(m.gpu for m in members),
                ",".join(str(m.cuda_index) for m in members),
                nodes,
                CpuSet().union(*(share.get(m.gpu, CpuSet()) for m in members)),
                nics,
                crosses,
            )
        )
    if extra:
        notes.append(
            _finding(
                "SPLIT_UNEVEN",
                tuple(g.gpu for g in gpus),
                f"{len(gpus)} GPUs do not divide into {n} equal groups: groups 0-{extra - 1} have {size + 1} GPU(s), "
                f"the others {size}.",
                "Split into a divisor of the GPU count for equal groups.",
            )
        )
    return tuple(groups), notes
