"""``topoagent draw --format dot``: the picture as Graphviz source, for people who post-process.

The grouping is :func:`topoagent.outputs.layout.scene`'s -- sockets, NUMA nodes, host bridges
and switches as nested clusters, GPUs and NICs as nodes -- and Graphviz's ``dot`` does the
layout (``dot -Tsvg``, ``dot -Tpng``; ``topoagent draw --format png`` runs the latter).  Rails
are edges labelled with their path class; a rail with a placement finding is red and carries
the finding's code in its tooltip; an ACS-redirecting port is a red note on its switch.

Every node id is the device's stable key (its BDF, or ``nvidia-smi:GPU0``), quoted, so two
drawings of one host diff cleanly.  See https://graphviz.org/doc/info/lang.html for the syntax.
"""

from __future__ import annotations

from typing import Any

from topoagent.analysis.paths import switch_of
from topoagent.outputs.escape import text_output
from topoagent.outputs.layout import (
    DEGRADED_CODES,
    TIE_GRADE,
    SceneBox,
    SceneChip,
    SceneNode,
    SceneTile,
    compact_link,
    nic_role,
    scene,
    tie_findings,
)
from topoagent.result import ScanResult
from topoagent.topology import Device, DeviceKind

__all__ = ["quote", "render"]

_FILL = {"gpu": "#e8f5e9", "compute": "#e3f2fd", "storage": "#f3e5f5", "management": "#f5f5f5",
         "vf": "#f1f8fe", "accelerator": "#fffde7"}
_TIE = {"good": "#2e7d32", "warn": "#f9a825", "bad": "#d32f2f"}


def quote(text: str) -> str:
    """A DOT double-quoted string (backslashes and quotes escaped, newlines as ``\\n``)."""
    text = text_output(text)  # control characters shown as \x1b (then escaped like any backslash)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class _Dot:
    def __init__(self, result: ScanResult) -> None:
        self.result = result
        self.lines: list[str] = []
        # box ident -> the ACS-redirecting bridges drawn in it (a port is folded into its switch,
        # a root port into its host bridge).
        self.acs_in: dict[str, list[Device]] = {}
        topo = result.topology
        for f in result.findings:
            br = topo.by_id(f.subjects[0]) if f.code == "ACS_REDIRECT" and f.subjects else None
            if br is None:
                continue
            sw = switch_of(topo, br)
            self.acs_in.setdefault(f"sw-{sw}" if sw is not None else f"hb-{br.root_bus}", []).append(br)
        self.degraded = {f.subjects[0] for f in result.findings if f.code in DEGRADED_CODES and f.subjects}
        self.clusters = 0

    def emit(self, depth: int, text: str) -> None:
        self.lines.append("  " * depth + text)

    def cluster(self, depth: int, label: str, style: str) -> None:
        self.clusters += 1
        self.emit(depth, f"subgraph cluster_{self.clusters} {{")
        self.emit(depth + 1, f"label={quote(label)}; {style}")

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
        self.emit(depth, f'{quote(d.key)} [label={quote(chr(10).join(lines))}, fillcolor="{_FILL[kind]}", '
                         f"id={quote('tile-' + d.id)}{extra}];")

    def box(self, depth: int, b: SceneBox) -> None:
        label = b.title
        if b.device is not None:
            link = compact_link(b.device.link)
            label += f"\n{b.device.name}" + (f"\n{'⚠ ' if b.device.id in self.degraded else ''}{link}" if link else "")
        style = {"switch": 'style="rounded,filled"; fillcolor="#eceff1"; color="#546e7a";',
                 "hostbridge": 'style="rounded"; color="#b0bec5";',
                 "group": 'style="rounded,dashed"; color="#b0bec5";'}[b.kind]
        self.cluster(depth, label, style)
        for c in b.children:
            if isinstance(c, SceneTile):
                self.tile(depth + 1, c)
            elif isinstance(c, SceneChip):
                self.emit(depth + 1, f'{quote(c.ident)} [label={quote(c.label)}, shape=note, fillcolor="#fafafa"];')
            else:
                self.box(depth + 1, c)
        # ACS-redirecting ports folded into this box: a red note inside it.
        for br in self.acs_in.get(b.ident, ()):
            self.emit(depth + 1, f"{quote('acs:' + (br.bdf or br.id))} [label={quote('ACS redirect ' + (br.bdf or br.id))}, "
                                 'shape=octagon, style=filled, fillcolor="#d32f2f", fontcolor="white"];')
        self.emit(depth, "}")

    def node(self, depth: int, n: SceneNode, style: str) -> None:
        self.cluster(depth, f"{n.title}\n{n.subtitle}" if n.subtitle else n.title, style)
        for b in n.boxes:
            self.box(depth + 1, b)
        if not n.boxes:
            self.emit(depth + 1, f'{quote(n.ident)} [label="", shape=point, style=invis];')
        self.emit(depth, "}")


def render(result: ScanResult, **_: Any) -> str:
    """``draw --format dot``: Graphviz source of the picture."""
    sc = scene(result)
    g = _Dot(result)
    snap = result.snapshot
    title = f"topoagent · {snap.hostname or '?'}" if snap.from_host_tree else "topoagent · offline"
    g.emit(0, "digraph topoagent {")
    g.emit(1, f'graph [label={quote(title)}, labelloc=t, fontname="DejaVu Sans Mono", fontsize=12, '
              'compound=true, newrank=true, rankdir=TB, nodesep=0.25, ranksep=0.35];')
    g.emit(1, 'node [shape=box, style="rounded,filled", fontname="DejaVu Sans Mono", fontsize=9];')
    g.emit(1, 'edge [fontname="DejaVu Sans Mono", fontsize=9, dir=none, penwidth=2];')
    for s in sc.sockets:
        g.cluster(1, f"{s.title}\n{s.subtitle}" if s.subtitle else s.title,
                  'style="rounded,filled"; fillcolor="#f5f7fa"; color="#37474f"; penwidth=2;')
        for n in s.nodes:
            g.node(2, n, 'style="rounded,filled"; fillcolor="#ffffff"; color="#90a4ae";')
        if not s.nodes:
            g.emit(2, f'{quote(s.ident)} [label="", shape=point, style=invis];')
        g.emit(1, "}")
    if sc.unknown is not None:
        g.node(1, sc.unknown, 'style="rounded,dashed,filled"; fillcolor="#fff8e1"; color="#ef6c00";')
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
        color = _TIE[TIE_GRADE.get(rail.cls.name if rail.cls else "SYS", "bad")]
        tip = f"{rail.gpu} -> {rail.nic}: {token}" + (f" ({f.code})" if f else "")
        g.emit(1, f"{quote(gd.key)} -> {quote(nd.key)} [label={quote(token)}, color=\"{color}\", "
                  f"fontcolor=\"{color}\", tooltip={quote(tip)}, id={quote(f'tie-{rail.gpu}-{rail.nic}')}"
                  + (", penwidth=3.5, constraint=false" if f and rail.cls and rail.cls.name == "SYS" else "") + "];")
    g.emit(0, "}")
    return "\n".join(g.lines) + "\n"
