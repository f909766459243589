"""``topoagent draw --format html``: one page with the picture, the findings and the matrix.

The page needs nothing but itself: the SVG is inline (:mod:`topoagent.features.draw.svg`), the
style sheet and the script are inline, there are no fonts, images or links to fetch.  Hovering
a tile, switch or rail shows the device's details in the side panel (a click pins them);
hovering a finding or a matrix header lights up the devices it names.  The daemon serves this
page at ``/``: :func:`render` needs no options.
"""

from __future__ import annotations

import json
from typing import Any

from topoagent.core.pci import DeviceKind
from topoagent.core.render.escape import xml_attr as escape
from topoagent.core.render.matrix import matrix_of, matrix_rows
from topoagent.core.render.verdict import unknown_line
from topoagent.core.result import ScanResult
from topoagent.core.topology import Device
from topoagent.features.draw.layout import compact_link, layout
from topoagent.features.draw.svg import svg_of

__all__ = ["device_details", "matrix_names", "render"]

_CSS = """
body{font-family:DejaVu Sans,Liberation Sans,Arial,sans-serif;margin:0;color:#212121;background:#eceff1}
header{padding:10px 18px;background:#263238;color:#fff}
header h1{font-size:18px;margin:0}
header p{margin:4px 0 0;font-size:13px;color:#cfd8dc}
main{display:flex;gap:14px;padding:14px;align-items:flex-start}
.ta-figure{flex:1 1 auto;min-width:0;background:#fff;border:1px solid #cfd8dc;border-radius:6px;padding:6px;overflow:auto}
.ta-figure svg{max-width:100%;height:auto;display:block}
aside{flex:0 0 300px;position:sticky;top:14px;background:#fff;border:1px solid #cfd8dc;border-radius:6px;padding:10px 12px;font-size:12px}
aside h3{margin:0 0 6px;font-size:14px}
aside dl{display:grid;grid-template-columns:auto 1fr;gap:2px 10px;margin:0}
aside dt{color:#607d8b}
aside dd{margin:0;font-family:DejaVu Sans Mono,monospace;word-break:break-all}
section{margin:0 14px 14px;background:#fff;border:1px solid #cfd8dc;border-radius:6px;padding:10px 12px}
section h2{font-size:15px;margin:0 0 8px}
table{border-collapse:collapse;font-size:12px}
th,td{border:1px solid #e0e0e0;padding:3px 6px;text-align:left;vertical-align:top}
.ta-findings tr:hover{background:#fff3e0}
.ta-sev-critical{color:#b71c1c;font-weight:bold}
.ta-sev-warning{color:#e65100;font-weight:bold}
.ta-sev-info{color:#455a64}
.ta-matrix td,.ta-matrix th{text-align:center;font-family:DejaVu Sans Mono,monospace}
.ta-matrix th[data-ids]{cursor:default}
.m-X{color:#9e9e9e}.m-NV{background:#c8e6c9}.m-PIX{background:#dcedc8}.m-PXB{background:#f0f4c3}
.m-PHB{background:#fff9c4}.m-NODE{background:#ffe0b2}.m-SYS{background:#ffcdd2}
.ta-muted{color:#757575}
.ta-legend{margin-top:8px}
"""  # noqa: E501  minified CSS, one rule a line

# The page's only script: details on hover/click, highlights from the tables.  No network,
# no libraries; it marks <body data-ready="1"> when it has run (tests look for that).
_JS = """
(function () {
  var data = JSON.parse(document.getElementById('ta-devices').textContent);
  var panel = document.getElementById('ta-detail');
  var pinned = null;
  function show(id, extra) {
    var d = data[id];
    if (!d) { return; }
    panel.textContent = '';
    var h = document.createElement('h3');
    h.textContent = d.title;
    panel.appendChild(h);
    var dl = document.createElement('dl');
    var rows = extra ? d.rows.concat(extra) : d.rows;
    rows.forEach(function (r) {
      var dt = document.createElement('dt'); dt.textContent = r[0];
      var dd = document.createElement('dd'); dd.textContent = r[1];
      dl.appendChild(dt); dl.appendChild(dd);
    });
    panel.appendChild(dl);
  }
  function highlight(ids) {
    var want = {};
    ids.forEach(function (i) { want[i] = true; });
    Array.prototype.forEach.call(document.querySelectorAll('[data-id]'), function (el) {
      if (el.closest('svg')) { el.classList.toggle('ta-hl', !!want[el.getAttribute('data-id')]); }
    });
  }
  function target(ev) {
    var el = ev.target.closest ? ev.target.closest('[data-id],[data-gpu]') : null;
    return el && el.closest('svg') ? el : null;
  }
  var svg = document.querySelector('.ta-figure svg');
  svg.addEventListener('mouseover', function (ev) {
    var el = target(ev);
    if (!el || pinned) { return; }
    if (el.hasAttribute('data-gpu')) {
      var g = el.getAttribute('data-gpu'), n = el.getAttribute('data-nic');
      show(g, [['rail', g + ' \\u2192 ' + n + ' (' + el.getAttribute('data-token') + ')'],
               ['finding', el.getAttribute('data-finding') || 'none']]);
      highlight([g, n]);
    } else {
      show(el.getAttribute('data-id'));
      highlight([el.getAttribute('data-id')]);
    }
  });
  svg.addEventListener('click', function (ev) {
    var el = target(ev);
    var id = el ? (el.getAttribute('data-id') || el.getAttribute('data-gpu')) : null;
    pinned = (id && pinned !== id) ? id : null;
    if (id) { show(id); highlight([id]); }
  });
  Array.prototype.forEach.call(document.querySelectorAll('[data-subjects]'), function (row) {
    if (row.closest('svg')) { return; }
    row.addEventListener('mouseenter', function () {
      highlight(row.getAttribute('data-subjects').split(' '));
    });
    row.addEventListener('mouseleave', function () { if (!pinned) { highlight([]); } });
  });
  document.body.setAttribute('data-ready', '1');
})();
"""


def _row(label: str, value: object) -> list[str] | None:
    if value is None or value == "" or value == ():
        return None
    return [label, ", ".join(value) if isinstance(value, tuple) else str(value)]


def device_details(result: ScanResult) -> dict[str, dict[str, Any]]:
    """Device id -> ``{"title", "rows": [[label, value], ...]}`` for the side panel."""
    topo = result.topology
    cpus = {p.gpu: p.cpus for p in result.plan.gpus}
    findings: dict[str, list[str]] = {}
    for f in result.findings:
        for s in f.subjects:
            findings.setdefault(s, []).append(f.code)
    out: dict[str, dict[str, Any]] = {}
    for d in topo.devices:
        if d.kind is DeviceKind.OTHER:
            continue
        out[d.id] = {"title": f"{d.id} · {d.name}", "rows": [r for r in _rows(result, d, cpus, findings) if r]}
    return out


def _rows(
    result: ScanResult, d: Device, cpus: dict[str, Any], findings: dict[str, list[str]]
) -> list[list[str] | None]:
    rail = result.rails.rail(d.id)
    role = result.rails.roles.get(d.id)
    users = result.rails.users(d.id)
    return [
        _row("kind", d.role.value.replace("_", " ") if d.role else d.kind.value),
        _row("BDF", d.bdf),
        _row("key", d.key if d.key != d.bdf else None),
        _row("label", d.label),
        _row("NUMA node", d.numa_node if d.numa_node is not None else "unknown"),
        _row("socket", d.socket),
        _row("local CPUs", d.local_cpus),
        _row("bind CPUs", cpus.get(d.id)),
        _row("link", compact_link(d.link)),
        _row("driver", d.driver),
        _row("netdevs", d.netdevs),
        _row("RDMA", d.rdma_devices),
        _row("IOMMU group", None if d.iommu_group is None else f"{d.iommu_group} ({d.iommu_type or '?'})"),
        _row("VF of", d.physfn),
        _row(
            "rail",
            None
            if rail is None or rail.nic is None
            else f"{rail.nic} ({rail.cls.token if rail.cls is not None else '?'})"
            + (f", shared with {', '.join(rail.shared_with)}" if rail.shared_with else ""),
        ),
        _row("NIC role", role.value if role is not None else None),
        _row("rail for", users),
        _row("findings", tuple(dict.fromkeys(findings.get(d.id, ())))),
    ]


def _findings_table(result: ScanResult) -> str:
    if not result.findings:
        return '<p class="ta-muted">No findings.</p>'
    rows = [
        '<table class="ta-findings"><tr><th>severity</th><th>code</th><th>devices</th><th>what</th><th>remedy</th></tr>'
    ]
    for f in result.findings:
        evidence = "\n".join(f"{e.path} = {e.value if e.value is not None else '(none)'}" for e in f.evidence)
        rows.append(
            f'<tr data-subjects="{escape(" ".join(f.subjects))}" title="{escape(evidence)}">'
            f'<td class="ta-sev-{f.severity.label}">{f.severity.label}</td><td>{escape(f.code)}</td>'
            f"<td>{escape(', '.join(f.subjects))}</td><td>{escape(f.message)}</td><td>{escape(f.remedy)}</td></tr>"
        )
    rows.append("</table>")
    return "".join(rows)


def matrix_names(result: ScanResult) -> list[tuple[str, str, str | None]]:
    """Each matrix row's name on the page -- the device id the picture, the details and the
    findings use (``nic2``; ``nic5 mlx5_3`` where one device has a row per RDMA device) -- with
    the label ``nvidia-smi topo -m`` gives it (``NIC0``) and its RDMA device.  The page used to
    number NICs NIC0... in the matrix and nic0... in the picture, with no legend (issue 32)."""
    behind = matrix_rows(result)
    rows_of: dict[str, int] = {}
    for ident, _ in behind:
        rows_of[ident] = rows_of.get(ident, 0) + 1
    out = []
    for ident, d in behind:
        name = ident if rows_of[ident] == 1 or d.rdma_name is None else f"{ident} {d.rdma_name}"
        out.append((name, d.label, d.rdma_name))
    return out


def _matrix_table(result: ScanResult) -> str:
    behind = matrix_rows(result)
    m = matrix_of(result, behind)
    if not m.devices:
        return '<p class="ta-muted">No GPUs or NICs.</p>'
    ids = [ident for ident, _ in behind]  # the device behind each row
    names = matrix_names(result)
    head = "".join(
        f'<th data-subjects="{escape(i)}" data-ids="{escape(i)}" title="{escape(smi)}">{escape(name)}</th>'
        for (name, smi, _), i in zip(names, ids, strict=True)
    )
    rows = [f'<table class="ta-matrix"><tr><th></th>{head}</tr>']
    for (name, smi, _), i, cells in zip(names, ids, m.cells, strict=True):
        tds = "".join(f'<td class="m-{"NV" if c.startswith("NV") else escape(c)}">{escape(c)}</td>' for c in cells)
        rows.append(f'<tr><th data-subjects="{escape(i)}" title="{escape(smi)}">{escape(name)}</th>{tds}</tr>')
    rows.append("</table>")
    legend = "".join(
        f"<tr><td>{escape(name)}</td><td>{escape(smi)}</td><td>{escape(rdma or '')}</td></tr>"
        for name, smi, rdma in names
        if smi.lower() != name  # gpu3 is GPU3 everywhere; NICs are numbered per RDMA device there
    )
    if legend:
        rows.append(
            '<table class="ta-legend"><tr><th>here and in the picture</th><th>nvidia-smi topo -m</th>'
            f"<th>RDMA device</th></tr>{legend}</table>"
        )
    said = unknown_line(result)  # why a cell is ?: the NVLinks no source showed, and the rest
    if said is not None:
        rows.append(f'<p class="ta-muted">{escape(said)}</p>')
    return "".join(rows)


def render(result: ScanResult, **_: Any) -> str:
    """``draw --format html``: the page (picture, findings, matrix, device details)."""
    lay = layout(result)
    details = json.dumps(device_details(result), sort_keys=True, ensure_ascii=True).replace("<", "\\u003c")
    return "".join(
        [
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{escape(lay.title)}</title><style>{_CSS}</style></head><body>\n",
            f"<header><h1>{escape(lay.title)}</h1><p>{escape(lay.subtitle)}</p></header>\n",
            '<main><div class="ta-figure">\n',
            svg_of(lay),
            "</div>\n",
            (
                '<aside id="ta-detail"><h3>Details</h3><p class="ta-muted">Hover a GPU, NIC, switch or rail; '
                "click to pin.</p></aside></main>\n"
            ),
            f"<section><h2>Findings ({len(result.findings)})</h2>{_findings_table(result)}</section>\n",
            (
                "<section><h2>Path classes (as nvidia-smi topo -m; devices named as in the picture)</h2>"
                f"{_matrix_table(result)}</section>\n"
            ),
            f'<script type="application/json" id="ta-devices">{details}</script>\n',
            f"<script>{_JS}</script>\n</body></html>\n",
        ]
    )
