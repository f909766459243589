"""``topoagent draw --format svg``: the host as one self-contained SVG picture.

Everything is in the file: the style sheet is inline, the font is the viewer's own monospace
(no ``@font-face``), there are no scripts and no images, so the file opens anywhere and can be
embedded in a page as it is (:mod:`topoagent.features.draw.html` does).

Machine-readable hooks, for tools and tests (every value escaped, every id unique):

* a GPU/NIC/accelerator tile is ``<g class="ta-tile ..." id="tile-<id>" data-id data-key
  data-bdf data-kind data-role data-findings data-usable>`` (``data-usable="false"``, class
  ``ta-unusable``: a GPU a finding makes unusable);
* a rail is ``<g class="ta-tie ..." id="tie-<gpu>-<nic>" data-gpu data-nic data-gpu-bdf
  data-nic-bdf data-class data-token>``, with ``data-finding`` (and class ``ta-finding``) when a
  placement finding is about it (``GPU_NIC_CROSS_SOCKET``...);
* an ACS mark is ``<g class="ta-mark ta-acs ta-finding" data-finding="ACS_REDIRECT" data-bdf>``;
* a PCIe link below its maximum is a ``<line class="ta-link ta-degraded" data-finding>``.

Geometry comes from :func:`topoagent.features.draw.layout.layout`; this module only paints.
"""

from __future__ import annotations

from typing import Any

from topoagent.core.render.escape import xml_attr as escape
from topoagent.core.result import ScanResult
from topoagent.features.draw.layout import FONT, LINE_H, Layout, Rect, layout, tie_grade

__all__ = ["STYLE", "render", "svg_of"]

#: Class -> colours.  Prefixed ``ta-`` so that the sheet does not leak into a page embedding it.
STYLE = """
.ta-bg{fill:#ffffff}
.ta-title{font-size:14px;font-weight:bold;fill:#212121}
.ta-sub{fill:#616161}
.ta-region-title{font-weight:bold;fill:#263238}
.ta-socket>rect{fill:#f5f7fa;stroke:#37474f;stroke-width:2}
.ta-socket .ta-region-title{font-size:13px}
.ta-node>rect{fill:#ffffff;stroke:#90a4ae;stroke-width:1.2}
.ta-unknown>rect{fill:#fff8e1;stroke:#ef6c00;stroke-width:1.5;stroke-dasharray:6 3}
.ta-unknown .ta-region-title{fill:#e65100}
.ta-hostbridge>rect{fill:#fbfbfb;stroke:#b0bec5;stroke-width:1}
.ta-switch>rect{fill:#eceff1;stroke:#546e7a;stroke-width:1.2}
.ta-group>rect{fill:#fbfbfb;stroke:#b0bec5;stroke-width:1;stroke-dasharray:3 3}
.ta-interconnect>rect{fill:#cfd8dc;stroke:#78909c;stroke-width:1}
.ta-interconnect text{fill:#37474f;font-weight:bold}
.ta-bus{stroke:#78909c}
.ta-link{stroke:#546e7a}
.ta-link.ta-degraded{stroke:#ef6c00;stroke-dasharray:3 2}
.ta-tile>rect{stroke-width:1.5}
.ta-gpu>rect{fill:#e8f5e9;stroke:#2e7d32}
.ta-nic>rect{fill:#e3f2fd;stroke:#1565c0}
.ta-role-storage>rect{fill:#f3e5f5;stroke:#6a1b9a}
.ta-role-management>rect{fill:#f5f5f5;stroke:#757575}
.ta-role-vf>rect{fill:#f1f8fe;stroke:#64b5f6;stroke-dasharray:4 2}
.ta-accelerator>rect{fill:#fffde7;stroke:#f9a825}
.ta-tile.ta-numa-unknown>rect{stroke:#ef6c00;stroke-dasharray:5 3}
.ta-tile text{fill:#212121}
.ta-tile .ta-name{font-weight:bold}
.ta-tile .ta-warn{fill:#e65100;font-weight:bold}
.ta-chip>rect{fill:#fafafa;stroke:#9e9e9e}
.ta-chip text{fill:#424242}
.ta-tie path{fill:none;stroke-width:3;stroke-linecap:round;stroke-linejoin:round}
.ta-tie rect{stroke-width:1.2}
.ta-tie text{font-size:10px;font-weight:bold;text-anchor:middle}
.ta-cls-good path{stroke:#2e7d32}
.ta-cls-good rect{fill:#e8f5e9;stroke:#2e7d32}
.ta-cls-good text{fill:#1b5e20}
.ta-cls-warn path{stroke:#f9a825}
.ta-cls-warn rect{fill:#fff8e1;stroke:#f9a825}
.ta-cls-warn text{fill:#8d6e00}
.ta-cls-bad path{stroke:#d32f2f;stroke-width:3.5}
.ta-cls-bad rect{fill:#d32f2f;stroke:#b71c1c}
.ta-cls-bad text{fill:#ffffff}
.ta-cls-unknown path{stroke:#9e9e9e;stroke-dasharray:6 4}
.ta-cls-unknown rect{fill:#f5f5f5;stroke:#9e9e9e}
.ta-cls-unknown text{fill:#616161}
.ta-acs rect{fill:#d32f2f;stroke:#7f0000}
.ta-acs text{fill:#ffffff;font-size:7.5px;font-weight:bold;text-anchor:middle}
.ta-legend>rect{fill:#ffffff;stroke:#bdbdbd}
.ta-hl>rect,.ta-hl>path{filter:drop-shadow(0 0 3px #ff9800)}
.ta-hl>rect{stroke-width:3}
"""


def _n(v: float) -> str:
    """A coordinate, short and stable (``12``, ``12.5``)."""
    s = f"{v:.1f}"
    return s.removesuffix(".0")


def _a(value: object) -> str:
    return escape("" if value is None else str(value))


def _rect(r: Rect, rx: float = 0, cls: str = "") -> str:
    c = f' class="{cls}"' if cls else ""
    return f'<rect{c} x="{_n(r.x)}" y="{_n(r.y)}" width="{_n(r.w)}" height="{_n(r.h)}" rx="{_n(rx)}"/>'


def _text(x: float, y: float, text: str, cls: str = "", extra: str = "") -> str:
    c = f' class="{cls}"' if cls else ""
    return f'<text{c} x="{_n(x)}" y="{_n(y)}"{extra}>{escape(text)}</text>'


def _regions(lay: Layout) -> list[str]:
    out = []
    for r in lay.regions:
        rx = 8 if r.kind in ("socket", "node", "unknown") else 4
        attrs = f'class="ta-region ta-{r.kind}" id="{_a(r.ident)}" data-kind="{_a(r.kind)}"'
        if r.device is not None:
            attrs += f' data-id="{_a(r.device)}" data-bdf="{_a(r.bdf)}"'
        if r.findings:
            attrs += f' data-findings="{_a(" ".join(r.findings))}"'
        parts = [f"<g {attrs}>", _rect(r.rect, rx)]
        if r.kind == "interconnect":
            if r.title:
                vertical = r.rect.h > r.rect.w
                extra = (
                    f' text-anchor="middle" transform="rotate(-90 {_n(r.rect.cx)} {_n(r.rect.cy)})"'
                    if vertical
                    else ' text-anchor="middle"'
                )
                parts.append(_text(r.rect.cx, r.rect.cy + 4, r.title, "", extra))
        else:
            big = r.kind in ("socket", "node", "unknown")
            pad = 10 if big else 6
            parts.append(_text(r.rect.x + pad, r.rect.y + (17 if big else 13), r.title, "ta-region-title"))
            if r.subtitle:
                warn = r.subtitle.startswith("⚠")
                parts.append(
                    _text(
                        r.rect.x + pad,
                        r.rect.y + (17 if big else 13) + LINE_H + (2 if big else 0),
                        r.subtitle,
                        "ta-warn" if warn else "ta-sub",
                    )
                )
        parts.append("</g>")
        out.append("".join(parts))
    return out


def _wires(lay: Layout) -> list[str]:
    out = []
    for w in lay.wires:
        cls = f"ta-{w.kind}" + (" ta-degraded ta-finding" if w.finding else "")
        attrs = (
            f'class="{cls}" x1="{_n(w.x1)}" y1="{_n(w.y1)}" x2="{_n(w.x2)}" y2="{_n(w.y2)}" '
            f'stroke-width="{_n(w.width)}"'
        )
        if w.device is not None:
            attrs += f' data-id="{_a(w.device)}" data-bdf="{_a(w.bdf)}"'
        if w.finding:
            attrs += f' data-finding="{_a(w.finding)}"'
        title = f"<title>{escape(w.label)}</title>" if w.label else ""
        out.append(f"<line {attrs}>{title}</line>" if title else f"<line {attrs}/>")
    return out


def _tiles(lay: Layout) -> list[str]:
    out = []
    for t in lay.tiles:
        cls = (
            f"ta-tile ta-{t.kind}"
            + (f" ta-role-{t.role}" if t.role else "")
            + (" ta-numa-unknown" if t.numa_unknown else "")
            + ("" if t.usable else " ta-unusable")
        )
        attrs = (
            f'class="{cls}" id="tile-{_a(t.device)}" data-id="{_a(t.device)}" data-key="{_a(t.key)}" '
            f'data-bdf="{_a(t.bdf)}" data-kind="{_a(t.kind)}" data-role="{_a(t.role)}" '
            f'data-findings="{_a(" ".join(t.findings))}" data-usable="{"true" if t.usable else "false"}"'
        )
        parts = [f"<g {attrs}>", _rect(t.rect, 5)]
        for i, line in enumerate(t.lines):
            y = t.rect.y + 5 + FONT + i * LINE_H - 1
            warn = line.startswith("⚠") or "NUMA node unknown" in line
            cls_line = "ta-name" if i == 0 else "ta-warn" if warn else ""
            parts.append(_text(t.rect.x + 6, y, line, cls_line))
        parts.append("</g>")
        out.append("".join(parts))
    for c in lay.chips:
        out.append(
            f'<g class="ta-chip" id="{_a(c.ident)}" data-ids="{_a(" ".join(c.devices))}" '
            f'data-bdfs="{_a(" ".join(c.bdfs))}">{_rect(c.rect, 4)}'
            f"{_text(c.rect.x + 6, c.rect.y + 15, c.text)}</g>"
        )
    return out


def _ties(lay: Layout) -> list[str]:
    out = []
    for t in lay.ties:
        kind = tie_grade(t.cls)
        graded = t.cls.name if t.cls is not None else "?"  # NCCL's name (P2C on Grace)
        cls = f"ta-tie ta-cls-{kind}" + (" ta-finding" if t.finding else "")
        attrs = (
            f'class="{cls}" id="tie-{_a(t.gpu)}-{_a(t.nic)}" data-gpu="{_a(t.gpu)}" data-nic="{_a(t.nic)}" '
            f'data-gpu-bdf="{_a(t.gpu_bdf)}" data-nic-bdf="{_a(t.nic_bdf)}" data-class="{_a(graded)}" '
            f'data-token="{_a(t.token)}"'
        )
        if t.finding:
            attrs += f' data-finding="{_a(t.finding)}" data-severity="{_a(t.severity)}"'
        d = "M" + " L".join(f"{_n(x)} {_n(y)}" for x, y in t.points)
        what = f"{t.gpu} → {t.nic}: {t.token}" + (f" ({t.finding})" if t.finding else "")
        out.append(
            f'<g {attrs}><title>{escape(what)}</title><path d="{d}"/>{_rect(t.label, 3)}'
            f"{_text(t.label.cx, t.label.bottom - 3.5, t.token)}</g>"
        )
    return out


def _marks(lay: Layout) -> list[str]:
    out = []
    for m in lay.marks:
        out.append(
            f'<g class="ta-mark ta-acs ta-finding" data-finding="{_a(m.finding)}" data-id="{_a(m.device)}" '
            f'data-bdf="{_a(m.bdf)}" data-subjects="{_a(" ".join(m.subjects))}">'
            f"<title>{escape(f'{m.finding} on {m.bdf}')}</title>{_rect(m.rect, 3)}"
            f"{_text(m.rect.cx, m.rect.bottom - 3, m.text)}</g>"
        )
    return out


def _legend(lay: Layout) -> list[str]:
    b = lay.legend_box
    parts = ['<g class="ta-legend" id="legend">', _rect(b, 6), _text(b.x + 10, b.y + 16, "Legend", "ta-region-title")]
    for e in lay.legend:
        r = e.rect
        k = e.kind
        if k.startswith("tie-"):
            cls = k.removeprefix("tie-")
            parts.append(
                f'<g class="ta-tie ta-cls-{cls}"><path d="M{_n(r.x)} {_n(r.cy)} L{_n(r.right)} {_n(r.cy)}"/></g>'
            )
        elif k == "acs":
            parts.append(
                f'<g class="ta-acs">{_rect(Rect(r.x + 4, r.y + 1, 20, 12), 3)}{_text(r.x + 14, r.y + 10, "ACS")}</g>'
            )
        elif k == "degraded":
            parts.append(
                f'<line class="ta-link ta-degraded" x1="{_n(r.x)}" y1="{_n(r.cy)}" x2="{_n(r.right)}" '
                f'y2="{_n(r.cy)}" stroke-width="1.2"/>'
            )
        elif k == "numa-unknown":
            parts.append(f'<g class="ta-tile ta-gpu ta-numa-unknown">{_rect(r, 3)}</g>')
        elif k == "switch":
            parts.append(f'<g class="ta-switch">{_rect(r, 3)}</g>')
        else:
            kind, _, role = k.partition("-")
            cls = f"ta-tile ta-{kind}" + (f" ta-role-{role}" if role else "")
            parts.append(f'<g class="{cls}">{_rect(r, 3)}</g>')
        parts.append(_text(r.right + 6, r.bottom - 3, e.text))
    parts.append("</g>")
    return parts


def svg_of(lay: Layout) -> str:
    """The SVG text of a layout."""
    w, h = _n(lay.width), _n(lay.height)
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="ta-draw" width="{w}" height="{h}" '
        f'viewBox="0 0 {w} {h}" font-family="DejaVu Sans Mono, Menlo, Consolas, Liberation Mono, monospace" '
        f'font-size="{_n(FONT)}">'
    )
    body = [
        head,
        f"<title>{escape(lay.title)}</title>",
        f"<style>{STYLE}</style>",
        f'<rect class="ta-bg" x="0" y="0" width="{w}" height="{h}"/>',
        _text(16, 24, lay.title, "ta-title"),
        _text(16, 24 + LINE_H + 4, lay.subtitle, "ta-sub"),
        '<g id="regions">',
        *_regions(lay),
        "</g>",
        '<g id="wires">',
        *_wires(lay),
        "</g>",
        '<g id="tiles">',
        *_tiles(lay),
        "</g>",
        '<g id="ties">',
        *_ties(lay),
        "</g>",
        '<g id="marks">',
        *_marks(lay),
        "</g>",
        *_legend(lay),
        "</svg>",
    ]
    return "\n".join(body) + "\n"


def render(result: ScanResult, **_: Any) -> str:
    """``draw --format svg``: the picture of the scan."""
    return svg_of(layout(result))
