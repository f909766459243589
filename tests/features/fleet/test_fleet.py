"""Fingerprints, baselines, ``scan --expect`` and ``topoagent fleet`` on DGX H100 hosts of one
build: the dgx-h100 fixture's tree, read once, and copies of its snapshot with one difference
each (tests/fleet_hosts.py): harmless ones, and one per fault kind of issue 32."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import msgspec
import pytest

from tests.fleet_hosts import (
    FAULTS,
    FAULTY,
    GPU0_SLOT,
    HARMLESS,
    MOVED,
    NIC0_SLOT,
    VARIANTS,
    variant,
    variant_result,
)
from tests.paths import REPO
from topoagent.core.analysis.fingerprint import class_related
from topoagent.core.api import read_host
from topoagent.core.baseline import (
    MAX_SLOTS,
    Baseline,
    SlotFacts,
    SlotLink,
    fingerprint,
    read_expectation,
    read_head,
)
from topoagent.core.findings import CATALOGUE, Severity
from topoagent.core.findings.doc import example_text
from topoagent.core.findings.expect import compare, compare_hosts
from topoagent.core.pci import DeviceKind
from topoagent.core.render.json_report import render
from topoagent.core.result import analyse, with_expected
from topoagent.features.fleet.tally import FleetTally

CLASS = "NVIDIA DGXH100 / 2x Intel(R) Xeon(R) Platinum 8480C / gpu 10de:2330"


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
def good(fixture_root):
    """The dgx-h100 fixture as the reader reads it (NVML off): every variant is a copy of it."""
    return read_host(fixture_root("dgx-h100"), nvml="off")


@pytest.fixture(scope="module")
def results(good):
    return {name: variant_result(good, name) for name in VARIANTS}


def _doc(result, hostname: str | None = None) -> bytes:
    """A host's scan JSON, as ``fleet`` reads it (under another host name where given)."""
    if hostname is not None:
        result = analyse(msgspec.structs.replace(result.snapshot, hostname=hostname))
    return render(result).encode()


def _tally(hosts, expected=None) -> FleetTally:
    """A fleet of ``(name, scan JSON bytes)``, read as ``fleet`` reads each file."""
    t = FleetTally(expected)
    for name, data in hosts:
        t.add(name, f"{name}.json", read_head(data))
    return t


@pytest.fixture(scope="module")
def fleet_docs(results):
    """30 good hosts (JSON as each daemon writes it) and one host of every other variant."""
    base = json.loads(_doc(results["good"]))
    docs = []
    for i in range(30):
        base["host"]["hostname"] = f"node-{i:03d}"
        docs.append((f"node-{i:03d}", json.dumps(base).encode()))
    docs += [(f"dgx-{v}", _doc(results[v])) for v in (*HARMLESS, *FAULTY) if v != "good"]
    return docs


# -- the fingerprint and the class ------------------------------------------------------------------


def test_harmless_differences_keep_the_fingerprint(results):
    good = results["good"].baseline
    assert good.hw_class == CLASS
    for name in ("idle", "renamed", "reserved"):
        assert results[name].baseline.fingerprint == good.fingerprint, name
    twin = analyse(msgspec.structs.replace(results["good"].snapshot, hostname="dgx-twin-77"))
    assert twin.baseline.fingerprint == good.fingerprint


@pytest.mark.parametrize("name", FAULTY)
def test_each_fault_changes_the_fingerprint_not_the_class(results, name):
    """Issue 32 item 2: the class is the board, CPUs and GPU models, never the full device set,
    so losing the only management NIC (its model's last device) keeps the host in its class."""
    assert results[name].baseline.fingerprint != results["good"].baseline.fingerprint
    assert results[name].baseline.hw_class == CLASS


def test_the_good_copy_is_the_golden_fixture(results):
    golden = json.loads((REPO / "tests/golden/dgx-h100/scan.json").read_text())
    assert results["good"].baseline.fingerprint == golden["host"]["fingerprint"]
    assert golden["host"]["shape"]["threads_per_core"] == 2 and len(golden["host"]["shape"]["nodes"]) == 2


def test_no_host_identity_enters_the_facts(results):
    text = msgspec.json.encode([results["good"].baseline.slots, results["good"].baseline.shape]).decode()
    for secret in ("dgx-good", "0000:1b:00.0", "1b:00.0", "mlx5_", "ibp"):
        assert secret not in text


def test_the_fingerprint_covers_the_cpus_and_numa_layout(results):
    """Issue 32 item 6: 35 of 44 real captures shared the fingerprint of an empty slot list."""
    good = results["good"].baseline
    for name in ("smt-off", "dimm-lost"):  # no slot changes: only the shape tells them apart
        assert results[name].baseline.slots == good.slots, name
        assert results[name].baseline.shape != good.shape, name


def test_real_trees_are_named_by_what_their_kernel_says(real_tree_roots):
    """Machines without DMI or a ``model name`` line fell into one class ("unknown system / Nx
    unknown CPU"); hosts without PCI devices of interest shared one fingerprint."""
    from topoagent.core.api import scan

    seen = {name: scan(str(root), nvml="off").baseline for name, root in real_tree_roots.items()}
    assert seen["nvidiagpunumanodes"].hw_class.startswith("PowerNV 8335-GTW / 2x POWER9")
    assert seen["nvidiagpunumanodes"].shape.threads_per_core == 4
    for b in seen.values():
        assert "unknown CPU" not in b.hw_class, b.hw_class
    assert len({b.fingerprint for b in seen.values()}) == len(seen)


@pytest.mark.parametrize(
    "small, big, related",
    [
        (CLASS, CLASS, True),
        ("NVIDIA DGXH100 / 2x unknown CPU / gpu 10de:2330", CLASS, True),  # an old capture
        ("unknown system / 2x Intel(R) Xeon(R) Platinum 8480C / gpu 10de:2330", CLASS, True),
        ("NVIDIA DGXH100 / 2x Intel(R) Xeon(R) Platinum 8480C", CLASS, True),  # its last GPU model lost
        ("NVIDIA DGXH100 / 1x Intel(R) Xeon(R) Platinum 8480C / gpu 10de:2330", CLASS, False),
        ("NVIDIA DGXA100 / 2x AMD EPYC 7742 64-Core Processor / gpu 10de:20b0", CLASS, False),
        (CLASS, "NVIDIA DGXH100 / 2x Intel(R) Xeon(R) Platinum 8480C", False),
    ],
)
def test_related_classes(small, big, related):
    assert class_related(small, big) is related


# -- one cause, one finding -----------------------------------------------------------------------


@pytest.mark.parametrize("name", FAULTY)
def test_each_fault_is_one_finding_naming_its_cause(results, name):
    """Issue 32 items 1 and 5: a device fallen off the bus is found (its link read 63 lanes and
    passed), an IOMMU mode change is one finding, not one per function; SNC turned on one, a
    root complex on the other socket one (slot names did not shift: no switch 'missing')."""
    found = compare(results["good"].baseline, results[name].baseline)
    code, subject = FAULTS[name]
    assert [(f.code, f.subjects[0]) for f in found] == [(code, subject)], [example_text(f) for f in found]


@pytest.mark.parametrize("name", HARMLESS)
def test_harmless_copies_show_no_difference_either_way(results, name):
    good, seen = results["good"].baseline, results[name].baseline
    assert compare(good, seen) == () and compare(seen, good) == ()


def test_the_catalogue_examples_are_scan_expect_on_the_faulty_copies(results, fixture_root):
    """docs/findings.md's EXPECT_* examples are what scan --expect says of these hosts (and of
    the dgx-h100 against another class's baseline)."""
    from topoagent.core.api import scan

    good = results["good"].baseline
    said = {example_text(f) for v in (*FAULTY, *MOVED) for f in with_expected(results[v], good).findings}
    said |= {
        example_text(f)
        for f in with_expected(results["good"], scan(fixture_root("cloud-vm"), nvml="off").baseline).findings
    }
    for code, entry in CATALOGUE.items():
        if entry.family == "expect":
            assert [x.text for x in entry.examples if x.text not in said] == [], code


def test_a_class_mismatch_is_one_finding(results, fixture_root):
    from topoagent.core.api import scan

    other = scan(fixture_root("cloud-vm"), nvml="off").baseline
    found = compare_hosts(other, results["good"].baseline)
    assert [f.code for f in found] == ["EXPECT_CLASS"]
    assert len(compare(other, results["good"].baseline)) > 5  # what would have been listed


def test_an_expectation_whose_slot_names_hold_5000_digits_is_compared(results):
    """Issue 44: a root bus ordinal of 5,000 digits in an expected topology (``s0.r9…9``, a
    user's file) made ``scan --expect`` an internal error: a finding's subject sort read it as a
    number."""
    good = results["good"].baseline
    big = "s0.r" + "9" * 5000
    slots = [msgspec.structs.replace(s, slot=s.slot.replace("s0.r0", big, 1)) for s in good.slots]
    found = with_expected(results["good"], msgspec.structs.replace(good, slots=slots)).findings
    assert any(big in " ".join(f.subjects) for f in found if f.code.startswith("EXPECT_"))


def _slot(**kw) -> SlotFacts:
    base = {
        "slot": GPU0_SLOT,
        "kind": DeviceKind.GPU,
        "model": "10de:2330",
        "numa_node": 0,
        "socket": 0,
        "link": SlotLink(16, 16, 32.0),
        "acs": [],  # read as root: no ACS bit set
        "iommu": "identity",  # read from a host tree
        "nvlinks": 18,
        "rail": NIC0_SLOT,
        "rail_path": "PIX",
        "nic_paths": {NIC0_SLOT: "PIX"},
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
        (_slot(nic_paths={NIC0_SLOT: "SYS"}), "EXPECT_PATH", "expected PIX, seen SYS"),
        (_slot(acs=["ReqRedir", "CmpltRedir"]), "EXPECT_STATE", "expected [], seen [ReqRedir,CmpltRedir]"),
        (_slot(iommu="DMA"), "EXPECT_STATE", "expected identity, seen DMA"),
        (_slot(iommu="none"), "EXPECT_STATE", "expected identity, seen none"),  # IOMMU turned off
        (_slot(nvlinks=12), "EXPECT_LINK", "expected 18, seen 12"),
        (_slot(fell_off_bus=True, link=SlotLink(None, None, None)), "EXPECT_DEVICE_MISSING", "seen fell off the bus"),
    ],
)
def test_compare_table(seen, code, evidence):
    found = compare(_baseline(_slot()), _baseline(seen))
    assert [f.code for f in found] == [code]
    assert found[0].subjects == (GPU0_SLOT,)
    assert any(e.value.endswith(evidence) for e in found[0].evidence), found[0].evidence


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


def test_iommu_is_none_from_a_host_tree_without_groups_and_unknown_from_a_paste(fixture_root):
    from topoagent.core.api import analyse as analyse_snapshot
    from topoagent.core.api import read_offline, scan

    no_iommu = scan(fixture_root("cloud-vm"), nvml="off").baseline  # iommu = "none"
    assert no_iommu.slots and all(s.iommu == "none" for s in no_iommu.slots)
    paste = (REPO / "tests/core/parse/samples/nvsmi/dgx_a100_nv12_12nic_spaces.txt").read_text()
    pasted = analyse_snapshot(read_offline(nvidia_smi_topo=paste)).baseline
    assert pasted.slots and all(s.iommu is None for s in pasted.slots) and pasted.shape is None


def test_compare_a_moved_device_compares_its_other_facts():
    nic = SlotFacts(
        slot=NIC0_SLOT, kind=DeviceKind.NIC, model="15b3:1021", numa_node=0, socket=0, link=SlotLink(16, 16, 32), acs=[]
    )
    moved = msgspec.structs.replace(nic, slot="s1.r7/01.0/00.0", link=SlotLink(8, 16, 32), acs=["ReqRedir"])
    # the GPU moved too, with fewer NVLinks; its rail is the moved NIC, as expected
    gpu = _slot(slot="s0.r2/01.0/00.0", nvlinks=12, rail=moved.slot, nic_paths={moved.slot: "PIX"})
    found = compare(_baseline(_slot(), nic), _baseline(moved, gpu))
    by_code = sorted((f.code, f.subjects) for f in found)
    assert by_code == [
        ("EXPECT_LINK", ("s0.r2/01.0/00.0",)),
        ("EXPECT_LINK", ("s1.r7/01.0/00.0",)),
        ("EXPECT_PLACEMENT", (NIC0_SLOT, "s1.r7/01.0/00.0")),
        ("EXPECT_PLACEMENT", (GPU0_SLOT, "s0.r2/01.0/00.0")),
        ("EXPECT_STATE", ("s1.r7/01.0/00.0",)),
    ]
    values = {e.path: e.value for f in found for e in f.evidence}
    assert values["slot s1.r7/01.0/00.0: link width"] == "expected 16, seen 8"
    assert values["slot s1.r7/01.0/00.0: acs"] == "expected [], seen [ReqRedir]"
    assert values["slot s0.r2/01.0/00.0: nvlinks"] == "expected 18, seen 12"


def test_compare_missing_extra_moved_and_peer_memory():
    nic = SlotFacts(
        slot=NIC0_SLOT, kind=DeviceKind.NIC, model="15b3:1021", numa_node=0, socket=0, link=SlotLink(16, 16, 32)
    )
    moved = msgspec.structs.replace(nic, slot="s1.r7/01.0/00.0", numa_node=1, socket=1)
    nvme = SlotFacts(
        slot="s1.r0/02.0/00.0", kind=DeviceKind.NVME, model="144d:a80a", numa_node=1, socket=1, link=SlotLink(4, 4, 16)
    )
    found = {f.code: f for f in compare(_baseline(_slot(), nic), _baseline(moved, nvme, peers=False))}
    assert set(found) == {"EXPECT_PLACEMENT", "EXPECT_DEVICE_MISSING", "EXPECT_DEVICE_EXTRA", "EXPECT_STATE"}
    assert found["EXPECT_PLACEMENT"].subjects == (NIC0_SLOT, "s1.r7/01.0/00.0")
    assert found["EXPECT_DEVICE_MISSING"].subjects == (GPU0_SLOT,)
    assert found["EXPECT_DEVICE_MISSING"].severity.label == "critical"
    assert found["EXPECT_DEVICE_EXTRA"].severity.label == "warning"
    assert found["EXPECT_STATE"].evidence[0].value == "expected True, seen False"


def test_a_missing_accelerator_is_critical():
    """Issue 32 item 8: a missing accelerator exited 0 under --fail-on critical (a warning)."""
    acc = SlotFacts(
        slot="s0.r0/03.0/00.0",
        kind=DeviceKind.ACCELERATOR,
        model="8086:0bd5",
        numa_node=0,
        socket=0,
        link=SlotLink(16, 16, 16.0),
    )
    (found,) = compare(_baseline(_slot(), acc), _baseline(_slot()))
    assert (found.code, found.severity.label) == ("EXPECT_DEVICE_MISSING", "critical")


# -- the fleet ----------------------------------------------------------------------------------


def _outliers(v) -> dict[str, list[str]]:
    return {o.host: sorted(f.code for f in o.findings) for o in v.outliers}


def test_every_fault_is_found_once_on_its_host_whatever_the_order(fleet_docs):
    """Issue 32, done when: each fault kind found once, on the right host, with its cause in one
    finding; no host flagged for knowing more; the same result whatever the input order."""
    verdicts = []
    for seed in (0, 1, 2):
        docs = list(fleet_docs)
        random.Random(seed).shuffle(docs)
        verdicts.append(_tally(docs).verdict())
    assert verdicts[0] == verdicts[1] == verdicts[2]
    v = verdicts[0]
    assert _outliers(v) == {f"dgx-{name}": [code] for name, (code, _) in FAULTS.items()}
    for o in v.outliers:
        assert o.findings[0].subjects[0] == FAULTS[o.host[4:]][1]
    (summary,) = v.summaries
    assert summary.majority and summary.hosts == len(fleet_docs)


def test_a_host_that_knows_more_is_never_an_outlier(results):
    """Issue 32 item 4: where 90 % of a class was scanned without root, every root-scanned host
    was flagged with 0 differences.  A root host's ACS fault is still seen."""
    user, root, acs = _doc(results["unprivileged"]), _doc(results["good"]), _doc(results["acs-on"])
    mostly_user = [(f"user-{i}", user) for i in range(9)] + [("root-0", root), ("root-1", root), ("root-acs", acs)]
    v = _tally(mostly_user).verdict()
    assert _outliers(v) == {"root-acs": ["EXPECT_STATE"]}
    mostly_root = [(f"root-{i}", root) for i in range(9)] + [("user-0", user)]
    assert _tally(mostly_root).verdict().outliers == ()


@pytest.mark.parametrize("first, second", [("good", "unprivileged"), ("unprivileged", "good")])
def test_two_hosts_that_agree_where_both_know_are_no_tie(results, first, second):
    """Issue 32 item 3: `fleet root.json user.json` exited 0, the other order 1."""
    v = _tally([(first, _doc(results[first])), (second, _doc(results[second]))]).verdict()
    assert v.outliers == () and v.summaries[0].majority


def test_a_tie_is_no_majority_and_the_order_does_not_decide(results):
    """With one good and one bad host the good one was blamed when read first."""
    a, b = ("good", _doc(results["good"])), ("bad", _doc(results["gpu-x8"]))
    one, other = _tally([a, b]).verdict(), _tally([b, a]).verdict()
    assert one == other
    assert not one.summaries[0].majority and {o.reason for o in one.outliers} == {"no majority"}
    # each side against the other: the x8 link is short of the other's x16, not the other way
    # round (links are minimums), whichever file came first
    assert _outliers(one) == {"bad": ["EXPECT_LINK"]}
    # an expectation decides
    decided = _tally([a, b], expected=results["good"].baseline).verdict()
    assert _outliers(decided) == {"bad": ["EXPECT_LINK"]}


def test_a_class_that_lost_its_last_gpu_is_compared_with_its_siblings(results, good):
    """Issue 32 item 2: losing every device of a model changed the class, so the host became the
    majority of a class of its own."""
    gpus = tuple(f.bdf for f in good.pci if f.class_code == 0x030200)
    lost = analyse(msgspec.structs.replace(good, pci=tuple(f for f in good.pci if f.bdf not in gpus)))
    assert "gpu" not in lost.baseline.hw_class
    docs = [(f"n{i}", _doc(results["good"])) for i in range(5)] + [("lost", _doc(lost))]
    v = _tally(docs).verdict()
    assert _outliers(v) == {"lost": ["EXPECT_DEVICE_MISSING"] * 8}
    assert [c.compared_with for c in v.classes if "lost" in c.hosts] == [CLASS]


def test_an_old_capture_without_the_cpu_name_compares_with_new_scans(results, good):
    """Issue 32 item 7: "1x unknown CPU" and "1x AMD EPYC" never compared."""
    old = analyse(msgspec.structs.replace(good, cpu_model=None))
    assert "unknown CPU" in old.baseline.hw_class
    v = _tally([(f"n{i}", _doc(results["good"])) for i in range(3)] + [("old", _doc(old))]).verdict()
    assert v.outliers == () and len(v.summaries) == 1


def test_a_hosts_own_faults_make_it_an_outlier_unless_the_class_shares_them(results, good):
    """Issue 32 item 1: a fault the host itself reports is shown beside the comparison; one
    most of the class reports is a class-wide condition, shown once."""
    aer = analyse(
        msgspec.structs.replace(
            good,
            pci=tuple(
                msgspec.structs.replace(f, aer=msgspec.structs.replace(f.aer, fatal=3))
                if f.bdf == "0000:18:00.0" and f.aer
                else f
                for f in good.pci
            ),
        )
    )
    codes = {f.code for f in aer.findings}
    assert "PCIE_AER_ERRORS" in codes and aer.baseline.fingerprint == results["good"].baseline.fingerprint
    v = _tally([(f"n{i}", _doc(results["good"])) for i in range(4)] + [("aer", _doc(aer))]).verdict()
    (o,) = v.outliers
    assert (o.host, o.reason, o.findings, [f.code for f in o.own]) == ("aer", "own findings", (), ["PCIE_AER_ERRORS"])
    # the whole class with ACS redirect on (a BIOS default): a class-wide condition, no outliers
    v = _tally([(f"n{i}", _doc(results["acs-on"])) for i in range(4)]).verdict()
    assert v.outliers == () and dict(v.summaries[0].class_findings) == {"ACS_REDIRECT": 4}


def test_fingerprints_are_computed_from_the_facts_not_trusted(results):
    """Issue 31 item 9: a file that claims the majority fingerprint over other slots hid its own
    x4 GPU and became the expectation, so a genuine x8 host matched."""
    claim = results["good"].baseline.fingerprint
    liar = json.loads(_doc(results["gpu-x8"]))
    liar["host"]["fingerprint"] = claim
    docs = [(f"liar-{i}", json.dumps(liar).encode()) for i in range(3)]
    docs += [(f"n{i}", _doc(results["good"])) for i in range(4)] + [("x2", _doc(results["nic-x2"]))]
    v = _tally(docs).verdict()
    assert set(_outliers(v)) == {"liar-0", "liar-1", "liar-2", "x2"}
    assert read_expectation(json.dumps(liar).encode()).fingerprint == results["gpu-x8"].baseline.fingerprint


def test_tally_decodes_each_distinct_slot_list_once(results, monkeypatch):
    from topoagent.features.fleet import tally as tally_mod

    calls = []
    real = tally_mod.decode_slots
    monkeypatch.setattr(tally_mod, "decode_slots", lambda raw: calls.append(1) or real(raw))
    docs = [(f"n{i}", _doc(results["good"], f"n{i}")) for i in range(5)] + [("x8", _doc(results["gpu-x8"]))] * 2
    v = _tally(docs).verdict()
    assert len(calls) == 2 and v.hosts == 7


# -- the command ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fleet_dir(fleet_docs, module_tmp):
    d = module_tmp / "fleet"
    d.mkdir()
    for name, data in fleet_docs:
        (d / f"{name}.json").write_bytes(data)
    return d


@pytest.fixture(scope="module")
def baseline_file(results, module_tmp):
    path = module_tmp / "dgx-h100.json"
    path.write_text(json.dumps(msgspec.to_builtins(results["good"].baseline)))
    return path


def test_fleet_json_names_every_fault_and_its_file(fleet_dir):
    p = run_cli("fleet", str(fleet_dir), "--format", "json")
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    assert doc["hosts"] == 47 and doc["unreadable"] == [] and doc["duplicate_names"] == []
    assert {o["host"]: [f["code"] for f in o["findings"]] for o in doc["outliers"]} == {
        f"dgx-{n}": [c] for n, (c, _) in FAULTS.items()
    }
    off = next(o for o in doc["outliers"] if o["host"] == "dgx-gpu-offbus")
    assert off["file"] == str(fleet_dir / "dgx-gpu-offbus.json")
    assert [f["code"] for f in off["own_findings"]] == ["FELL_OFF_BUS"]


def test_fleet_text_and_stdin_list_and_explicit_expect(fleet_dir, baseline_file):
    listing = "\n".join(str(p) for p in sorted(fleet_dir.glob("*.json"))) + "\n"
    p = run_cli("fleet", "--expect", str(baseline_file), stdin=listing)
    assert p.returncode == 1, p.stderr
    assert p.stdout.startswith(f"47 host(s), 1 hardware class(es), {2 + len(FAULTY)} fingerprint(s), 13 outlier(s)")
    outliers = [ln.split(":")[0] for ln in p.stdout.splitlines() if ": fingerprint " in ln]
    assert outliers == sorted(f"dgx-{n}" for n in FAULTY)
    assert f"[EXPECT_LINK] gpu 10de:2330 at slot {GPU0_SLOT}: link width 8 below the expected 16" in p.stdout
    assert "own CRITICAL [FELL_OFF_BUS]" in p.stdout


def test_fleet_names_hosts_by_file_where_two_claim_one_name(fleet_dir, results, tmp_path):
    """Issue 31 item 10: a file claiming a healthy host's name put its fault on that host."""
    (tmp_path / "impostor.json").write_bytes(_doc(results["gpu-x8"], "node-001"))
    p = run_cli("fleet", *(str(fleet_dir / f"node-{i:03d}.json") for i in range(3)), str(tmp_path / "impostor.json"))
    assert p.returncode == 1
    assert f"node-001 ({tmp_path / 'impostor.json'}): fingerprint" in p.stdout
    files = f"{fleet_dir / 'node-001.json'}, {tmp_path / 'impostor.json'}"
    assert p.stderr.splitlines() == [f"topoagent: fleet: 2 files claim host name node-001: {files}"]


def test_fleet_survives_slots_that_do_not_decode(fleet_dir, tmp_path):
    """Issue 31 item 6: slots of a wrong type, or a state.json from before slot facts, left an
    empty group and fleet failed with KeyError."""
    doc = json.loads((fleet_dir / "node-000.json").read_text())
    (tmp_path / "wrong.json").write_text(json.dumps({**doc, "slots": [{"slot": 1}]}))
    old = {k: v for k, v in doc.items() if k != "slots"}
    (tmp_path / "old.json").write_text(json.dumps(old))
    p = run_cli("fleet", str(fleet_dir / "node-000.json"), str(tmp_path / "wrong.json"), str(tmp_path / "old.json"))
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert p.stdout.startswith("1 host(s)") and len(p.stderr.splitlines()) == 2


def test_fleet_walks_a_very_deep_directory(fleet_dir, tmp_path):
    """Issue 31 item 6: os.walk recursed past the limit ~1,100 levels down (Python 3.10/3.11)."""
    d = here = tmp_path / "deep"
    d.mkdir()
    levels = [d]
    for _ in range(1100):  # os.makedirs (and shutil.rmtree, below) recurse once per level
        here = here / "d"
        here.mkdir()
        levels.append(here)
    (here / "h.json").write_bytes((fleet_dir / "node-000.json").read_bytes())
    try:
        p = run_cli("fleet", str(d))
        assert p.returncode == 0 and p.stdout.startswith("1 host(s)"), p.stderr
    finally:
        (here / "h.json").unlink()
        for level in reversed(levels):
            level.rmdir()


def test_fleet_reads_captures_and_names_unreadable_files(fixture_root, fleet_dir, tmp_path):
    (tmp_path / "junk.json").write_text("not json")
    cap = tmp_path / "dgx-cap.tar.gz"
    assert run_cli("capture", "--root", str(fixture_root("dgx-h100")), "-o", str(cap), "-q").returncode == 0
    p = run_cli(
        "fleet",
        str(cap),
        str(fleet_dir / "node-000.json"),
        str(fleet_dir / "node-001.json"),
        str(tmp_path / "junk.json"),
        "--format",
        "json",
    )
    doc = json.loads(p.stdout)
    assert doc["hosts"] == 3 and [u["file"] for u in doc["unreadable"]] == [str(tmp_path / "junk.json")]
    assert doc["outliers"] == [] and any("dgx-cap" in c["hosts"] for c in doc["classes"])  # named by its file
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
    monkeypatch.setattr(fleet_cmd, "_scan_capture", lambda path: b"{}")  # the archive reader reads the rest
    assert fleet_cmd._read(str(big)) == (b"{}", True)
    assert sum(read) <= 2


def test_fleet_html_page_names_the_outliers_and_escapes(fleet_dir):
    from html.parser import HTMLParser

    p = run_cli("fleet", str(fleet_dir), "--format", "html")
    assert p.returncode == 1, p.stderr
    HTMLParser().feed(p.stdout)  # parses
    assert p.stdout.startswith("<!DOCTYPE html>") and "<script" not in p.stdout and "http" not in p.stdout
    for name in FAULTY:
        assert f"<h2>dgx-{name} <code>" in p.stdout
    assert "Intel(R) Xeon(R)" in p.stdout and "EXPECT_DEVICE_MISSING" in p.stdout and "FELL_OFF_BUS" in p.stdout


def test_fleet_outputs_treat_a_hostile_fingerprint_as_data():
    """A fingerprint (and a host name) comes from files nobody here wrote: the HTML page escapes
    it and the text shows no raw control character."""
    from topoagent.core.baseline import FindingView
    from topoagent.features.fleet.report import render_html, render_text
    from topoagent.features.fleet.tally import ClassSummary, FleetClass, FleetVerdict, Outlier

    evil = "<script>x</script>\x1b[31m"
    own = (FindingView("X\x1b[2J", "critical\n<b>", ["s"], "m\nline"),)
    v = FleetVerdict(
        1,
        (FleetClass("c", evil, ("h\x1b[2J",), False),),
        (Outlier("h\x1b[2J", "f\nx", "c", evil, "differs", (), own),),
        (ClassSummary("c", 1, True, evil),),
    )
    page = render_html(v, [])
    assert "<script>" not in page and "&lt;script&gt;" in page and "<b>" not in page
    text = render_text(v, [])
    assert "\x1b" not in text and "\\x1b" in text and "m\nline" not in text


# -- baseline and scan --expect -----------------------------------------------------------------


def test_baseline_file_round_trips_and_matches_its_schema(fixture_root, results, tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    path = tmp_path / "b.json"
    p = run_cli("baseline", "--root", str(fixture_root("dgx-h100")), "--no-nvml", "-o", str(path))
    assert p.returncode == 0, p.stderr
    doc = json.loads(path.read_text())
    jsonschema.validate(doc, json.loads((REPO / "topoagent/schema/baseline.schema.json").read_text()))
    assert read_expectation(path.read_bytes()) == msgspec.structs.replace(results["good"].baseline, host=doc["host"])
    assert doc["fingerprint"] == results["good"].baseline.fingerprint and doc["shape"]["sockets"] == 2
    # from a scan JSON, the same
    scan_json = tmp_path / "scan.json"
    scan_json.write_text(
        run_cli("scan", "--root", str(fixture_root("dgx-h100")), "--no-nvml", "--format", "json").stdout
    )
    p = run_cli("baseline", "--from-json", str(scan_json))
    assert p.returncode == 0 and p.stdout == path.read_text()


def test_scan_expect_says_it_ran_and_exits_on_a_difference(fixture_root, results, tmp_path):
    """Issue 32 item 8: differences at warning (an extra card, a narrower link) exited 0 under the
    default --fail-on; against a matching baseline nothing said the comparison ran; against
    another class's, 117 findings and no sentence saying the classes differ."""
    root = str(fixture_root("dgx-h100"))
    for name in ("good", "mgmt-gone", "extra-card"):
        (tmp_path / f"{name}.json").write_bytes(_doc(results[name]))
    same = run_cli("scan", "--root", root, "--no-nvml", "--expect", str(tmp_path / "good.json"))
    assert same.returncode == 0, same.stdout
    assert (
        f"Compared with the expected topology of dgx-good (fingerprint {results['good'].baseline.fingerprint}): matches"
        in same.stdout
    )
    # this host has the management NIC the expectation lacks: an extra device, a warning
    extra = run_cli(
        "scan", "--root", root, "--no-nvml", "--expect", str(tmp_path / "mgmt-gone.json"), "--format", "json"
    )
    doc = json.loads(extra.stdout)
    assert extra.returncode == 1 and doc["expectation"]["differences"] == 1
    assert [f["code"] for f in doc["findings"] if f["code"].startswith("EXPECT")] == ["EXPECT_DEVICE_EXTRA"]
    told = run_cli(
        "scan", "--root", root, "--no-nvml", "--expect", str(tmp_path / "mgmt-gone.json"), "--fail-on", "critical"
    )
    assert told.returncode == 0  # asked for critical only
    missing = run_cli("scan", "--root", root, "--no-nvml", "--expect", str(tmp_path / "extra-card.json"))
    assert missing.returncode == 1 and "[EXPECT_DEVICE_MISSING]" in missing.stdout
    other = tmp_path / "vm.json"
    other.write_text(run_cli("baseline", "--root", str(fixture_root("cloud-vm")), "--no-nvml").stdout)
    p = run_cli("scan", "--root", root, "--no-nvml", "--expect", str(other), "--format", "json")
    doc = json.loads(p.stdout)
    assert [f["code"] for f in doc["findings"] if f["code"].startswith("EXPECT")] == ["EXPECT_CLASS"]
    assert doc["expectation"]["compared"] is False and p.returncode == 1


def _per_socket_names(facts):
    """``facts`` as a baseline written before this round names them: root buses numbered per
    socket (``s1.r0`` for the second socket's first), and no shape."""
    heads = {s.slot.split("/")[0] for s in facts.slots if s.slot.startswith("s")}
    roots = sorted(heads, key=lambda r: int(r.partition(".r")[2]))
    names, per = {}, {}
    for r in roots:
        sock = r.split(".")[0]
        names[r] = f"{sock}.r{per.setdefault(sock, 0)}"
        per[sock] += 1

    def rn(slot):
        root, sep, rest = slot.partition("/")
        return names.get(root, root) + sep + rest

    slots = [
        msgspec.structs.replace(
            s,
            slot=rn(s.slot),
            rail=s.rail and rn(s.rail),
            nic_paths=s.nic_paths and {rn(k): v for k, v in s.nic_paths.items()},
        )
        for s in facts.slots
    ]
    assert any(s.slot.startswith("s1.r0") for s in slots)  # the names really differ
    return msgspec.structs.replace(facts, slots=sorted(slots, key=lambda s: s.slot), shape=None)


def test_a_baseline_written_before_host_wide_root_numbers_still_compares(results):
    """Slots used to number root buses per socket; a stored baseline (no shape) of a two-socket
    host must not turn every device of socket 1 into a difference after an upgrade: its root
    buses are renamed, per socket in bus order, as the scan names them.  Its faults are still
    found."""
    old = _per_socket_names(results["good"].baseline)
    assert compare_hosts(old, results["good"].baseline) == ()
    assert [(f.code, f.subjects) for f in compare_hosts(old, results["gpu-x8"].baseline)] == [
        ("EXPECT_LINK", (GPU0_SLOT,))
    ]
    # Another count of root buses per socket: nothing to rename by, so the old names stay and
    # the move is reported device by device (take a new baseline); never silence.
    moved = compare_hosts(old, results["root-moved"].baseline)
    assert "EXPECT_PLACEMENT" in {f.code for f in moved} and any(f.severity is Severity.CRITICAL for f in moved)


def test_a_fleet_halfway_through_the_upgrade_compares_old_and_new_documents(results):
    """state.json files of daemons not yet upgraded (per-socket root numbers, no shape) beside
    new ones: one class, no host an outlier for the naming, a fault on an old host still found."""
    t = FleetTally()
    for i in range(6):
        t.add_facts(f"new-{i}", f"new-{i}.json", results["good"].baseline)
    for i in range(4):
        t.add_facts(f"old-{i}", f"old-{i}.json", _per_socket_names(results["good"].baseline))
    t.add_facts("old-x8", "old-x8.json", _per_socket_names(results["gpu-x8"].baseline))
    v = t.verdict()
    assert [(o.host, [f.code for f in o.findings]) for o in v.outliers] == [("old-x8", ["EXPECT_LINK"])]
    assert v.summaries[0].majority and v.summaries[0].hosts == 11


def test_scan_expect_fails_cleanly_on_bad_files(fixture_root, tmp_path):
    (tmp_path / "x.json").write_text("{}")
    for bad in (str(tmp_path / "x.json"), str(tmp_path / "absent.json")):
        p = run_cli("scan", "--root", str(fixture_root("dgx-h100")), "--no-nvml", "--expect", bad)
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--expect" in p.stderr, p.stderr


def test_an_expectation_with_too_many_slots_is_refused(baseline_file, fixture_root, tmp_path):
    """Issue 31 item 7: 520,000 small slots cost scan --expect 21-32 s and 1.4 GB."""
    doc = json.loads(baseline_file.read_text())
    link = {"width": None, "max_width": None, "max_gts": None}
    one = {"slot": "s0.r0/01.0", "kind": "bridge", "model": None, "numa_node": 0, "socket": 0, "link": link}
    doc["slots"] = [one] * (MAX_SLOTS + 1)
    big = tmp_path / "big.json"
    big.write_text(json.dumps(doc))
    p = run_cli("scan", "--root", str(fixture_root("dgx-h100")), "--no-nvml", "--expect", str(big))
    assert p.returncode == 2 and len(p.stderr.splitlines()) == 1 and str(MAX_SLOTS) in p.stderr, p.stderr


def test_daemon_exports_the_fingerprint_and_compares_with_its_expect_file(
    results, baseline_file, fixture_root, tmp_path
):
    from prometheus_client.parser import text_string_to_metric_families

    from tests.features.daemon.test_daemon_parts import _status
    from topoagent.features.daemon import config as cfgmod
    from topoagent.features.daemon.exports import nfd_features
    from topoagent.features.daemon.loop import default_scan
    from topoagent.features.daemon.metrics import render_text

    good = results["good"].baseline
    fams = {f.name: f for f in text_string_to_metric_families(render_text(_status(results["good"])).decode())}
    (sample,) = fams["topoagent_topology_info"].samples
    # NVML off: the GPUs' NVLinks are unknown, and the fleet rules compare it with hosts alike
    assert sample.labels == {"hw_class": good.hw_class, "fingerprint": good.fingerprint, "unknown": "nvlinks"}
    labels = nfd_features(results["good"], degraded_links=False)
    assert labels["topoagent.fingerprint"] == good.fingerprint and len(labels["topoagent.hw-class"]) == 16

    bigger = tmp_path / "bigger.json"  # the good build with GPU0 expected at x32: this host is short
    doc = json.loads(baseline_file.read_text())
    for s in doc["slots"]:
        if s["slot"] == GPU0_SLOT:
            s["link"]["width"] = 32
    bigger.write_text(json.dumps(doc))
    conf = tmp_path / "config.toml"
    conf.write_text(f'root = "{fixture_root("dgx-h100")}"\nnvml = false\nexpect = "{bigger}"\nexpected_gpus = 8\n')
    codes = {f.code for f in default_scan(cfgmod.load(str(conf))).findings}
    assert "EXPECT_LINK" in codes
    conf.write_text(f'expect = "{tmp_path / "absent.json"}"\nroot = "{fixture_root("dgx-h100")}"\nnvml = false\n')
    with pytest.raises(Exception, match="absent.json"):
        default_scan(cfgmod.load(str(conf)))


@pytest.mark.parametrize("version", ["2", '"banana"', "null", "1.5", None])
def test_a_baseline_of_an_unknown_schema_version_is_refused(baseline_file, fixture_root, tmp_path, version):
    """Issue 31 item 8: schema_version was never read (2, "banana", null, 1.5 were accepted)."""
    doc = json.loads(baseline_file.read_text())
    if version is None:
        del doc["schema_version"]
        text = json.dumps(doc)
    else:
        text = json.dumps(doc).replace('"schema_version": 1', f'"schema_version": {version}')
    bad = tmp_path / "baseline.json"
    bad.write_text(text)
    proc = run_cli("scan", "--root", str(fixture_root("dgx-h100")), "--no-nvml", "--expect", str(bad))
    assert proc.returncode == 2 and "schema_version" in proc.stderr and len(proc.stderr.splitlines()) == 1, proc.stderr
    fleet = run_cli("fleet", str(bad))
    assert fleet.returncode == 2 and "schema_version" in fleet.stderr, fleet.stderr


def test_a_document_nested_thousands_deep_is_one_line(baseline_file, fixture_root, tmp_path):
    """Issue 31 item 6: 1,000-deep nesting in a field msgspec skips raised RecursionError."""
    doc = baseline_file.read_text().rstrip().rstrip("}") + ', "extra": ' + "[" * 5000 + "]" * 5000 + "}"
    deep = tmp_path / "deep.json"
    deep.write_text(doc)
    for args in (
        ("scan", "--root", str(fixture_root("dgx-h100")), "--no-nvml", "--expect", str(deep)),
        ("baseline", "--from-json", str(deep)),
        ("fleet", str(deep)),
    ):
        proc = run_cli(*args)
        assert proc.returncode == 2 and "nested too deeply" in proc.stderr and "Traceback" not in proc.stderr, args


def test_variant_helpers_are_pure(good):
    """A variant never changes the good snapshot it was made from (the module shares it)."""
    from topoagent.core.snapshot import enc_hook

    before = msgspec.json.encode(good, enc_hook=enc_hook)
    for name in VARIANTS:
        variant(good, name)
    assert msgspec.json.encode(good, enc_hook=enc_hook) == before
