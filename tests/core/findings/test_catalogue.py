"""The findings catalogue: docs/findings.md is generated from it, every code is raised by some
fixture or named test, each fixture's example is that fixture's output, and what the goldens
raise is what the catalogue says (severity, kind of evidence, family)."""

import importlib
import inspect
import json
import re
import string
from pathlib import Path

import msgspec
import pytest

from tests.paths import REPO
from topoagent.core.findings import CATALOGUE, Evidence, Finding, Severity
from topoagent.core.findings.catalogue import FAMILIES, PROOF_BOUND, Proof, evidence_bound, finding, proof_of
from topoagent.core.findings.doc import example_text, page

GOLDEN = sorted((REPO / "tests/golden").glob("*/scan.json"))


def _findings(path: Path) -> list[Finding]:
    return [
        Finding(
            f["code"],
            Severity.parse(f["severity"]),
            tuple(f["subjects"]),
            f["message"],
            tuple(msgspec.convert(e, Evidence) for e in f["evidence"]),
            f["remedy"],
        )
        for f in json.loads(path.read_text())["findings"]
    ]


def test_the_page_is_the_generated_one():
    """Fails when the catalogue changed and docs/findings.md was not regenerated."""
    assert (REPO / "docs/findings.md").read_text() == page(), "run python -m topoagent.core.findings"


def test_every_code_is_documented_once():
    headings = re.findall(r"^### ([A-Z0-9_]+)$", page(), re.MULTILINE)
    assert headings == list(CATALOGUE)


def test_every_code_is_raised_by_a_fixture():
    raised = {f.code for p in GOLDEN for f in _findings(p)}
    # NVLink P2P needs NVML (tests/core/test_nvml_join.py, recorded HGX H100); disagreements need a
    # second source (tests/core/findings/test_crosscheck.py); overlapping nodes a damaged copy of a fixture
    # (tests/core/read/test_cpu_files.py); EXPECT_* an expected topology to compare with (scan --expect,
    # fleet: tests/features/fleet/test_fleet.py, faulty copies of dgx-h100 against its baseline);
    # NVLink fabric registration an NVML recording, an unrecognised platform a GB300 tray without a
    # DMA function's VPD and an idle slower NIC a variant of epyc-nps2-mixed (tests/core/test_platform.py);
    # the pasted family real pastes of the tools that show those facts (tests/core/paste/test_paste.py).
    # Each of those tests checks that its finding is the catalogue's example.
    # PXN needs NVLinks and a NIC farther than a peer (tests/core/findings/test_verdicts.py, a pasted V100
    # mesh); the audit's codes running processes (tests/features/audit/test_audit.py).
    expect = {code for code, e in CATALOGUE.items() if e.family == "expect"}
    audit = {code for code, e in CATALOGUE.items() if e.family == "audit"}
    pasted = {code for code, e in CATALOGUE.items() if e.family == "pasted"}
    named = {"NVLINK_P2P_DISABLED", "SOURCES_DISAGREE", "NUMA_NODES_OVERLAP", "GPU_NIC_VIA_PXN"}
    named |= {"NVLINK_FABRIC_NOT_READY", "PLATFORM_UNRECOGNISED", "NIC_SHARED_WHILE_IDLE"}
    assert set(CATALOGUE) - raised - pasted == named | expect | audit
    for code in set(CATALOGUE) - raised:
        assert CATALOGUE[code].examples, code
        for example in CATALOGUE[code].examples:
            assert example.fixture is None and (example.source or code in expect)


@pytest.mark.parametrize("code", [c for c, e in CATALOGUE.items() if any(x.fixture for x in e.examples)])
def test_a_fixture_example_is_that_fixtures_output(code):
    for x in CATALOGUE[code].examples:
        found = [example_text(f) for f in _findings(REPO / "tests/golden" / str(x.fixture) / "scan.json")]
        assert x.text in found, f"{code}: the {x.fixture} golden raises no finding shown as its example"


def test_goldens_raise_what_the_catalogue_says():
    """Each golden finding at a severity its code's rule names, with evidence of the kinds its
    entry says prove it."""
    for p in GOLDEN:
        for f in _findings(p):
            entry = CATALOGUE[f.code]
            bound = evidence_bound(f.evidence)
            allowed = {min(g.severity, bound) for g in entry.severity}
            assert f.severity in allowed, (p.parent.name, f.code, f.severity)
            kinds = {proof_of(e) for e in f.evidence}
            assert kinds <= set(entry.proof), (p.parent.name, f.code, kinds - set(entry.proof))


def test_a_finding_is_bounded_by_its_weakest_evidence():
    """What is inferred can only suggest: a finding with an inference among its evidence is at
    most a warning, whatever its code's rule asks; stated facts leave the rule's severity."""
    code = "GPU_NIC_CROSS_SOCKET"
    stated = [Evidence("/sys/bus/pci/devices/0000:17:00.0/numa_node", "0")]
    inferred = [*stated, Evidence("nvidia-smi topo -m NIC0: NUMA node via its paths to GPUs", "1")]
    fields = {"gpu": "gpu0", "nic": "nic0", "nic_socket": 1, "gpu_socket": 0}
    assert finding(code, ["gpu0", "nic0"], stated, **fields).severity is Severity.CRITICAL
    assert finding(code, ["gpu0", "nic0"], inferred, **fields).severity is Severity.WARNING
    assert PROOF_BOUND[Proof.INFERENCE] is Severity.WARNING
    assert proof_of(Evidence("inferred: NVLinked GPUs, every GPU-NIC and NIC-NIC cell PHB", "x")) is Proof.INFERENCE


def test_the_remedy_fits_the_host_kind():
    """Without a remedy the check chose, the one written for the host's kind is said."""
    from topoagent.core.findings.catalogue import HostKind

    code = "GPU_NIC_VIA_HOST_BRIDGE"
    fields = {"gpu": "gpu0", "nic": "nic0", "path": "PHB"}
    ev = [Evidence("lspci 0000:05:00.0: NUMA node", "unknown")]
    guest = finding(code, ["gpu0"], ev, host=HostKind.GUEST, **fields).remedy
    metal = finding(code, ["gpu0"], ev, host=HostKind.BARE_METAL, **fields).remedy
    assert "pxb-pcie" in guest and "topoagent vms" in guest and "PCIe switch" in metal


def test_each_family_is_the_module_that_raises_its_codes():
    for code, entry in CATALOGUE.items():
        assert entry.family in FAMILIES
        source = inspect.getsource(importlib.import_module(FAMILIES[entry.family].where))
        assert f'"{code}"' in source, code
    assert list(FAMILIES) == list(dict.fromkeys(e.family for e in CATALOGUE.values())), "page order = family order"


def test_templates_are_well_formed():
    for code, entry in CATALOGUE.items():
        assert entry.severity and entry.proof and entry.about and "" in entry.remedies, code
        assert len({g.severity for g in entry.severity}) == len(entry.severity), code
        for w in (*entry.messages.values(), *entry.remedies.values()):
            assert "`" not in w.text, code  # the page shows a template as one code span
            assert [
                f for _, f, _, _ in string.Formatter().parse(w.text) if f is not None and not f.isidentifier()
            ] == []
