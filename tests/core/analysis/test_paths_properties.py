"""Properties of path classes over random PCIe trees (hypothesis)."""

from __future__ import annotations

from itertools import combinations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from topoagent.core.analysis.paths import pcie_class, scan_paths
from topoagent.core.cpuset import CpuSet
from topoagent.core.pathclass import PathClass
from topoagent.core.snapshot import ConfigSpace, Cpu, NumaNode, PciFunction, Snapshot
from topoagent.core.topology import build_topology

BRIDGE = 0x060400
KINDS = {"gpu": 0x030200, "nic": 0x020700}
PORT = {"rp": 4, "usp": 5, "dsp": 6}


class _Builder:
    def __init__(self) -> None:
        self.fns: list[PciFunction] = []
        self.bus = 0

    def fn(self, path: str, cls: int, numa: int, port: int | None) -> str:
        self.bus += 1
        bdf = f"0000:{self.bus:02x}:00.0"
        cfg = ConfigSpace(size=64, header_type=1 if cls == BRIDGE else 0, pcie_port_type=port)
        self.fns.append(
            PciFunction(
                bdf=bdf,
                sysfs_path=f"{path}/{bdf}",
                class_code=cls,
                vendor_id=0x10B5,
                device_id=0x8796,
                numa_node=numa,
                config=cfg,
            )
        )
        return f"{path}/{bdf}"


# A subtree below a port: an endpoint, or a switch with 1-3 downstream subtrees.
subtree = st.recursive(
    st.sampled_from(["gpu", "nic"]),
    lambda children: st.lists(children, min_size=1, max_size=3).map(tuple),
    max_leaves=6,
)
machine = st.lists(  # root buses: (numa node, root ports)
    st.tuples(st.integers(0, 1), st.lists(subtree, min_size=1, max_size=3)), min_size=1, max_size=4
)


def build(spec, insert_above: int | None = None) -> Snapshot:
    b = _Builder()
    leaves = 0

    def place(path: str, node, numa: int) -> None:
        nonlocal leaves
        if isinstance(node, str):
            if insert_above == leaves:  # an extra switch (upstream + downstream port) above this leaf
                usp = b.fn(path, BRIDGE, numa, PORT["usp"])
                path = b.fn(usp, BRIDGE, numa, PORT["dsp"])
            leaves += 1
            b.fn(path, KINDS[node], numa, 0)
            return
        usp = b.fn(path, BRIDGE, numa, PORT["usp"])
        for child in node:
            place(b.fn(usp, BRIDGE, numa, PORT["dsp"]), child, numa)

    for i, (numa, ports) in enumerate(spec):
        root = f"pci0000:{0x80 + i:02x}"
        for port in ports:
            place(b.fn(root, BRIDGE, numa, PORT["rp"]), port, numa)
    return Snapshot(
        numa_nodes=(
            NumaNode(0, CpuSet.parse("0-3"), distances=(10, 21)),
            NumaNode(1, CpuSet.parse("4-7"), distances=(21, 10)),
        ),
        cpus=tuple(Cpu(i, package=i // 4) for i in range(8)),
        pci=tuple(b.fns),
    )


def classes(snap: Snapshot) -> dict[tuple[str, str], PathClass]:
    topo = build_topology(snap)
    return {(topo.by_id(p.a).bdf, topo.by_id(p.b).bdf): p.pcie for p in scan_paths(topo)}


@settings(max_examples=150, deadline=None)
@given(machine)
def test_symmetric(spec):
    topo = build_topology(build(spec))
    ends = topo.gpus + topo.nics
    for a, b in combinations(ends, 2):
        assert pcie_class(topo, a, b) == pcie_class(topo, b, a)


@settings(max_examples=150, deadline=None)
@given(machine)
def test_sys_exactly_when_numa_differs(spec):
    topo = build_topology(build(spec))
    for p in scan_paths(topo):
        a, b = topo.by_id(p.a), topo.by_id(p.b)
        assert (p.pcie is PathClass.SYS) == (a.numa_node != b.numa_node)
        if p.pcie is PathClass.SYS:
            assert p.same_socket is False  # nodes 0 and 1 are on different packages here


@settings(max_examples=150, deadline=None)
@given(machine, st.integers(0, 20))
def test_adding_a_switch_never_improves_a_class(spec, which):
    before_snap = build(spec)
    leaves = sum(1 for f in before_snap.pci if f.class_code != BRIDGE)
    which %= leaves
    before = classes(before_snap)
    after_snap = build(spec, insert_above=which)
    # BDFs shift when bridges are inserted: match devices by their order among endpoints.
    ends_before = [f.bdf for f in before_snap.pci if f.class_code != BRIDGE]
    ends_after = [f.bdf for f in after_snap.pci if f.class_code != BRIDGE]
    rename = dict(zip(ends_before, ends_after, strict=True))
    after = classes(after_snap)
    for (a, b), cls in before.items():
        assert after[(rename[a], rename[b])] >= cls


def test_pix_pxb_phb_node_examples():
    spec = [(0, [("gpu", "nic", ("gpu",)), "nic"]), (0, ["gpu"]), (1, ["nic"])]
    topo = build_topology(build(spec))
    g = {d.bdf: d for d in topo.devices}
    gpus, nics = topo.gpus, topo.nics
    assert pcie_class(topo, gpus[0], nics[0])[0] is PathClass.PIX  # same switch
    assert pcie_class(topo, gpus[0], gpus[1])[0] is PathClass.PXB  # nested switch below it
    assert pcie_class(topo, gpus[0], nics[1])[0] is PathClass.PHB  # other root port, same root bus
    assert pcie_class(topo, gpus[0], gpus[2])[0] is PathClass.NODE  # other root bus, same node
    assert pcie_class(topo, gpus[0], nics[2])[0] is PathClass.SYS
    assert len(g) == len(topo.devices)


def test_unknown_numa_is_worst_case():
    snap = build([(0, ["gpu"]), (1, ["nic"])])
    pci = tuple(msgspec.structs.replace(f, numa_node=None) if f.class_code == KINDS["nic"] else f for f in snap.pci)
    topo = build_topology(msgspec.structs.replace(snap, pci=pci))
    (p,) = scan_paths(topo)
    assert p.pcie is PathClass.SYS and p.locality_known is False
