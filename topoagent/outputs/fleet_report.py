"""``topoagent fleet``'s outputs: text for a person, JSON for automation.

JSON: ``{"hosts": N, "classes": [{"hw_class", "fingerprint", "hosts": [...], "expected"}],
"outliers": [{"host", "hw_class", "fingerprint", "findings": [...]}], "unreadable": [...]}``,
findings as in ``scan --format json``.
"""

from __future__ import annotations

import msgspec

from topoagent.analysis.fleet import FleetVerdict
from topoagent.outputs.json_report import FindingEntry, encode, finding_entry

__all__ = ["FleetReport", "render_json", "render_text"]


class ClassEntry(msgspec.Struct, frozen=True):
    hw_class: str
    fingerprint: str
    hosts: list[str]
    expected: bool


class OutlierEntry(msgspec.Struct, frozen=True):
    host: str
    hw_class: str
    fingerprint: str
    findings: list[FindingEntry]


class Unreadable(msgspec.Struct, frozen=True):
    """An input that could not be read as a host, and why."""

    file: str
    error: str


class FleetReport(msgspec.Struct, frozen=True):
    """``topoagent fleet --format json``."""

    hosts: int
    classes: list[ClassEntry]
    outliers: list[OutlierEntry]
    unreadable: list[Unreadable]


def report(v: FleetVerdict, unreadable: list[tuple[str, str]]) -> FleetReport:
    """The verdict as the JSON document."""
    return FleetReport(
        hosts=v.hosts,
        classes=[ClassEntry(c.hw_class, c.fingerprint, list(c.hosts), c.expected) for c in v.classes],
        outliers=[OutlierEntry(o.host, o.hw_class, o.fingerprint, [finding_entry(f) for f in o.findings])
                  for o in v.outliers],
        unreadable=[Unreadable(f, e) for f, e in unreadable],
    )


def render_json(v: FleetVerdict, unreadable: list[tuple[str, str]], *, pretty: bool = False) -> str:
    """``fleet --format json``."""
    return encode(report(v, unreadable), pretty=pretty)


def _hosts(names: tuple[str, ...], most: int = 5) -> str:
    shown = ", ".join(names[:most])
    return shown + (f", ... ({len(names) - most} more)" if len(names) > most else "")


def render_text(v: FleetVerdict, unreadable: list[tuple[str, str]]) -> str:
    """``fleet``: the classes with their fingerprints, then each outlier and why."""
    classes = list(dict.fromkeys(c.hw_class for c in v.classes))
    lines = [(f"{v.hosts} host(s), {len(classes)} hardware class(es), {len(v.classes)} fingerprint(s), "
              f"{len(v.outliers)} outlier(s)"), ""]
    for hw in classes:
        groups = [c for c in v.classes if c.hw_class == hw]
        lines.append(f"class {hw}: {sum(len(c.hosts) for c in groups)} host(s)")
        for c in groups:
            mark = "expected" if c.expected else "outlier "
            lines.append(f"  {c.fingerprint}  {mark} {len(c.hosts):6d}  {_hosts(c.hosts)}")
    lines.append("")
    for o in v.outliers:
        lines.append(f"{o.host}: fingerprint {o.fingerprint} ({len(o.findings)} difference(s))")
        for f in o.findings:
            lines.append(f"  {f.severity.label.upper():8s} [{f.code}] {f.message}")
            lines.extend(f"           {e.path}: {e.value}" for e in f.evidence[:4])
    for name, why in unreadable:
        lines.append(f"unreadable: {name}: {why}")
    return "\n".join(lines).rstrip("\n") + "\n"
