"""The model's value classes are msgspec Structs: what is a field, what is compared, what is frozen."""

from __future__ import annotations

import msgspec
import pytest

from topoagent.core.api import run
from topoagent.core.aside import Aside, derived
from topoagent.core.inputs import Inputs
from topoagent.core.result import ScanResult, with_timings
from topoagent.core.snapshot import AcsInfo
from topoagent.core.topology import Topology, TopologyIndex


@pytest.fixture(scope="module")
def dgx(fixture_root):
    return run(Inputs(root=str(fixture_root("dgx-h100")), nvml="off"))


def test_two_results_that_differ_only_in_timings_compare_equal(dgx):
    a = with_timings(dgx, {"sysfs": 0.5, "analyse": 0.1})
    b = with_timings(dgx, {"sysfs": 9.0})
    assert dict(a.timings) == {"sysfs": 0.5, "analyse": 0.1} and dict(b.timings) == {"sysfs": 9.0}
    assert a == b and a is not b and hash(a) == hash(b)
    assert "timings" not in msgspec.structs.asdict(a) and "_timings" not in msgspec.structs.asdict(a)


def test_timings_and_an_expectation_keep_the_cached_baseline(dgx, monkeypatch):
    """``with_timings``/``with_expected`` change no fact: the baseline (slot facts and their
    hash) is computed once, not again for the copy."""
    import topoagent.core.result as result_mod
    from topoagent.core.analysis.fingerprint import baseline

    calls = []

    def counted(*args):
        calls.append(args)
        return baseline(*args)

    monkeypatch.setattr(result_mod, "baseline", counted)
    fresh = msgspec.structs.replace(dgx)  # no cache yet
    timed = result_mod.with_timings(fresh, {"sysfs": 0.5})
    good = timed.baseline
    expected = msgspec.structs.replace(good, slots=good.slots[1:])  # one slot fewer: a finding
    out = result_mod.with_expected(timed, expected)
    assert any(f.code == "EXPECT_DEVICE_EXTRA" for f in out.findings)
    assert out.baseline is good and dict(out.timings) == {"sysfs": 0.5}
    assert result_mod.with_timings(out, {}).baseline is good
    assert len(calls) == 1


def test_a_run_is_timed_and_a_copy_keeps_its_timings(dgx):
    """Timings are kept beside the value (core.aside): an ordinary replace keeps them, no copy
    by hand; a result made afresh has none."""
    assert {"sysfs", "analyse"} <= set(dgx.timings)
    assert dict(msgspec.structs.replace(dgx).timings) == dict(dgx.timings)
    assert dict(msgspec.structs.replace(dgx, findings=()).timings) == dict(dgx.timings)
    fresh = ScanResult(dgx.topology, dgx.paths, dgx.rails, dgx.findings, dgx.plan)
    assert dict(fresh.timings) == {} and fresh == dgx


def test_a_derived_value_is_kept_while_its_fields_are_and_made_again_when_they_change(dgx, monkeypatch):
    """The baseline is derived from topology, paths and rails: a copy that changes none of them
    (findings) reuses it; a copy with other paths computes its own, never the stale one."""
    import topoagent.core.result as result_mod
    from topoagent.core.analysis.fingerprint import baseline

    calls = []
    monkeypatch.setattr(result_mod, "baseline", lambda *a: calls.append(a) or baseline(*a))
    fresh = ScanResult(dgx.topology, dgx.paths, dgx.rails, dgx.findings, dgx.plan)
    first = fresh.baseline
    assert msgspec.structs.replace(fresh, findings=()).baseline is first and len(calls) == 1
    fewer = msgspec.structs.replace(fresh, paths=fresh.paths[1:])
    assert fewer.baseline is not first and len(calls) == 2
    assert fewer.baseline == baseline(fewer.topology, fewer.paths, fewer.rails)


def test_a_struct_with_an_aside_compares_and_hashes_by_its_fields_only():
    """core.aside: the mechanism every model value uses for what is not its value."""

    class Box(msgspec.Struct, frozen=True):
        items: tuple[int, ...]
        aside: Aside = msgspec.field(default_factory=Aside)

        @derived("items")
        def total(self) -> int:
            return sum(self.items)

    a, b = Box((1, 2)), Box((1, 2), Aside({"note": 1}))
    assert a == b and hash(a) == hash(b) and a != Box((3,))
    assert a.total == 3 and a.aside is msgspec.structs.replace(a).aside
    assert msgspec.structs.replace(a, items=(5,)).total == 5 and a.total == 3
    assert repr(a) == "Box(items=(1, 2), aside=Aside())"
    assert not hasattr(a, "__dict__")  # no dict=True: a cached_property has nowhere to hide


def test_results_that_differ_in_a_field_compare_unequal(dgx):
    assert dgx.paths and dgx != msgspec.structs.replace(dgx, paths=())


def test_a_class_variable_is_no_field():
    """``AcsInfo.BITS`` is a ClassVar: a field would take a constructor slot (``fix acs`` once
    crashed on that in a naive port)."""
    assert "BITS" not in AcsInfo.__struct_fields__ and AcsInfo.BITS[0] == (0, "SrcValid")
    assert AcsInfo(0x5F, 0x1D, 0x100).offset == 0x100


def test_the_topology_index_is_derived_not_a_field(dgx):
    topo = dgx.topology
    assert Topology.__struct_fields__ == ("snapshot", "sockets", "nodes", "host_bridges", "devices", "aside")
    assert isinstance(topo.index, TopologyIndex) and topo.index is topo.index
    gpu = topo.gpus[0]
    assert topo.by_bdf(gpu.bdf) is gpu and topo.by_id(gpu.id) is gpu and topo.by_key(gpu.key) is gpu
    fresh = msgspec.structs.replace(topo)
    assert fresh == topo and fresh.index is topo.index  # same devices: the same lookups
    moved = msgspec.structs.replace(gpu, id="gpu9")
    other = msgspec.structs.replace(topo, devices=tuple(moved if d is gpu else d for d in topo.devices))
    assert other != topo and other.by_id("gpu9") is moved and topo.by_id("gpu9") is None  # never stale


def test_devices_carry_what_consumers_joined_the_snapshot_for(dgx):
    """AER counts, fell-off-bus, NVML's record, RDMA ports and interface speeds are the
    device's own fields: nothing above the model joins a Device back to its PciFunction."""
    fns = {f.bdf: f for f in dgx.snapshot.pci}
    for d in dgx.topology.devices:
        f = fns[d.bdf]
        assert (d.aer, d.fell_off_bus) == (f.aer, f.fell_off_bus)
    nic = next(n for n in dgx.topology.nics if n.rdma_devices)
    rdma = {r.name: r.ports for r in dgx.snapshot.rdma}
    assert dict(nic.rdma_ports) == {name: rdma[name] for name in nic.rdma_devices}
    speeds = {n.name: n.speed_mbps for n in dgx.snapshot.netdevs if n.speed_mbps is not None}
    assert dict(nic.netdev_speeds) == {name: speeds[name] for name in nic.netdevs if name in speeds}
    assert all(d.nvml is None for d in dgx.topology.devices)  # nvml="off"


def test_the_topology_states_the_host_facts(dgx):
    topo, snap = dgx.topology, dgx.snapshot
    for name in ("hostname", "root", "virtualized", "kernel_cmdline", "allowed_cpus", "cpus", "modules"):
        assert getattr(topo, name) == getattr(snap, name)
    assert (topo.peer_memory, topo.sources, topo.probe_errors) == (snap.peer_memory, snap.sources, snap.probe_errors)


def test_inputs_compare_without_runners_and_origins():
    a = Inputs(root="/x", runners={"lspci": lambda: None}, origins={"lspci_tree_text": "--lspci-tree t"})
    assert a == Inputs(root="/x") and hash(a) == hash(Inputs(root="/x"))
    assert a != Inputs(root="/y")


def test_values_are_frozen(dgx):
    with pytest.raises(AttributeError):
        dgx.topology.devices[0].id = "gpu9"  # type: ignore[misc]
