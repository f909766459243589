"""Where everything goes in ``topoagent draw``'s picture: pure, deterministic geometry.

Two steps, both pure functions of a :class:`~topoagent.core.result.ScanResult`:

* :func:`scene` groups what is drawn: sockets -> NUMA nodes -> host bridges -> PCIe switches ->
  GPU/NIC tiles (NVMe drives and NVSwitches summarised as one chip per container), plus the
  regions a scan could not place ("Socket unknown", "NUMA node unknown").  The Graphviz output
  draws the same grouping.
* :func:`layout` gives every region, tile, PCIe link, rail tie and finding mark a rectangle or
  a curve, in SVG user units (pixels at 100%).

How it is laid out (boxes nest, so nothing overlaps by construction):

* a PCIe container (host bridge or switch) stacks its children in a column behind a left
  gutter that carries the bus and one link stub per child (thicker for more lanes); long columns
  wrap into more columns.  Root ports and downstream ports are folded into their container; a
  Broadcom switch that presents two levels is one box, as NCCL counts it
  (:func:`~topoagent.core.analysis.paths.switch_of`);
* a GPU is followed by its rail NIC when both sit in one container, with a wider gap between
  them that holds the path-class label of their tie;
* NUMA nodes lay their containers out in a row that wraps; sockets lay their nodes out the
  same way; sockets stand side by side when that fits :data:`MAX_WIDTH`, else one above the
  other, with the inter-socket interconnect drawn as a band between them;
* a rail tie (GPU -> primary NIC) is a straight line when the NIC is right below or above
  the GPU, else a polyline through the gaps between boxes (see :func:`_route`); its label goes
  at the first point along it that overlaps no tile, chip, header or other label.

Text is fitted to its box by character count: the SVG uses a monospace font (every glyph
0.6 em wide), so a line that fits here fits on screen.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from itertools import pairwise

import msgspec

from topoagent.core.analysis.paths import Path, switch_of
from topoagent.core.analysis.rails import Rail
from topoagent.core.bdf import bdf_key, root_bus_key
from topoagent.core.findings import Finding, Severity
from topoagent.core.findings.catalogue import Output, carries
from topoagent.core.frozen import FrozenMap
from topoagent.core.pathclass import PathClass
from topoagent.core.pci import DeviceKind, is_nvswitch_or_other_bridge
from topoagent.core.platform import PlatformRole
from topoagent.core.render.tree import format_bytes
from topoagent.core.render.verdict import unusable_words
from topoagent.core.result import ScanResult
from topoagent.core.snapshot import LinkInfo
from topoagent.core.topology import BridgeRole, Device, Node, Topology, id_key

__all__ = [
    "Chip",
    "Layout",
    "LegendEntry",
    "Mark",
    "Rect",
    "Region",
    "Scene",
    "SceneBox",
    "SceneChip",
    "SceneNode",
    "SceneSocket",
    "SceneTile",
    "Tie",
    "Tile",
    "Wire",
    "compact_link",
    "fit",
    "layout",
    "nic_role",
    "scene",
    "tie_findings",
    "rail_class",
    "tie_grade",
]

# -- geometry constants (SVG user units) ---------------------------------------------------

FONT = 11.0  #: tile and header text size
CHAR_W = FONT * 0.6  #: advance of one monospace glyph at FONT
LINE_H = 13.0
TILE_W = 190.0
TILE_LINES = 4
TILE_H = TILE_LINES * LINE_H + 10
CHIP_H = 22.0
GAP = 10.0  #: between stacked items in a container
TIE_GAP = 26.0  #: between a GPU and the NIC tied to it: holds the tie's label
GUTTER = 22.0  #: a container's left margin: bus, link stubs, ACS marks
PAD = 5.0
COL_GAP = 8.0
MAX_ROWS = 6  #: items per column in a container before it wraps
REGION_PAD = 10.0
REGION_GAP = 12.0
REGION_HEAD = 2 * LINE_H + 8
BAND = 44.0  #: width (or height) of the inter-socket interconnect band
MAX_WIDTH = 1640.0  #: sockets side by side only up to this width; rows wrap at it
MARGIN = 16.0
LABEL_H = 14.0

#: Path class of a rail -> how it is painted (``good``, ``warn``; ``bad`` for any other).
TIE_GRADE = {
    PathClass.NV: "good",
    PathClass.PIX: "good",
    PathClass.PXB: "good",
    PathClass.P2C: "good",
    PathClass.PHB: "warn",
    PathClass.NODE: "warn",
    PathClass.SYS: "bad",
}


def rail_class(rail: Rail, path: Path | None) -> PathClass | None:
    """The class a rail is graded by: None where no input shows it; NCCL's where it differs
    from nvidia-smi's (a Grace GPU's own-CPU NIC: ``P2C``, GPUDirect RDMA on, though the cell
    reads ``SYS``); else its class."""
    if rail.nccl_class is None or (path is not None and not path.shown):
        return None
    return rail.nccl_class


def tie_grade(cls: PathClass | None) -> str:
    """How a rail is painted: by :data:`TIE_GRADE`; ``unknown`` (neutral grey, dashed) for a rail
    no input shows (None: a partial paste), never a colour its placeholder class would earn."""
    return "unknown" if cls is None else TIE_GRADE.get(cls, "bad")


class Rect(msgspec.Struct, frozen=True):
    """An axis-aligned rectangle in drawing units: left, top, width, height."""

    x: float
    y: float
    w: float
    h: float

    @property
    def right(self) -> float:
        """The right edge."""
        return self.x + self.w

    @property
    def bottom(self) -> float:
        """The bottom edge."""
        return self.y + self.h

    @property
    def cx(self) -> float:
        """The horizontal centre."""
        return self.x + self.w / 2

    @property
    def cy(self) -> float:
        """The vertical centre."""
        return self.y + self.h / 2

    def overlaps(self, other: Rect, margin: float = 0.0) -> bool:
        """True when the two rectangles share interior area (touching edges do not count)."""
        return (
            self.x < other.right + margin
            and other.x < self.right + margin
            and self.y < other.bottom + margin
            and other.y < self.bottom + margin
        )


def fit(text: str, width: float, size: float = FONT) -> str:
    """``text`` cut (with an ellipsis) to what a monospace font of ``size`` fits in ``width``."""
    room = int(width // (size * 0.6))
    if len(text) <= room:
        return text
    return text[: max(room - 1, 0)] + "…" if room > 0 else ""


def compact_link(link: LinkInfo) -> str | None:
    """``x16 · 32 GT/s``, ``x8/16 · 8/32 GT/s`` below its maximum; None when unknown."""
    if not link.known:
        return None
    w, mw, s, ms = link.current_width, link.max_width, link.current_gts, link.max_gts
    width = "x?" if w is None else f"x{w}" + (f"/{mw}" if mw is not None and mw != w else "")
    speed = "?" if s is None else f"{s:g}" + (f"/{ms:g}" if ms is not None and ms != s else "")
    return f"{width} · {speed} GT/s"


# -- the scene: what is drawn, grouped -----------------------------------------------------


class SceneTile(msgspec.Struct, frozen=True):
    """A device drawn as a tile of its own (GPU, NIC, accelerator)."""

    device: Device


class SceneChip(msgspec.Struct, frozen=True):
    """Several devices of one kind in one container, drawn as one line (``4× NVMe``)."""

    ident: str
    label: str
    devices: tuple[Device, ...]


class SceneBox(msgspec.Struct, frozen=True):
    """A host bridge (``device`` None), a PCIe switch (``device``: its upstream port), or the
    devices of a source without a PCI tree (``kind`` ``group``)."""

    kind: str
    ident: str
    title: str
    device: Device | None
    children: tuple[SceneTile | SceneChip | SceneBox, ...]


class SceneNode(msgspec.Struct, frozen=True):
    """A NUMA node's region: its title lines and the boxes in it."""

    ident: str
    title: str
    subtitle: str
    node: int | None
    boxes: tuple[SceneBox, ...]


class SceneSocket(msgspec.Struct, frozen=True):
    """A socket's region: its title lines and its NUMA nodes."""

    ident: str
    title: str
    subtitle: str
    socket: int | None
    nodes: tuple[SceneNode, ...]


class Scene(msgspec.Struct, frozen=True):
    """What is drawn, grouped: sockets, their nodes and boxes, and what no node could be given to."""

    sockets: tuple[SceneSocket, ...]
    #: The region of what no NUMA node could be given to, or None.
    unknown: SceneNode | None


_TILE_KINDS = (DeviceKind.GPU, DeviceKind.NIC, DeviceKind.ACCELERATOR)


def _chip_kind(d: Device) -> str | None:
    if d.kind is DeviceKind.NVME:
        return "NVMe"
    if d.platform_role is PlatformRole.CX_DMA:
        return "DMA"  # a ConnectX-8 Data Direct DMA function: its NIC's path to the GPU
    if d.kind is DeviceKind.NVSWITCH:
        return "NVSwitch"
    if d.kind is DeviceKind.BRIDGE and d.role is None and is_nvswitch_or_other_bridge(d.class_code):
        return "bridge"  # another 0x0680 bridge function
    return None


def _containers(topo: Topology, d: Device) -> list[Device]:
    """The switches a device sits below, outermost first (each named by its upstream port)."""
    out: list[Device] = []
    for bdf in d.ancestors:
        br = topo.by_bdf(bdf)
        sw = switch_of(topo, br) if br is not None else None
        up = topo.by_bdf(sw) if sw is not None else None
        if up is not None and up.role is BridgeRole.SWITCH_UPSTREAM and up not in out:
            out.append(up)
    return out


def _order(
    children: list[SceneTile | SceneChip | SceneBox], rail_of: dict[str, str]
) -> list[SceneTile | SceneChip | SceneBox]:
    """Children in PCI order, each GPU followed by its rail NIC when that NIC is a sibling."""
    tiles = {c.device.id: c for c in children if isinstance(c, SceneTile)}
    placed: set[int] = set()
    deferred = {nic for gpu, nic in rail_of.items() if gpu in tiles and nic in tiles}
    out: list[SceneTile | SceneChip | SceneBox] = []
    for c in children:
        if id(c) in placed:
            continue
        if isinstance(c, SceneTile) and c.device.id in deferred:
            continue  # comes right after its GPU
        out.append(c)
        placed.add(id(c))
        if isinstance(c, SceneTile) and c.device.id in rail_of:
            nic = tiles.get(rail_of[c.device.id])
            if nic is not None and id(nic) not in placed:
                out.append(nic)
                placed.add(id(nic))
    return out


def scene(result: ScanResult) -> Scene:
    """Group the drawn devices of a scan into sockets, nodes, host bridges and switches."""
    topo = result.topology
    boxes = _Boxes(result)
    sockets: list[SceneSocket] = []
    placed: set[int] = set()
    groups: list[tuple[int | None, list[Node]]] = [
        (s.id, [n for n in topo.nodes if n.socket == s.id]) for s in topo.sockets
    ]
    rest = [n for n in topo.nodes if n.socket is None or n.socket not in {s.id for s in topo.sockets}]
    if rest:
        groups.append((None, rest))
    for sid, nodes in groups:
        placed.update(n.id for n in nodes)
        sockets.append(_socket(topo, sid, nodes, boxes))
    return Scene(tuple(sockets), _unknown_node(boxes, placed))


class _Boxes:
    """The boxes of the drawn devices: which container (host bridge name, switch USP BDF, or
    ``group:NODE`` where a source has no PCI tree) holds which devices and sub-containers, and
    the top-level containers of each NUMA node."""

    def __init__(self, result: ScanResult) -> None:
        topo = result.topology
        self.topo = topo
        self.rail_of = {r.gpu: r.nic for r in result.rails.rails if r.nic is not None}
        self.members: dict[str, list[Device]] = defaultdict(list)
        self.sub: dict[str, list[str]] = defaultdict(list)
        self.top: dict[int | None, list[str]] = defaultdict(list)  # NUMA node -> top-level containers
        hb_node = {hb.name: hb.numa_node for hb in topo.host_bridges}
        for d in topo.devices:
            if d.kind in _TILE_KINDS or _chip_kind(d) is not None:
                self._add(d, hb_node)

    def _add(self, d: Device, hb_node: dict[str, int | None]) -> None:
        if d.root_bus is None:
            key = f"group:{'unknown' if d.numa_node is None else d.numa_node}"
            if key not in self.top[d.numa_node]:
                self.top[d.numa_node].append(key)
            self.members[key].append(d)
            return
        node = hb_node.get(d.root_bus)
        if d.root_bus not in self.top[node]:
            self.top[node].append(d.root_bus)
        parent = d.root_bus
        for sw in _containers(self.topo, d):
            if sw.bdf not in self.sub[parent]:
                self.sub[parent].append(sw.bdf)  # type: ignore[arg-type]
            parent = sw.bdf  # type: ignore[assignment]
        self.members[parent].append(d)

    def box(self, key: str) -> SceneBox:
        """The box of one container: its tiles and sub-boxes in order, then its chips."""
        items: list[SceneTile | SceneChip | SceneBox] = []
        chips: dict[str, list[Device]] = defaultdict(list)
        for d in self.members.get(key, ()):
            kind = _chip_kind(d)
            if kind is None:
                items.append(SceneTile(d))
            else:
                chips[kind].append(d)
        items.extend(self.box(s) for s in self.sub.get(key, ()))
        items.sort(key=_item_sort_key)
        ordered = _order(items, self.rail_of)
        for kind, devs in sorted(chips.items()):
            label = f"{len(devs)}× {kind}" if len(devs) > 1 else f"{kind} {devs[0].bdf or devs[0].id}"
            ordered.append(SceneChip(f"chip-{key.replace('group:', 'group-')}-{kind.lower()}", label, tuple(devs)))
        if key.startswith("group:"):
            return SceneBox("group", f"group-{key[6:]}", "no PCI tree in this source", None, tuple(ordered))
        up = self.topo.by_bdf(key)
        if up is None:
            return SceneBox("hostbridge", f"hb-{key}", f"{key} host bridge", None, tuple(ordered))
        return SceneBox("switch", f"sw-{key}", f"switch {key}", up, tuple(ordered))

    def node(self, node_id: int | None, title: str, subtitle: str, ident: str) -> SceneNode:
        """A node's boxes: host bridges in bus order, then the groups without a PCI tree."""
        keys = sorted(
            self.top.get(node_id, ()),
            key=lambda k: (k.startswith("group:"), root_bus_key(k) if not k.startswith("group:") else (0, 0)),
        )
        return SceneNode(ident, title, subtitle, node_id, tuple(self.box(k) for k in keys))


def _socket(topo: Topology, sid: int | None, nodes: list[Node], boxes: _Boxes) -> SceneSocket:
    """A socket (``sid`` None: nodes of no listed socket) with its nodes; a memory-only node
    without devices is named in the subtitle rather than drawn."""
    shown = [n for n in nodes if not n.cpu_less or boxes.top.get(n.id)]
    memory_only = [n.id for n in nodes if n.cpu_less and not boxes.top.get(n.id)]
    sock = next((s for s in topo.sockets if s.id == sid), None)
    title = f"Socket {sid}" if sid is not None else "Socket unknown"
    sub_parts = [f"CPUs {sock.cpus}" if sock is not None and sock.cpus else ""]
    if memory_only:
        sub_parts.append("memory-only NUMA nodes " + ",".join(str(i) for i in memory_only))
    subtitle = " · ".join(p for p in sub_parts if p)
    return SceneSocket(
        f"socket-{sid if sid is not None else 'unknown'}",
        title,
        subtitle,
        sid,
        tuple(boxes.node(n.id, f"NUMA node {n.id}", _node_subtitle(n), f"node-{n.id}") for n in shown),
    )


def _unknown_node(boxes: _Boxes, placed: set[int]) -> SceneNode | None:
    """The devices on no node or on nodes the scan does not list, in one box; None if none."""
    orphans = [k for k in boxes.top if k is not None and k not in placed]
    unknown_keys = [None, *sorted(orphans)]
    if not any(boxes.top.get(k) for k in unknown_keys):
        return None
    found: list[SceneBox] = []
    for k in unknown_keys:
        found.extend(boxes.node(k, "", "", "").boxes)
    return SceneNode("node-unknown", "NUMA node unknown", "no NUMA node in the source", None, tuple(found))


#: Vendor words that take room in a tile and tell a GPU engineer nothing.
_VENDOR_PREFIXES = ("NVIDIA Corporation ", "NVIDIA ", "Mellanox Technologies ", "Mellanox ")


def nic_role(result: ScanResult, d: Device) -> str:
    """How a NIC is drawn: ``vf``, or its rail role (``compute``/``storage``), else ``management``."""
    role = result.rails.roles.get(d.id)
    return "vf" if d.is_vf else role.value if role is not None else "management"


def _short_name(name: str) -> str:
    for prefix in _VENDOR_PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :]
    return name


def _item_sort_key(item: SceneTile | SceneChip | SceneBox) -> tuple[int, tuple[int, ...], str]:
    """PCI order; devices without an address after them, by id; chips last."""
    d = item.device if isinstance(item, (SceneTile, SceneBox)) else None
    if d is None:
        return (2, (), "")
    if d.bdf is None:
        head, num = id_key(d.id)
        return (1, (num,), head)
    return (0, bdf_key(d.bdf), "")


def _node_subtitle(n: Node) -> str:
    if not n.cpus_known:
        cpus = "CPUs ?"
    elif n.cpu_less:
        cpus = "no CPUs" + (f" (bind to node {n.nearest_cpu_node})" if n.nearest_cpu_node is not None else "")
    else:
        cpus = f"CPUs {n.cpulist}"
    return cpus + ("" if n.memory_bytes is None else f" · {format_bytes(n.memory_bytes)}")


# -- the layout: geometry ------------------------------------------------------------------


class Region(msgspec.Struct, frozen=True):
    """A socket, NUMA node, host bridge, switch, no-tree group, or the interconnect band."""

    kind: str
    ident: str
    rect: Rect
    title: str
    subtitle: str = ""
    device: str | None = None
    bdf: str | None = None
    #: The header's text area (labels avoid it).
    head: Rect | None = None
    findings: tuple[str, ...] = ()


class Tile(msgspec.Struct, frozen=True):
    """A GPU, NIC or accelerator."""

    device: str
    key: str
    bdf: str | None
    kind: str
    #: NIC role (``compute``/``storage``/``management``/``vf``), ``None`` for others.
    role: str | None
    rect: Rect
    lines: tuple[str, ...]
    numa_unknown: bool
    degraded: bool
    findings: tuple[str, ...]
    #: False for a GPU a finding makes unusable (the scan's ``unusable``).
    usable: bool = True


class Chip(msgspec.Struct, frozen=True):
    """A placed :class:`SceneChip`: its rectangle, its text and the devices it stands for."""

    ident: str
    rect: Rect
    text: str
    devices: tuple[str, ...]
    bdfs: tuple[str, ...]


class Wire(msgspec.Struct, frozen=True):
    """A container's bus (``kind`` ``bus``) or the PCIe link of one child (``link``)."""

    kind: str
    x1: float
    y1: float
    x2: float
    y2: float
    width: float
    device: str | None = None
    bdf: str | None = None
    #: A link finding drawn on it (:attr:`Output.DRAWN_ON_LINK`), None when fine.
    finding: str | None = None
    label: str | None = None


class Tie(msgspec.Struct, frozen=True):
    """A GPU's rail: a polyline from the GPU tile to its primary NIC's tile."""

    gpu: str
    nic: str
    gpu_bdf: str | None
    nic_bdf: str | None
    token: str
    #: The class the tie is graded by (:func:`rail_class`); None where no input shows it.
    cls: PathClass | None
    points: tuple[tuple[float, float], ...]
    label: Rect
    #: The placement finding about this rail (:attr:`Output.DRAWN_ON_RAIL`), None when fine.
    finding: str | None
    severity: str | None


class Mark(msgspec.Struct, frozen=True):
    """A finding drawn on a bridge (:attr:`Output.DRAWN_ON_BRIDGE`)."""

    finding: str
    bdf: str | None
    device: str
    rect: Rect
    text: str
    subjects: tuple[str, ...]


class LegendEntry(msgspec.Struct, frozen=True):
    """One legend line: the swatch of a kind and its text."""

    kind: str
    text: str
    rect: Rect  #: the swatch; the text follows it on the same line


class Layout(msgspec.Struct, frozen=True):
    """A placed drawing: its size, titles and every region, tile, wire, tie and mark the renderers draw."""

    width: float
    height: float
    title: str
    subtitle: str
    regions: tuple[Region, ...]
    tiles: tuple[Tile, ...]
    chips: tuple[Chip, ...]
    wires: tuple[Wire, ...]
    ties: tuple[Tie, ...]
    marks: tuple[Mark, ...]
    legend: tuple[LegendEntry, ...]
    legend_box: Rect
    #: Device id -> the rectangle it is drawn in (tiles, switch boxes, chips' devices).
    where: FrozenMap[str, Rect] = msgspec.field(default_factory=FrozenMap)


#: The legend: swatch kind, text.
LEGEND: tuple[tuple[str, str], ...] = (
    ("gpu", "GPU"),
    ("nic-compute", "NIC: compute (rail)"),
    ("nic-storage", "NIC: storage"),
    ("nic-management", "NIC: management"),
    ("switch", "PCIe switch"),
    ("tie-good", "rail GPU→NIC: PIX/PXB; Grace's own-CPU SYS (NCCL P2C); Data Direct (NCCL PXB via DMA)"),
    ("tie-warn", "rail through the CPU: PHB/NODE"),
    ("tie-bad", "rail across the interconnect: SYS"),
    ("tie-unknown", "rail the input does not show: ?"),
    ("acs", "ACS redirects peer traffic"),
    ("degraded", "link below its maximum"),
    ("numa-unknown", "NUMA node unknown"),
)
LEGEND_SWATCH = 28.0


class _Placer:
    """Measures and places the scene; collects the output.  Used once per :func:`layout`."""

    def __init__(self, result: ScanResult) -> None:
        self.result = result
        self.topo = result.topology
        self.tied = {frozenset((r.gpu, r.nic)) for r in result.rails.rails if r.nic is not None}
        self.sizes: dict[int, tuple[float, float]] = {}
        self.regions: list[Region] = []
        self.tiles: list[Tile] = []
        self.chips: list[Chip] = []
        self.wires: list[Wire] = []
        self.where: dict[str, Rect] = {}
        self.stub_y: dict[str, tuple[float, float, float]] = {}  # device id -> (bus x, y, child x)
        self.tops: list[Rect] = []  # top-level boxes (host bridges, groups), where ties are routed round
        self.top_of: dict[str, Rect] = {}  # tile's device id -> its top-level box
        self.findings_of: dict[str, list[Finding]] = defaultdict(list)
        for f in result.findings:
            for s in f.subjects:
                self.findings_of[s].append(f)
        self.degraded = {
            f.subjects[0]: f.code for f in result.findings if carries(f, Output.DRAWN_ON_LINK) and f.subjects
        }

    # -- containers -------------------------------------------------------------------------
    def head_h(self, box: SceneBox) -> float:
        return 2 * LINE_H + 6 if box.kind == "switch" else LINE_H + 6

    def columns(self, box: SceneBox) -> list[list[SceneTile | SceneChip | SceneBox]]:
        cols: list[list[SceneTile | SceneChip | SceneBox]] = []
        items = list(box.children)
        while items:
            n = min(MAX_ROWS, len(items))
            # Never split a GPU from the NIC tied to it.
            if n < len(items) and self.gap(items[n - 1], items[n]) == TIE_GAP and n > 1:
                n -= 1
            cols.append(items[:n])
            items = items[n:]
        return cols

    def gap(self, a: SceneTile | SceneChip | SceneBox, b: SceneTile | SceneChip | SceneBox) -> float:
        if isinstance(a, SceneTile) and isinstance(b, SceneTile) and frozenset((a.device.id, b.device.id)) in self.tied:
            return TIE_GAP
        return GAP

    def col_size(self, col: Sequence[SceneTile | SceneChip | SceneBox]) -> tuple[float, float]:
        w = max(self.size(c)[0] for c in col)
        h = sum(self.size(c)[1] for c in col) + sum(self.gap(a, b) for a, b in pairwise(col))
        return w, h

    def size(self, item: SceneTile | SceneChip | SceneBox) -> tuple[float, float]:
        if id(item) in self.sizes:
            return self.sizes[id(item)]
        if isinstance(item, SceneTile):
            s = (TILE_W, TILE_H)
        elif isinstance(item, SceneChip):
            s = (TILE_W, CHIP_H)
        else:
            cols = [self.col_size(c) for c in self.columns(item)]
            w = sum(GUTTER + cw for cw, _ in cols) + COL_GAP * (len(cols) - 1) + PAD
            h = self.head_h(item) + PAD + max((ch for _, ch in cols), default=0.0) + PAD
            s = (max(w, GUTTER + TILE_W + PAD), h)
        self.sizes[id(item)] = s
        return s

    def place_item(self, item: SceneTile | SceneChip | SceneBox, x: float, y: float) -> None:
        w, h = self.size(item)
        r = Rect(x, y, w, h)
        if isinstance(item, SceneTile):
            self.place_tile(item.device, r)
        elif isinstance(item, SceneChip):
            self.chips.append(
                Chip(
                    item.ident,
                    r,
                    fit(item.label, w - 10),
                    tuple(d.id for d in item.devices),
                    tuple(d.bdf or "" for d in item.devices),
                )
            )
            for d in item.devices:
                self.where[d.id] = r
        else:
            self.place_box(item, r)

    def place_box(self, box: SceneBox, r: Rect) -> None:
        head = self.head_h(box)
        dev = box.device
        subtitle = ""
        if dev is not None:
            link = compact_link(dev.link)
            subtitle = " · ".join(p for p in (link, dev.name) if p)
            if dev.id in self.degraded:
                subtitle = f"⚠ {subtitle}"
            self.where[dev.id] = r
        self.regions.append(
            Region(
                box.kind,
                box.ident,
                r,
                fit(box.title, r.w - 2 * PAD),
                fit(subtitle, r.w - 2 * PAD),
                dev.id if dev else None,
                dev.bdf if dev else None,
                Rect(r.x, r.y, r.w, head),
                tuple(f.code for f in self.findings_of.get(dev.id, ())) if dev else (),
            )
        )
        x = r.x
        for col in self.columns(box):
            cw, _ = self.col_size(col)
            bus_x = x + GUTTER / 2
            y = r.y + head + PAD
            last_stub = y
            prev: SceneTile | SceneChip | SceneBox | None = None
            for item in col:
                if prev is not None:
                    y += self.gap(prev, item)
                _, ih = self.size(item)
                self.place_item(item, x + GUTTER, y)
                stub = y + (LINE_H / 2 + 3 if isinstance(item, SceneBox) else ih / 2)
                self.stub(item, bus_x, stub, x + GUTTER)
                last_stub = stub
                y += ih
                prev = item
            self.wires.append(Wire("bus", bus_x, r.y + head, bus_x, last_stub, 2.0))
            x += GUTTER + cw + COL_GAP

    def stub(self, item: SceneTile | SceneChip | SceneBox, x1: float, y: float, x2: float) -> None:
        dev = None if isinstance(item, SceneChip) else item.device
        if dev is None:
            self.wires.append(Wire("link", x1, y, x2, y, 1.5))
            return
        lanes = dev.link.current_width
        width = {1: 1.0, 2: 1.5, 4: 2.0, 8: 3.0, 16: 4.5, 32: 5.0}.get(lanes or 0, 2.0)
        finding = self.degraded.get(dev.id)
        label = compact_link(dev.link)
        self.wires.append(Wire("link", x1, y, x2, y, 1.2 if finding else width, dev.id, dev.bdf, finding, label))
        self.stub_y[dev.id] = (x1, y, x2)

    # -- tiles ------------------------------------------------------------------------------
    def place_tile(self, d: Device, r: Rect) -> None:
        topo = self.topo
        role = nic_role(self.result, d) if d.kind is DeviceKind.NIC else None
        numa_unknown = d.numa_node is None and (topo.multi_node or bool(topo.virtualized))
        degraded = d.id in self.degraded
        room = r.w - 10
        name = _short_name(d.name)
        where = d.bdf if d.bdf is not None else f"{d.label or d.key} (no PCI address)"
        if d.bdf is not None and d.label is not None:
            where += f" {d.label}"
        link = compact_link(d.link) or "link ?"
        if degraded:
            link = f"⚠ {link}"
        numa = "NUMA node unknown" if numa_unknown else f"NUMA {d.numa_node}" if d.numa_node is not None else "NUMA ?"
        state = unusable_words(self.result, d.id) if d.kind is DeviceKind.GPU else None
        if d.kind is DeviceKind.GPU:
            rail = self.result.rails.rail(d.id)
            lines = [
                f"{d.id} {name}",
                where,
                link,
                f"⚠ {state}" if state else numa + (f" · rail {rail.nic}" if rail is not None and rail.nic else ""),
            ]
        elif d.kind is DeviceKind.NIC:
            names = " ".join(d.rdma_devices + d.netdevs) or "no netdev"
            users = self.result.rails.users(d.id)
            tag = f"rail {','.join(users)}" if users else (role or "")
            lines = [f"{d.id} {name}", where, f"{link} · {numa}" if numa_unknown else link, f"{tag} · {names}"]
        else:
            lines = [f"{d.id} {name}", where, link, numa]
        self.tiles.append(
            Tile(
                d.id,
                d.key,
                d.bdf,
                d.kind.value,
                role,
                r,
                tuple(fit(t, room) for t in lines[:TILE_LINES]),
                numa_unknown,
                degraded,
                tuple(dict.fromkeys(f.code for f in self.findings_of.get(d.id, ()))),
                state is None,
            )
        )
        self.where[d.id] = r
        self.top_of[d.id] = self.tops[-1]

    # -- regions ----------------------------------------------------------------------------
    def flow(
        self, sizes: list[tuple[float, float]], limit: float, gap: float
    ) -> tuple[list[tuple[float, float]], float, float]:
        """Offsets of boxes in rows that wrap at ``limit``; and the total width and height."""
        out: list[tuple[float, float]] = []
        x = y = row_h = width = 0.0
        for w, h in sizes:
            if x > 0 and x + w > limit:
                y += row_h + gap
                x = row_h = 0.0
            out.append((x, y))
            x += w + gap
            row_h = max(row_h, h)
            width = max(width, x - gap)
        return out, width, y + row_h

    def node_size(self, node: SceneNode, limit: float) -> tuple[float, float]:
        _, w, h = self.flow([self.size(b) for b in node.boxes], limit - 2 * REGION_PAD, REGION_GAP)
        title_w = max(len(node.title), len(node.subtitle)) * CHAR_W + 2 * REGION_PAD
        return max(w + 2 * REGION_PAD, min(title_w, limit)), REGION_HEAD + h + REGION_PAD

    def place_node(self, node: SceneNode, x: float, y: float, limit: float, kind: str = "node") -> Rect:
        w, h = self.node_size(node, limit)
        r = Rect(x, y, w, h)
        self.regions.append(
            Region(
                kind,
                node.ident,
                r,
                fit(node.title, w - 2 * REGION_PAD, 12),
                fit(node.subtitle, w - 2 * REGION_PAD),
                head=Rect(x, y, w, REGION_HEAD),
            )
        )
        offsets, _, _ = self.flow([self.size(b) for b in node.boxes], limit - 2 * REGION_PAD, REGION_GAP)
        for b, (ox, oy) in zip(node.boxes, offsets, strict=True):
            box = Rect(x + REGION_PAD + ox, y + REGION_HEAD + oy, *self.size(b))
            self.tops.append(box)
            self.place_box(b, box)
        return r

    def socket_size(self, s: SceneSocket, limit: float) -> tuple[float, float]:
        inner = limit - 2 * REGION_PAD
        _, w, h = self.flow([self.node_size(n, inner) for n in s.nodes], inner, REGION_GAP)
        title_w = min(max(len(s.title), len(s.subtitle)) * CHAR_W, 320) + 2 * REGION_PAD
        return max(w + 2 * REGION_PAD, title_w), REGION_HEAD + h + REGION_PAD

    def place_socket(self, s: SceneSocket, x: float, y: float, limit: float) -> Rect:
        w, h = self.socket_size(s, limit)
        r = Rect(x, y, w, h)
        self.regions.append(
            Region(
                "socket",
                s.ident,
                r,
                fit(s.title, w - 2 * REGION_PAD, 13),
                fit(s.subtitle, w - 2 * REGION_PAD),
                head=Rect(x, y, w, REGION_HEAD),
            )
        )
        inner = limit - 2 * REGION_PAD
        sizes = [self.node_size(n, inner) for n in s.nodes]
        offsets, _, _ = self.flow(sizes, inner, REGION_GAP)
        for n, (ox, oy) in zip(s.nodes, offsets, strict=True):
            self.place_node(n, x + REGION_PAD + ox, y + REGION_HEAD + oy, inner)
        return r


Point = tuple[float, float]


def _along(points: Sequence[Point], t: float) -> Point:
    """The point at fraction ``t`` of a polyline's length."""
    lengths = [abs(x2 - x1) + abs(y2 - y1) for (x1, y1), (x2, y2) in pairwise(points)]
    goal = t * sum(lengths)
    for ((x1, y1), (x2, y2)), seg in zip(pairwise(points), lengths, strict=True):
        if goal <= seg and seg > 0:
            f = goal / seg
            return x1 + (x2 - x1) * f, y1 + (y2 - y1) * f
        goal -= seg
    return points[-1]


_LABEL_TS = tuple(sorted((i / 40 for i in range(2, 39)), key=lambda t: (abs(t - 0.5), t)))


def tie_findings(result: ScanResult) -> dict[tuple[str, str], Finding]:
    """(GPU id, NIC id) -> the placement finding about that rail (:attr:`Output.DRAWN_ON_RAIL`)."""
    out: dict[tuple[str, str], Finding] = {}
    for f in result.findings:
        if carries(f, Output.DRAWN_ON_RAIL) and len(f.subjects) >= 2:
            out.setdefault((f.subjects[0], f.subjects[1]), f)
    return out


def _route(
    g: Rect, n: Rect, gtop: Rect, ntop: Rect, n_frac: float, tiles: Sequence[Rect], tops: Sequence[Rect]
) -> tuple[Point, ...]:
    """The polyline of a tie from GPU tile ``g`` to NIC tile ``n``.

    Adjacent in one column: a straight line through the gap between them.  Otherwise the tie
    leaves the GPU on the right, runs down the channel right of the GPU's host-bridge box
    (``gtop``), along a lane in the gap below it, up or down the channel right of the NIC's
    box, and enters the NIC on the right: it crosses gaps, not tiles.  Ties that share a
    channel or lane run on top of each other, like a cable bundle; ``n_frac`` spreads them out
    along the NIC's edge.
    """
    if abs(g.x - n.x) < 1:
        lo, hi = (g, n) if g.y < n.y else (n, g)
        if not any(abs(t.x - g.x) < 1 and lo.bottom <= t.y and t.bottom <= hi.y for t in tiles):
            x = g.cx
            return ((x, g.bottom), (x, n.y)) if g.y < n.y else ((x, g.y), (x, n.bottom))
    gy, ny = g.y + g.h * 0.5, n.y + n.h * n_frac
    cg = gtop.right + REGION_GAP / 2
    if gtop == ntop:
        return ((g.right, gy), (cg, gy), (cg, ny), (n.right, ny))
    cn = ntop.right + REGION_GAP / 2
    upper, lower = (gtop, ntop) if gtop.y <= ntop.y else (ntop, gtop)
    lane_y = (upper.bottom if lower.y >= upper.bottom else max(gtop.bottom, ntop.bottom)) + REGION_GAP / 2
    lo_x, hi_x = min(cg, cn), max(cg, cn)
    changed = True
    while changed:  # below every box the lane would otherwise cut through
        changed = False
        for t in tops:
            if t.x < hi_x and lo_x < t.right and t.y < lane_y < t.bottom:
                lane_y = t.bottom + REGION_GAP / 2
                changed = True
    return ((g.right, gy), (cg, gy), (cg, lane_y), (cn, lane_y), (cn, ny), (n.right, ny))


def layout(result: ScanResult) -> Layout:
    """Place everything :func:`scene` groups; pure and deterministic."""
    sc = scene(result)
    p = _Placer(result)
    limit = MAX_WIDTH - 2 * MARGIN
    top = MARGIN + 2 * LINE_H + 16

    socket_rects = _place_sockets(sc, p, limit, top)
    bottom = max((r.bottom for r in socket_rects), default=top)
    right = max((r.right for r in socket_rects), default=MARGIN)
    if sc.unknown is not None:
        y0 = bottom + (REGION_GAP * 2 if socket_rects else 0)
        r = p.place_node(sc.unknown, MARGIN, y0, limit, kind="unknown")
        bottom, right = r.bottom, max(right, r.right)

    ties = _ties(result, p)
    for tie in ties:
        right = max(right, tie.label.right, max(x for x, _ in tie.points))
        bottom = max(bottom, tie.label.bottom, max(y for _, y in tie.points))

    marks = _acs_marks(result, p)

    title, subtitle = _titles(result)
    width = max(right + MARGIN, 760.0)
    entries, legend_box = _legend(width, bottom + 2 * REGION_GAP)
    height = legend_box.bottom + MARGIN
    return Layout(
        width,
        height,
        fit(title, width - 2 * MARGIN, 14),
        fit(subtitle, width - 2 * MARGIN),
        tuple(p.regions),
        tuple(p.tiles),
        tuple(p.chips),
        tuple(p.wires),
        tuple(ties),
        tuple(marks),
        tuple(entries),
        legend_box,
        FrozenMap(p.where),
    )


def _place_sockets(sc: Scene, p: _Placer, limit: float, top: float) -> list[Rect]:
    """Place the sockets side by side when they fit the width, else one below the other, with
    the interconnect drawn between consecutive ones; their rectangles."""
    sizes = [p.socket_size(s, limit) for s in sc.sockets]
    side_by_side = bool(sizes) and sum(w for w, _ in sizes) + BAND * (len(sizes) - 1) <= limit
    x, y = MARGIN, top
    socket_rects: list[Rect] = []
    for s in sc.sockets:
        r = p.place_socket(s, x, y, limit)
        socket_rects.append(r)
        if side_by_side:
            x = r.right + BAND
        else:
            y = r.bottom + BAND
    # The interconnect between consecutive sockets.
    for i, (a, b) in enumerate(pairwise(socket_rects)):
        if side_by_side:
            band = Rect(a.right + 8, top + REGION_HEAD, BAND - 16, max(a.h, b.h) - REGION_HEAD - REGION_PAD)
        else:
            band = Rect(MARGIN + REGION_PAD, a.bottom + 8, max(a.w, b.w) - 2 * REGION_PAD, BAND - 16)
        long_side = max(band.w, band.h) - 8
        text = "socket interconnect (QPI/UPI, Infinity Fabric)" if long_side > 420 else "socket interconnect"
        p.regions.append(
            Region(
                "interconnect", f"interconnect-{i}", band, fit(text, long_side) if long_side > 80 else "", "", head=band
            )
        )
    return socket_rects


def _ties(result: ScanResult, p: _Placer) -> list[Tie]:
    """Ties: each GPU to its primary NIC, routed around the tiles, labelled with the path class
    where the label hides nothing."""
    topo = result.topology
    tie_finding = tie_findings(result)
    tile_rects = [t.rect for t in p.tiles]
    by_nic: dict[str, list[Rail]] = defaultdict(list)
    for rail in result.rails.rails:
        if rail.nic is not None and rail.gpu in p.top_of and rail.nic in p.top_of:
            by_nic[rail.nic].append(rail)
    obstacles: list[Rect] = (
        tile_rects
        + [c.rect for c in p.chips]
        + [r.head for r in p.regions if r.head is not None and r.kind != "interconnect"]
    )
    ties: list[Tie] = []
    labels: list[Rect] = []
    for rail in result.rails.rails:
        if rail.nic is None or rail.gpu not in p.top_of or rail.nic not in p.top_of:
            continue
        g, n = p.where[rail.gpu], p.where[rail.nic]
        peers = sorted(by_nic[rail.nic], key=lambda r: (p.where[r.gpu].y, p.where[r.gpu].x))
        frac = (peers.index(rail) + 1) / (len(peers) + 1)
        pts = _route(g, n, p.top_of[rail.gpu], p.top_of[rail.nic], frac, tile_rects, p.tops)
        path = result.path(rail.gpu, rail.nic)
        token = path.cell if path is not None else (rail.cls.token if rail.cls is not None else "?")
        label = _tie_label(pts, len(token) * CHAR_W + 8, obstacles + labels)
        labels.append(label)
        f = tie_finding.get((rail.gpu, rail.nic))
        gd, nd = topo.by_id(rail.gpu), topo.by_id(rail.nic)
        ties.append(
            Tie(
                rail.gpu,
                rail.nic,
                gd.bdf if gd else None,
                nd.bdf if nd else None,
                token,
                rail_class(rail, path),
                pts,
                label,
                f.code if f else None,
                f.severity.label if f else None,
            )
        )
    return ties


def _tie_label(pts: Sequence[Point], lw: float, obstacles: list[Rect]) -> Rect:
    """Where a tie's label goes: the first spot along it that overlaps nothing, else its middle."""
    for t in _LABEL_TS:
        cx, cy = _along(pts, t)
        cand = Rect(cx - lw / 2, cy - LABEL_H / 2, lw, LABEL_H)
        if not any(cand.overlaps(o) for o in obstacles):
            return cand
    cx, cy = _along(pts, 0.5)
    return Rect(cx - lw / 2, cy - LABEL_H / 2, lw, LABEL_H)


def _titles(result: ScanResult) -> tuple[str, str]:
    """The drawing's title (the host, or the offline sources) and its subtitle (counts)."""
    topo = result.topology
    crit = sum(1 for f in result.findings if f.severity is Severity.CRITICAL)
    warn = sum(1 for f in result.findings if f.severity is Severity.WARNING)
    where = (
        f"host {topo.hostname or '?'}" if topo.from_host_tree else "offline: " + ", ".join(s.name for s in topo.sources)
    )
    title = f"topoagent draw · {where}"
    subtitle = (
        f"{len(topo.sockets) or '?'} socket(s) · {len(topo.nodes)} NUMA node(s) · {len(topo.gpus)} GPU(s) · "
        f"{len(topo.nics)} NIC(s) · findings: {crit} critical, {warn} warning, "
        f"{len(result.findings) - crit - warn} info"
    )
    return title, subtitle


def _legend(width: float, ly: float) -> tuple[list[LegendEntry], Rect]:
    """The legend's entries, wrapped to the width, and its box (top at ``ly``)."""
    entries: list[LegendEntry] = []
    lx = MARGIN + REGION_PAD
    row = ly + REGION_HEAD - 8
    for kind, text in LEGEND:
        w = LEGEND_SWATCH + 6 + len(text) * CHAR_W + 18
        if lx > MARGIN + REGION_PAD and lx + w > width - MARGIN - REGION_PAD:
            lx = MARGIN + REGION_PAD
            row += 22
        entries.append(LegendEntry(kind, text, Rect(lx, row, LEGEND_SWATCH, 14)))
        lx += w
    return entries, Rect(MARGIN, ly, width - 2 * MARGIN, row + 14 + REGION_PAD - ly)


def _acs_marks(result: ScanResult, p: _Placer) -> list[Mark]:
    """One mark per finding drawn on a bridge (:attr:`Output.DRAWN_ON_BRIDGE`): on the link stub
    of what hangs below the port."""
    topo = result.topology
    marks: list[Mark] = []
    fallback: dict[str, int] = defaultdict(int)
    for f in result.findings:
        if not carries(f, Output.DRAWN_ON_BRIDGE) or not f.subjects:
            continue
        br = topo.by_id(f.subjects[0])
        if br is None:
            continue
        below = sorted(
            (d.id for d in topo.devices if d.parent == br.bdf and d.id in p.stub_y), key=lambda i: p.stub_y[i][1]
        )
        if br.id in p.stub_y:  # a switch's own upstream port
            below = [br.id]
        if below:
            x1, y, _ = p.stub_y[below[0]]
            rect = Rect(x1 - 10, y - 6, 20, 12)
        else:  # nothing drawn below it: mark the header of the box it belongs to
            box = _enclosing(topo, br, p)
            k = fallback[box.ident]
            fallback[box.ident] += 1
            rect = Rect(box.rect.right - 26 - 24 * k, box.rect.y + 3, 20, 12)
        marks.append(Mark(f.code, br.bdf, br.id, rect, "ACS", f.subjects))
    return marks


def _enclosing(topo: Topology, br: Device, p: _Placer) -> Region:
    """The drawn box a bridge is folded into: its switch's, else its host bridge's."""
    for bdf in reversed(br.ancestors + ((br.bdf,) if br.bdf else ())):
        for r in p.regions:
            if r.bdf == bdf and r.kind == "switch":
                return r
    for r in p.regions:
        if r.kind == "hostbridge" and r.ident == f"hb-{br.root_bus}":
            return r
    return next(r for r in p.regions if r.kind in ("socket", "node", "unknown"))
