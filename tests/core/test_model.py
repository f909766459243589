"""The model's value classes are msgspec Structs: what is a field, what is compared, what is frozen."""

from __future__ import annotations

import msgspec
import pytest

from topoagent.core.api import run
from topoagent.core.inputs import Inputs
from topoagent.core.result import with_timings
from topoagent.core.snapshot import AcsInfo
from topoagent.core.topology import Topology, TopologyIndex


@pytest.fixture(scope="module")
def dgx(fixture_root):
    return run(Inputs(root=str(fixture_root("dgx-h100")), nvml="off"))


def test_two_results_that_differ_only_in_timings_compare_equal(dgx):
    a = with_timings(dgx, {"sysfs": 0.5, "analyse": 0.1})
    b = with_timings(dgx, {"sysfs": 9.0})
    assert dict(a.timings) == {"sysfs": 0.5, "analyse": 0.1} and dict(b.timings) == {"sysfs": 9.0}
    assert a == b and a is not b
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


def test_a_run_is_timed_and_an_untimed_result_has_no_timings(dgx):
    assert {"sysfs", "analyse"} <= set(dgx.timings)
    assert dict(msgspec.structs.replace(dgx).timings) == {}


def test_results_that_differ_in_a_field_compare_unequal(dgx):
    assert dgx.paths and dgx != msgspec.structs.replace(dgx, paths=())


def test_a_class_variable_is_no_field():
    """``AcsInfo.BITS`` is a ClassVar: a field would take a constructor slot (``fix acs`` once
    crashed on that in a naive port)."""
    assert "BITS" not in AcsInfo.__struct_fields__ and AcsInfo.BITS[0] == (0, "SrcValid")
    assert AcsInfo(0x5F, 0x1D, 0x100).offset == 0x100


def test_the_topology_index_is_derived_not_a_field(dgx):
    topo = dgx.topology
    assert Topology.__struct_fields__ == ("snapshot", "sockets", "nodes", "host_bridges", "devices")
    assert isinstance(topo.index, TopologyIndex) and topo.index is topo.index
    gpu = topo.gpus[0]
    assert topo.by_bdf(gpu.bdf) is gpu and topo.by_id(gpu.id) is gpu and topo.by_key(gpu.key) is gpu
    fresh = msgspec.structs.replace(topo)
    assert fresh == topo and "index" not in fresh.__dict__  # built on first use, never compared


def test_inputs_compare_without_runners_and_origins():
    a = Inputs(root="/x", runners={"lspci": lambda: None}, origins={"lspci_tree_text": "--lspci-tree t"})
    assert a == Inputs(root="/x") and hash(a) == hash(Inputs(root="/x"))
    assert a != Inputs(root="/y")


def test_values_are_frozen(dgx):
    with pytest.raises(AttributeError):
        dgx.topology.devices[0].id = "gpu9"  # type: ignore[misc]
