"""Finding codes are data: what an output does with a code is in the code's catalogue entry.

No module names a code outside the one that raises it (``core/findings``, or the family's
``raised_in``), every :class:`Output` is read by its consumer and carried by some entry, the
alerting rules page on the codes whose entries name them, and a code that no consumer names
reaches each output its entry lists -- so adding a code is its entry (and the check that raises
it) plus its tests.
"""

from __future__ import annotations

import ast
import re

import msgspec
import pytest
import yaml

from tests.paths import REPO
from topoagent.core.api import scan
from topoagent.core.findings import CATALOGUE, Finding, Severity
from topoagent.core.findings.catalogue import FAMILIES, Output, Proof
from topoagent.features.audit.advise import AuditReport, GpuUse
from topoagent.features.daemon.changes import device_faults
from topoagent.features.daemon.exports import nfd_features
from topoagent.features.daemon.metrics import render_text
from topoagent.features.daemon.status import Attempt, Status
from topoagent.features.draw.layout import layout, tie_findings

PACKAGE = REPO / "topoagent"
RULES = REPO / "deploy/prometheus/topoagent-rules.yml"
#: The series an output puts a code in, as the alerting rules select it.
SERIES = {Output.FINDINGS: "topoagent_finding", Output.PROCESS_SERIES: "topoagent_gpu_processes_misplaced"}


def _raisers() -> set[str]:
    """The files allowed to name codes: the findings package and each family's raising module."""
    where = {f.where for f in FAMILIES.values() if f.raised_in}
    return {str(p) for p in (PACKAGE / "core/findings").glob("*.py")} | {
        str(REPO / (w.replace(".", "/") + ".py")) for w in where
    }


def _code_literals(source: str) -> list[str]:
    """The string literals in ``source`` that are a code, or the start of codes (``EXPECT_``)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            v = node.value
            if v in CATALOGUE or (len(v) > 2 and v.endswith("_") and any(c.startswith(v) for c in CATALOGUE)):
                out.append(v)
    return out


def test_the_literal_finder_finds_what_a_consumer_would_write():
    assert _code_literals('x = f.code == "ACS_REDIRECT"\ny = c.startswith("EXPECT_")') == ["ACS_REDIRECT", "EXPECT_"]
    assert _code_literals('"""A mark per ACS_REDIRECT finding."""\nz = "ACS"') == []


def test_no_consumer_names_a_code():
    """What an output does with a code is in the code's entry (:class:`Output`, ``alert``): only
    the modules that raise codes name them."""
    allowed = _raisers()
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 100 and len(allowed & {str(p) for p in files}) == len(allowed)
    named = {
        str(p.relative_to(REPO)): found
        for p in files
        if str(p) not in allowed and (found := _code_literals(p.read_text()))
    }
    assert named == {}


def test_every_output_is_read_and_carried():
    """Each output is named by some entry and read by some module besides the catalogue's own;
    every finding a scan raises (and only those) is in the scan's views."""
    readers: dict[Output, set[str]] = {o: set() for o in Output}
    for p in PACKAGE.rglob("*.py"):
        for name in re.findall(r"\bOutput\.([A-Z_]+)\b", p.read_text()):
            readers[Output[name]].add(p.name)
    for o in Output:
        assert any(o in e.outputs for e in CATALOGUE.values()), o
        if o is not Output.FINDINGS:  # every view of ScanResult.findings: no consumer picks codes
            assert readers[o] - {"catalogue.py", "doc.py"}, o
    for e in CATALOGUE.values():  # the audit's too: one result holds them (issue 40)
        assert Output.FINDINGS in e.outputs, e.code


def _alerts() -> dict[str, dict]:
    doc = yaml.safe_load(RULES.read_text())
    return {r["alert"]: r for g in doc["groups"] for r in g["rules"] if "alert" in r}


def _rules() -> dict[str, str]:
    return {alert: rule["expr"] for alert, rule in _alerts().items()}


def _selected(expr: str) -> set[str]:
    """The codes a rule pages on: those its finding selectors name (``code="X"`` or
    ``code=~"X|Y"``) before any ``unless``, which only holds it back."""
    pages = expr.split("unless")[0]
    return {
        code
        for one, many in re.findall(r'topoagent_finding\{[^}]*code(?:="([A-Z0-9_]+)"|=~"([A-Z0-9_|]+)")', pages)
        for code in ([one] if one else many.split("|"))
    }


def test_each_alert_pages_on_the_codes_its_entries_name():
    """A rule that selects a finding by code pages on it (``unless`` clauses only hold it back),
    and an entry's ``alert`` is a rule reading a series its outputs put the code in."""
    rules = _rules()
    selected = {(code, alert) for alert, expr in rules.items() for code in _selected(expr)}
    assert selected and all(CATALOGUE[code].alert == alert for code, alert in selected)
    named = [e for e in CATALOGUE.values() if e.alert]
    assert named
    for e in named:
        expr = rules[e.alert].split("unless")[0]
        reads = [SERIES[o] for o in e.outputs if o in SERIES and SERIES[o] in expr]
        assert reads, e.code
        assert reads != ["topoagent_finding"] or (e.code, e.alert) in selected, e.code


#: The family of the alerts that page on the daemon itself, not on a finding's cause.
AGENT = "agent"


def test_each_alert_owns_one_family_and_each_cause_pages_once():
    """Issue 40 item 3, one cause, one page: every alert names the family of findings it owns
    (its ``family`` label: a family of the catalogue, or ``agent``), every code it pages on is of
    that family, and no code is paged by two alerts; a code a check can raise critical from the
    host's own files pages (pasted output never reaches the daemon); an alert on findings pages at
    the finding's own severity; and the outlier and the baseline's alert stand back where any
    other alert of the node's hardware pages (``unless`` on ALERTS of every family but the
    agent's, the processes' and their own)."""
    alerts = _alerts()
    families = {alert: rule["labels"]["family"] for alert, rule in alerts.items()}
    assert set(families.values()) <= {*FAMILIES, AGENT}, families
    paged: dict[str, str] = {}
    for alert, rule in alerts.items():
        codes = _selected(rule["expr"])
        for code in codes:
            assert CATALOGUE[code].family == families[alert], (alert, code)
            assert paged.setdefault(code, alert) == alert, (code, alert, paged[code])
        if codes:  # the finding's severity, never one the rule states
            assert "severity" not in rule["labels"], alert
            assert re.search(r"by \([^)]*\bseverity\b", rule["expr"]), alert
        if families[alert] == AGENT:  # the daemon's own series only
            assert set(re.findall(r"\b(?:topoagent_\w+|up)\b", rule["expr"])) <= {
                "up",
                "topoagent_scan_success",
                "topoagent_last_scan_timestamp_seconds",
                "topoagent_scan_interval_seconds",
            }, alert
    critical = {c for c, e in CATALOGUE.items() if e.worst is Severity.CRITICAL and e.proof != (Proof.PASTED,)}
    assert critical and critical <= set(paged), critical - set(paged)
    standing_back = [a for a, r in alerts.items() if "ALERTS{" in r["expr"]]
    assert {families[a] for a in standing_back} == {"expect"} and len(standing_back) == 2, standing_back
    for alert in standing_back:
        held = re.search(r"unless on \(job, instance\)\s+ALERTS\{([^}]*)\}", alerts[alert]["expr"])
        assert held, alert
        skipped = set(re.search(r'family!~"([^"]*)"', held.group(1)).group(1).split("|"))
        assert skipped <= {AGENT, "audit", "expect"}, (alert, skipped)


def _entry(monkeypatch: pytest.MonkeyPatch, code: str, *outputs: Output) -> None:
    """A code of the catalogue's that no consumer names, carried by ``outputs``."""
    monkeypatch.setitem(CATALOGUE, code, msgspec.structs.replace(CATALOGUE["ACS_REDIRECT"], code=code, outputs=outputs))


def test_a_new_code_reaches_what_its_entry_names(fixture_root, monkeypatch):
    """The synthetic codes below are in no consumer's source: each output carries them only
    because their entries say so, and the result without them shows none of it."""
    result = scan(fixture_root("dgx-h100"), nvml="off")
    rail = next(r for r in result.rails.rails if r.nic is not None)
    gpu = result.topology.by_id(rail.gpu)
    assert gpu is not None and rail.nic is not None
    bridge = next(d for d in result.topology.devices if d.bdf == gpu.parent)
    _entry(monkeypatch, "TEST_EVERY_OUTPUT", *Output)
    _entry(monkeypatch, "TEST_ACS_UNREAD", Output.FINDINGS, Output.ACS_UNREAD)
    on_rail = Finding("TEST_EVERY_OUTPUT", Severity.WARNING, (gpu.id, rail.nic), "m", (), "r")
    on_bridge = Finding("TEST_EVERY_OUTPUT", Severity.WARNING, (bridge.id,), "m", (), "r")
    new = msgspec.structs.replace(result, findings=(*result.findings, on_rail, on_bridge))
    reached: set[Output] = set()

    def check(output: Output, before: bool, after: bool) -> None:
        assert (before, after) == (False, True), output
        reached.add(output)

    nfd, was = nfd_features(new, degraded_links=False), nfd_features(result, degraded_links=False)
    check(Output.GDR_BLOCKER, was["topoagent.gdr.ready"] == "false", nfd["topoagent.gdr.ready"] == "false")
    check(Output.ACS_BLOCKING, was["topoagent.acs.blocking"] == "true", nfd["topoagent.acs.blocking"] == "true")
    unread = msgspec.structs.replace(
        result, findings=(*result.findings, msgspec.structs.replace(on_bridge, code="TEST_ACS_UNREAD"))
    )
    acs = nfd_features(unread, degraded_links=False)["topoagent.acs.blocking"]
    check(Output.ACS_UNREAD, was["topoagent.acs.blocking"] == "unknown", acs == "unknown")
    faults = [c for c in device_faults(result, new) if "TEST_EVERY_OUTPUT" in (c.after or "")]
    check(
        Output.DEVICE_FAULT, bool(device_faults(result, result)), {c.subject for c in faults} >= {gpu.key, bridge.key}
    )
    check(Output.DRAWN_ON_RAIL, (gpu.id, rail.nic) in tie_findings(result), (gpu.id, rail.nic) in tie_findings(new))
    drawn, plain = layout(new), layout(result)
    check(
        Output.DRAWN_ON_LINK,
        any(w.finding for w in plain.wires),
        [w.device for w in drawn.wires if w.finding == "TEST_EVERY_OUTPUT"] == [gpu.id],
    )
    check(Output.DRAWN_ON_BRIDGE, bool(plain.marks), bridge.id in [m.device for m in drawn.marks])
    misplaced = 'topoagent_gpu_processes_misplaced{code="TEST_EVERY_OUTPUT"'
    use = GpuUse(gpu.id, gpu.bdf, gpu.numa_node, None, (7,), (7,), {"TEST_EVERY_OUTPUT": (7,)})
    audit = AuditReport("fd", (), (use,), (), (), 1, None, True)
    text = render_text(Status(started_at=0.0, result=new, last=Attempt(0.0, True, 0.1), audit=audit)).decode()
    check(Output.PROCESS_SERIES, False, misplaced in text)
    check(
        Output.FINDINGS,
        'code="TEST_EVERY_OUTPUT"' in render_text(Status(0.0, result)).decode(),
        "TEST_EVERY_OUTPUT" in text,
    )
    plain_gpu = next(g for g in result.plan_with().gpus if g.gpu == gpu.id)
    new_gpu = next(g for g in new.plan_with().gpus if g.gpu == gpu.id)
    check(Output.GPU_UNUSABLE, not plain_gpu.usable, not new_gpu.usable and not new_gpu.rank_cpus[0])
    assert reached == set(Output), "a new output is tested here"
