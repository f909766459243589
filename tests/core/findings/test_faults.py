"""The node's own faults as findings and daemon events: a GPU fallen off the bus, AER error
counters, a garbage class file, the real reason extended config space is not seen, and metric
labels that never renumber.  Fixture: ``dgx-h100-faults`` (the DGX H100 with one fault per rail)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import msgspec
import pytest

from tests.daemon_helpers import quiet_config
from tests.fakesysfs import generate, load_machine
from tests.features.daemon.test_daemon_loop import Running, one
from tests.features.daemon.test_daemon_tree import copy_tree, remove_function
from tests.paths import REPO
from topoagent.core.api import scan
from topoagent.core.parse.sysfs_values import parse_aer_stats
from topoagent.features.daemon.config import Config
from topoagent.features.daemon.labels import pin_names

OFF_BUS = "0000:1b:00.0"  # gpu0: config space all ones
AER_NIC = "0000:40:00.0"  # mlx5_3, gpu1's rail NIC: fatal and non-fatal AER counts
BAD_CLASS = "0000:52:00.0"  # gpu2: class file "0x03zz00"

# What drivers/pci/pcie/aer.c (aer_stats_dev_attr) writes, cut short.
_FATAL = "Undefined 0\nDLP 1\nSDES 2\nTLP 0\nTOTAL_ERR_FATAL 3\n"


@pytest.mark.parametrize(
    "text,total,want",
    [
        (_FATAL, "TOTAL_ERR_FATAL", (3, (("DLP", 1), ("SDES", 2)))),
        ("RxErr 0\nBadTLP 0\nTOTAL_ERR_COR 0\n", "TOTAL_ERR_COR", (0, ())),
        (
            "RxErr 7\ndev_cor_errs_bit[9] 2\nTOTAL_ERR_COR 9",
            "TOTAL_ERR_COR",
            (9, (("RxErr", 7), ("dev_cor_errs_bit[9]", 2))),
        ),
        ("TOTAL_ERR_NONFATAL 18446744\n", "TOTAL_ERR_NONFATAL", (18446744, ())),
    ],
)
def test_parse_aer_stats(text, total, want):
    assert parse_aer_stats(text, total) == want


@pytest.mark.parametrize(
    "text",
    [
        "",
        "DLP 1\n",
        "DLP one\nTOTAL_ERR_FATAL 1",
        "DLP\nTOTAL_ERR_FATAL 1",
        "TOTAL_ERR_COR 1\n",
        "DLP -1\nTOTAL_ERR_FATAL 0",
    ],
)
def test_parse_aer_stats_rejects(text):
    with pytest.raises(ValueError):
        parse_aer_stats(text, "TOTAL_ERR_FATAL")


@pytest.fixture(scope="module")
def faults(fixture_root):
    return scan(fixture_root("dgx-h100-faults"), nvml="off")


@pytest.fixture(scope="module")
def dgx(fixture_root):
    return scan(fixture_root("dgx-h100"), nvml="off")


def test_scan_json_names_each_fault_and_counts_every_gpu(fixture_root, dgx):
    run = subprocess.run(
        [sys.executable, "-m", "topoagent", "scan", "--root", str(fixture_root("dgx-h100-faults")), "--format", "json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert run.returncode == 1, run.stderr  # critical findings
    report = json.loads(run.stdout)
    devices = {d["bdf"]: d for d in report["devices"]}
    gpus = [d for d in report["devices"] if d["kind"] == "gpu"]
    assert len(gpus) == 8
    # Same display ids as on the healthy DGX: nothing dropped, nothing renumbered.
    assert [(g.id, g.bdf) for g in dgx.topology.gpus] == [(g["id"], g["bdf"]) for g in gpus]
    by_code = {(f["code"], tuple(f["subjects"])): f for f in report["findings"]}
    off = by_code[("FELL_OFF_BUS", (devices[OFF_BUS]["id"],))]
    assert off["severity"] == "critical" and OFF_BUS in off["message"]
    assert {"path": f"/sys/bus/pci/devices/{OFF_BUS}/device", "value": "0x2330"} in off["evidence"]
    assert devices[OFF_BUS]["vendor_id"] in ("0x10de", 0x10DE) and devices[OFF_BUS]["name"].endswith("H100 SXM5 80GB")
    aer = by_code[("PCIE_AER_ERRORS", (devices[AER_NIC]["id"],))]
    assert aer["severity"] == "critical" and "3 fatal" in aer["message"] and "SDES 2" in aer["message"]
    assert {"path": f"/sys/bus/pci/devices/{AER_NIC}/aer_dev_fatal", "value": "TOTAL_ERR_FATAL 3"} in aer["evidence"]
    # Correctable errors (the root port's) are no scan finding.
    assert not any(
        f["code"] == "PCIE_AER_ERRORS" and devices["0000:3d:01.0"]["id"] in f["subjects"] for f in report["findings"]
    )
    assert devices[BAD_CLASS]["kind"] == "gpu" and devices[BAD_CLASS]["id"] == "gpu2"
    assert [e for e in report["probe_errors"] if e["path"].endswith(f"{BAD_CLASS}/class")]


def test_config_all_ones_on_a_vf_is_no_fault(fixture_root):
    r = scan(fixture_root("sriov-nic"), nvml="off")
    vfs = [d for d in r.topology.devices if d.is_vf]
    assert vfs and all(d.vendor_id is not None for d in vfs)
    assert not [f for f in r.findings if f.code == "FELL_OFF_BUS"]


def test_nonfatal_aer_errors_only_warn_and_a_fallen_off_nvme_warns(tmp_path):
    desc = load_machine("workstation")
    r = scan(generate(desc, tmp_path / "plain"), nvml="off")
    nvme = next(d for d in r.topology.devices if d.kind.value == "nvme")
    text = json.dumps(desc)
    assert nvme.bdf is not None
    # The NVMe drive: non-fatal AER errors, then gone from the bus.
    tree = generate(_with_attrs(desc, nvme.bdf, "aer_nonfatal=CmpltTO:2 offbus=true"), tmp_path / "bad")
    found = {f.code: f for f in scan(tree, nvml="off").findings if nvme.id in f.subjects}
    assert found["PCIE_AER_ERRORS"].severity.label == "warning"
    assert found["FELL_OFF_BUS"].severity.label == "warning"
    assert json.dumps(desc) == text  # the description was copied, not changed


def _with_attrs(desc: dict, bdf: str, attrs: str) -> dict:
    """``desc`` with ``attrs`` added to the tree line of the function at ``bdf``."""
    from tests.fakesysfs import summary

    rows = summary(desc)
    part = next(r["part"] for r in rows if r["bdf"] == bdf)
    out = json.loads(json.dumps(desc))
    for rb in out["rootbus"]:
        if isinstance(rb.get("tree"), str) and f"> {part}" in rb["tree"] or f" {part}\n" in rb.get("tree", ""):
            new = rb["tree"].replace(f" {part}", f" {part} {attrs}", 1)
            rb["tree"] = new
            if any(r["bdf"] == bdf for r in summary(out)) and _has(out, bdf, attrs):
                return out
            rb["tree"] = new.replace(f" {part} {attrs}", f" {part}", 1)
    raise AssertionError(f"no tree line for {bdf}")


def _has(desc: dict, bdf: str, attrs: str) -> bool:
    from tests.fakesysfs.generator import build

    return any(
        f.bdf == bdf and all(f.attrs.get(k) == v for k, v in (a.split("=", 1) for a in attrs.split()))
        for f in build(desc).funcs
    )


def test_acs_unknown_says_why(tmp_path, fixture_root):
    desc = load_machine("dgx-h100")
    desc["machine"]["config"] = 256  # a root reader on functions without extended space
    r = scan(generate(desc, tmp_path / "short"), nvml="off")
    acs = next(f for f in r.findings if f.code == "ACS_UNKNOWN")
    assert "256 bytes on this function" in acs.message and "CAP_SYS_ADMIN" not in acs.message
    assert "as root" not in acs.remedy
    assert "256 bytes" in next(s.detail for s in r.snapshot.sources if s.name == "configspace")
    unpriv = next(f for f in scan(fixture_root("unprivileged"), nvml="off").findings if f.code == "ACS_UNKNOWN")
    assert "CAP_SYS_ADMIN" in unpriv.message and "as root" in unpriv.remedy


def test_pinned_names_never_renumber(dgx):
    pinned = pin_names({}, dgx.topology.devices)
    assert pinned[OFF_BUS] == "gpu0"
    gone = [d for d in dgx.topology.devices if d.bdf != OFF_BUS]
    assert pin_names(pinned, gone) == pinned
    # A device at a new key whose scan id is taken gets the next free number of its kind.
    stranger = dgx.topology.gpus[0]
    moved = msgspec.structs.replace(stranger, key="0000:ff:00.0", bdf="0000:ff:00.0", id="gpu0")
    assert pin_names(pinned, [moved])["0000:ff:00.0"] == "gpu8"


@pytest.fixture
def config(tmp_path, fixture_root) -> Config:
    return quiet_config(fixture_root("dgx-h100"), tmp_path)


def in_turn(results: list):
    """A daemon scan function returning ``results`` one per scan, the last one ever after.

    It counts its own calls: the daemon thread may scan before the test has bound the
    ``Running`` it is building (a closure reading ``d.daemon`` raised NameError there, a failed
    first scan that left the metrics without the result's series)."""
    calls = iter(range(len(results)))
    return lambda cfg: results[next(calls, len(results) - 1)]


def _rail_labels(fams) -> dict[str, str]:
    return {s.labels["gpu_bdf"]: s.labels["gpu"] for s in fams["topoagent_rail_info"]}


def test_daemon_logs_faults_by_bdf_and_exports_aer_counters(config, dgx, faults):
    results = [dgx, faults]
    d = Running(config, scan=in_turn(results))
    try:
        d.scans(1)
        before = _rail_labels(d.metrics())
        d.daemon.request_reload()
        d.scans(2)
        fams = d.metrics()
        events = [e for e in d.events() if e["event"] == "device_fault"]
        by_subject = {(e["subject"], e.get("after")): e for e in events}
        assert by_subject[(OFF_BUS, "FELL_OFF_BUS,PCIE_AER_ERRORS")]["level"] == "critical"  # one per device
        assert by_subject[(AER_NIC, "PCIE_AER_ERRORS")]["level"] == "critical"
        assert by_subject[(BAD_CLASS, "probe_error")]["level"] == "warning"
        state = json.loads((Path(config.state_dir) / "state.json").read_text())
        jsonschema.validate(state, json.loads((REPO / "topoagent/schema/scan.schema.json").read_text()))
        faults_in_state = {(c["subject"], c["after"]) for c in state["changes"] if c["kind"] == "device_fault"}
        assert {
            (OFF_BUS, "FELL_OFF_BUS,PCIE_AER_ERRORS"),
            (AER_NIC, "PCIE_AER_ERRORS"),
            (BAD_CLASS, "probe_error"),
        } <= faults_in_state
        assert {(f["code"], f["severity"]) for f in state["findings"]} >= {
            ("FELL_OFF_BUS", "critical"),
            ("PCIE_AER_ERRORS", "critical"),
        }
        assert one(fams, "topoagent_pcie_aer_errors_total", bdf=AER_NIC, kind="nic", severity="fatal") == 3
        assert one(fams, "topoagent_pcie_aer_errors_total", bdf=AER_NIC, kind="nic", severity="nonfatal") == 4
        assert (
            one(fams, "topoagent_pcie_aer_errors_total", bdf="0000:3d:01.0", kind="bridge", severity="correctable")
            == 15
        )
        assert one(fams, "topoagent_finding", code="FELL_OFF_BUS", severity="critical", subject=OFF_BUS) == 1
        assert _rail_labels(fams) == before  # eight GPUs, same labels
    finally:
        d.stop()


def test_daemon_logs_faults_present_at_its_first_scan(config, faults):
    d = Running(config, scan=lambda cfg: faults)
    try:
        d.scans(1)
        subjects = {e["subject"] for e in d.events() if e["event"] == "device_fault"}
        assert {OFF_BUS, AER_NIC, BAD_CLASS} <= subjects
    finally:
        d.stop()


def test_rail_info_labels_do_not_renumber_when_a_gpu_disappears(config, dgx, fixture_root, tmp_path):
    tree = copy_tree(fixture_root("dgx-h100"), tmp_path / "tree")
    remove_function(tree, OFF_BUS)  # gpu0: every other GPU's scan id shifts down by one
    fewer = scan(tree, nvml="off")
    assert fewer.topology.by_key("0000:43:00.0").id == "gpu0"
    results = [dgx, fewer]
    d = Running(config, scan=in_turn(results))
    try:
        d.scans(1)
        before = _rail_labels(d.metrics())
        d.daemon.request_reload()
        d.scans(2)
        after = _rail_labels(d.metrics())
        assert OFF_BUS not in after and len(after) == 7
        assert after == {bdf: name for bdf, name in before.items() if bdf != OFF_BUS}
        assert after["0000:43:00.0"] == "gpu1"
    finally:
        d.stop()


def test_daemon_keeps_the_last_known_identity_of_a_device_that_fell_off(config, dgx, fixture_root, tmp_path):
    tree = copy_tree(fixture_root("dgx-h100-faults"), tmp_path / "tree")
    device_dir = (tree / "sys/bus/pci/devices" / OFF_BUS).resolve()
    for name in ("vendor", "device", "class"):
        (device_dir / name).unlink()  # not even sysfs's copies of the ids are left
    alone = scan(tree, nvml="off")
    assert len(alone.topology.gpus) == 7  # a scan on its own cannot know what it was
    assert [f.severity.label for f in alone.findings if f.code == "FELL_OFF_BUS"] == ["warning"]
    results = [dgx, alone]
    d = Running(config, scan=in_turn(results))
    try:
        d.scans(1)
        d.daemon.request_reload()
        d.scans(2)
        state = json.loads((Path(config.state_dir) / "state.json").read_text())
        gpus = {x["bdf"]: x["id"] for x in state["devices"] if x["kind"] == "gpu"}
        assert len(gpus) == 8 and gpus[OFF_BUS] == "gpu0"
        off = [f for f in state["findings"] if f["code"] == "FELL_OFF_BUS"]
        assert [(f["severity"], f["subjects"]) for f in off] == [("critical", ["gpu0"])]
        assert one(d.metrics(), "topoagent_devices", kind="gpu") == 8
    finally:
        d.stop()
