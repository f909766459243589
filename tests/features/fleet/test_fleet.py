"""Fingerprints, baselines, ``scan --expect`` and ``topoagent fleet`` on DGX H100 hosts of one
build: the good build under other names, and three faulty copies (tests/fleet_hosts.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import msgspec
import pytest

from tests.fleet_hosts import VARIANTS, description, host_root
from tests.paths import REPO
from topoagent.core.analysis.fingerprint import (
    Baseline,
    SlotFacts,
    SlotLink,
    fingerprint,
    read_expectation,
)
from topoagent.core.api import scan
from topoagent.core.findings import CATALOGUE
from topoagent.core.findings.doc import example_text
from topoagent.core.findings.expect import compare
from topoagent.core.pci import DeviceKind
from topoagent.core.result import with_expected
from topoagent.features.fleet.tally import FleetTally

GPU0 = "s0.r1/01.0/00.0/01.0/00.0/00.0/00.0"  # GPU0's slot: socket 0, second root bus, 2-level switch
NIC0 = "s0.r1/01.0/00.0/00.0/00.0"  # its rail NIC


def run_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "topoagent", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def roots(module_tmp):
    base = module_tmp / "hosts"
    out = {v: host_root(v, base / v, hostname=f"dgx-{v}") for v in VARIANTS}
    out["good-twin"] = host_root("good", base / "good-twin", hostname="dgx-twin-77")
    return out


@pytest.fixture(scope="module")
def results(roots):
    return {name: scan(str(root), nvml="off") for name, root in roots.items()}


@pytest.fixture(scope="module")
def baseline_file(roots, module_tmp):
    path = module_tmp / "dgx-h100.json"
    p = run_cli("baseline", "--root", str(roots["good"]), "-o", str(path))
    assert p.returncode == 0, p.stderr
    return path


def test_the_twin_differs_only_in_what_the_fingerprint_leaves_out(results):
    good, twin = results["good"], results["good-twin"]
    assert good.snapshot.hostname != twin.snapshot.hostname
    assert good.baseline.fingerprint == twin.baseline.fingerprint
    assert (
        good.baseline.hw_class
        == twin.baseline.hw_class
        == ("NVIDIA DGXH100 / 2x Intel(R) Xeon(R) Platinum 8480C / gpu 10de:2330 / nic 15b3:1021,8086:1572")
    )


@pytest.mark.parametrize("variant", ["gpu-x8", "nic-moved", "gpu-gone", "acs-on"])
def test_each_fault_changes_the_fingerprint_not_the_class(results, variant):
    assert results[variant].baseline.fingerprint != results["good"].baseline.fingerprint
    assert results[variant].baseline.hw_class == results["good"].baseline.hw_class


def test_the_fixture_description_is_unchanged_by_the_good_variant(results):
    # tests/fleet_hosts.py rebuilds the first rail by hand: it must be the golden dgx-h100.
    golden = json.loads((REPO / "tests/golden/dgx-h100/scan.json").read_text())
    assert results["good"].baseline.fingerprint == golden["host"]["fingerprint"]
    assert description("good")["rootbus"][0]["id"] == "0000:15"


def test_no_host_identity_enters_the_facts(results):
    text = msgspec.json.encode(results["good"].baseline.slots).decode()
    for secret in ("dgx-good", "0000:1b:00.0", "1b:00.0", "mlx5_", "ibp"):
        assert secret not in text


def test_the_catalogue_examples_are_scan_expect_on_the_faulty_copies(results):
    """docs/findings.md's EXPECT_* examples are what scan --expect says of these hosts."""
    good = results["good"].baseline
    said = {example_text(f) for v in VARIANTS for f in with_expected(results[v], good).findings}
    for code, entry in CATALOGUE.items():
        if entry.family == "expect":
            assert [x.text for x in entry.examples if x.text not in said] == [], code


def _slot(**kw) -> SlotFacts:
    base = {
        "slot": GPU0,
        "kind": DeviceKind.GPU,
        "model": "10de:2330",
        "numa_node": 0,
        "socket": 0,
        "link": SlotLink(16, 16, 32.0),
        "acs": [],  # read as root: no ACS bit set
        "iommu": "identity",  # read from a host tree
        "nvlinks": 18,
        "rail": NIC0,
        "rail_path": "PIX",
        "nic_paths": {NIC0: "PIX"},
    }
    return SlotFacts(**{**base, **kw})


def _baseline(*slots: SlotFacts, peers: bool | None = True) -> Baseline:
    return Baseline(hw_class="c", fingerprint=fingerprint(peers, list(slots)), peer_memory=peers, slots=list(slots))


@pytest.mark.parametrize(
    "seen, code, evidence",
    [
        (_slot(link=SlotLink(8, 8, 32.0)), "EXPECT_LINK", "expected 16, seen 8"),  # at the device's own max
        (_slot(link=SlotLink(16, 16, 16.0)), "EXPECT_LINK", "expected 32.0, seen 16.0"),
        (_slot(numa_node=1, socket=1), "EXPECT_PLACEMENT", "expected 0, seen 1"),
        (_slot(rail_path="PXB"), "EXPECT_PATH", "expected PIX, seen PXB"),
        (_slot(nic_paths={NIC0: "SYS"}), "EXPECT_PATH", "expected PIX, seen SYS"),
        (_slot(acs=["ReqRedir", "CmpltRedir"]), "EXPECT_STATE", "expected [], seen [ReqRedir,CmpltRedir]"),
        (_slot(iommu="DMA"), "EXPECT_STATE", "expected identity, seen DMA"),
        (_slot(iommu="none"), "EXPECT_STATE", "expected identity, seen none"),  # IOMMU turned off
        (_slot(nvlinks=12), "EXPECT_LINK", "expected 18, seen 12"),
    ],
)
def test_compare_table(seen, code, evidence):
    found = compare(_baseline(_slot()), _baseline(seen))
    assert [f.code for f in found] == [code]
    assert found[0].subjects == (GPU0,)
    assert any(e.value == evidence for e in found[0].evidence), found[0].evidence


def test_compare_links_are_minimums_and_equal_hosts_give_nothing():
    assert compare(_baseline(_slot()), _baseline(_slot())) == ()
    assert compare(_baseline(_slot(link=SlotLink(8, 16, 16.0))), _baseline(_slot())) == ()


@pytest.mark.parametrize("expected, seen", [([], None), (None, []), (None, ["ReqRedir"]), (["ReqRedir"], None)])
def test_compare_skips_acs_unknown_on_either_side(expected, seen):
    # None: the extended config space was unreadable (a scan without root), not "no ACS"
    assert compare(_baseline(_slot(acs=expected)), _baseline(_slot(acs=seen))) == ()


@pytest.mark.parametrize("expected, seen", [("identity", None), (None, "DMA"), ("none", None), (None, "none")])
def test_compare_skips_iommu_unknown_on_either_side(expected, seen):
    # None: pasted output shows no IOMMU; "none": a host tree shows the device in no IOMMU group
    assert compare(_baseline(_slot(iommu=expected)), _baseline(_slot(iommu=seen))) == ()


def test_iommu_is_none_from_a_host_tree_without_groups_and_unknown_from_a_paste(tmp_path):
    from tests.fakesysfs import generate
    from topoagent.core.api import analyse, read_offline

    no_iommu = scan(str(generate("cloud-vm", tmp_path / "vm")), nvml="off").baseline  # iommu = "none"
    assert no_iommu.slots and all(s.iommu == "none" for s in no_iommu.slots)
    paste = (REPO / "tests/core/parse/samples/nvsmi/dgx_a100_nv12_12nic_spaces.txt").read_text()
    pasted = analyse(read_offline(nvidia_smi_topo=paste)).baseline
    assert pasted.slots and all(s.iommu is None for s in pasted.slots)


def test_unprivileged_scan_tells_acs_unknown_and_matches_a_root_baseline(results, tmp_path):
    from tests.fakesysfs import generate

    desc = description("good", hostname="dgx-unprivileged")
    desc["machine"]["config"] = 64  # what a reader without root gets of each config file
    seen = scan(str(generate(desc, tmp_path / "unprivileged")), nvml="off").baseline
    good = results["good"].baseline
    acs = {s.slot: s.acs for s in good.slots}
    assert acs[GPU0] == [] and acs[GPU0.rsplit("/", 1)[0]] == []  # root: none set, and no capability
    assert all(s.acs is None for s in seen.slots)  # unknown, not none
    assert seen.fingerprint != good.fingerprint  # scans made alike compare alike (docs/fleet.md)
    assert compare(good, seen) == ()
    # In a fleet its group keeps its own fingerprint but is no odd host: nothing to act on.
    t = FleetTally()
    for i, b in enumerate([good] * 3 + [seen]):
        t.add(f"h{i}", b.hw_class, b.fingerprint, lambda b=b: b)
    verdict = t.verdict()
    assert verdict.outliers == () and [(c.fingerprint, c.expected, c.matches) for c in verdict.classes] == [
        (good.fingerprint, True, True),
        (seen.fingerprint, False, True),
    ]


def test_a_majority_scanned_without_root_does_not_hide_a_root_hosts_acs_fault():
    """Against an expectation that knows no ACS, a root host's ACS redirect is no difference
    compare() can show, but the host knows more than the expectation: it stays an outlier
    (with nothing listed) instead of matching, while the unprivileged twins match."""
    unknown = _baseline(_slot(acs=None))
    good, bad = _baseline(_slot()), _baseline(_slot(acs=["ReqRedir", "CmpltRedir"]))
    t = FleetTally()
    for i, b in enumerate([unknown] * 3 + [good] * 2 + [bad]):
        t.add(f"h{i}", b.hw_class, b.fingerprint, lambda b=b: b)
    verdict = t.verdict()
    assert {c.fingerprint: c.matches for c in verdict.classes} == {
        unknown.fingerprint: True,
        good.fingerprint: False,
        bad.fingerprint: False,
    }
    assert [o.host for o in verdict.outliers] == ["h3", "h4", "h5"]


def test_compare_a_moved_device_compares_its_other_facts():
    nic = SlotFacts(
        slot=NIC0, kind=DeviceKind.NIC, model="15b3:1021", numa_node=0, socket=0, link=SlotLink(16, 16, 32), acs=[]
    )
    moved = msgspec.structs.replace(nic, slot="s1.r7/01.0/00.0", link=SlotLink(8, 16, 32), acs=["ReqRedir"])
    # the GPU moved too, with fewer NVLinks; its rail is the moved NIC, as expected
    gpu = _slot(slot="s0.r2/01.0/00.0", nvlinks=12, rail=moved.slot, nic_paths={moved.slot: "PIX"})
    found = compare(_baseline(_slot(), nic), _baseline(moved, gpu))
    by_code = sorted((f.code, f.subjects) for f in found)
    assert by_code == [
        ("EXPECT_LINK", ("s0.r2/01.0/00.0",)),
        ("EXPECT_LINK", ("s1.r7/01.0/00.0",)),
        ("EXPECT_PLACEMENT", (NIC0, "s1.r7/01.0/00.0")),
        ("EXPECT_PLACEMENT", (GPU0, "s0.r2/01.0/00.0")),
        ("EXPECT_STATE", ("s1.r7/01.0/00.0",)),
    ]
    values = {e.path: e.value for f in found for e in f.evidence}
    assert values["slot s1.r7/01.0/00.0: link width"] == "expected 16, seen 8"
    assert values["slot s1.r7/01.0/00.0: acs"] == "expected [], seen [ReqRedir]"
    assert values["slot s0.r2/01.0/00.0: nvlinks"] == "expected 18, seen 12"


def test_compare_missing_extra_moved_and_peer_memory():
    nic = SlotFacts(slot=NIC0, kind=DeviceKind.NIC, model="15b3:1021", numa_node=0, socket=0, link=SlotLink(16, 16, 32))
    moved = msgspec.structs.replace(nic, slot="s1.r7/01.0/00.0", numa_node=1, socket=1)
    nvme = SlotFacts(
        slot="s1.r0/02.0/00.0", kind=DeviceKind.NVME, model="144d:a80a", numa_node=1, socket=1, link=SlotLink(4, 4, 16)
    )
    found = {f.code: f for f in compare(_baseline(_slot(), nic), _baseline(moved, nvme, peers=False))}
    assert set(found) == {"EXPECT_PLACEMENT", "EXPECT_DEVICE_MISSING", "EXPECT_DEVICE_EXTRA", "EXPECT_STATE"}
    assert found["EXPECT_PLACEMENT"].subjects == (NIC0, "s1.r7/01.0/00.0")
    assert (
        found["EXPECT_DEVICE_MISSING"].subjects == (GPU0,)
        and found["EXPECT_DEVICE_MISSING"].severity.label == "critical"
    )
    assert found["EXPECT_DEVICE_EXTRA"].severity.label == "warning"
    assert found["EXPECT_STATE"].evidence[0].value == "expected True, seen False"


def test_baseline_file_round_trips_and_matches_its_schema(baseline_file, results):
    jsonschema = pytest.importorskip("jsonschema")
    doc = json.loads(baseline_file.read_text())
    jsonschema.validate(doc, json.loads((REPO / "topoagent/schema/baseline.schema.json").read_text()))
    assert read_expectation(baseline_file.read_bytes()).slots == results["good"].baseline.slots
    assert doc["host"] == "dgx-good" and doc["fingerprint"] == results["good"].baseline.fingerprint


def test_baseline_from_a_scan_json_equals_the_host_one(baseline_file, roots, tmp_path):
    scan_json = tmp_path / "scan.json"
    scan_json.write_text(run_cli("scan", "--root", str(roots["good"]), "--format", "json").stdout)
    p = run_cli("baseline", "--from-json", str(scan_json))
    assert p.returncode == 0, p.stderr
    assert p.stdout == baseline_file.read_text()


@pytest.mark.parametrize(
    "variant, code, slot, expected, seen",
    [
        ("gpu-x8", "EXPECT_LINK", GPU0, "16", "8"),
        ("nic-moved", "EXPECT_PLACEMENT", NIC0, "s0.r1/01.0/00.0/00.0/00.0", "s1.r7/01.0/00.0"),
        ("nic-moved", "EXPECT_PATH", GPU0, "PIX", "NODE"),
        ("gpu-gone", "EXPECT_DEVICE_MISSING", GPU0, "gpu 10de:2330", "None"),
        ("acs-on", "EXPECT_STATE", GPU0.rsplit("/", 1)[0], "[]", "[ReqRedir,CmpltRedir]"),
    ],
)
def test_scan_expect_names_the_slot_and_both_values(roots, baseline_file, variant, code, slot, expected, seen):
    p = run_cli(
        "scan",
        "--root",
        str(roots[variant]),
        "--expect",
        str(baseline_file),
        "--format",
        "json",
        "--fail-on",
        "warning",
    )
    assert p.returncode == 1, p.stderr
    found = [f for f in json.loads(p.stdout)["findings"] if f["code"] == code]
    assert any(
        slot in f["message"]
        and any(
            e["path"].startswith(f"slot {slot}") and e["value"] == f"expected {expected}, seen {seen}"
            for e in f["evidence"]
        )
        for f in found
    ), found


def test_scan_expect_is_quiet_on_a_twin_and_fails_cleanly_on_bad_files(roots, baseline_file, tmp_path):
    p = run_cli("scan", "--root", str(roots["good-twin"]), "--expect", str(baseline_file), "--format", "json")
    assert p.returncode == 0 and not [f for f in json.loads(p.stdout)["findings"] if f["code"].startswith("EXPECT")]
    (tmp_path / "x.json").write_text("{}")
    for bad in (str(tmp_path / "x.json"), str(tmp_path / "absent.json")):
        p = run_cli("scan", "--root", str(roots["good"]), "--expect", bad)
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--expect" in p.stderr, p.stderr


@pytest.fixture(scope="module")
def fleet_dir(results, module_tmp):
    """300 copies of the good host's scan JSON under other names, plus the three faulty hosts."""
    from topoagent.core.render.json_report import render

    d = module_tmp / "fleet"
    d.mkdir()
    doc = json.loads(render(results["good"]))
    for i in range(300):
        doc["host"]["hostname"] = f"node-{i:03d}"
        (d / f"node-{i:03d}.json").write_text(json.dumps(doc))
    for v in ("gpu-x8", "nic-moved", "gpu-gone"):
        (d / f"{v}.json").write_text(render(results[v]))
    return d


REASONS = {
    "dgx-gpu-x8": {"EXPECT_LINK"},
    "dgx-nic-moved": {"EXPECT_PLACEMENT", "EXPECT_PATH", "EXPECT_DEVICE_EXTRA", "EXPECT_LINK"},
    "dgx-gpu-gone": {"EXPECT_DEVICE_MISSING", "EXPECT_LINK"},
}


def test_fleet_json_reports_exactly_the_three_hosts(fleet_dir):
    p = run_cli("fleet", str(fleet_dir), "--format", "json")
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    assert doc["hosts"] == 303 and doc["unreadable"] == []
    majority = [c for c in doc["classes"] if c["expected"]]
    assert len(majority) == 1 and len(majority[0]["hosts"]) == 300
    assert {o["host"]: {f["code"] for f in o["findings"]} for o in doc["outliers"]} == REASONS
    gone = next(o for o in doc["outliers"] if o["host"] == "dgx-gpu-gone")
    assert any(GPU0 in f["message"] for f in gone["findings"] if f["code"] == "EXPECT_DEVICE_MISSING")


def test_fleet_text_and_stdin_list_and_explicit_expect(fleet_dir, baseline_file):
    listing = "\n".join(str(p) for p in sorted(fleet_dir.glob("*.json"))) + "\n"
    p = run_cli("fleet", "--expect", str(baseline_file), stdin=listing)
    assert p.returncode == 1, p.stderr
    assert p.stdout.startswith("303 host(s), 1 hardware class(es), 4 fingerprint(s), 3 outlier(s)")
    outliers = [ln.split(":")[0] for ln in p.stdout.splitlines() if ": fingerprint " in ln]
    assert outliers == ["dgx-gpu-gone", "dgx-gpu-x8", "dgx-nic-moved"]
    assert f"[EXPECT_LINK] gpu 10de:2330 at slot {GPU0}: link width 8 below the expected 16" in p.stdout


def test_fleet_reads_captures_and_names_unreadable_files(roots, fleet_dir, tmp_path):
    (tmp_path / "junk.json").write_text("not json")
    p = run_cli(
        "fleet",
        str(roots["gpu-x8"]),
        str(fleet_dir / "node-000.json"),
        str(fleet_dir / "node-001.json"),
        str(tmp_path / "junk.json"),
        "--format",
        "json",
    )
    doc = json.loads(p.stdout)
    assert doc["hosts"] == 3 and [u["file"] for u in doc["unreadable"]] == [str(tmp_path / "junk.json")]
    assert [o["host"] for o in doc["outliers"]] == ["gpu-x8"]  # a capture is named by its file
    p = run_cli("fleet", str(tmp_path / "junk.json"))
    assert p.returncode == 2 and "no host could be read" in p.stderr


def test_fleet_compares_the_readable_hosts_and_names_each_unreadable_one(fleet_dir, tmp_path):
    (tmp_path / "junk.json").write_text("not json")
    names = [str(fleet_dir / "node-000.json"), str(tmp_path / "junk.json"), str(tmp_path / "absent.json")]
    p = run_cli("fleet", *names, str(fleet_dir / "node-001.json"), "--format", "json")
    assert p.returncode == 1, p.stderr  # not 2: two hosts were read and compared
    doc = json.loads(p.stdout)
    assert doc["hosts"] == 2 and doc["outliers"] == []
    assert [u["file"] for u in doc["unreadable"]] == names[1:]
    lines = p.stderr.splitlines()
    assert len(lines) == 2 and all(ln.startswith("topoagent: fleet: cannot read ") for ln in lines)
    assert names[1] in lines[0] and names[2] in lines[1] and "No such file" in lines[1]
    p = run_cli("fleet", names[0], str(fleet_dir / "node-001.json"))
    assert p.returncode == 0 and p.stderr == ""


def test_fleet_reads_only_the_magic_bytes_of_a_capture(monkeypatch, tmp_path):
    import os

    from topoagent.features.fleet import command as fleet_cmd

    big = tmp_path / "host.tar.gz"
    with open(big, "wb") as fh:
        fh.write(b"\x1f\x8b\x08")
        fh.truncate(65 * 1024 * 1024)  # sparse: larger than any host's JSON may be
    read = []
    real_read = os.read

    def counted(fd, n):
        data = real_read(fd, n)
        read.append(len(data))
        return data

    monkeypatch.setattr(os, "read", counted)
    monkeypatch.setattr(fleet_cmd, "_scan_capture", lambda path: b"{}")  # the unpacker reads the rest
    assert fleet_cmd._read(str(big)) == (b"{}", True)
    assert sum(read) <= 2


def test_fleet_tally_decodes_facts_once_per_fingerprint(results):
    t = FleetTally()
    calls = []

    def facts(name):
        def load():
            calls.append(name)
            return results[name].baseline

        return load

    for i, v in enumerate(["good"] * 5 + ["gpu-x8"] * 2 + ["good"] * 3):
        b = results[v].baseline
        t.add(f"h{i}", b.hw_class, b.fingerprint, facts(v))
    assert calls == ["good", "gpu-x8"]
    v = t.verdict()
    assert v.hosts == 10 and [o.host for o in v.outliers] == ["h5", "h6"]


def test_fleet_html_page_names_the_outliers_and_escapes(fleet_dir):
    from html.parser import HTMLParser

    p = run_cli("fleet", str(fleet_dir), "--format", "html")
    assert p.returncode == 1, p.stderr
    HTMLParser().feed(p.stdout)  # parses
    assert p.stdout.startswith("<!DOCTYPE html>") and "<script" not in p.stdout and "http" not in p.stdout
    for host in REASONS:
        assert f"<h2>{host} <code>" in p.stdout
    assert "Intel(R) Xeon(R)" in p.stdout and "EXPECT_DEVICE_MISSING" in p.stdout


def test_daemon_exports_the_fingerprint_and_compares_with_its_expect_file(roots, results, baseline_file, tmp_path):
    from prometheus_client.parser import text_string_to_metric_families

    from tests.features.daemon.test_daemon_parts import _status
    from topoagent.features.daemon import config as cfgmod
    from topoagent.features.daemon.exports import nfd_features
    from topoagent.features.daemon.loop import default_scan
    from topoagent.features.daemon.metrics import render_text

    good = results["good"].baseline
    fams = {f.name: f for f in text_string_to_metric_families(render_text(_status(results["good"])).decode())}
    (sample,) = fams["topoagent_topology_info"].samples
    assert sample.labels == {"hw_class": good.hw_class, "fingerprint": good.fingerprint} and sample.value == 1
    labels = nfd_features(results["good"], degraded_links=False)
    assert labels["topoagent.fingerprint"] == good.fingerprint and len(labels["topoagent.hw-class"]) == 16

    conf = tmp_path / "config.toml"
    conf.write_text(f'root = "{roots["gpu-x8"]}"\nnvml = false\nexpect = "{baseline_file}"\nexpected_gpus = 8\n')
    config = cfgmod.load(str(conf))
    codes = {f.code for f in default_scan(config).findings}
    assert "EXPECT_LINK" in codes
    conf.write_text(f'expect = "{tmp_path / "absent.json"}"\nroot = "{roots["good"]}"\nnvml = false\n')
    with pytest.raises(Exception, match="absent.json"):
        default_scan(cfgmod.load(str(conf)))


def test_fleet_outputs_treat_a_hostile_fingerprint_as_data():
    """A fingerprint (and a host name) comes from files nobody here wrote: the HTML page escapes
    it and the text shows no raw control character."""
    from topoagent.features.fleet.report import render_html, render_text
    from topoagent.features.fleet.tally import FleetClass, FleetVerdict, Outlier

    evil = "<script>x</script>\x1b[31m"
    v = FleetVerdict(1, (FleetClass("c", evil, ("h\x1b[2J",), False),), (Outlier("h\x1b[2J", "c", evil, ()),))
    page = render_html(v, [])
    assert "<script>" not in page and "&lt;script&gt;" in page
    text = render_text(v, [])
    assert "\x1b" not in text and "\\x1b" in text


@pytest.mark.parametrize("version", ["2", '"banana"', "null", "1.5", None])
def test_a_baseline_of_an_unknown_schema_version_is_refused(baseline_file, roots, tmp_path, version):
    """Issue 31 item 8: schema_version was never read (2, "banana", null, 1.5 were accepted)."""
    doc = json.loads(baseline_file.read_text())
    text = json.dumps(doc).replace('"schema_version": 1', "" if version is None else f'"schema_version": {version}')
    if version is None:
        text = text.replace("{, ", "{").replace("{,", "{")
    bad = tmp_path / "baseline.json"
    bad.write_text(text)
    proc = run_cli("scan", "--root", str(roots["good"]), "--no-nvml", "--expect", str(bad))
    assert proc.returncode == 2 and "schema_version" in proc.stderr and len(proc.stderr.splitlines()) == 1, proc.stderr
    fleet = run_cli("fleet", str(bad))
    assert fleet.returncode == 2 and "schema_version" in fleet.stderr, fleet.stderr


def test_a_document_nested_thousands_deep_is_one_line(baseline_file, roots, tmp_path):
    """Issue 31 item 6: 1,000-deep nesting in a field msgspec skips raised RecursionError."""
    doc = baseline_file.read_text().rstrip().rstrip("}") + ', "extra": ' + "[" * 5000 + "]" * 5000 + "}"
    deep = tmp_path / "deep.json"
    deep.write_text(doc)
    for args in (
        ("scan", "--root", str(roots["good"]), "--no-nvml", "--expect", str(deep)),
        ("baseline", "--from-json", str(deep)),
        ("fleet", str(deep)),
    ):
        proc = run_cli(*args)
        assert proc.returncode == 2 and "nested too deeply" in proc.stderr and "Traceback" not in proc.stderr, args
