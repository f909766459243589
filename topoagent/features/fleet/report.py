"""``topoagent fleet``'s outputs: text for a person, JSON for automation, an HTML page.

JSON: ``{"hosts": N, "classes": [{"hw_class", "fingerprint", "hosts": [...], "expected",
"matches", "compared_with"}], "summary": [{"hw_class", "hosts", "majority", "expected",
"class_findings"}], "outliers": [{"host", "file", "hw_class", "fingerprint", "reason",
"findings": [...], "own_findings": [...]}], "duplicate_names": [{"host", "files"}],
"unreadable": [...]}``, findings as in ``scan --format json``.
"""

from __future__ import annotations

import msgspec

from topoagent.core.baseline import FindingView
from topoagent.core.render.escape import shown, text_output
from topoagent.core.render.escape import xml_text as escape
from topoagent.core.render.json_report import FindingEntry, encode, finding_entry
from topoagent.features.fleet.tally import FleetVerdict, Outlier

__all__ = ["FleetReport", "render_html", "render_json", "render_text"]


class ClassEntry(msgspec.Struct, frozen=True):
    hw_class: str
    fingerprint: str
    hosts: list[str]
    expected: bool
    #: Agrees with the expected facts wherever both sides know them (no outlier).
    matches: bool
    #: The class its hosts were compared with, where that is another (null: its own).
    compared_with: str | None = None


class ClassFinding(msgspec.Struct, frozen=True):
    code: str
    hosts: int


class SummaryEntry(msgspec.Struct, frozen=True):
    """A class as compared: whether it had a majority (a tie has none), its expected
    fingerprint, and the findings more than half its hosts report themselves."""

    hw_class: str
    hosts: int
    majority: bool
    expected: str | None
    class_findings: list[ClassFinding]


class OutlierEntry(msgspec.Struct, frozen=True):
    host: str
    file: str
    hw_class: str
    fingerprint: str
    #: ``differs``, ``no majority`` or ``own findings``.
    reason: str
    findings: list[FindingEntry]
    #: The faults the host's own scan reports that most of its class does not.
    own_findings: list[FindingView]


class Duplicate(msgspec.Struct, frozen=True):
    """A host name several files claim (each host is then named ``name (file)``)."""

    host: str
    files: list[str]


class Unreadable(msgspec.Struct, frozen=True):
    """An input that could not be read as a host, and why."""

    file: str
    error: str


class FleetReport(msgspec.Struct, frozen=True):
    """``topoagent fleet --format json``."""

    hosts: int
    classes: list[ClassEntry]
    summary: list[SummaryEntry]
    outliers: list[OutlierEntry]
    duplicate_names: list[Duplicate]
    unreadable: list[Unreadable]


def _outlier(o: Outlier) -> OutlierEntry:
    return OutlierEntry(
        o.host, o.file, o.hw_class, o.fingerprint, o.reason, [finding_entry(f) for f in o.findings], list(o.own)
    )


def report(v: FleetVerdict, unreadable: list[tuple[str, str]]) -> FleetReport:
    """The verdict as the JSON document."""
    return FleetReport(
        hosts=v.hosts,
        classes=[
            ClassEntry(c.hw_class, c.fingerprint, list(c.hosts), c.expected, c.matches, c.compared_with)
            for c in v.classes
        ],
        summary=[
            SummaryEntry(s.hw_class, s.hosts, s.majority, s.expected, [ClassFinding(c, n) for c, n in s.class_findings])
            for s in v.summaries
        ],
        outliers=[_outlier(o) for o in v.outliers],
        duplicate_names=[Duplicate(n, list(f)) for n, f in v.duplicates],
        unreadable=[Unreadable(f, e) for f, e in unreadable],
    )


def render_json(v: FleetVerdict, unreadable: list[tuple[str, str]], *, pretty: bool = False) -> str:
    """``fleet --format json``."""
    return encode(report(v, unreadable), pretty=pretty)


def _hosts(names: tuple[str, ...], most: int = 5) -> str:
    listed = ", ".join(map(shown, names[:most]))
    return listed + (f", ... ({len(names) - most} more)" if len(names) > most else "")


def _class_lines(v: FleetVerdict) -> list[str]:
    lines = []
    for s in v.summaries:
        groups = [c for c in v.classes if (c.compared_with or c.hw_class) == s.hw_class]
        lines.append(f"class {shown(s.hw_class)}: {s.hosts} host(s)")
        if not s.majority:
            lines.append("  no majority: fingerprints tie, each side is compared with the other")
        for code, n in s.class_findings:
            lines.append(f"  class-wide: {n} of {s.hosts} host(s) report {code} (not counted as outliers)")
        for c in groups:
            mark = "expected" if c.expected else "matches " if c.matches else "outlier "
            other = f"  (class {shown(c.hw_class)})" if c.compared_with else ""
            lines.append(f"  {shown(c.fingerprint)}  {mark} {len(c.hosts):6d}  {_hosts(c.hosts)}{other}")
    return lines


def _outlier_lines(o: Outlier) -> list[str]:
    said = {"differs": "differs", "no majority": "no majority", "own findings": "own findings"}[o.reason]
    lines = [f"{shown(o.host)}: fingerprint {shown(o.fingerprint)}, {said} ({len(o.findings)} difference(s))"]
    for f in o.findings:
        lines.append(f"  {f.severity.label.upper():8s} [{f.code}] {shown(f.message)}")
        lines.extend(f"           {shown(e.path)}: {shown(e.value)}" for e in f.evidence[:4])
    for own in o.own:
        lines.append(f"  own {own.severity.upper():8s} [{shown(own.code)}] {shown(own.message)}")
    return lines


def render_text(v: FleetVerdict, unreadable: list[tuple[str, str]]) -> str:
    """``fleet``: the classes with their fingerprints, then each outlier and why."""
    lines = [
        (
            f"{v.hosts} host(s), {len(v.summaries)} hardware class(es), {len(v.classes)} fingerprint(s), "
            f"{len(v.outliers)} outlier(s)"
        ),
        "",
        *_class_lines(v),
        "",
    ]
    for o in v.outliers:
        lines += _outlier_lines(o)
    for name, files in v.duplicates:
        lines.append(f"duplicate host name: {shown(name)}: {', '.join(map(shown, files))}")
    for name, why in unreadable:
        lines.append(f"unreadable: {shown(name)}: {shown(why)}")
    # names, classes and messages come from other hosts' files: each is one field (`shown`), so
    # none adds a line or sends a control character to the terminal
    return text_output("\n".join(lines).rstrip("\n") + "\n")


_CSS = """
body{font-family:DejaVu Sans,Liberation Sans,Arial,sans-serif;margin:0;color:#212121;background:#eceff1}
header{padding:10px 18px;background:#263238;color:#fff}
header h1{font-size:18px;margin:0}
section{margin:14px;background:#fff;border:1px solid #cfd8dc;border-radius:6px;padding:10px 12px}
h2{font-size:15px;margin:0 0 8px}
table{border-collapse:collapse;font-size:12px;width:100%}
th,td{border:1px solid #e0e0e0;padding:3px 6px;text-align:left;vertical-align:top}
code{font-family:DejaVu Sans Mono,monospace}
.critical{color:#b71c1c;font-weight:bold}.warning{color:#e65100}.info{color:#455a64}
.ok{color:#2e7d32}
"""


def render_html(v: FleetVerdict, unreadable: list[tuple[str, str]]) -> str:
    """``fleet --format html``: one self-contained page, the classes with their fingerprints and
    each outlier's differences (nothing to fetch)."""
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>topoagent fleet</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<header><h1>topoagent fleet: {v.hosts} host(s), {len(v.classes)} fingerprint(s), "
        f"{len(v.outliers)} outlier(s)</h1></header>",
        "<section><h2>Classes</h2><table><tr><th>hardware class</th><th>fingerprint</th><th>hosts</th>"
        "<th></th><th>names</th></tr>",
    ]
    for c in v.classes:
        mark = (
            '<span class="ok">expected</span>'
            if c.expected
            else '<span class="ok">matches where known</span>'
            if c.matches
            else '<span class="critical">outlier</span>'
        )
        out.append(
            f"<tr><td>{escape(c.hw_class)}</td><td><code>{escape(c.fingerprint)}</code></td><td>{len(c.hosts)}</td>"
            f"<td>{mark}</td><td>{escape(_hosts(c.hosts, 20))}</td></tr>"
        )
    out.append("</table></section>")
    for o in v.outliers:
        out.append(
            f"<section><h2>{escape(o.host)} <code>{escape(o.fingerprint)}</code></h2>"
            f"<p>{escape(o.reason)}; file <code>{escape(o.file)}</code></p><table>"
            "<tr><th>severity</th><th>code</th><th>difference</th><th>expected / seen</th></tr>"
        )
        for own in o.own:
            out.append(
                f'<tr><td class="{escape(own.severity)}">{escape(own.severity)}</td><td><code>{escape(own.code)}'
                f"</code></td><td>{escape(own.message)}</td><td>its own scan</td></tr>"
            )
        for f in o.findings:
            ev = "<br>".join(f"<code>{escape(e.path)}</code>: {escape(e.value or '')}" for e in f.evidence)
            out.append(
                f'<tr><td class="{f.severity.label}">{f.severity.label}</td><td><code>{f.code}</code></td>'
                f"<td>{escape(f.message)}<br><small>{escape(f.remedy)}</small></td><td>{ev}</td></tr>"
            )
        out.append("</table></section>")
    if unreadable:
        out.append("<section><h2>Unreadable</h2><ul>")
        out.extend(f"<li><code>{escape(name)}</code>: {escape(why)}</li>" for name, why in unreadable)
        out.append("</ul></section>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
