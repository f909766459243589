"""``topoagent fleet``'s outputs: text for a person, JSON for automation, an HTML page.

JSON: ``{"hosts": N, "classes": [{"hw_class", "fingerprint", "hosts": [...], "expected",
"matches"}],
"outliers": [{"host", "hw_class", "fingerprint", "findings": [...]}], "unreadable": [...]}``,
findings as in ``scan --format json``.
"""

from __future__ import annotations

import msgspec

from topoagent.core.render.escape import shown, text_output
from topoagent.core.render.escape import xml_text as escape
from topoagent.core.render.json_report import FindingEntry, encode, finding_entry
from topoagent.features.fleet.tally import FleetVerdict

__all__ = ["FleetReport", "render_html", "render_json", "render_text"]


class ClassEntry(msgspec.Struct, frozen=True):
    hw_class: str
    fingerprint: str
    hosts: list[str]
    expected: bool
    #: Agrees with the expected facts wherever both sides know them (no outlier).
    matches: bool


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
        classes=[ClassEntry(c.hw_class, c.fingerprint, list(c.hosts), c.expected, c.matches) for c in v.classes],
        outliers=[
            OutlierEntry(o.host, o.hw_class, o.fingerprint, [finding_entry(f) for f in o.findings]) for o in v.outliers
        ],
        unreadable=[Unreadable(f, e) for f, e in unreadable],
    )


def render_json(v: FleetVerdict, unreadable: list[tuple[str, str]], *, pretty: bool = False) -> str:
    """``fleet --format json``."""
    return encode(report(v, unreadable), pretty=pretty)


def _hosts(names: tuple[str, ...], most: int = 5) -> str:
    listed = ", ".join(map(shown, names[:most]))
    return listed + (f", ... ({len(names) - most} more)" if len(names) > most else "")


def render_text(v: FleetVerdict, unreadable: list[tuple[str, str]]) -> str:
    """``fleet``: the classes with their fingerprints, then each outlier and why."""
    classes = list(dict.fromkeys(c.hw_class for c in v.classes))
    lines = [
        (
            f"{v.hosts} host(s), {len(classes)} hardware class(es), {len(v.classes)} fingerprint(s), "
            f"{len(v.outliers)} outlier(s)"
        ),
        "",
    ]
    for hw in classes:
        groups = [c for c in v.classes if c.hw_class == hw]
        lines.append(f"class {shown(hw)}: {sum(len(c.hosts) for c in groups)} host(s)")
        for c in groups:
            mark = "expected" if c.expected else "matches " if c.matches else "outlier "
            lines.append(f"  {shown(c.fingerprint)}  {mark} {len(c.hosts):6d}  {_hosts(c.hosts)}")
    lines.append("")
    for o in v.outliers:
        lines.append(f"{shown(o.host)}: fingerprint {shown(o.fingerprint)} ({len(o.findings)} difference(s))")
        for f in o.findings:
            lines.append(f"  {f.severity.label.upper():8s} [{f.code}] {shown(f.message)}")
            lines.extend(f"           {shown(e.path)}: {shown(e.value)}" for e in f.evidence[:4])
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
            f"<section><h2>{escape(o.host)} <code>{escape(o.fingerprint)}</code></h2><table>"
            "<tr><th>severity</th><th>code</th><th>difference</th><th>expected / seen</th></tr>"
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
