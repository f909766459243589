"""``plan --format dra``: the standard Kubernetes DRA device attributes of every GPU, NIC and
the CPUs of each NUMA node, and whether a claim of them is aligned on this host.

These are the attributes a DRA driver publishes in its ResourceSlice (kubernetes/kubernetes
``staging/src/k8s.io/dynamic-resource-allocation/deviceattribute``; KEP-4381 names the first
two, KEP-6072 the NUMA one), in the ResourceSlice's own value shape (``{"string": ...}``,
``{"int": ...}``, ``{"ints": [...]}``), so a claim can be checked before a driver is deployed:

- ``resource.kubernetes.io/pcieRoot``: the device's PCIe root complex as ``pci<domain>:<bus>``
  (``pci0000:15``): the root-bus directory above the device in sysfs, which is what the
  upstream helper reads.  A VF has its PF's root.  CPUs have none.
- ``resource.kubernetes.io/pciBusID``: the extended BDF ``dddd:bb:dd.f``.
- ``resource.kubernetes.io/numaNode``: the device's ``numa_node`` as the kernel gives it, in
  one of the two forms KEP-6072 defines (``deviceattribute.AttributeForm``): a scalar ``int``
  (no feature gate), or an ``ints`` list (the ``DRAListTypeAttributes`` gate, KEP-5491) -- the
  physical node first, then the nodes at the smallest SLIT distance from it that are not on
  another socket (``getEquidistantNUMANodes`` in numa_linux.go).  Left out where it is -1
  (unknown), as the helper refuses to publish it -- also where topoagent placed the device by
  its local CPUs instead, which no driver reads.  A NUMA node's CPUs (the dra-driver-cpu's
  device per node) publish their own node, ``N`` or ``[N]``.

A device known only by a tool's label (pasted ``nvidia-smi topo -m``) has no PCI attributes.
Whether a claim that matches GPU and NIC on ``pcieRoot`` pairs each GPU with its rail NIC is
the ``DRA_PCIE_ROOT_MISMATCH`` finding's question; :func:`check_claim` answers it for one claim.
"""

from __future__ import annotations

import builtins
from typing import Any

import msgspec

from topoagent.core.cpuset import CpuSet
from topoagent.core.errors import InputError
from topoagent.core.pci import DeviceKind
from topoagent.core.render.json_report import encode
from topoagent.core.result import ScanResult
from topoagent.core.topology import NUMA_FROM_LSPCI, NUMA_FROM_SYSFS, Device, Node, Topology

PREFIX = "resource.kubernetes.io/"
PCIE_ROOT = PREFIX + "pcieRoot"
PCI_BUS_ID = PREFIX + "pciBusID"
NUMA_NODE = PREFIX + "numaNode"

#: ``numaNode`` forms (``deviceattribute.ScalarAttribute``, ``ListAttribute``).
NUMA_FORMS = ("scalar", "list")


class Attribute(msgspec.Struct, frozen=True, omit_defaults=True):
    """A ResourceSlice device attribute value: exactly one of its typed fields is set."""

    string: str | None = None
    int: builtins.int | None = None  # the builtin: this field is named like it
    #: ``IntValues`` (KEP-5491, json ``ints``): a non-empty list.
    ints: list[builtins.int] | None = None

    def values(self) -> frozenset[object]:
        """The value as the set ``matchAttribute`` intersects (KEP-5491: a scalar is a
        one-element list)."""
        if self.ints is not None:
            return frozenset(self.ints)
        return frozenset(v for v in (self.string, self.int) if v is not None)


class DraDevice(msgspec.Struct, frozen=True, omit_defaults=True):
    """One GPU, NIC or NUMA node's CPUs with its standard attributes."""

    device: str
    key: str
    kind: str
    attributes: dict[str, Attribute]
    #: The CPUs of a ``cpu`` entry (kernel list format).
    cpus: str | None = None


class DraReport(msgspec.Struct, frozen=True):
    """Every GPU and NIC of the host, in the scan's device order, then each NUMA node's CPUs."""

    node: str | None
    devices: list[DraDevice]


def equidistant_nodes(topo: Topology, node: int) -> list[int]:
    """``node`` first, then every node at the smallest distance from it (its SLIT row) that is
    not known to be on another socket, in id order: the list form of ``numaNode``, as
    ``getEquidistantNUMANodes`` builds it (a node whose socket is unknown -- CPU-less -- is
    kept, as upstream keeps it).  ``[node]`` where the distances are unknown."""
    here = topo.node(node)
    if here is None or not here.distances:
        return [node]
    ids = [n.id for n in topo.nodes]  # the row's order (Snapshot.numa_nodes)
    row = {ids[i]: d for i, d in enumerate(here.distances) if i < len(ids)}
    others = {i: d for i, d in row.items() if i != node}
    if not others:
        return [node]
    nearest = min(others.values())
    sockets = {n.id: n.socket for n in topo.nodes if n.cpus}
    mine = sockets.get(node)
    keep = [
        i
        for i, d in sorted(others.items())
        if d == nearest and (mine is None or sockets.get(i) is None or sockets.get(i) == mine)
    ]
    return [node, *keep]


def numa_attribute(topo: Topology, node: int, form: str, *, io: bool = True) -> Attribute:
    """The ``numaNode`` value of a device on ``node``: a scalar, or the list (an I/O device's
    equidistant nodes; a NUMA node's own CPUs, ``io=False``, just ``[node]``)."""
    if form == "scalar":
        return Attribute(int=node)
    return Attribute(ints=equidistant_nodes(topo, node) if io else [node])


def attributes(d: Device, topo: Topology | None = None, numa: str = "scalar") -> dict[str, Attribute]:
    """The standard attributes a DRA driver would publish for the device."""
    out: dict[str, Attribute] = {}
    if d.root_bus is not None:
        out[PCIE_ROOT] = Attribute(string=d.root_bus)
    if d.bdf is not None:
        out[PCI_BUS_ID] = Attribute(string=d.bdf)
    if d.numa_node is not None and d.numa_source in (NUMA_FROM_SYSFS, NUMA_FROM_LSPCI):
        out[NUMA_NODE] = Attribute(int=d.numa_node) if topo is None else numa_attribute(topo, d.numa_node, numa)
    return out


def cpu_device(topo: Topology, n: Node, numa: str) -> DraDevice:
    """A NUMA node's CPUs as the CPU DRA driver publishes them (one device per node)."""
    return DraDevice(
        f"cpu-node{n.id}", f"node{n.id}", "cpu", {NUMA_NODE: numa_attribute(topo, n.id, numa, io=False)}, str(n.cpus)
    )


def report(result: ScanResult, numa: str = "scalar") -> DraReport:
    """The attributes of every GPU and NIC, then of each NUMA node's CPUs."""
    if numa not in NUMA_FORMS:
        raise InputError(f"the numaNode form must be one of {', '.join(NUMA_FORMS)}")
    topo = result.topology
    devices = [
        DraDevice(d.id, d.key, d.kind.value, attributes(d, topo, numa))
        for d in topo.devices
        if d.kind in (DeviceKind.GPU, DeviceKind.NIC)
    ]
    if topo.from_host_tree:  # pasted text names nodes, not which CPUs the kernel gives them
        devices += [cpu_device(topo, n, numa) for n in topo.nodes if n.cpus_known and n.cpus]
    return DraReport(topo.hostname, devices)


def render(result: ScanResult, dra_numa: str = "scalar", pretty: bool = False, **_: Any) -> str:
    """``plan --format dra``: the attributes, one compact line (``pretty``: indented)."""
    return encode(report(result, dra_numa), pretty=pretty)


# -- a claim: is it aligned here? -----------------------------------------------------------


class Constraint(msgspec.Struct, frozen=True):
    """One ``matchAttribute`` constraint over the claim's devices, as the DRA allocator would
    judge it: each device's value, and whether they match (equal scalars; with lists, a
    non-empty intersection, KEP-5491)."""

    attribute: str
    values: dict[str, Attribute | None]
    match: bool
    note: str | None = None


class ClaimCheck(msgspec.Struct, frozen=True):
    """Whether a claim of a GPU, NICs and CPUs is aligned on this host: the DRA constraints
    (what a scheduler would accept) and topoagent's own view (what it means for the GPU)."""

    claim: list[str]
    numa_form: str
    constraints: list[Constraint]
    topology: list[str]
    aligned: bool


def _nic_by_name(topo: Topology, name: str) -> Device | None:
    return next((n for n in topo.nics if name in n.rdma_devices or name in n.netdevs), None)


def parse_claim(result: ScanResult, spec: str) -> tuple[list[Device], CpuSet | None]:
    """The devices and CPUs a claim names: ``gpu0,nic0,cpus=0-15`` (device ids, BDFs, RDMA or
    netdev names; ``cpus=`` a kernel CPU list).  InputError (one line) for a name it cannot place."""
    devices: list[Device] = []
    cpus: CpuSet | None = None
    for token in spec.replace(",", " ").split():
        if token.startswith("cpus="):
            try:
                cpus = CpuSet.parse(token[5:])
            except ValueError as exc:
                raise InputError(f"--claim {token!r}: {exc}") from None
            continue
        d = result.device(token) or _nic_by_name(result.topology, token)
        if d is None or d.kind not in (DeviceKind.GPU, DeviceKind.NIC):
            raise InputError(f"--claim: {token!r} is no GPU or NIC of this host (give gpuN, nicN, a BDF or mlx5_N)")
        devices.append(d)
    if not devices and cpus is None:
        raise InputError("--claim names nothing (give e.g. gpu0,nic0,cpus=0-15)")
    return devices, cpus


def _match(values: dict[str, Attribute | None], form: str) -> bool:
    known = [v for v in values.values() if v is not None]
    if len(known) < len(values):
        return False  # a device without the attribute matches nothing (the allocator skips it)
    if form == "scalar":
        return len({v.values() for v in known}) <= 1
    common: frozenset[object] | None = None
    for v in known:
        common = v.values() if common is None else common & v.values()
    return bool(common)


def check_claim(result: ScanResult, spec: str, numa: str = "scalar") -> ClaimCheck:
    """Judge a claim (:func:`parse_claim`) as ``matchAttribute`` on ``pcieRoot`` (its PCI
    devices) and ``numaNode`` (all of it) would, and by the host's own paths: each GPU's path to
    each NIC (GPUDirect RDMA needs PIX or PXB), the CPUs within the GPU's NUMA node."""
    topo = result.topology
    devices, cpus = parse_claim(result, spec)
    constraints: list[Constraint] = []
    if len(devices) > 1:
        roots = {d.id: attributes(d).get(PCIE_ROOT) for d in devices}
        constraints.append(
            Constraint(PCIE_ROOT, roots, _match(roots, "scalar"), "CPUs have no pcieRoot" if cpus is not None else None)
        )
    numa_values: dict[str, Attribute | None] = {d.id: attributes(d, topo, numa).get(NUMA_NODE) for d in devices}
    if cpus is not None:
        nodes = sorted({n.id for n in topo.nodes if n.cpus & cpus})
        for n in nodes:
            numa_values[f"cpus node{n}"] = numa_attribute(topo, n, numa, io=False)
        if not nodes:
            numa_values[f"cpus {cpus}"] = None
    if len(numa_values) > 1:
        constraints.append(Constraint(NUMA_NODE, numa_values, _match(numa_values, numa)))
    lines, ok = _topology_view(result, devices, cpus)
    return ClaimCheck(
        claim=spec.replace(",", " ").split(),
        numa_form=numa,
        constraints=constraints,
        topology=lines,
        aligned=ok and all(c.match for c in constraints),
    )


def _topology_view(result: ScanResult, devices: list[Device], cpus: CpuSet | None) -> tuple[list[str], bool]:
    """What the claim means on this host: each GPU-NIC path and the CPUs' place."""
    topo = result.topology
    lines: list[str] = []
    ok = True
    gpus = [d for d in devices if d.kind is DeviceKind.GPU]
    for g in gpus:
        for n in (d for d in devices if d.kind is DeviceKind.NIC):
            p = result.path(g.id, n.id)
            token = p.token if p is not None and p.shown else "unknown"
            near = token in ("PIX", "PXB")
            ok = ok and near
            lines.append(
                f"{g.id} - {n.id}: {token}"
                + ("" if near else " (GPUDirect RDMA off by default: NCCL_NET_GDR_LEVEL=PXB)")
            )
        if cpus is not None:
            node = topo.node(g.numa_node)
            if node is None or not node.cpus:
                lines.append(f"{g.id}: NUMA node unknown, the CPUs' place cannot be judged")
                ok = False
            elif cpus <= node.cpus:
                lines.append(f"cpus {cpus}: within {g.id}'s NUMA node {node.id}")
            else:
                lines.append(f"cpus {cpus}: {cpus - node.cpus} outside {g.id}'s NUMA node {node.id} ({node.cpulist})")
                ok = False
    return lines, ok


def render_check(check: ClaimCheck, pretty: bool = False) -> str:
    """``plan --format dra --claim``: the verdict as JSON, one compact line (``pretty``: indented)."""
    return encode(check, pretty=pretty)
