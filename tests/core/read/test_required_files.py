"""Required versus optional sysfs files (topoagent.core.read.sysfs): a PCI function without one
of the files the kernel always creates is a probe error and a partial source, never a silent
guess; an absent optional file is normal.  Plus stable identity across hotplug."""

import shutil

import pytest

from tests.core.test_bad_input import BDF, minimal_tree
from topoagent.core.api import scan

REQUIRED = ("class", "vendor", "device")
OPTIONAL = ("numa_node", "current_link_speed", "max_link_width", "subsystem_vendor", "config", "driver")


def _sysfs_status(result):
    return next(s for s in result.snapshot.sources if s.name == "sysfs")


@pytest.mark.parametrize("name", REQUIRED)
def test_missing_required_file_is_a_probe_error(tmp_path, name):
    root = minimal_tree(tmp_path)
    (root / "sys/devices/pci0000:16/0000:16:01.0" / BDF / name).unlink()
    r = scan(root, nvml="off")
    lost = {e.path: e.error for e in r.snapshot.probe_errors}
    path = f"/sys/devices/pci0000:16/0000:16:01.0/{BDF}/{name}"
    assert lost[path].startswith("missing"), lost
    assert _sysfs_status(r).status == "partial"
    assert r.by_bdf(BDF) is not None  # still reported, with what could be read


@pytest.mark.parametrize("name", OPTIONAL)
def test_missing_optional_file_is_not_an_error(tmp_path, name):
    root = minimal_tree(tmp_path)
    target = root / "sys/devices/pci0000:16/0000:16:01.0" / BDF / name
    if target.exists():
        target.unlink()
    r = scan(root, nvml="off")
    assert r.snapshot.probe_errors == ()
    assert _sysfs_status(r).status == "ok"


@pytest.mark.parametrize("name", REQUIRED)
def test_required_file_gone_while_read_is_a_probe_error(tmp_path, monkeypatch, name):
    """Hotplug or a driver rebinding: the file is absent when read and back by the time anyone
    checks.  The read failed, so it is a lost probe and a partial source, never a silent guess."""
    from topoagent.core.hostfs import HostFS

    root = minimal_tree(tmp_path)
    real = HostFS.texts

    def texts(self, directory, names):
        out = real(self, directory, names)
        return {**out, name: None} if directory.endswith(BDF) and name in out else out

    monkeypatch.setattr(HostFS, "texts", texts)
    r = scan(root, nvml="off")
    lost = {e.path: e.error for e in r.snapshot.probe_errors}
    path = f"/sys/devices/pci0000:16/0000:16:01.0/{BDF}/{name}"
    assert path in lost and "during the scan" in lost[path], lost
    assert _sysfs_status(r).status == "partial"


def test_every_fixture_has_its_required_files(fixture_root):
    for machine in ("dgx-h100", "cloud-vm", "grace-hopper", "sriov-nic"):
        r = scan(fixture_root(machine), nvml="off")
        assert not [e for e in r.snapshot.probe_errors if e.error.startswith("missing")], machine


def test_hotplug_keeps_every_other_devices_key(scratch_root):
    """A GPU falls off the bus: ids after it renumber, stable keys do not."""
    root = scratch_root("dgx-h100")
    before = scan(root, nvml="off")
    gone = before.topology.by_id("gpu3")
    assert gone is not None and gone.key == gone.bdf
    link = root / "sys/bus/pci/devices" / gone.bdf
    shutil.rmtree(link.resolve())
    link.unlink()
    after = scan(root, nvml="off")
    assert after.by_bdf(gone.bdf) is None
    keys_before = {d.key for d in before.topology.devices} - {gone.key}
    assert {d.key for d in after.topology.devices} == keys_before
    for d in after.topology.devices:
        old = before.topology.by_key(d.key)
        assert old is not None and (old.bdf, old.kind, old.name) == (d.bdf, d.kind, d.name)
    # the positional ids after it shift; the key names the same function
    assert after.topology.by_id("gpu3").bdf == before.topology.by_id("gpu4").bdf
    assert after.device(before.topology.by_id("gpu4").key).id == "gpu3"
