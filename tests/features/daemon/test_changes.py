"""topoagent.features.daemon.changes: the pure diff of two scans, on real fixture trees changed the way hosts change."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from tests.features.daemon.test_daemon_tree import copy_tree, remove_function, set_attr, set_link
from tests.paths import REPO
from topoagent.core.api import scan
from topoagent.features.daemon.changes import (
    ChangeKind,
    ScanChange,
    device_faults,
    diff,
    finding_keys,
    link_verdict_changes,
)

GPU5 = "0000:c3:00.0"
NIC2 = "0000:18:00.0"  # gpu0's rail NIC on the DGX H100 fixture, socket 0


@pytest.fixture
def dgx(fixture_root, tmp_path) -> Path:
    return copy_tree(fixture_root("dgx-h100"), tmp_path / "dgx")


@pytest.fixture
def base(dgx):
    return scan(dgx, nvml="off")


def kinds(changes) -> list[tuple[str, str]]:
    return [(c.kind.value, c.subject) for c in changes]


def test_first_scan_and_same_host_give_nothing(base, dgx):
    assert diff(None, base) == ()
    assert diff(base, scan(dgx, nvml="off")) == ()


def test_gpu_falls_off_the_bus_by_stable_key(base, dgx):
    remove_function(dgx, GPU5)
    after = scan(dgx, nvml="off")
    changes = diff(base, after)
    removed = [c for c in changes if c.kind is ChangeKind.DEVICE_REMOVED]
    assert kinds(removed) == [("device_removed", GPU5)]
    c = removed[0]
    assert c.severity == "warning" and c.device_kind == "gpu" and c.before == "gpu5" and c.after is None
    assert "H100" in c.message
    # gpu6 became gpu5 and gpu7 became gpu6, but they are the same devices: no event for them.
    assert after.device("gpu5").key == "0000:d1:00.0"
    assert not [c for c in changes if c.subject in ("0000:d1:00.0", "0000:df:00.0")]
    # ... and back: it appears again, under its old key.
    back = diff(after, base)
    assert kinds(c for c in back if c.kind is ChangeKind.DEVICE_ADDED) == [("device_added", GPU5)]


def test_nic_trains_low_then_recovers(base, dgx):
    set_link(dgx, NIC2, width=8)
    low = scan(dgx, nvml="off")
    changes = diff(base, low)
    assert kinds(changes) == [("link_width_changed", NIC2), ("finding_raised", "LINK_WIDTH_DEGRADED")]
    width, raised = changes
    assert (width.before, width.after, width.severity) == ("x16", "x8", "warning")
    assert raised.keys == (NIC2,) and raised.severity == "warning" and raised.after == "warning"
    recovered = diff(low, base)
    assert kinds(recovered) == [("link_width_changed", NIC2), ("finding_cleared", "LINK_WIDTH_DEGRADED")]
    assert recovered[0].severity == "info" and recovered[1].keys == (NIC2,)


def test_nic_speed_is_compared_but_idle_gpu_speed_is_not(base, dgx):
    set_link(dgx, NIC2, gts=16.0)
    set_link(dgx, "0000:1b:00.0", gts=2.5)  # gpu0 idles
    changes = diff(base, scan(dgx, nvml="off"))
    speed = [c for c in changes if c.kind is ChangeKind.LINK_SPEED_CHANGED]
    assert kinds(speed) == [("link_speed_changed", NIC2)]
    assert (speed[0].before, speed[0].after) == ("32 GT/s", "16 GT/s")
    # The GPU's width and maximum are still compared.
    set_link(dgx, "0000:1b:00.0", width=8)
    gpu = [c for c in diff(base, scan(dgx, nvml="off")) if c.subject == "0000:1b:00.0"]
    assert kinds(gpu) == [("link_width_changed", "0000:1b:00.0")]


def test_numa_node_change_and_the_findings_it_brings(base, dgx):
    set_attr(dgx, NIC2, "numa_node", "1")
    moved = scan(dgx, nvml="off")
    changes = diff(base, moved)
    numa = [c for c in changes if c.kind is ChangeKind.NUMA_NODE_CHANGED]
    assert kinds(numa) == [("numa_node_changed", NIC2)]
    assert (numa[0].before, numa[0].after) == ("node 0", "node 1")
    raised = [c for c in changes if c.kind is ChangeKind.FINDING_RAISED]
    assert raised and all(c.subject in {f.code for f in moved.findings} for c in raised)
    assert any(NIC2 in c.keys for c in raised)


def test_findings_are_keyed_by_code_and_subject_keys(fixture_root):
    r = scan(fixture_root("wrong-socket-nic"), nvml="off")
    assert r.findings
    for f in r.findings:
        keys = finding_keys(r, f)
        assert len(keys) == len(f.subjects)
        assert all(":" in k for k in keys if r.topology.by_key(k) is not None)
    # A different host entirely: every finding of one is cleared, every one of the other raised.
    other = scan(fixture_root("dgx-h100"), nvml="off")
    changes = diff(r, other)
    cleared = [c for c in changes if c.kind is ChangeKind.FINDING_CLEARED]
    assert len(cleared) == len({(f.code, finding_keys(r, f)) for f in r.findings})


def test_changes_are_plain_values(base, dgx):
    remove_function(dgx, GPU5)
    set_link(dgx, NIC2, width=8)
    changes = diff(base, scan(dgx, nvml="off"))
    assert changes == diff(base, scan(dgx, nvml="off"))  # deterministic
    assert changes
    for c in changes:
        assert isinstance(c, ScanChange) and hash(c) is not None
        d = json.loads(json.dumps(c.as_dict()))
        assert d["kind"] == c.kind.value and d["subject"] == c.subject
        assert c.severity in ("info", "warning", "critical")


def test_link_verdict_changes():
    before = {"0000:18:00.0": ("nic", "x8 of x16")}
    after = {"0000:1b:00.0": ("gpu", "16 of 32 GT/s under load")}
    changes = link_verdict_changes(before, after)
    assert kinds(changes) == [("link_degraded", "0000:1b:00.0"), ("link_recovered", "0000:18:00.0")]
    assert changes[0].severity == "warning" and changes[0].after == "16 of 32 GT/s under load"
    assert changes[1].severity == "info" and changes[1].before == "x8 of x16"
    assert link_verdict_changes(before, before) == ()


def test_the_diff_is_pure():
    """No I/O: the module imports nothing that reads the host or the clock."""
    source = (REPO / "topoagent/features/daemon/changes.py").read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module or "")
    assert not imported & {
        "os",
        "time",
        "socket",
        "subprocess",
        "topoagent.core.hostfs",
        "topoagent.core.read",
        "topoagent.core.api",
        "pathlib",
        "io",
    }


def test_a_lost_nvswitch_is_a_warning(base, dgx):
    remove_function(dgx, "0000:e8:00.0")
    removed = [c for c in diff(base, scan(dgx, nvml="off")) if c.kind is ChangeKind.DEVICE_REMOVED]
    assert [(c.subject, c.device_kind, c.severity, c.before) for c in removed] == [
        ("0000:e8:00.0", "nvswitch", "warning", "nvswitch1")
    ]


def test_device_faults_are_one_event_per_device_listing_its_findings(fixture_root):
    """gpu0 of the faults fixture fell off the bus and counted a fatal AER error: one
    device_fault event for it (both codes, both messages), not one per finding."""
    faults = scan(fixture_root("dgx-h100-faults"), nvml="off")
    events = device_faults(None, faults)
    subjects = [c.subject for c in events]
    assert len(subjects) == len(set(subjects))
    gpu0 = next(c for c in events if c.subject == "0000:1b:00.0")
    assert gpu0.kind is ChangeKind.DEVICE_FAULT and gpu0.severity == "critical"
    assert gpu0.after == "FELL_OFF_BUS,PCIE_AER_ERRORS" and gpu0.keys == ("0000:1b:00.0",)
    assert gpu0.message.startswith("FELL_OFF_BUS: gpu0 (0000:1b:00.0") and "; PCIE_AER_ERRORS: " in gpu0.message
    assert ".;" not in gpu0.message
    by_subject = {c.subject: c.after for c in events}
    assert by_subject == {
        "0000:1b:00.0": "FELL_OFF_BUS,PCIE_AER_ERRORS",
        "0000:40:00.0": "PCIE_AER_ERRORS",
        "0000:52:00.0": "probe_error",
    }
    assert device_faults(faults, faults) == ()  # nothing new: nothing logged
