"""``topoagent draw --format dot``: the picture as Graphviz source, for people who post-process.

The grouping is :func:`topoagent.features.draw.layout.scene`'s -- sockets, NUMA nodes, host bridges
and switches as nested clusters, GPUs and NICs as nodes.  Rails are edges labelled with their
path class (a badge coloured as in the SVG); a rail with a placement finding is red and carries
the finding's code in its tooltip; an ACS-redirecting port is a red mark in its switch.  Below
the host: the legend (the SVG's entries, as many to a row as the SVG puts) and the findings
(severity, code, devices, what, remedy), as HTML-like labels
(https://graphviz.org/doc/info/shapes.html#html).

The source carries :func:`topoagent.features.draw.layout.layout`'s geometry: every node has its
``pos`` and size, every cluster its ``bb``, every tie its route (``pos``) and label place
(``lp``), in points with y up.  ``neato -n2`` draws exactly those
(https://graphviz.org/docs/layouts/neato/), so ``topoagent draw --format png`` (which runs it)
is the SVG's picture: rows that wrap, sockets one above the other when they do not fit side by
side, devices in bus order.  ``dot`` ignores positions and lays the graph out itself; for it the
layout's rows are invisible constraints (a container's columns chained top to bottom, the heads
of a row on one rank, each row below the one before through an invisible anchor), which keep a
big host from becoming one long strip, though ``dot`` may still reorder clusters within a row.

Every node id is the device's stable key (its BDF, or ``nvidia-smi:GPU0``), quoted, so two
drawings of one host diff cleanly.  See https://graphviz.org/doc/info/lang.html for the syntax.
"""

from __future__ import annotations

import textwrap
from itertools import pairwise
from typing import Any

import msgspec

from topoagent.core.analysis.paths import switch_of
from topoagent.core.findings.catalogue import Output, carries
from topoagent.core.pathclass import PathClass
from topoagent.core.pci import DeviceKind
from topoagent.core.render.escape import text_output, xml_text
from topoagent.core.result import ScanResult
from topoagent.core.topology import Device
from topoagent.features.draw.layout import (
    LEGEND,
    MARGIN,
    REGION_GAP,
    Layout,
    Rect,
    SceneBox,
    SceneChip,
    SceneNode,
    SceneSocket,
    SceneTile,
    Tie,
    compact_link,
    layout,
    nic_role,
    rail_class,
    scene,
    tie_findings,
    tie_grade,
)

__all__ = ["quote", "render"]

_FILL = {
    "gpu": "#e8f5e9",
    "compute": "#e3f2fd",
    "storage": "#f3e5f5",
    "management": "#f5f5f5",
    "vf": "#f1f8fe",
    "accelerator": "#fffde7",
}
_LINE = {
    "gpu": "#2e7d32",
    "compute": "#1565c0",
    "storage": "#6a1b9a",
    "management": "#757575",
    "vf": "#64b5f6",
    "accelerator": "#f9a825",
}
_TIE = {"good": "#2e7d32", "warn": "#f9a825", "bad": "#d32f2f", "unknown": "#9e9e9e"}
#: A tie's label badge, as the SVG draws it: fill, border, text.
_BADGE = {
    "good": ("#e8f5e9", "#2e7d32", "#1b5e20"),
    "warn": ("#fff8e1", "#f9a825", "#8d6e00"),
    "bad": ("#d32f2f", "#b71c1c", "#ffffff"),
    "unknown": ("#f5f5f5", "#9e9e9e", "#616161"),
}
_SEVERITY = {"critical": "#b71c1c", "warning": "#e65100", "info": "#455a64"}
#: Invisible ordering edges: no arrow, no ink, no pull on the horizontal placement.
_INVIS = "[style=invis, weight=0]"
_GLYPH = 6.02  #: advance of one DejaVu Sans Mono glyph at 10 pt, in points
_LINE_H = 13.0  #: a line of 10 pt text in an HTML-like label, in points


class _Part(msgspec.Struct, frozen=True):
    """A drawn item as its container orders it: its top-left node and its lowest nodes (quoted)."""

    head: str
    bottoms: tuple[str, ...]


def _lines(placed: list[tuple[Rect, _Part]], rows: bool) -> list[list[_Part]]:
    """Items grouped as the layout placed them: rows (same top, left to right) or columns (same
    left edge, top to bottom); rows top to bottom, columns left to right."""
    groups: dict[float, list[tuple[Rect, _Part]]] = {}
    for rect, part in placed:
        groups.setdefault(rect.y if rows else rect.x, []).append((rect, part))
    return [
        [p for _, p in sorted(g, key=lambda rp: (rp[0].x, rp[0].y) if rows else (rp[0].y, rp[0].x))]
        for _, g in sorted(groups.items())
    ]


def quote(text: str) -> str:
    """A DOT double-quoted string (backslashes and quotes escaped, newlines as ``\\n``)."""
    text = text_output(text)  # control characters shown as \x1b (then escaped like any backslash)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _left(text: str) -> str:
    """A DOT label of left-justified lines (each ends in ``\\l``)."""
    return '"' + "".join(quote(line)[1:-1] + "\\l" for line in text.split("\n")) + '"'


class _Dot:
    def __init__(self, result: ScanResult, lay: Layout, height: float) -> None:
        self.result = result
        self.lines: list[str] = []
        self.height = height  # of the whole drawing: Graphviz's y axis points up, the layout's down
        self.regions = {r.ident: r for r in lay.regions}
        self.tiles = {t.device: t for t in lay.tiles}
        self.chips = {c.ident: c for c in lay.chips}
        self.marks = {m.device: m.rect for m in lay.marks}
        # scene ident -> where the layout put it; its rows and columns are the picture's.
        self.rects: dict[str, Rect] = {r.ident: r.rect for r in lay.regions}
        self.rects.update({c.ident: c.rect for c in lay.chips})
        self.rects.update({f"tile:{t.device}": t.rect for t in lay.tiles})
        self.anchors = 0
        self.stacked: set[tuple[str, str]] = set()  # (upper, lower) heads next to each other in a column
        # box ident -> the ACS-redirecting bridges drawn in it (a port is folded into its switch,
        # a root port into its host bridge).
        self.acs_in: dict[str, list[Device]] = {}
        topo = result.topology
        for f in result.findings:
            br = topo.by_id(f.subjects[0]) if carries(f, Output.DRAWN_ON_BRIDGE) and f.subjects else None
            if br is None:
                continue
            sw = switch_of(topo, br)
            self.acs_in.setdefault(f"sw-{sw}" if sw is not None else f"hb-{br.root_bus}", []).append(br)
        self.degraded = {f.subjects[0] for f in result.findings if carries(f, Output.DRAWN_ON_LINK) and f.subjects}
        self.clusters = 0

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def pos(self, r: Rect) -> str:
        """A node's place and size from the layout (points; ``neato -n2`` keeps them)."""
        return f'pos="{r.cx:.1f},{self.height - r.cy:.1f}", width={r.w / 72:.3f}, height={r.h / 72:.3f}, fixedsize=true'

    def bb(self, r: Rect) -> str:
        return f'bb="{r.x:.1f},{self.height - r.bottom:.1f},{r.right:.1f},{self.height - r.y:.1f}"'

    def cluster(self, depth: int, ident: str, fallback: str, style: str, size: int = 9) -> None:
        """Open a cluster for a region of the layout: its title and subtitle, its box."""
        self.clusters += 1
        region = self.regions.get(ident)
        label = (
            f"{region.title}\n{region.subtitle}"
            if region is not None and region.subtitle
            else region.title
            if region is not None
            else fallback
        )
        self.emit(depth, f"subgraph cluster_{self.clusters} {{")
        self.emit(
            depth + 1,
            f"label={_left(label)}; labeljust=l; fontsize={size}; {style}"
            + (f" {self.bb(region.rect)};" if region is not None else ""),
        )

    def anchor(self, depth: int) -> str:
        """A new invisible node of no size: what a row hangs from."""
        self.anchors += 1
        name = quote(f"anchor-{self.anchors}")
        self.emit(depth, f'{name} [label="", shape=point, width=0, height=0, style=invis, ordering=out, pos="0,0"];')
        return name

    def point(self, depth: int, ident: str) -> _Part:
        """An empty region's one invisible node, so the region is drawn and can be ordered."""
        r = self.rects.get(ident)
        where = f', pos="{r.cx:.1f},{self.height - r.cy:.1f}"' if r is not None else ', pos="0,0"'
        self.emit(depth, f'{quote(ident)} [label="", shape=point, style=invis{where}];')
        return _Part(quote(ident), (quote(ident),))

    def row(self, depth: int, row: list[_Part], above: str | None) -> None:
        """The heads of a row on one rank, asked to stand left to right in this order (a chain
        of flat edges; the anchor above them lists them in order, ``ordering=out``): a hint for
        ``dot``, which does not always keep it across clusters."""
        if len(row) > 1:
            heads = [p.head for p in row]
            self.emit(depth, "{rank=same; " + "; ".join(heads) + "}")
            self.emit(depth, " -> ".join(heads) + " [style=invis];")
        if len(row) > 1 and above is None:  # the first row: an anchor right above it (weight 1 holds it there)
            top = self.anchor(depth)
            for p in row:
                self.emit(depth, f"{top} -> {p.head} [style=invis];")
        elif above is not None:
            for p in row:
                self.emit(depth, f"{above} -> {p.head} {_INVIS};")

    def rows(self, depth: int, rows: list[list[_Part]]) -> _Part:
        """Rows of regions: each row on one rank, each below all of the row before."""
        above: str | None = None
        for upper, lower in zip([None, *rows], rows, strict=False):
            if upper is not None:
                above = self.anchor(depth)
                for b in dict.fromkeys(b for p in upper for b in p.bottoms):
                    self.emit(depth, f"{b} -> {above} {_INVIS};")
            self.row(depth, lower, above)
        return _Part(rows[0][0].head, tuple(b for p in rows[-1] for b in p.bottoms))

    def columns(self, depth: int, cols: list[list[_Part]]) -> _Part:
        """A container's columns: each chained top to bottom, their heads on one rank."""
        for col in cols:
            for a, b in pairwise(col):
                self.stacked.add((a.head, b.head))
                for x in a.bottoms:
                    self.emit(depth, f"{x} -> {b.head} [style=invis];")
        self.row(depth, [c[0] for c in cols], None)
        return _Part(cols[0][0].head, tuple(b for c in cols for b in c[-1].bottoms))

    def tile(self, depth: int, t: SceneTile) -> None:
        d = t.device
        kind = nic_role(self.result, d) if d.kind is DeviceKind.NIC else d.kind.value
        link = compact_link(d.link) or "link ?"
        lines = [f"{d.id} {d.name}", d.bdf or d.key, ("⚠ " if d.id in self.degraded else "") + link]
        names = " ".join(d.rdma_devices + d.netdevs)
        if names:
            lines.append(names)
        if d.numa_node is None:
            lines.append("NUMA node unknown")
        extra = ', color="#ef6c00", penwidth=2, style="rounded,filled,dashed"' if d.numa_node is None else ""
        placed = self.tiles.get(d.id)
        label = quote(chr(10).join(lines))
        if placed is not None:  # the layout's lines (role, rail, NUMA node), fitted to its tile
            label = _left(chr(10).join(placed.lines))
            extra = f", {self.pos(placed.rect)}{extra}"
        self.emit(
            depth,
            f'{quote(d.key)} [label={label}, fillcolor="{_FILL[kind]}", color="{_LINE[kind]}", '
            f"id={quote('tile-' + d.id)}{extra}];",
        )

    def box(self, depth: int, b: SceneBox) -> _Part:
        label = b.title
        if b.device is not None and b.ident not in self.regions:
            link = compact_link(b.device.link)
            label += f"\n{b.device.name}" + (f"\n{'⚠ ' if b.device.id in self.degraded else ''}{link}" if link else "")
        style = {
            "switch": 'style="rounded,filled"; fillcolor="#eceff1"; color="#546e7a";',
            "hostbridge": 'style="rounded"; color="#b0bec5";',
            "group": 'style="rounded,dashed"; color="#b0bec5";',
        }[b.kind]
        self.cluster(depth, b.ident, label, style)
        placed: list[tuple[Rect, _Part]] = []
        for c in b.children:
            if isinstance(c, SceneTile):
                self.tile(depth + 1, c)
                placed.append((self.rects[f"tile:{c.device.id}"], _Part(quote(c.device.key), (quote(c.device.key),))))
            elif isinstance(c, SceneChip):
                chip = self.chips.get(c.ident)
                where = f", {self.pos(chip.rect)}" if chip is not None else ""
                self.emit(
                    depth + 1, f'{quote(c.ident)} [label={quote(c.label)}, shape=note, fillcolor="#fafafa"{where}];'
                )
                placed.append((self.rects[c.ident], _Part(quote(c.ident), (quote(c.ident),))))
            else:
                placed.append((self.rects[c.ident], self.box(depth + 1, c)))
        cols = _lines(placed, rows=False)
        # ACS-redirecting ports folded into this box: a red note inside it, below its last column.
        for br in self.acs_in.get(b.ident, ()):
            ident = quote("acs:" + (br.bdf or br.id))
            mark = self.marks.get(br.id)
            text = "ACS redirect " + (br.bdf or br.id)
            where = f", tooltip={quote(text)}, fontsize=7, {self.pos(mark)}" if mark is not None else ""
            self.emit(
                depth + 1,
                f"{ident} [label={quote('ACS' if mark is not None else text)}, "
                f'shape=octagon, style=filled, fillcolor="#d32f2f", fontcolor="white"{where}];',
            )
            cols[-1].append(_Part(ident, (ident,)))
        part = self.columns(depth + 1, cols)
        self.emit(depth, "}")
        return part

    def node(self, depth: int, n: SceneNode, style: str) -> _Part:
        self.cluster(depth, n.ident, f"{n.title}\n{n.subtitle}" if n.subtitle else n.title, style, 10)
        placed = [(self.rects[b.ident], self.box(depth + 1, b)) for b in n.boxes]
        part = self.rows(depth + 1, _lines(placed, rows=True)) if placed else self.point(depth + 1, n.ident)
        self.emit(depth, "}")
        return part

    def socket(self, depth: int, s: SceneSocket) -> _Part:
        self.cluster(
            depth,
            s.ident,
            f"{s.title}\n{s.subtitle}" if s.subtitle else s.title,
            'style="rounded,filled"; fillcolor="#f5f7fa"; color="#37474f"; penwidth=2;',
            11,
        )
        placed = [
            (
                self.rects[n.ident],
                self.node(depth + 1, n, 'style="rounded,filled"; fillcolor="#ffffff"; color="#90a4ae";'),
            )
            for n in s.nodes
        ]
        part = self.rows(depth + 1, _lines(placed, rows=True)) if placed else self.point(depth + 1, s.ident)
        self.emit(depth, "}")
        return part


def render(result: ScanResult, **_: Any) -> str:
    """``draw --format dot``: Graphviz source of the picture."""
    sc = scene(result)
    lay = layout(result)
    legend, lw, lh = _legend_label(lay)
    findings, fw, fh = _findings_label(result, lay)
    # Their left edges at the margin, as the SVG's legend: Graphviz sizes them, we estimate.
    key = Rect(MARGIN, lay.legend_box.y, lw, lh)
    found = Rect(MARGIN, key.bottom + REGION_GAP, fw, fh)
    height = found.bottom + MARGIN
    width = max(lay.width, key.right + MARGIN, found.right + MARGIN)
    g = _Dot(result, lay, height)
    g.emit(0, "digraph topoagent {")
    g.emit(
        1,
        f"graph [label={_left(lay.title + chr(10) + lay.subtitle)}, labelloc=t, labeljust=l, "
        f'fontname="DejaVu Sans Mono", fontsize=12, bb="0,0,{width:.1f},{height:.1f}", '
        "compound=true, newrank=true, rankdir=TB, nodesep=0.25, ranksep=0.35];",
    )
    g.emit(1, 'node [shape=box, style="rounded,filled", fontname="DejaVu Sans Mono", fontsize=9];')
    g.emit(1, 'edge [fontname="DejaVu Sans Mono", fontsize=9, dir=none, penwidth=2];')
    placed = [(g.rects[s.ident], g.socket(1, s)) for s in sc.sockets]
    if sc.unknown is not None:
        placed.append(
            (
                g.rects[sc.unknown.ident],
                g.node(1, sc.unknown, 'style="rounded,dashed,filled"; fillcolor="#fff8e1"; color="#ef6c00";'),
            )
        )
    rows = _lines(placed, rows=True)
    # The legend, then the findings, each a row of its own below the host.
    for ident, label, r in (("legend", legend, key), ("findings", findings, found)):
        where = f'pos="{r.cx:.1f},{height - r.cy:.1f}"'
        g.emit(1, f"{quote(ident)} [shape=plain, style=solid, fontsize=10, {where}, label=<{label}>];")
        rows.append([_Part(quote(ident), (quote(ident),))])
    g.rows(1, rows)
    for band in lay.regions:  # the socket interconnect between sockets, where the layout draws it
        if band.kind == "interconnect":
            text = band.title if band.rect.w > band.rect.h else ""  # Graphviz cannot turn a label upright
            g.emit(
                1,
                f"{quote(band.ident)} [label={quote(text)}, tooltip={quote(band.title or 'socket interconnect')}, "
                f'shape=box, style=filled, fillcolor="#cfd8dc", color="#78909c", fontsize=10, {g.pos(band.rect)}];',
            )
    drawn = {(t.gpu, t.nic): t for t in lay.ties}
    topo = result.topology
    tie_finding = tie_findings(result)
    for rail in result.rails.rails:
        if rail.nic is None:
            continue
        gd, nd = topo.by_id(rail.gpu), topo.by_id(rail.nic)
        if gd is None or nd is None:
            continue
        path = result.path(rail.gpu, rail.nic)
        token = path.cell if path is not None else "?"
        f = tie_finding.get((rail.gpu, rail.nic))
        # a rail no input shows (a partial paste) is unknown: neutral, not its placeholder's red
        grade = tie_grade(rail_class(rail, path))
        color = _TIE[grade]
        fill, border, ink = _BADGE[grade]
        badge = (
            f'<<TABLE BORDER="1" CELLBORDER="0" CELLPADDING="1" CELLSPACING="0" COLOR="{border}" BGCOLOR="{fill}">'
            f'<TR><TD><FONT COLOR="{ink}"><B>{xml_text(token)}</B></FONT></TD></TR></TABLE>>'
        )
        tip = f"{rail.gpu} -> {rail.nic}: {token}" + (f" ({f.code})" if f else "")
        tie = drawn.get((rail.gpu, rail.nic))
        route = "" if tie is None else f", {_route(tie, height)}"
        g.emit(
            1,
            f'{quote(gd.key)} -> {quote(nd.key)} [label={badge}, color="{color}", '
            f'fontcolor="{color}", tooltip={quote(tip)}, id={quote(f"tie-{rail.gpu}-{rail.nic}")}'
            + (", penwidth=3.5" if f and rail.cls is PathClass.SYS else "")
            + (", style=dashed" if grade == "unknown" else "")
            # Only a tie within one column may rank its NIC; others would undo the rows.
            + ("" if (quote(gd.key), quote(nd.key)) in g.stacked else ", constraint=false")
            + route
            + "];",
        )
    g.emit(0, "}")
    return "\n".join(g.lines) + "\n"


def _route(tie: Tie, height: float) -> str:
    """A tie's polyline from the layout as a Graphviz spline (each segment a straight cubic
    piece, https://graphviz.org/docs/attr-types/splineType/) and its label's place."""
    pts = [(x, height - y) for x, y in tie.points]
    spline = [pts[0]]
    for a, b in pairwise(pts):
        spline += [a, b, b]
    return (
        f'pos="{" ".join(f"{x:.1f},{y:.1f}" for x, y in spline)}", lp="{tie.label.cx:.1f},{height - tie.label.cy:.1f}"'
    )


def _swatch(kind: str) -> str:
    """The legend's sample of one kind of mark, as the DOT draws it (an HTML-like table cell)."""
    cell = '<TD WIDTH="32" HEIGHT="16" FIXEDSIZE="TRUE" CELLPADDING="0"'
    fills = {
        "gpu": _FILL["gpu"],
        "nic-compute": _FILL["compute"],
        "nic-storage": _FILL["storage"],
        "nic-management": _FILL["management"],
    }
    if kind in fills:
        return f'{cell} BORDER="1" COLOR="black" BGCOLOR="{fills[kind]}" STYLE="rounded"></TD>'
    if kind == "switch":
        return f'{cell} BORDER="1" COLOR="#546e7a" BGCOLOR="#eceff1" STYLE="rounded"></TD>'
    if kind.startswith("tie-"):
        color = _TIE[kind[4:]]
        line = "╍╍╍" if kind == "tie-unknown" else "━━━"  # dashed, as the edge is drawn
        return f'{cell}><FONT COLOR="{color}" POINT-SIZE="10">{line}</FONT></TD>'
    if kind == "acs":
        return f'{cell} BGCOLOR="#d32f2f"><FONT COLOR="white">ACS</FONT></TD>'
    if kind == "degraded":
        return f"{cell}>⚠ x8</TD>"
    return f'{cell} BORDER="1" COLOR="#ef6c00" STYLE="dashed"></TD>'  # numa-unknown


def _legend_label(lay: Layout) -> tuple[str, float, float]:
    """The legend as an HTML-like label -- the SVG's entries, as many to a row as the SVG puts
    when that fits the picture's width, else fewer -- and about how wide and high it is drawn."""
    room = lay.width - 2 * MARGIN
    per_row = sum(1 for e in lay.legend if e.rect.y == lay.legend[0].rect.y) if lay.legend else len(LEGEND)

    def wide(n: int) -> float:  # a grid: each text column as wide as its longest entry
        cols = [max(len(text) for _, text in LEGEND[j::n]) * _GLYPH + 4 for j in range(n)]
        return sum(cols) + n * 32 + (2 * n + 1) * 4 + 2

    while per_row > 1 and wide(per_row) > room:
        per_row -= 1
    rows = []
    for i in range(0, len(LEGEND), per_row):
        cells = "".join(
            f'{_swatch(kind)}<TD ALIGN="LEFT">{xml_text(text)}</TD>' for kind, text in LEGEND[i : i + per_row]
        )
        rows.append(f"<TR>{cells}</TR>")
    label = (
        f'<TABLE BORDER="1" COLOR="#b0bec5" CELLBORDER="0" CELLSPACING="4" CELLPADDING="2" STYLE="rounded">'
        f'<TR><TD COLSPAN="{2 * per_row}" ALIGN="LEFT"><B>Legend</B></TD></TR>{"".join(rows)}</TABLE>'
    )
    return label, wide(per_row), (len(rows) + 1) * (_LINE_H + 4) + (len(rows) + 2) * 4 + 2


def _findings_label(result: ScanResult, lay: Layout) -> tuple[str, float, float]:
    """The findings as an HTML-like label: severity, code, devices, what and remedy, as the
    HTML page's table has them, wrapped to the picture's width; and about how wide and high
    Graphviz draws it (10 pt DejaVu Sans Mono: 6.02 pt a glyph, 13 pt a line)."""
    head = f'<TR><TD COLSPAN="4" ALIGN="LEFT"><B>Findings ({len(result.findings)})</B></TD></TR>'
    table = '<TABLE BORDER="1" COLOR="#b0bec5" CELLBORDER="0" CELLSPACING="4" STYLE="rounded">'
    if not result.findings:
        return (
            f'{table}{head}<TR><TD ALIGN="LEFT"><FONT COLOR="#607d8b">No findings.</FONT></TD></TR></TABLE>',
            14 * _GLYPH + 16,
            2 * _LINE_H + 16,
        )
    code_w = max(len(f.code) for f in result.findings)
    what_w = max(40, int((lay.width - 2 * MARGIN - 48) / _GLYPH) - 8 - code_w - 24)

    def wrap(text: str, cols: int) -> list[str]:
        return textwrap.wrap(text, cols) or [""]

    def cell(lines: list[str]) -> str:
        return "".join(xml_text(t) + '<BR ALIGN="LEFT"/>' for t in lines)

    rows = [head]
    high = _LINE_H + 8
    widths = [0, code_w, 0, 0]  # characters in each column
    for f in result.findings:
        sev = f.severity.label
        subjects, what, remedy = (
            wrap(", ".join(f.subjects), 24),
            wrap(f.message, what_w),
            wrap("remedy: " + f.remedy, what_w),
        )
        high += max(len(subjects), len(what) + len(remedy)) * _LINE_H + 8
        widths = [
            max(widths[0], len(sev)),
            code_w,
            max(widths[2], *map(len, subjects)),
            max(widths[3], *map(len, what + remedy)),
        ]
        rows.append(
            f'<TR><TD ALIGN="LEFT" VALIGN="TOP"><FONT COLOR="{_SEVERITY[sev]}"><B>{sev}</B></FONT></TD>'
            f'<TD ALIGN="LEFT" VALIGN="TOP">{xml_text(f.code)}</TD>'
            f'<TD ALIGN="LEFT" VALIGN="TOP" BALIGN="LEFT">{cell(subjects)}</TD>'
            f'<TD ALIGN="LEFT" VALIGN="TOP" BALIGN="LEFT">{cell(what)}'
            f'<FONT COLOR="#607d8b">{cell(remedy)}</FONT></TD></TR>'
        )
    wide = sum(widths) * _GLYPH + 4 * 4 + 5 * 4 + 2  # glyphs, cell padding, cell spacing, border
    return f"{table}{''.join(rows)}</TABLE>", wide, high
