"""Generate a fake Linux host tree (``sys/`` and ``proc/``) from a short machine description.

The description format is documented in ``README.md`` beside this file.  The work is done in
two steps: :func:`build` turns a description into a :class:`Machine` (plain objects: CPUs, NUMA
nodes, root buses, PCI functions with their names, links and config space), and
:func:`write_tree` writes that machine the way Linux lays it out.  Everything is deterministic:
sorted iteration, names and numbers derived from the description alone, no clocks, no
randomness.
"""

from __future__ import annotations

import copy
import os
import re
import shlex
import sys
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
PARTS_FILE = HERE / "parts.toml"
MACHINES_DIR = HERE.parent / "fixtures" / "machines"


class DescriptionError(ValueError):
    """The machine description is inconsistent or malformed."""


# ------------------------------------------------------------------------------------------
# loading
# ------------------------------------------------------------------------------------------
def _load_toml(path: Path) -> dict:
    with open(path, "rb") as fh:
        return tomllib.load(fh)


def machine_names() -> list[str]:
    """Names of the machine descriptions in :data:`MACHINES_DIR`, sorted."""
    return sorted(p.stem for p in MACHINES_DIR.glob("*.toml"))


def load_machine(name: str) -> dict:
    """The parsed description ``MACHINES_DIR/NAME.toml``."""
    path = MACHINES_DIR / f"{name}.toml"
    if not path.is_file():
        raise DescriptionError(
            f"no machine description {name!r} in {MACHINES_DIR} (have: {', '.join(machine_names())})"
        )
    desc = _load_toml(path)
    desc.setdefault("machine", {}).setdefault("name", name)
    return desc


_PARTS_CACHE: dict | None = None


def _catalogue() -> dict:
    global _PARTS_CACHE
    if _PARTS_CACHE is None:
        _PARTS_CACHE = _load_toml(PARTS_FILE)
    return _PARTS_CACHE


def _as_description(src: Any) -> dict:
    if isinstance(src, dict):
        return copy.deepcopy(src)
    path = Path(os.fspath(src))
    if path.is_file():
        desc = _load_toml(path)
        desc.setdefault("machine", {}).setdefault("name", path.stem)
        return desc
    if isinstance(src, str) and re.fullmatch(r"[A-Za-z0-9_.-]+", src):
        return load_machine(src)
    raise DescriptionError(f"{src!r}: neither a description file, a dict, nor a machine name")


# ------------------------------------------------------------------------------------------
# CPU lists and masks, the kernel's formats
# ------------------------------------------------------------------------------------------
# Written independently of topoagent.core.cpuset on purpose: the fixtures are the oracle the reader
# is tested against, so they must not share its code (a shared bug would pass both ways).
def fmt_cpulist(cpus) -> str:
    """``[0,1,2,5]`` -> ``"0-2,5"``; empty -> ``""``."""
    out: list[str] = []
    ids = sorted(set(cpus))
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(out)


def parse_cpulist(text: str) -> list[int]:
    cpus: set[int] = set()
    for part in str(text).strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            cpus.update(range(int(lo), int(hi) + 1))
        else:
            cpus.add(int(part))
    return sorted(cpus)


def fmt_mask(ids, nbits: int) -> str:
    """A bitmap the way the kernel prints ``%*pb``: 32-bit hex words, most significant first,
    the first word as wide as the bits left in it (``ff,ffffffff,ffffffff`` for 72 bits)."""
    val = 0
    for i in ids:
        val |= 1 << i
    nbits = max(int(nbits), 1)
    nwords = (nbits + 31) // 32
    words = []
    for w in range(nwords - 1, -1, -1):
        chunk = (val >> (32 * w)) & 0xFFFFFFFF
        width = 8
        if w == nwords - 1:
            rem = nbits % 32 or 32
            width = (rem + 3) // 4
        words.append(f"{chunk:0{width}x}")
    return ",".join(words)


# ------------------------------------------------------------------------------------------
# the model
# ------------------------------------------------------------------------------------------
SPEED_CODES = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
CODE_SPEEDS = {v: k for k, v in SPEED_CODES.items()}
PORT_TYPES = {
    "endpoint": 0,
    "legacy_endpoint": 1,
    "root_port": 4,
    "switch_upstream": 5,
    "switch_downstream": 6,
    "pci_bridge": 7,
    "rciep": 9,
}
ROLE_ALIASES = {
    "root": "root_port",
    "up": "switch_upstream",
    "down": "switch_downstream",
    "pci": "pci_bridge",
    "rciep": "rciep",
    "endpoint": "endpoint",
}
ACS_BITS = {
    "SrcValid": 0x01,
    "TransBlk": 0x02,
    "ReqRedir": 0x04,
    "CmpltRedir": 0x08,
    "UpstreamFwd": 0x10,
    "EgressCtrl": 0x20,
    "DirectTrans": 0x40,
}
BRIDGE_ROLES = ("root_port", "switch_upstream", "switch_downstream", "pci_bridge")


@dataclass
class Cpu:
    id: int
    socket: int
    core: int
    thread: int
    node: int


@dataclass
class Node:
    id: int
    cpus: list[int]
    memory_kb: int
    socket: int | None


@dataclass
class Link:
    """One function's view of its PCIe link.

    ``kind``: ``none`` (no PCIe capability: no link files), ``zero`` (capability present, link
    registers zero: the kernel prints Unknown/0/255) or ``num``.  Speeds are GT/s floats, or a
    raw string to write verbatim (``"16 GT/s"``, ``"Unknown"``).
    """

    kind: str
    max_speed: float | str | None = None
    max_width: int | None = None
    cur_speed: float | str | None = None
    cur_width: int | None = None
    explicit_cur_speed: bool = False
    explicit_cur_width: bool = False


@dataclass(eq=False)
class RootBus:
    domain: int
    bus: int
    node: int
    children: list[Func] = field(default_factory=list)
    next_bus: int = 0
    last_bus: int = 0
    is_rootbus = True

    @property
    def name(self) -> str:
        return f"pci{self.domain:04x}:{self.bus:02x}"

    @property
    def relpath(self) -> str:
        return f"sys/devices/{self.name}"


@dataclass(eq=False)
class Func:
    domain: int
    bus: int
    dev: int
    fn: int
    part_name: str
    part: dict
    attrs: dict
    parent: Any  # Func or RootBus
    rootbus: RootBus
    role: str
    is_vf: bool = False
    children: list[Func] = field(default_factory=list)
    sec: int | None = None
    sub: int | None = None
    numa_node: int = -1
    local_cpus: list[int] = field(default_factory=list)
    link: Link = field(default_factory=lambda: Link("none"))
    driver: str | None = None
    netdevs: list[str] = field(default_factory=list)
    rdma: str | None = None
    nvme: str | None = None
    vfs: list[Func] = field(default_factory=list)
    physfn: Func | None = None
    vf_index: int = -1
    iommu_group: int | None = None
    config_size: int = 0
    acs_ctl: int | None = None  # None: no ACS capability
    acs_cap: int = 0
    multifunction: bool = False
    irqs: list[int] = field(default_factory=list)
    is_rootbus = False

    @property
    def bdf(self) -> str:
        return f"{self.domain:04x}:{self.bus:02x}:{self.dev:02x}.{self.fn}"

    @property
    def key(self) -> tuple[int, int, int, int]:
        return (self.domain, self.bus, self.dev, self.fn)

    @property
    def vendor(self) -> int:
        return self.part["_vendor"]

    @property
    def device(self) -> int:
        return self.part["_device"]

    @property
    def cls(self) -> int:
        return self.part["_class"]

    @property
    def is_bridge(self) -> bool:
        return self.role in BRIDGE_ROLES

    @property
    def relpath(self) -> str:
        return f"{self.parent.relpath}/{self.bdf}"


@dataclass
class Machine:
    name: str
    settings: dict
    cpus: list[Cpu]
    nodes: list[Node]
    distances: list[list[int]]
    nr_cpu_ids: int
    allowed: list[int]
    rootbuses: list[RootBus]
    funcs: list[Func]  # every function, sorted by (domain, bus, dev, fn)
    cpu_settings: dict = field(default_factory=dict)
    processes: list = field(default_factory=list)  # the description's [[process]] tables

    @property
    def online(self) -> list[int]:
        return [c.id for c in self.cpus]

    def node_by_id(self, nid: int) -> Node | None:
        for n in self.nodes:
            if n.id == nid:
                return n
        return None


# ------------------------------------------------------------------------------------------
# the tree notation
# ------------------------------------------------------------------------------------------
_SLOT_RE = re.compile(r"^(?:([0-9a-fA-F]{1,2}))?\.([0-7])$")
_COUNT_RE = re.compile(r"^\*(\d+)$")
_PART_COUNT_RE = re.compile(r"^(@?[A-Za-z0-9_.+-]+)\*(\d+)$")


def _parse_item(tokens: list[str], where: str) -> dict:
    if not tokens:
        raise DescriptionError(f"{where}: empty item (two '>' in a row?)")
    node: dict = {"part": None, "slot": None, "count": 1, "attrs": {}, "children": [], "where": where}
    toks = list(tokens)
    if _SLOT_RE.match(toks[0]):
        node["slot"] = toks.pop(0)
    if not toks:
        raise DescriptionError(f"{where}: slot {node['slot']} without a part")
    part = toks.pop(0)
    if "=" in part:
        raise DescriptionError(f"{where}: expected a part name, got {part!r}")
    m = _PART_COUNT_RE.match(part)
    if m:
        part, node["count"] = m.group(1), int(m.group(2))
    node["part"] = part
    for tok in toks:
        m = _COUNT_RE.match(tok)
        if m:
            node["count"] = int(m.group(1))
            continue
        if "=" not in tok:
            raise DescriptionError(f"{where}: expected key=value, got {tok!r}")
        k, v = tok.split("=", 1)
        node["attrs"][k] = v
    if node["count"] < 1:
        raise DescriptionError(f"{where}: count must be at least 1")
    return node


def parse_tree(text: str, blocks: dict | None = None, where: str = "tree", _seen: tuple = ()) -> list[dict]:
    """Parse the indented tree notation into nested node dicts (see README.md)."""
    blocks = blocks or {}
    roots: list[dict] = []
    stack: list[tuple[int, dict | None]] = []  # (indent, the last item of that line's chain)
    for lineno, raw in enumerate(text.splitlines(), 1):
        here = f"{where}, line {lineno}"
        line = _parse_line(raw, here)
        if line is None:
            continue
        indent, items = line
        while stack and stack[-1][0] >= indent:
            stack.pop()
        siblings = _children_of(stack[-1][1], here) if stack else roots
        stack.append((indent, _attach_chain(items, siblings, blocks, here, _seen)))
    return roots


def _parse_line(raw: str, here: str) -> tuple[int, list[dict]] | None:
    """A line's indent and its chain of items (``A > B > C``); None for a blank or comment line."""
    stripped = raw.strip()
    if not stripped or stripped.startswith("#"):
        return None
    lead = raw[: len(raw) - len(raw.lstrip())]
    if "\t" in lead:
        raise DescriptionError(f"{here}: indent with spaces, not tabs")
    try:
        tokens = shlex.split(raw, comments=True)
    except ValueError as exc:
        raise DescriptionError(f"{here}: {exc}") from None
    if not tokens:
        return None
    groups: list[list[str]] = [[]]
    for tok in tokens:
        if tok == ">":
            groups.append([])
        else:
            groups[-1].append(tok)
    items = [_parse_item(g, here) for g in groups]
    if any(it["count"] != 1 for it in items[1:]):
        raise DescriptionError(f"{here}: a count ('*N') is allowed on the first item of a chain only")
    return len(lead), items


def _children_of(parent: dict | None, here: str) -> list[dict]:
    """The list a line indented below ``parent`` (None: a block reference) joins."""
    if parent is None:
        raise DescriptionError(f"{here}: a block reference ('@name') cannot have children")
    children: list[dict] = parent["children"]
    return children


def _attach_chain(items: list[dict], siblings: list[dict], blocks: dict, here: str, seen: tuple) -> dict | None:
    """Append a chain to ``siblings``, each item the child of the one before it; return the last
    item, the parent of more-indented lines (None when the chain ends in a block reference)."""
    last: dict | None = None
    for pos, it in enumerate(items):
        if it["part"].startswith("@"):
            if it["slot"] or it["attrs"] or it["count"] != 1:
                raise DescriptionError(f"{here}: a block reference takes no slot, count or attributes")
            if pos != len(items) - 1:
                raise DescriptionError(f"{here}: nothing may follow a block reference in a chain")
            siblings.extend(_expand_block(it["part"][1:], blocks, here, seen))
            last = None
        else:
            siblings.append(it)
            siblings = it["children"]
            last = it
    return last


def _expand_block(name: str, blocks: dict, where: str, seen: tuple) -> list[dict]:
    if name in seen:
        raise DescriptionError(f"{where}: block @{name} refers to itself")
    if name not in blocks:
        raise DescriptionError(f"{where}: no block named @{name}")
    body = blocks[name]
    tree = body.get("tree") if isinstance(body, dict) else body
    return _normalise_tree(tree, blocks, f"block {name}", seen + (name,))


def _normalise_tree(tree: Any, blocks: dict, where: str, seen: tuple = ()) -> list[dict]:
    """A tree given as text, or as a list of dicts ``{part, slot, count, children, **attrs}``."""
    if tree is None:
        return []
    if isinstance(tree, str):
        return parse_tree(tree, blocks, where, seen)
    out: list[dict] = []
    for i, d in enumerate(tree):
        here = f"{where}[{i}]"
        if not isinstance(d, dict) or "part" not in d:
            raise DescriptionError(f"{here}: a tree node must be a table with a 'part'")
        if str(d["part"]).startswith("@"):
            out.extend(_expand_block(str(d["part"])[1:], blocks, here, seen))
            continue
        attrs = {k: str(v) for k, v in d.items() if k not in ("part", "slot", "count", "children")}
        out.append(
            {
                "part": str(d["part"]),
                "slot": d.get("slot"),
                "count": int(d.get("count", 1)),
                "attrs": attrs,
                "children": _normalise_tree(d.get("children"), blocks, here, seen),
                "where": here,
            }
        )
    return out


# ------------------------------------------------------------------------------------------
# parts
# ------------------------------------------------------------------------------------------
def _hex(text: Any, what: str) -> int:
    try:
        return int(str(text), 16)
    except ValueError:
        raise DescriptionError(f"{what}: {text!r} is not hexadecimal") from None


def _resolve_parts(desc: dict) -> dict:
    raw = dict(_catalogue())
    raw.update(desc.get("parts", {}))
    resolved: dict = {}

    def get(name: str, chain: tuple = ()) -> dict:
        if name in resolved:
            return resolved[name]
        if name not in raw:
            raise DescriptionError(f"unknown part {name!r}")
        if name in chain:
            raise DescriptionError(f"part {name!r} inherits from itself")
        p = dict(raw[name])
        if "base" in p:
            merged = dict(get(p.pop("base"), chain + (name,)))
            merged = {k: v for k, v in merged.items() if not k.startswith("_")}
            merged.update(p)
            p = merged
        if "id" not in p or "class" not in p:
            raise DescriptionError(f"part {name!r} needs 'id' and 'class'")
        v, d = str(p["id"]).split(":")
        p["_vendor"], p["_device"] = _hex(v, f"part {name} id"), _hex(d, f"part {name} id")
        sv, sd = str(p.get("subsys", p["id"])).split(":")
        p["_subvendor"], p["_subdevice"] = _hex(sv, f"part {name} subsys"), _hex(sd, f"part {name} subsys")
        p["_class"] = int(str(p["class"]), 16) if isinstance(p["class"], str) else int(p["class"])
        resolved[name] = p
        return p

    class _Lazy(dict):
        def __missing__(self, name):
            return get(name)

    return _Lazy()


# ------------------------------------------------------------------------------------------
# link values
# ------------------------------------------------------------------------------------------
def _speed_value(text: Any) -> float | str:
    """``"16"`` -> 16.0; anything that is not a number stays a raw string for the file."""
    s = str(text).strip()
    try:
        v = float(s)
    except ValueError:
        return s
    if v not in SPEED_CODES:
        raise DescriptionError(f"link speed {s} GT/s is not a PCIe speed (2.5, 5, 8, 16, 32, 64)")
    return v


def _speed_num(v: float | str | None) -> float | None:
    """The GT/s a speed value stands for, parsing raw strings like ``"16 GT/s"``."""
    if v is None:
        return None
    if isinstance(v, float):
        return v
    m = re.match(r"^\s*([0-9.]+)\s*GT/s", v)
    if m and float(m.group(1)) in SPEED_CODES:
        return float(m.group(1))
    return None


def _parse_link(spec: str, where: str) -> tuple[str, float | None, int | None]:
    spec = str(spec).strip()
    if spec in ("none", "zero"):
        return spec, None, None
    m = re.fullmatch(r"([0-9.]+)x([0-9]+)", spec)
    if not m:
        raise DescriptionError(f"{where}: link {spec!r} is not 'GTxWIDTH', 'none' or 'zero'")
    speed = _speed_value(m.group(1))
    return "num", speed, int(m.group(2))  # type: ignore[return-value]


def speed_text(v: float | str | None, fmt: str) -> str:
    """The text of ``current_link_speed``/``max_link_speed`` for a speed value."""
    if isinstance(v, str):
        return v
    if v is None:
        return "Unknown" if fmt == "new" else "Unknown speed"
    if fmt == "new":
        return f"{v:.1f} GT/s PCIe"
    return f"{v:g} GT/s"


# ------------------------------------------------------------------------------------------
# building the machine
# ------------------------------------------------------------------------------------------
def _size_kb(d: dict, default_kb: int, where: str) -> int:
    if "memory_kb" in d:
        return int(d["memory_kb"])
    if "memory_gib" in d:
        return int(float(d["memory_gib"]) * 1024 * 1024)
    return default_kb


def _build_cpus(desc: dict) -> tuple[list[Cpu], list[Node], list[list[int]], int]:
    """The CPUs, NUMA nodes, node distances and ``nr_cpu_ids`` that the ``[cpu]``, ``[[node]]``
    and ``[numa]`` tables describe."""
    c = desc.get("cpu", {})
    cpus, nodes = _socket_cpus_and_nodes(c)
    for i, extra in enumerate(desc.get("node", [])):
        _apply_node_table(nodes, i, extra)
    _move_cpus_to_nodes(cpus, nodes)
    node_list = [nodes[k] for k in sorted(nodes)]
    dist = _node_distances(desc.get("numa", {}), node_list)
    nr_cpu_ids = int(c.get("possible", len(cpus)))
    if nr_cpu_ids < len(cpus):
        raise DescriptionError("cpu.possible is smaller than the number of CPUs")
    return cpus, node_list, dist, nr_cpu_ids


def _socket_cpus_and_nodes(c: dict) -> tuple[list[Cpu], dict[int, Node]]:
    """The ``[cpu]`` table's CPUs, numbered thread by thread (every core's first thread, then every
    core's second), and its nodes: each socket's cores split into ``nodes_per_socket`` runs."""
    sockets = int(c.get("sockets", 1))
    cores = int(c.get("cores", 1))
    threads = int(c.get("threads", 1))
    nps = int(c.get("nodes_per_socket", 1))
    if cores % nps:
        raise DescriptionError(f"cpu: {cores} cores do not split into {nps} nodes per socket")
    per_node = cores // nps
    total_cores = sockets * cores
    cpus = [
        Cpu(t * total_cores + s * cores + core, s, core, t, s * nps + core // per_node)
        for t in range(threads)
        for s in range(sockets)
        for core in range(cores)
    ]
    cpus.sort(key=lambda x: x.id)
    default_kb = _size_kb(c, 64 * 1024 * 1024, "cpu")
    nodes = {n: Node(n, [x.id for x in cpus if x.node == n], default_kb, n // nps) for n in range(sockets * nps)}
    return cpus, nodes


def _apply_node_table(nodes: dict[int, Node], i: int, extra: dict) -> None:
    """One ``[[node]]`` table: set the CPUs, memory and socket of the nodes it names (new or not)."""
    ids = extra.get("id")
    ids = ids if isinstance(ids, list) else [ids]
    for nid in ids:
        if nid is None:
            raise DescriptionError(f"node[{i}]: needs an id")
        nid = int(nid)
        node = nodes.get(nid) or Node(nid, [], 0, extra.get("socket"))
        if "cpus" in extra:
            node.cpus = parse_cpulist(extra["cpus"])
        node.memory_kb = _size_kb(extra, node.memory_kb, f"node {nid}")
        if "socket" in extra:
            node.socket = int(extra["socket"])
        nodes[nid] = node


def _move_cpus_to_nodes(cpus: list[Cpu], nodes: dict[int, Node]) -> None:
    """Give each CPU the node that lists it: explicit cpus on nodes must still partition the CPUs."""
    seen: dict[int, int] = {}
    for node in nodes.values():
        for cid in node.cpus:
            if cid in seen:
                raise DescriptionError(f"cpu {cid} is in node {seen[cid]} and node {node.id}")
            seen[cid] = node.id
    by_id = {x.id: x for x in cpus}
    for cid, nid in seen.items():
        if cid not in by_id:
            raise DescriptionError(f"node {nid} lists cpu {cid}, which does not exist")
        by_id[cid].node = nid


def _node_distances(numa: dict, node_list: list[Node]) -> list[list[int]]:
    """The ``[numa]`` table's ``distances`` matrix, else one made of its ``same_socket``,
    ``remote`` and ``cpuless`` distances (10 from a node to itself)."""
    if "distances" in numa:
        dist = [list(map(int, row)) for row in numa["distances"]]
        if len(dist) != len(node_list) or any(len(r) != len(node_list) for r in dist):
            raise DescriptionError("numa.distances must be a square matrix, one row per node")
        return dist
    same_socket = int(numa.get("same_socket", 12))
    remote = int(numa.get("remote", 21))
    cpuless = int(numa.get("cpuless", remote))
    return [[_node_distance(a, b, same_socket, remote, cpuless) for b in node_list] for a in node_list]


def _node_distance(a: Node, b: Node, same_socket: int, remote: int, cpuless: int) -> int:
    """The default distance from node ``a`` to node ``b``."""
    if a.id == b.id:
        return 10
    if not a.cpus or not b.cpus:
        return cpuless
    if a.socket is not None and a.socket == b.socket:
        return same_socket
    return remote


def _parse_rootbus_id(text: str, where: str) -> tuple[int, int]:
    parts = str(text).split(":")
    if len(parts) == 1:
        return 0, _hex(parts[0], where)
    if len(parts) == 2:
        return _hex(parts[0], where), _hex(parts[1], where)
    raise DescriptionError(f"{where}: root bus id {text!r} is not 'DDDD:BB'")


def _parse_acs(text: str, where: str) -> int | None:
    s = str(text).strip()
    if s == "none":
        return None
    if s in ("", "0", "off"):
        return 0
    if re.fullmatch(r"0x[0-9a-fA-F]+", s):
        return int(s, 16)
    val = 0
    for name in s.split(","):
        name = name.strip()
        if name not in ACS_BITS:
            raise DescriptionError(f"{where}: unknown ACS bit {name!r} (known: {', '.join(ACS_BITS)})")
        val |= ACS_BITS[name]
    return val


def _substitute_index(node: dict, i: int) -> dict:
    """A copy of a repeated line's subtree with ``{n}`` replaced by the repeat index ``i``;
    a nested repeated line keeps its own ``{n}`` (the nearest repeat wins)."""

    def walk(nd: dict, top: bool) -> dict:
        out = dict(nd)
        if top or nd["count"] == 1:
            out["attrs"] = {k: v.replace("{n}", str(i)) for k, v in nd["attrs"].items()}
            out["children"] = [walk(c, False) for c in nd["children"]]
        return out

    return walk(node, True)


def _hex_pair(text: str, where: str) -> tuple[int, int]:
    """A ``VVVV:DDDD`` id pair (vendor and device) as two numbers."""
    v, sep, d = text.partition(":")
    if not sep:
        raise DescriptionError(f"{where}: {text!r} is no VVVV:DDDD id pair")
    return _hex(v, where), _hex(d, where)


def _override_part(part: dict, attrs: dict, where: str) -> dict:
    """A copy of the part with the line's own ``id``, ``subsys``, ``class`` and ``rev``."""
    part = dict(part)
    if "id" in attrs:
        part["_vendor"], part["_device"] = _hex_pair(attrs["id"], where)
    if "subsys" in attrs:
        part["_subvendor"], part["_subdevice"] = _hex_pair(attrs["subsys"], where)
    if "class" in attrs:
        part["_class"] = int(attrs["class"], 16)
    if "rev" in attrs:
        part["rev"] = int(attrs["rev"], 0)
    return part


#: What a function is by where it sits: the parent's role ("rootbus" for a root bus) -> (the
#: role of a bridge below it, the role of any other function; None: none may sit there).
_CHILD_ROLES: dict[str, tuple[str, str | None]] = {
    "rootbus": ("root_port", "rciep"),
    "root_port": ("switch_upstream", "endpoint"),
    "switch_downstream": ("switch_upstream", "endpoint"),
    "switch_upstream": ("switch_downstream", None),
}
_BELOW_PCI_BRIDGE = ("pci_bridge", "endpoint")  # below a PCIe-to-PCI bridge: conventional PCI


def _role_of(parent: Any, part: dict, node: dict, attrs: dict) -> str:
    """The function's role: what its place below ``parent`` makes it, unless ``role=`` says."""
    where = node["where"]
    bridge = (part["_class"] >> 8) == 0x0604
    above = "rootbus" if isinstance(parent, RootBus) else parent.role
    as_bridge, as_other = _CHILD_ROLES.get(above, _BELOW_PCI_BRIDGE)
    role = as_bridge if bridge else as_other
    if role is None:
        raise DescriptionError(
            f"{where}: {node['part']} sits directly below a switch upstream port; "
            "only downstream ports can (write 'PORT > DEVICE')"
        )
    if "role" not in attrs:
        return role
    if attrs["role"] not in ROLE_ALIASES:
        raise DescriptionError(f"{where}: role must be one of {', '.join(ROLE_ALIASES)}")
    role = ROLE_ALIASES[attrs["role"]]
    if (role in BRIDGE_ROLES) != bridge:
        raise DescriptionError(f"{where}: role {role} does not fit class {part['_class']:#08x}")
    return role


def _default_to_max(link: Link) -> None:
    """A link not given a current speed or width runs at its maximum."""
    if link.cur_speed is None:
        link.cur_speed = link.max_speed
    if link.cur_width is None:
        link.cur_width = link.max_width


def _set_current(link: Link, speed: float | str | None, width: int | None) -> None:
    """Set the link's current speed and width, each unless the description gave it."""
    if not link.explicit_cur_speed:
        link.cur_speed = speed
    if not link.explicit_cur_width:
        link.cur_width = width


def _trained(head: Link, port: Link, what: str, fallback: Any) -> Any:
    """The current ``what`` (``speed`` or ``width``) a link trains to: the device's given value,
    else the port's, else ``fallback``."""
    for end in (head, port):
        if getattr(end, f"explicit_cur_{what}"):
            return getattr(end, f"cur_{what}")
    return fallback


def _train(port: Func) -> None:
    """A port and the device below it train to one speed and width: the lower of both ends'
    maxima unless either end is given; an empty slot's link is down."""
    below = [c for c in port.children if not c.is_vf and c.link.kind == "num" and c.dev == 0]
    if not below:
        # an empty slot: link down, Gen1 speed code, width 0
        _set_current(port.link, 2.5, 0)
        return
    head = min(below, key=lambda c: c.fn)
    maxima = [x for x in (_speed_num(port.link.max_speed), _speed_num(head.link.max_speed)) if x is not None]
    speed = _trained(head.link, port.link, "speed", min(maxima) if maxima else None)
    width = _trained(head.link, port.link, "width", min(port.link.max_width or 0, head.link.max_width or 0))
    for c in below:
        _set_current(c.link, speed, width)
    num = _speed_num(speed)
    _set_current(port.link, num if num is not None else speed, width)


def _host_driver(f: Func) -> bool:
    """Whether a host driver holds the function (one passed through with vfio-pci gets no names)."""
    return bool(f.driver) and f.driver != "vfio-pci"


def _name_nvme(funcs: list[Func]) -> None:
    """NVMe controllers: the line's ``nvme=``, else nvmeN in PCI order."""
    n = 0
    for f in funcs:
        if f.driver == "nvme":
            f.nvme = f.attrs.get("nvme", f"nvme{n}")
            n += 1


class _Builder:
    def __init__(self, desc: dict) -> None:
        self.desc = desc
        self.m = desc.get("machine", {})
        self.parts = _resolve_parts(desc)
        self.blocks = desc.get("blocks", {})
        self.cpus, self.nodes, self.dist, self.nr_cpu_ids = _build_cpus(desc)
        self.online = [c.id for c in self.cpus]
        self.funcs: dict[tuple, Func] = {}
        self.rootbuses: list[RootBus] = []
        self.config_default = int(self.m.get("config", 4096))
        self.acs_default = _parse_acs(self.m.get("acs", ""), "machine.acs")

    # -- helpers ----------------------------------------------------------------------
    def node_cpus(self, nid: int) -> list[int]:
        if nid < 0:
            return list(self.online)
        for n in self.nodes:
            if n.id == nid:
                return list(n.cpus)
        raise DescriptionError(f"NUMA node {nid} does not exist")

    def slot_of(self, node: dict, prev_dev: int | None) -> tuple[int, int]:
        slot = node["slot"]
        if slot is None:
            return (0 if prev_dev is None else prev_dev + 1), 0
        m = _SLOT_RE.match(str(slot))
        if not m:
            raise DescriptionError(f"{node['where']}: bad slot {slot!r} (want DD.F or .F)")
        if m.group(1) is None:
            return (0 if prev_dev is None else prev_dev), int(m.group(2))
        dev = int(m.group(1), 16)
        if dev > 0x1F:
            raise DescriptionError(f"{node['where']}: device number {dev:#x} is above 0x1f")
        return dev, int(m.group(2))

    # -- placing the tree ---------------------------------------------------------------
    def add_rootbus(self, i: int, spec: dict) -> None:
        ids = spec.get("id")
        if ids is None:
            raise DescriptionError(f"rootbus[{i}]: needs an id ('0000:15' or a list)")
        ids = ids if isinstance(ids, list) else [ids]
        nodes = spec.get("node", -1)
        nodes = nodes if isinstance(nodes, list) else [nodes] * len(ids)
        if len(nodes) != len(ids):
            raise DescriptionError(f"rootbus[{i}]: 'node' list must be as long as 'id'")
        where = f"rootbus[{i}]"
        tree = _normalise_tree(spec.get("tree"), self.blocks, where)
        for rid, nid in zip(ids, nodes, strict=True):
            domain, bus = _parse_rootbus_id(rid, where)
            nid = int(nid)
            if nid >= 0:
                self.node_cpus(nid)  # validates
            rb = RootBus(domain, bus, nid, next_bus=bus + 1, last_bus=bus)
            self.rootbuses.append(rb)
            self.place(copy.deepcopy(tree), rb, bus, rb)
            rb.last_bus = max(bus, rb.next_bus - 1)

    def place(self, nodes: list[dict], parent: Any, bus: int, rb: RootBus) -> None:
        prev_dev: int | None = None
        for node in nodes:
            dev0, fn = self.slot_of(node, prev_dev)
            for i in range(node["count"]):
                dev = dev0 + i
                if dev > 0x1F:
                    raise DescriptionError(f"{node['where']}: device number runs past 0x1f")
                inst = _substitute_index(node, i) if node["count"] > 1 else node
                attrs = dict(inst["attrs"])
                f = self.make_func(rb.domain, bus, dev, fn, inst, attrs, parent, rb)
                if f.is_bridge:
                    sec = rb.next_bus
                    if "sec" in attrs:
                        want = _hex(attrs["sec"], inst["where"])
                        if want < rb.next_bus:
                            raise DescriptionError(
                                f"{inst['where']}: sec={want:02x} but bus {rb.next_bus:02x} is the next free bus"
                            )
                        sec = want
                    if sec > 0xFF:
                        raise DescriptionError(f"{inst['where']}: ran out of bus numbers below {rb.name}")
                    f.sec = sec
                    rb.next_bus = sec + 1
                    self.place(inst["children"], f, sec, rb)
                    sub = rb.next_bus - 1
                    if "sub" in attrs:
                        sub = max(sub, _hex(attrs["sub"], inst["where"]))
                    if sub > 0xFF:
                        raise DescriptionError(f"{inst['where']}: ran out of bus numbers below {rb.name}")
                    f.sub = sub
                    rb.next_bus = sub + 1
                elif inst["children"]:
                    raise DescriptionError(
                        f"{inst['where']}: {inst['part']} is not a bridge (class {f.cls:#08x}) but has children"
                    )
            prev_dev = dev0 + node["count"] - 1

    def make_func(self, domain, bus, dev, fn, node, attrs, parent, rb) -> Func:
        """The function a tree line makes at ``domain:bus:dev.fn`` below ``parent``, with its VFs."""
        where = node["where"]
        part = _override_part(self.parts[node["part"]], attrs, where)
        role = _role_of(parent, part, node, attrs)
        if not isinstance(parent, RootBus) and parent.role in ("root_port", "switch_downstream") and dev != 0:
            raise DescriptionError(
                f"{where}: below a PCIe port only device 00 exists (got {dev:02x}.{fn}); a link carries one device"
            )
        f = Func(domain, bus, dev, fn, node["part"], part, attrs, parent, rb, role)
        if f.key in self.funcs:
            raise DescriptionError(f"{where}: {f.bdf} is defined twice")
        self.funcs[f.key] = f
        parent.children.append(f)
        self.finish_func(f, attrs, where)
        # SR-IOV virtual functions: siblings of the PF, in the same parent directory
        self.setup_sriov(f, where)
        if int(attrs.get("vfs", 0)) > 0:
            self.add_vfs(f, int(attrs["vfs"]), where)
        return f

    def finish_func(self, f: Func, attrs: dict, where: str) -> None:
        part = f.part
        rb = f.rootbus
        f.numa_node = int(attrs["node"]) if "node" in attrs else rb.node
        f.local_cpus = parse_cpulist(attrs["cpus"]) if "cpus" in attrs else self.node_cpus(rb.node)
        drv = attrs.get("driver", part.get("driver"))
        f.driver = None if drv in (None, "", "none") else drv
        f.config_size = int(attrs.get("config", self.config_default))
        if f.config_size not in (0, 64, 256, 4096):
            raise DescriptionError(f"{where}: config must be 0, 64, 256 or 4096")
        # link
        kind, mspeed, mwidth = _parse_link(attrs.get("link", part.get("link", "none")), where)
        if isinstance(f.parent, Func) and f.parent.role == "pci_bridge":
            kind = "none"
        link = Link(kind, mspeed, mwidth)
        if kind == "num":
            if "maxspeed" in attrs:
                link.max_speed = _speed_value(attrs["maxspeed"])
            if "maxwidth" in attrs:
                link.max_width = int(attrs["maxwidth"])
            if "cur" in attrs:
                _, cs, cw = _parse_link(attrs["cur"], where)
                link.cur_speed, link.cur_width = cs, cw
                link.explicit_cur_speed = link.explicit_cur_width = True
            if "speed" in attrs:
                link.cur_speed, link.explicit_cur_speed = _speed_value(attrs["speed"]), True
            if "width" in attrs:
                link.cur_width, link.explicit_cur_width = int(attrs["width"]), True
        elif any(k in attrs for k in ("cur", "speed", "width", "maxspeed", "maxwidth")):
            raise DescriptionError(f"{where}: link speed/width given for a link of kind {kind!r}")
        f.link = link
        # ACS on root ports and switch downstream ports
        if f.role in ("root_port", "switch_downstream") and part.get("acs", True):
            f.acs_cap = int(part.get("acs_cap", 0x5F))
            f.acs_ctl = self.acs_default
            if "acs" in attrs:
                f.acs_ctl = _parse_acs(attrs["acs"], where)
        elif "acs" in attrs and attrs["acs"] != "none":
            f.acs_cap = int(part.get("acs_cap", 0x5F))
            f.acs_ctl = _parse_acs(attrs["acs"], where)
        if f.acs_ctl:
            f.acs_cap |= f.acs_ctl

    def setup_sriov(self, pf: Func, where: str) -> None:
        """The SR-IOV capability of a PF whose part has ``sriov_total`` (VFs enabled or not)."""
        total = int(pf.attrs.get("sriov_total", pf.part.get("sriov_total", 0)))
        if not total:
            return
        vf_part_name = pf.part.get("vf_part")
        if not vf_part_name:
            raise DescriptionError(f"{where}: part {pf.part_name} names no vf_part")
        vf_part = self.parts[vf_part_name]
        default_offset = int(pf.part.get("vf_offset", 1)) + pf.fn * (total - 1)
        pf.part["_sriov"] = {
            "total": total,
            "offset": int(pf.attrs.get("vf_offset", default_offset)),
            "stride": int(pf.attrs.get("vf_stride", pf.part.get("vf_stride", 1))),
            "vf_device": vf_part["_device"],
            "vf_part": vf_part_name,
        }

    def add_vfs(self, pf: Func, count: int, where: str) -> None:
        sriov = pf.part.get("_sriov")
        if not sriov:
            raise DescriptionError(f"{where}: {pf.part_name} is not SR-IOV capable (no sriov_total)")
        total, offset, stride = sriov["total"], sriov["offset"], sriov["stride"]
        if count > total:
            raise DescriptionError(f"{where}: vfs={count} exceeds sriov_total={total}")
        vf_part_name = sriov["vf_part"]
        vf_part = dict(self.parts[vf_part_name])
        drivers = pf.attrs.get("vf_driver", vf_part.get("driver", "")).split(",")
        rid = (pf.bus << 8) | (pf.dev << 3) | pf.fn
        for i in range(count):
            vrid = rid + offset + i * stride
            vbus, vdev, vfn = vrid >> 8, (vrid >> 3) & 0x1F, vrid & 7
            if vbus != pf.bus:
                raise DescriptionError(f"{where}: VF {i} would land on another bus; not supported")
            role = "rciep" if isinstance(pf.parent, RootBus) else "endpoint"
            vf = Func(pf.domain, vbus, vdev, vfn, vf_part_name, dict(vf_part), {}, pf.parent, pf.rootbus, role)
            vf.is_vf = True
            vf.vf_index = i
            vf.physfn = pf
            if vf.key in self.funcs:
                raise DescriptionError(f"{where}: VF {vf.bdf} collides with {self.funcs[vf.key].bdf}")
            self.funcs[vf.key] = vf
            pf.parent.children.append(vf)
            pf.vfs.append(vf)
            vf.numa_node = pf.numa_node
            vf.local_cpus = list(pf.local_cpus)
            drv = drivers[min(i, len(drivers) - 1)].strip()
            vf.driver = None if drv in ("", "none") else drv
            vf.config_size = pf.config_size
            kind, ms, mw = _parse_link(vf_part.get("link", "zero"), where)
            vf.link = Link(kind, ms, mw)

    # -- whole-machine passes ---------------------------------------------------------------
    def negotiate_links(self) -> None:
        """Both ends of a link train to the same speed and width."""
        for f in self.funcs.values():
            if f.link.kind == "num":
                _default_to_max(f.link)
        for port in sorted(self.funcs.values(), key=lambda x: x.key):
            if port.role in ("root_port", "switch_downstream") and port.link.kind == "num":
                _train(port)

    def assign_names(self, funcs: list[Func]) -> None:
        """Mark multi-function devices, then name what the drivers make: netdevs, RDMA devices, NVMe."""
        by_slot: dict[tuple, list[Func]] = {}
        for f in funcs:
            if not f.is_vf:
                by_slot.setdefault((f.domain, f.bus, f.dev), []).append(f)
        for group in by_slot.values():
            if len(group) > 1:
                for f in group:
                    f.multifunction = True
        self.name_netdevs(funcs)
        self.name_rdma(funcs)
        _name_nvme(funcs)

    def name_netdevs(self, funcs: list[Func]) -> None:
        """Network interfaces: the line's ``net=`` names, else the part's prefix and the PCI path."""
        for f in funcs:
            net = f.part.get("net")
            explicit = f.attrs.get("net")
            if explicit == "none" or not _host_driver(f):
                continue
            if explicit:
                f.netdevs = [n for n in explicit.split(",") if n]
            elif net and not f.is_vf:
                f.netdevs = [self.path_name(net, f)]
        for f in funcs:  # VFs take the PF's name plus vN (systemd's scheme)
            if f.is_vf and f.part.get("net") and _host_driver(f) and not f.netdevs:
                pf = f.physfn
                base = self.path_name(pf.part.get("net") or f.part["net"], pf, with_port=False)
                f.netdevs = [f"{base}v{f.vf_index}"]

    def name_rdma(self, funcs: list[Func]) -> None:
        """RDMA devices: mlx5_N in probe order (PFs by BDF, then VFs), EFA by PCI path."""
        counter = 0
        ordered = [f for f in funcs if not f.is_vf] + [f for f in funcs if f.is_vf]
        for f in ordered:
            kind = f.part.get("rdma")
            explicit = f.attrs.get("rdma")
            if not kind or not _host_driver(f):
                continue
            if kind == "mlx5":
                idx = counter
                counter += 1
                if explicit == "none":
                    continue
                f.rdma = explicit or f"mlx5_{idx}"
            elif explicit != "none":
                f.rdma = explicit or self.path_name("rdma", f, with_port=False)

    @staticmethod
    def path_name(prefix: str, f: Func, with_port: bool = True) -> str:
        dom = f"P{f.domain}" if f.domain else ""
        name = f"{prefix}{dom}p{f.bus}s{f.dev}"
        if f.multifunction:
            name += f"f{f.fn}"
        if with_port and f.part.get("phys_port"):
            name += f"np{f.fn}"
        return name

    def assign_groups_and_irqs(self, funcs: list[Func]) -> None:
        iommu = str(self.m.get("iommu", "identity"))
        if iommu != "none":
            groups: dict[tuple, int] = {}
            for f in funcs:
                if "group" in f.attrs:  # functions of one root bus that name one label share a group
                    key: tuple = ("g", f.rootbus.name, f.attrs["group"])
                elif f.is_vf or f.is_bridge:
                    key = ("f",) + f.key
                else:
                    key = ("d", f.domain, f.bus, f.dev)  # functions of one device share a group
                if key not in groups:
                    groups[key] = len(groups)
                f.iommu_group = groups[key]
        irq = int(self.m.get("first_irq", 100))
        for f in funcs:
            if f.driver and int(f.part.get("irqs", 0)) > 0:
                f.irqs = list(range(irq, irq + int(f.part["irqs"])))
                irq += len(f.irqs)

    def check_bus_ranges(self) -> None:
        spans = sorted((rb.domain, rb.bus, rb.last_bus, rb.name) for rb in self.rootbuses)
        for a, b in pairwise(spans):
            if a[0] == b[0] and b[1] <= a[2]:
                raise DescriptionError(f"{a[3]} uses buses {a[1]:02x}-{a[2]:02x}, which overlaps root bus {b[3]}")
        names = [rb.name for rb in self.rootbuses]
        if len(set(names)) != len(names):
            raise DescriptionError("a root bus is defined twice")

    def build(self) -> Machine:
        for i, spec in enumerate(self.desc.get("rootbus", [])):
            self.add_rootbus(i, spec)
        self.check_bus_ranges()
        funcs = sorted(self.funcs.values(), key=lambda f: f.key)
        for f in funcs:
            f.children.sort(key=lambda c: c.key)
        for rb in self.rootbuses:
            rb.children.sort(key=lambda c: c.key)
        self.negotiate_links()
        self.assign_names(funcs)
        self.assign_groups_and_irqs(funcs)
        allowed = parse_cpulist(self.desc.get("cpu", {}).get("allowed", fmt_cpulist(self.online)))
        if not set(allowed) <= set(self.online):
            raise DescriptionError("cpu.allowed lists CPUs that are not online")
        return Machine(
            name=str(self.m.get("name", "machine")),
            settings=self.m,
            cpus=self.cpus,
            nodes=self.nodes,
            distances=self.dist,
            nr_cpu_ids=self.nr_cpu_ids,
            allowed=allowed,
            rootbuses=sorted(self.rootbuses, key=lambda r: (r.domain, r.bus)),
            funcs=funcs,
            cpu_settings=dict(self.desc.get("cpu", {})),
            processes=list(self.desc.get("process", [])),
        )


def build(description: Any) -> Machine:
    """Build the machine model from a description (dict, TOML path or machine name)."""
    desc = _as_description(description)
    return _Builder(desc).build()


# ------------------------------------------------------------------------------------------
# PCI configuration space
# ------------------------------------------------------------------------------------------
def _w(buf: bytearray, off: int, val: int, size: int) -> None:
    buf[off : off + size] = (val & ((1 << (8 * size)) - 1)).to_bytes(size, "little")


def _width_reg(w: int | None) -> int:
    if w is None or w < 0 or w > 63:  # 255 is the kernel's "unknown": the register held 0
        return 0
    return w


def _flag(f: Func, key: str) -> bool:
    """A true/false attribute of the line, else of the part (``ats = true`` in parts.toml)."""
    value = f.attrs.get(key, f.part.get(key, False))
    return value is True or str(value).lower() == "true"


def has_vpd(f: Func) -> bool:
    """Whether the function has a VPD capability: its part or line names VPD contents."""
    return not f.is_vf and any(k in f.attrs or k in f.part for k in ("vpd_name", "v3", "sn"))


def has_ats(f: Func) -> bool:
    """Whether the function exposes an ATS capability (``ats=true``; mlxconfig ATS_ENABLED on a
    ConnectX, NVIDIA's HGX B300 VM guide, appendix "ATS and ACS configuration")."""
    return not f.is_bridge and _flag(f, "ats")


def vpd_bytes(f: Func) -> bytes:
    """The function's VPD as the PCI Local Bus Spec (appendix I) lays it out: the identifier
    string (tag 0x82), a VPD-R resource (tag 0x90) with PN, SN, V3 and the RV checksum byte that
    makes the bytes up to it sum to zero, and the end tag 0x78."""
    name = str(f.attrs.get("vpd_name", f.part.get("vpd_name", f.part.get("name", "")))).encode("ascii")
    keywords = b""
    for key in ("pn", "sn", "v3"):
        value = f.attrs.get(key, f.part.get(key))
        if value is not None:
            raw = str(value).encode("ascii")
            keywords += key.upper().encode("ascii") + bytes([len(raw)]) + raw
    head = bytes([0x82]) + len(name).to_bytes(2, "little") + name
    body = keywords + b"RV" + bytes([1])
    ro = bytes([0x90]) + (len(body) + 1).to_bytes(2, "little") + body
    checksum = (-sum(head + ro)) & 0xFF
    return head + ro + bytes([checksum, 0x78])


def modalias(f: Func) -> str:
    """The ``modalias`` line the kernel writes (drivers/pci/pci-sysfs.c, modalias_show)."""
    c = f.cls
    return (
        f"pci:v{f.vendor:08X}d{f.device:08X}sv{f.part['_subvendor']:08X}sd{f.part['_subdevice']:08X}"
        f"bc{c >> 16 & 0xFF:02X}sc{c >> 8 & 0xFF:02X}i{c & 0xFF:02X}"
    )


def build_config(f: Func) -> bytes:
    """The function's configuration space, truncated to its ``config_size``."""
    b = bytearray(4096)
    _config_header(b, f)
    _config_capabilities(b, f)
    if f.link.kind != "none":
        _config_express(b, f)
        _config_extended(b, f)
    return bytes(b[: f.config_size])


def _config_header(b: bytearray, f: Func) -> None:
    """The type 0 (device) or type 1 (bridge) header, pointing at the first capability."""
    bridge = f.is_bridge
    # An SR-IOV VF's Vendor ID and Device ID registers read 0xffff (SR-IOV spec 3.4.1.1-2);
    # sysfs's vendor/device files carry the PF's vendor and the VF device id instead.
    _w(b, 0x00, 0xFFFF if f.physfn is not None else f.vendor, 2)
    _w(b, 0x02, 0xFFFF if f.physfn is not None else f.device, 2)
    _w(b, 0x04, 0x0407 if bridge else (0x0406 if f.driver else 0x0000), 2)
    _w(b, 0x06, 0x0010, 2)  # capabilities list
    _w(b, 0x08, int(f.part.get("rev", 0)), 1)
    _w(b, 0x09, f.cls, 3)  # prog-if, subclass, base class
    _w(b, 0x0C, 0x10 if bridge else 0x00, 1)
    _w(b, 0x0E, (1 if bridge else 0) | (0x80 if f.multifunction else 0), 1)
    if bridge:
        _w(b, 0x18, f.bus, 1)
        _w(b, 0x19, f.sec or 0, 1)
        _w(b, 0x1A, f.sub or 0, 1)
    else:
        _w(b, 0x2C, f.part["_subvendor"], 2)
        _w(b, 0x2E, f.part["_subdevice"], 2)
        _w(b, 0x3D, 0 if f.is_vf else 1, 1)  # INTA#
    _w(b, 0x34, 0x40, 1)


def _config_capabilities(b: bytearray, f: Func) -> None:
    """The capability list: power management, MSI or MSI-X, PCI Express, bridge subsystem ids, VPD."""
    bridge = f.is_bridge
    caps: list[tuple[int, int]] = [(0x40, 0x01)]  # power management
    caps.append((0x50, 0x05 if bridge else 0x11))  # MSI on ports, MSI-X on endpoints
    if f.link.kind != "none":
        caps.append((0x60, 0x10))
    if bridge:
        caps.append((0xA0, 0x0D))  # bridge subsystem vendor id
    if has_vpd(f):
        caps.append((0xB0, 0x03))  # Vital Product Data: the kernel makes the vpd file
    for i, (off, cid) in enumerate(caps):
        nxt = caps[i + 1][0] if i + 1 < len(caps) else 0
        _w(b, off, cid, 1)
        _w(b, off + 1, nxt, 1)
    _w(b, 0x42, 0x0003, 2)  # PM version 3
    _w(b, 0x44, 0x0008, 2)  # PMCSR: D0, no soft reset
    if bridge:
        _w(b, 0x52, 0x0080, 2)  # MSI: 64-bit
        _w(b, 0xA4, f.part["_subvendor"], 2)
        _w(b, 0xA6, f.part["_subdevice"], 2)
    else:
        _w(b, 0x52, max(len(f.irqs), 1) - 1, 2)  # MSI-X table size


def _config_express(b: bytearray, f: Func) -> None:
    """The PCI Express capability at 0x60: port type, device and link registers."""
    cap = 0x60
    ptype = PORT_TYPES[f.role]
    port = f.role in ("root_port", "switch_downstream")
    _w(b, cap + 0x02, 0x0002 | (ptype << 4) | (0x0100 if port else 0), 2)
    _w(b, cap + 0x04, 0x00008022 if not f.is_bridge else 0x00008001, 4)
    if f.link.kind != "num":
        return
    mcode = SPEED_CODES.get(_speed_num(f.link.max_speed) or 0.0, 0)
    ccode = SPEED_CODES.get(_speed_num(f.link.cur_speed) or 0.0, 0)
    lnkcap = mcode | (_width_reg(f.link.max_width) << 4)
    if port:
        lnkcap |= 1 << 20  # data link layer link active reporting
        lnkcap |= (f.dev & 0xFF) << 24  # port number
    _w(b, cap + 0x0C, lnkcap, 4)
    lnksta = ccode | (_width_reg(f.link.cur_width) << 4)
    if port and (f.link.cur_width or 0) > 0:
        lnksta |= 1 << 13  # data link layer link active
    _w(b, cap + 0x12, lnksta, 2)
    _w(b, cap + 0x2C, ((1 << mcode) - 1) << 1 if mcode else 0, 4)  # supported speeds
    _w(b, cap + 0x30, mcode, 2)  # target link speed


def _config_extended(b: bytearray, f: Func) -> None:
    """The extended capabilities from 0x100: AER, then ACS, ATS and SR-IOV where the function has them."""
    ext: list[tuple[int, int, int, bytes]] = [(0x0001, 2, 0x48, bytes(0x44))]  # AER
    if f.acs_ctl is not None:
        acs = bytearray(4)
        _w(acs, 0, f.acs_cap, 2)
        _w(acs, 2, f.acs_ctl, 2)
        ext.append((0x000D, 1, 0x08, bytes(acs)))
    if has_ats(f):  # Address Translation Services (PCIe Base Spec 7.8.8): 4 bytes of registers
        ext.append((0x000F, 1, 0x08, bytes(4)))
    sriov = f.part.get("_sriov")
    if sriov:
        ext.append((0x0010, 1, 0x40, _sriov_registers(f, sriov)))
    off = 0x100
    for i, (cid, ver, size, body) in enumerate(ext):
        nxt = 0
        if i + 1 < len(ext):
            nxt = (off + size + 0xF) & ~0xF
        _w(b, off, cid | (ver << 16) | (nxt << 20), 4)
        b[off + 4 : off + 4 + len(body)] = body
        off = nxt


def _sriov_registers(f: Func, sriov: dict) -> bytes:
    """The SR-IOV capability's registers after its header: VF enable, VF counts, offset, stride, device id."""
    body = bytearray(0x3C)
    n = len(f.vfs)
    _w(body, 0x08 - 4, 0x0009 if n else 0x0000, 2)  # VF enable, VF MSE
    _w(body, 0x0C - 4, sriov["total"], 2)  # initial VFs
    _w(body, 0x0E - 4, sriov["total"], 2)  # total VFs
    _w(body, 0x10 - 4, n, 2)  # num VFs
    _w(body, 0x14 - 4, sriov["offset"], 2)
    _w(body, 0x16 - 4, sriov["stride"], 2)
    _w(body, 0x1A - 4, sriov["vf_device"], 2)
    return bytes(body)


# ------------------------------------------------------------------------------------------
# AER counters
# ------------------------------------------------------------------------------------------
#: The names the kernel prints in aer_dev_* (drivers/pci/pcie/aer.c,
#: aer_uncorrectable_error_string and aer_correctable_error_string), in bit order; None: a
#: bit without a name, printed as ``<array>_bit[N]`` only when it counted.
AER_UNCORRECTABLE = (
    "Undefined",
    None,
    None,
    None,
    "DLP",
    "SDES",
    None,
    None,
    None,
    None,
    None,
    None,
    "TLP",
    "FCP",
    "CmpltTO",
    "CmpltAbrt",
    "UnxCmplt",
    "RxOF",
    "MalfTLP",
    "ECRC",
    "UnsupReq",
    "ACSViol",
    "UncorrIntErr",
    "BlockedTLP",
    "AtomicOpBlocked",
    "TLPBlockedErr",
    "PoisonTLPBlocked",
)
AER_CORRECTABLE = (
    "RxErr",
    None,
    None,
    None,
    None,
    None,
    "BadTLP",
    "BadDLLP",
    "Rollover",
    None,
    None,
    None,
    "Timeout",
    "NonFatalErr",
    "CorrIntErr",
    "HeaderOF",
)
#: (file, the attribute that sets its counts, its name table, its total line's name).
_AER_FILES = (
    ("aer_dev_correctable", "aer_cor", AER_CORRECTABLE, "ERR_COR"),
    ("aer_dev_fatal", "aer_fatal", AER_UNCORRECTABLE, "ERR_FATAL"),
    ("aer_dev_nonfatal", "aer_nonfatal", AER_UNCORRECTABLE, "ERR_NONFATAL"),
)


def aer_text(table: tuple, total: str, counts: str) -> str:
    """One aer_dev_* file as the kernel's aer_stats_dev_attr writes it; ``counts`` is the
    attribute's ``NAME:N,NAME:N`` (names from ``table``)."""
    given: dict[str, int] = {}
    for item in filter(None, counts.split(",")):
        name, _, n = item.partition(":")
        if name not in table:
            raise DescriptionError(f"AER counter {name!r} is not one the kernel names")
        given[name] = int(n or 1)
    lines = [f"{name} {given.get(name, 0)}" for name in table if name is not None]
    lines.append(f"TOTAL_{total} {sum(given.values())}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------
# writing the tree
# ------------------------------------------------------------------------------------------
class _Writer:
    """Writes files, directories and relative symlinks below the root, creating each
    directory once (a tree has thousands of small files: syscalls and path handling are the
    whole cost, so paths stay plain strings relative to the root)."""

    def __init__(self, root: Path) -> None:
        self.root = str(root).rstrip("/") + "/"
        self.made: set[str] = {""}

    def _parent(self, rel: str) -> str:
        parent = rel.rpartition("/")[0]
        if parent not in self.made:
            missing = []
            d = parent
            while d not in self.made:
                missing.append(d)
                d = d.rpartition("/")[0]
            for d in reversed(missing):
                try:
                    os.mkdir(self.root + d)
                except FileExistsError:
                    pass
                self.made.add(d)
        return parent

    def text(self, rel: str, content: str, newline: bool = True) -> None:
        self.data(rel, (content + "\n" if newline else content).encode("utf-8"))

    def data(self, rel: str, content: bytes) -> None:
        self._parent(rel)
        fd = os.open(self.root + rel, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, content)
        finally:
            os.close(fd)

    def dir(self, rel: str) -> None:
        self._parent(rel + "/x")

    def link(self, rel: str, target_rel: str) -> None:
        """A relative symlink at ``rel`` pointing to ``target_rel`` (both relative to the root)."""
        # as the kernel does (kernfs_get_target_path): climb to the nearest ancestor of the
        # target's parent, then name the way down, so net/IF/device is ../../../BDF, never ../..
        here = self._parent(rel).split("/")
        there = target_rel.split("/")
        n = 0
        while n < len(here) and n < len(there) - 1 and here[n] == there[n]:
            n += 1
        target = "/".join([".."] * (len(here) - n) + there[n:])
        os.symlink(target, self.root + rel)


_X86_FLAGS = (
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr "
    "sse sse2 ss ht syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology cpuid "
    "tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt aes "
    "xsave avx f16c rdrand{hv} lahf_lm abm 3dnowprefetch fsgsbase bmi1 avx2 smep bmi2 erms "
    "invpcid avx512f avx512dq rdseed adx smap clflushopt clwb avx512cd sha_ni avx512bw "
    "avx512vl xsaveopt xsavec xgetbv1 xsaves"
)
_ARM_FEATURES = (
    "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma "
    "lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs sb paca "
    "pacg dcpodp sve2 sveaes svepmull svebitperm svesha3 svesm4 flagm2 frint svei8mm svebf16 "
    "i8mm bf16 dgh bti"
)


_NODE_DIR = "sys/devices/system/node"
_CPU_DIR = "sys/devices/system/cpu"


def write_tree(machine: Machine, out_root: Path) -> None:
    """Write the machine's ``sys/`` and ``proc/`` below ``out_root`` as Linux lays them out."""
    w = _Writer(out_root)
    nbits = machine.nr_cpu_ids
    _write_pci(w, machine, nbits)
    _write_iommu_groups(w, machine)
    _write_netdevs(w, machine)
    _write_rdma(w, machine)
    _write_nvme(w, machine)
    _write_nodes(w, machine, nbits)
    _write_cpus(w, machine, nbits)
    _write_l3(w, machine, nbits)
    _write_modules(w, machine)
    _write_dmi(w, machine)
    _write_proc(w, machine, nbits)
    _write_nvidia_information(w, machine)
    _write_kfd(w, machine)
    _write_processes(w, machine, nbits)
    _write_irqs(w, machine, nbits)


def _write_pci(w: _Writer, machine: Machine, nbits: int) -> None:
    """The root buses with their CPU affinity, every function, and the drivers they are bound to."""
    link_format = str(machine.settings.get("link_format", "new"))
    for rb in machine.rootbuses:
        w.text(f"{rb.relpath}/uevent", "", newline=False)
        cpus = machine_node_cpus(machine, rb.node)
        pb = f"{rb.relpath}/pci_bus/{rb.domain:04x}:{rb.bus:02x}"
        w.text(f"{pb}/cpulistaffinity", fmt_cpulist(cpus))
        w.text(f"{pb}/cpuaffinity", fmt_mask(cpus, nbits))
    for f in machine.funcs:
        _write_function(w, f, link_format, nbits)
    for drv in sorted({f.driver for f in machine.funcs if f.driver}):
        w.dir(f"sys/bus/pci/drivers/{drv}")


def _write_iommu_groups(w: _Writer, machine: Machine) -> None:
    """``sys/kernel/iommu_groups/N/type`` for each group, unless the machine has no IOMMU."""
    iommu = str(machine.settings.get("iommu", "identity"))
    if iommu == "none":
        return
    for g in sorted({f.iommu_group for f in machine.funcs if f.iommu_group is not None}):
        w.text(f"sys/kernel/iommu_groups/{g}/type", iommu)


def _is_down(f: Func) -> bool:
    """Whether the line says the function's link to the network is down (``state=down``)."""
    return f.attrs.get("state", "up") == "down"


def _write_netdevs(w: _Writer, machine: Machine) -> None:
    """The loopback, then every function's interfaces, ifindex counting on from 2 in PCI order."""
    lo = "sys/devices/virtual/net/lo"
    for name, value in (
        ("address", "00:00:00:00:00:00"),
        ("operstate", "unknown"),
        ("carrier", "1"),
        ("mtu", "65536"),
        ("type", "772"),
        ("ifindex", "1"),
    ):
        w.text(f"{lo}/{name}", value)
    w.link("sys/class/net/lo", lo)
    ifindex = 2
    for f in machine.funcs:
        for port, ifname in enumerate(f.netdevs):
            _write_netdev(w, f, port, ifname, ifindex)
            ifindex += 1


def _write_netdev(w: _Writer, f: Func, port: int, ifname: str, ifindex: int) -> None:
    """One network interface of a function: Ethernet, or IPoIB on an InfiniBand port."""
    down = _is_down(f)
    nd = f"{f.relpath}/net/{ifname}"
    ib = f.part.get("net") == "ib" or f.cls == 0x020700
    w.text(f"{nd}/address", _ib_hwaddr(f) if ib else _mac(f, port))
    w.text(f"{nd}/operstate", "down" if down else "up")
    w.text(f"{nd}/carrier", "0" if down else "1")
    w.text(f"{nd}/speed", "-1" if down else str(int(f.attrs.get("mbps", f.part.get("mbps", -1)))))
    w.text(f"{nd}/mtu", "4092" if ib else "1500")
    w.text(f"{nd}/type", "32" if ib else "1")
    w.text(f"{nd}/ifindex", str(ifindex))
    w.text(f"{nd}/dev_port", str(port))
    if f.part.get("phys_port") and not f.is_vf:
        w.text(f"{nd}/phys_port_name", f"p{f.fn}")
    w.link(f"{nd}/device", f.relpath)
    w.link(f"sys/class/net/{ifname}", nd)


def _write_rdma(w: _Writer, machine: Machine) -> None:
    """``infiniband/DEV`` below each function with an RDMA device, and its class link."""
    for f in machine.funcs:
        if not f.rdma:
            continue
        down = _is_down(f)
        ibd = f"{f.relpath}/infiniband/{f.rdma}"
        guid = _guid(f)
        w.text(f"{ibd}/node_type", "1: CA")
        w.text(f"{ibd}/node_guid", guid)
        w.text(f"{ibd}/sys_image_guid", guid)
        w.text(f"{ibd}/fw_ver", str(f.part.get("fw", "0.0.0")))
        w.text(f"{ibd}/hca_type", str(f.part.get("hca", "")))
        ll = f.attrs.get("ll", f.part.get("ll", "InfiniBand"))
        w.text(f"{ibd}/ports/1/state", "1: DOWN" if down else "4: ACTIVE")
        w.text(f"{ibd}/ports/1/phys_state", "3: Disabled" if down else "5: LinkUp")
        w.text(f"{ibd}/ports/1/rate", str(f.attrs.get("rate", f.part.get("rate", "10 Gb/sec (4X SDR)"))))
        w.text(f"{ibd}/ports/1/link_layer", ll)
        w.link(f"{ibd}/device", f.relpath)
        w.link(f"sys/class/infiniband/{f.rdma}", ibd)


def _write_nvme(w: _Writer, machine: Machine) -> None:
    """``nvme/nvmeN`` below each NVMe controller, and its class link."""
    for f in machine.funcs:
        if not f.nvme:
            continue
        nv = f"{f.relpath}/nvme/{f.nvme}"
        w.text(f"{nv}/model", str(f.part.get("model", "NVMe SSD")))
        w.text(f"{nv}/serial", f"S{f.domain:04X}{f.bus:02X}{f.dev:02X}{f.fn}FAKE")
        w.text(f"{nv}/firmware_rev", str(f.part.get("fw", "1.0")))
        w.text(f"{nv}/transport", "pcie")
        w.text(f"{nv}/address", f.bdf)
        w.text(f"{nv}/state", "live")
        w.link(f"{nv}/device", f.relpath)
        w.link(f"sys/class/nvme/{f.nvme}", nv)


def _write_nodes(w: _Writer, machine: Machine, nbits: int) -> None:
    """``sys/devices/system/node``: the node masks, and each node's CPUs, distances and meminfo."""
    node_ids = [n.id for n in machine.nodes]
    with_memory = fmt_cpulist([n.id for n in machine.nodes if n.memory_kb])
    w.text(f"{_NODE_DIR}/online", fmt_cpulist(node_ids))
    w.text(f"{_NODE_DIR}/possible", fmt_cpulist(node_ids))
    w.text(f"{_NODE_DIR}/has_cpu", fmt_cpulist([n.id for n in machine.nodes if n.cpus]))
    w.text(f"{_NODE_DIR}/has_memory", with_memory)
    w.text(f"{_NODE_DIR}/has_normal_memory", with_memory)
    for i, n in enumerate(machine.nodes):
        nd = f"{_NODE_DIR}/node{n.id}"
        w.text(f"{nd}/cpulist", fmt_cpulist(n.cpus))
        w.text(f"{nd}/cpumap", fmt_mask(n.cpus, nbits))
        w.text(f"{nd}/distance", " ".join(str(x) for x in machine.distances[i]))
        total = n.memory_kb
        free = total - total // 20
        w.text(
            f"{nd}/meminfo",
            "\n".join(
                [
                    f"Node {n.id} MemTotal:       {total:8d} kB",
                    f"Node {n.id} MemFree:        {free:8d} kB",
                    f"Node {n.id} MemUsed:        {total - free:8d} kB",
                    f"Node {n.id} HugePages_Total: {0:5d}",
                    f"Node {n.id} HugePages_Free:  {0:5d}",
                ]
            ),
        )


def _write_cpus(w: _Writer, machine: Machine, nbits: int) -> None:
    """``sys/devices/system/cpu``: the CPU masks, and each CPU's topology and node link."""
    online = machine.online
    w.text(f"{_CPU_DIR}/online", fmt_cpulist(online))
    w.text(f"{_CPU_DIR}/present", fmt_cpulist(online))
    w.text(f"{_CPU_DIR}/possible", fmt_cpulist(range(machine.nr_cpu_ids)))
    siblings: dict[tuple, list[int]] = {}
    package: dict[int, list[int]] = {}
    for c in machine.cpus:
        siblings.setdefault((c.socket, c.core), []).append(c.id)
        package.setdefault(c.socket, []).append(c.id)
    sib_masks = {k: fmt_mask(v, nbits) for k, v in siblings.items()}
    pkg_masks = {k: fmt_mask(v, nbits) for k, v in package.items()}
    for c in machine.cpus:
        t = f"{_CPU_DIR}/cpu{c.id}/topology"
        sib = siblings[(c.socket, c.core)]
        w.text(f"{t}/physical_package_id", str(c.socket))
        w.text(f"{t}/die_id", "0")
        w.text(f"{t}/core_id", str(c.core))
        w.text(f"{t}/thread_siblings_list", fmt_cpulist(sib))
        w.text(f"{t}/core_cpus", sib_masks[(c.socket, c.core)])  # masks: what hwloc reads
        w.text(f"{t}/package_cpus", pkg_masks[c.socket])
        w.text(f"{t}/package_cpus_list", fmt_cpulist(package[c.socket]))  # Linux >= 5.3 writes both
        w.text(f"{t}/core_siblings_list", fmt_cpulist(package[c.socket]))  # the older name
        w.link(f"{_CPU_DIR}/cpu{c.id}/node{c.node}", f"{_NODE_DIR}/node{c.node}")


def _write_modules(w: _Writer, machine: Machine) -> None:
    """Loaded modules, peer-memory clients, and GPU memory onlined as a NUMA node."""
    s = machine.settings
    for name, version in sorted(dict(s.get("modules", {})).items()):
        w.text(f"sys/module/{name}/initstate", "live")
        if version:
            w.text(f"sys/module/{name}/version", str(version))
    for name, version in sorted(dict(s.get("memory_peers", {})).items()):
        w.text(f"sys/kernel/mm/memory_peers/{name}/version", str(version))
    # GPU memory onlined as a NUMA node (Grace): the NVIDIA driver's procfs file, a "Node:" and a
    # "Status:" line (NVIDIA/open-gpu-kernel-modules kernel-open/nvidia/nv-procfs.c, numa_status).
    for bdf, node in sorted(dict(s.get("gpu_memory", {})).items()):
        w.text(f"proc/driver/nvidia/gpus/{bdf}/numa_status", f"Node: {int(node)}\nStatus: online")


def _write_dmi(w: _Writer, machine: Machine) -> None:
    """The DMI vendor and product name."""
    dmi = list(machine.settings.get("dmi", ["Unknown", "Unknown"]))
    w.text("sys/devices/virtual/dmi/id/sys_vendor", str(dmi[0]))
    w.text("sys/devices/virtual/dmi/id/product_name", str(dmi[1]))
    w.link("sys/class/dmi/id", "sys/devices/virtual/dmi/id")


def _write_proc(w: _Writer, machine: Machine, nbits: int) -> None:
    """``/proc``'s kernel command line, host name, kernel release, own status and cpuinfo."""
    s = machine.settings
    w.text("proc/cmdline", str(s.get("cmdline", "BOOT_IMAGE=/boot/vmlinuz root=/dev/sda1 ro")))
    w.text("proc/sys/kernel/hostname", str(s.get("hostname", machine.name)))
    release = re.search(r"vmlinuz-(\S+)", str(s.get("cmdline", "")))
    if release or "kernel" in s:  # uname -r: the machine's kernel key, else its BOOT_IMAGE's version
        w.text("proc/sys/kernel/osrelease", str(s.get("kernel", release.group(1) if release else "")))
    mems = [n.id for n in machine.nodes if n.memory_kb]
    w.text(
        "proc/self/status",
        "\n".join(
            [
                "Name:\ttopoagent",
                "Umask:\t0022",
                "State:\tR (running)",
                "Tgid:\t4242",
                "Pid:\t4242",
                "PPid:\t1",
                f"Cpus_allowed:\t{fmt_mask(machine.allowed, nbits)}",
                f"Cpus_allowed_list:\t{fmt_cpulist(machine.allowed)}",
                f"Mems_allowed:\t{fmt_mask(mems, 1024)}",
                f"Mems_allowed_list:\t{fmt_cpulist(mems)}",
                "voluntary_ctxt_switches:\t1",
                "nonvoluntary_ctxt_switches:\t0",
            ]
        ),
    )
    w.text("proc/cpuinfo", _cpuinfo(machine), newline=False)


def _write_irqs(w: _Writer, machine: Machine, nbits: int) -> None:
    """``/proc/irq``: the default affinity and each function's interrupts, all on every online CPU."""
    online = machine.online
    w.text("proc/irq/default_smp_affinity", fmt_mask(online, nbits))
    for f in machine.funcs:
        for irq in f.irqs:
            w.text(f"proc/irq/{irq}/smp_affinity", fmt_mask(online, nbits))
            w.text(f"proc/irq/{irq}/smp_affinity_list", fmt_cpulist(online))


def _write_nvidia_information(w: _Writer, machine: Machine) -> None:
    """``proc/driver/nvidia/gpus/BDF/information`` for each NVIDIA GPU, where the description
    sets ``machine.nvidia_procfs``: the driver's own lines (kernel-open/nvidia/nv-procfs.c), the
    ``Device Minor`` numbered in PCI order as the driver usually numbers /dev/nvidiaN."""
    if not machine.settings.get("nvidia_procfs"):
        return
    gpus = [f for f in machine.funcs if f.vendor == 0x10DE and f.cls >> 16 == 0x03 and f.physfn is None]
    for minor, f in enumerate(gpus):
        w.text(
            f"proc/driver/nvidia/gpus/{f.bdf}/information",
            "\n".join(
                [
                    f"Model: \t\t {f.part.get('name', 'NVIDIA GPU')}",
                    "IRQ:   \t\t 0",
                    f"GPU UUID: \t GPU-{f.domain:04x}{f.bus:02x}{f.dev:02x}-fake",
                    "Video BIOS: \t ??.??.??.??.??",
                    "Bus Type: \t PCIe",
                    "DMA Size: \t 52 bits",
                    "DMA Mask: \t 0xfffffffffffff",
                    f"Bus Location: \t {f.bdf}",
                    f"Device Minor: \t {minor}",
                    "GPU Excluded:\t No",
                ]
            ),
        )


#: KFD's io_link types (kfd_crat.h CRAT_IOLINK_TYPE_*) and weights (kfd_crat.c): PCIe to the
#: GPU's CPU, XGMI between GPUs of a hive (KFD_CRAT_XGMI_WEIGHT, 15 a hop), the CPU-CPU link.
_KFD_PCIE, _KFD_QPI, _KFD_XGMI = 2, 5, 11
_KFD_PCIE_WEIGHT, _KFD_XGMI_WEIGHT, _KFD_CPU_WEIGHT = 20, 15, 32


def _kfd_iolink(node_from: int, node_to: int, kind: int, weight: int, bandwidth: tuple[int, int], flags: int) -> str:
    """An ``io_links/N/properties`` file as kfd_topology.c's iolink_show prints it."""
    return "\n".join(
        [
            f"type {kind}",
            "version_major 0",
            "version_minor 0",
            f"node_from {node_from}",
            f"node_to {node_to}",
            f"weight {weight}",
            "min_latency 0",
            "max_latency 0",
            f"min_bandwidth {bandwidth[0]}",
            f"max_bandwidth {bandwidth[1]}",
            "recommended_transfer_size 0",
            f"flags {flags}",
        ]
    )


def _kfd_gpu_properties(f: Func, spec: dict, minor: int, hive: int, io_links: int) -> str:
    """A GPU node's ``properties`` as kfd_topology.c's node_show prints them (the values an
    MI300X gives: 304 CUs of 4 SIMDs on 8 XCCs, gfx942)."""
    kfd = f.part.get("kfd", {})
    return "\n".join(
        [
            "cpu_cores_count 0",
            f"simd_count {kfd.get('simd_count', 1216)}",
            "mem_banks_count 1",
            "caches_count 626",
            f"io_links_count {io_links}",
            f"p2p_links_count {io_links - 1}",
            "cpu_core_id_base 0",
            "simd_id_base 2147487744",
            "max_waves_per_simd 8",
            "lds_size_in_kb 64",
            "gds_size_in_kb 0",
            "num_gws 64",
            "wave_front_size 64",
            "array_count 32",
            "simd_arrays_per_engine 1",
            "cu_per_simd_array 10",
            "simd_per_cu 4",
            "max_slots_scratch_cu 32",
            f"gfx_target_version {kfd.get('gfx_target_version', 90402)}",
            f"vendor_id {f.vendor}",
            f"device_id {f.device}",
            f"location_id {f.bus << 8 | f.dev << 3 | f.fn}",
            f"domain {f.domain}",
            f"drm_render_minor {minor}",
            f"hive_id {hive}",
            "num_sdma_engines 2",
            "num_sdma_xgmi_engines 14",
            "num_sdma_queues_per_engine 8",
            "num_cp_queues 24",
            "max_engine_clk_fcompute 2100",
            "local_mem_size 0",
            "fw_version 177",
            "capability 746325632",
            "sdma_fw_version 19",
            f"unique_id {0x5B3F1C2D00000000 | f.bus << 8 | f.dev << 3 | f.fn}",
            f"num_xcc {kfd.get('num_xcc', 8)}",
            "max_engine_clk_ccompute 3700",
        ]
    )


def _write_kfd(w: _Writer, machine: Machine) -> None:
    """The KFD topology (``devices/virtual/kfd/kfd/topology``, ``class/kfd/kfd``) and amdgpu's
    XGMI and partition attributes, where the description has ``[machine.kfd]``: one KFD node per
    CPU NUMA node first, then one per AMD GPU in PCI order (kfd_topology.c numbers them so), each
    GPU with a PCIe io_link to its CPU node and, with ``xgmi = "all"``, an XGMI io_link to every
    other GPU of the hive (an MI300X UBB's all-to-all Infinity Fabric)."""
    spec = machine.settings.get("kfd")
    if not spec:
        return
    gpus = [f for f in machine.funcs if "kfd" in f.part and f.physfn is None]
    cpu_nodes = [n for n in machine.nodes if n.cpus]
    base = "sys/devices/virtual/kfd/kfd/topology"
    w.link("sys/class/kfd/kfd", "sys/devices/virtual/kfd/kfd")
    w.text(f"{base}/generation_id", "1")
    w.text(f"{base}/system_properties", "platform_oem 0\nplatform_id 0\nplatform_rev 0")
    node_of_cpu = {n.id: i for i, n in enumerate(cpu_nodes)}
    for i, n in enumerate(cpu_nodes):
        nb = f"{base}/nodes/{i}"
        w.text(f"{nb}/gpu_id", "0")
        w.text(f"{nb}/name", "")
        others = [j for j in range(len(cpu_nodes)) if j != i]
        w.text(
            f"{nb}/properties",
            "\n".join(
                [
                    f"cpu_cores_count {len(n.cpus)}",
                    "simd_count 0",
                    "mem_banks_count 1",
                    "caches_count 0",
                    f"io_links_count {len(others)}",
                    f"cpu_core_id_base {n.cpus[0]}",
                    "gfx_target_version 0",
                    "vendor_id 0",
                    "device_id 0",
                    "location_id 0",
                    "domain 0",
                    "drm_render_minor 0",
                    "hive_id 0",
                ]
            ),
        )
        for k, j in enumerate(others):
            w.text(f"{nb}/io_links/{k}/properties", _kfd_iolink(i, j, _KFD_QPI, _KFD_CPU_WEIGHT, (0, 0), 1))
    hive = int(str(spec.get("hive_id", "0")), 0)
    xgmi = str(spec.get("xgmi", "all")) == "all"
    first = len(cpu_nodes)
    for k, f in enumerate(gpus):
        node = first + k
        nb = f"{base}/nodes/{node}"
        minor = 128 + k
        links = [_kfd_iolink(node, node_of_cpu.get(f.numa_node, 0), _KFD_PCIE, _KFD_PCIE_WEIGHT, (312, 64000), 3)]
        if xgmi:
            links += [
                _kfd_iolink(node, first + m, _KFD_XGMI, _KFD_XGMI_WEIGHT, (50000, 50000), 1)
                for m in range(len(gpus))
                if m != k
            ]
        w.text(f"{nb}/gpu_id", str(0x1000 + (f.bus * 131 + k * 7919) % 0xEFFF))
        w.text(f"{nb}/name", "ip discovery")
        w.text(f"{nb}/properties", _kfd_gpu_properties(f, spec, minor, hive if xgmi else 0, len(links)))
        for m, text in enumerate(links):
            w.text(f"{nb}/io_links/{m}/properties", text)
        dev = f.relpath
        w.text(f"{dev}/current_compute_partition", str(spec.get("compute_partition", "SPX")))
        w.text(f"{dev}/available_compute_partition", "SPX, DPX, QPX, CPX")
        w.text(f"{dev}/current_memory_partition", str(spec.get("memory_partition", "NPS1")))
        w.text(f"{dev}/available_memory_partition", "NPS1, NPS4")
        if xgmi:
            w.text(f"{dev}/xgmi_physical_id", str(k))
            w.text(f"{dev}/xgmi_device_id", str(0x8000 + k))
            w.text(f"{dev}/xgmi_hive_info/xgmi_hive_id", str(hive))


def _write_processes(w: _Writer, machine: Machine, nbits: int) -> None:
    """``proc/<pid>/`` for each ``[[process]]``: ``status``, ``cmdline``, ``environ``,
    ``numa_maps``, ``task/<tid>/status`` (one thread per ``threads`` entry, tids from the pid
    on) and ``fd/<n>`` links to ``fds`` (from 3; 0-2 are /dev/null), as proc(5) lays them out."""
    online = machine.online
    mems = [n.id for n in machine.nodes if n.memory_kb]
    for i, proc in enumerate(machine.processes):
        pid = int(proc["pid"])
        name = str(proc.get("name", "python3"))
        uid = int(proc.get("uid", 1000))
        threads = [parse_cpulist(str(t)) for t in proc.get("threads", [fmt_cpulist(online)])]
        base = f"proc/{pid}"
        for k, cpus in enumerate(threads):
            w.text(f"{base}/task/{pid + k}/status", _proc_status(name, pid, pid + k, uid, cpus, mems, nbits))
        w.text(f"{base}/status", _proc_status(name, pid, pid, uid, threads[0], mems, nbits))
        w.data(f"{base}/cmdline", name.encode() + b"\0")
        env = {"PATH": "/usr/bin", "HOME": "/home/user", **{str(k): str(v) for k, v in proc.get("environ", {}).items()}}
        w.data(f"{base}/environ", b"".join(f"{k}={v}".encode() + b"\0" for k, v in env.items()))
        policy = str(proc.get("policy", "default"))
        memory = {int(n): int(mib) for n, mib in dict(proc.get("memory", {})).items()}
        pages = " ".join(f"N{n}={mib * 256}" for n, mib in sorted(memory.items()))  # 4 KiB pages
        total = sum(memory.values()) * 256
        lines = [
            f"55d4c0000000 default file=/usr/bin/{name} mapped=4 N{mems[0]}=4 kernelpagesize_kB=4",
            f"55d4c2000000 {policy} heap anon={total} dirty={total} {pages} kernelpagesize_kB=4" if memory else "",
            f"7ffd00000000 {policy} stack anon=3 dirty=3 N{mems[0]}=3 kernelpagesize_kB=4",
        ]
        w.text(f"{base}/numa_maps", "\n".join(line for line in lines if line))
        w.dir(f"{base}/fd")
        for fd, target in enumerate(["/dev/null"] * 3 + [str(t) for t in proc.get("fds", [])]):
            os.symlink(target, w.root + f"{base}/fd/{fd}")
        os.symlink(f"socket:[{40000 + i}]", w.root + f"{base}/fd/{3 + len(proc.get('fds', []))}")


def _proc_status(name: str, pid: int, tid: int, uid: int, cpus: list[int], mems: list[int], nbits: int) -> str:
    return "\n".join(
        [
            f"Name:\t{name}",
            "State:\tS (sleeping)",
            f"Tgid:\t{pid}",
            f"Pid:\t{tid}",
            "PPid:\t1",
            f"Uid:\t{uid}\t{uid}\t{uid}\t{uid}",
            f"Gid:\t{uid}\t{uid}\t{uid}\t{uid}",
            "Threads:\t1",
            f"Cpus_allowed:\t{fmt_mask(cpus, nbits)}",
            f"Cpus_allowed_list:\t{fmt_cpulist(cpus)}",
            f"Mems_allowed:\t{fmt_mask(mems, 1024)}",
            f"Mems_allowed_list:\t{fmt_cpulist(mems)}",
        ]
    )


def _write_l3(w: _Writer, machine: Machine, nbits: int) -> None:
    """``cpuN/cache/index3/``, where the description has ``cpu.l3_per_socket``: each socket's
    cores cut into that many runs of consecutive cores (an AMD CCD each), every thread of a run
    sharing one L3 -- the files the kernel writes (drivers/base/cacheinfo.c) and hwloc reads
    (``level``, ``type``, ``size``, ``shared_cpu_map``, line size, ways, partitions)."""
    per_socket = int(machine.cpu_settings.get("l3_per_socket", 0))
    if not per_socket:
        return
    cores = int(machine.cpu_settings.get("cores", 1))
    if cores % per_socket:
        raise DescriptionError(f"cpu: {cores} cores do not split into {per_socket} L3 caches per socket")
    run = cores // per_socket
    members: dict[tuple[int, int], list[int]] = {}
    for c in machine.cpus:
        members.setdefault((c.socket, c.core // run), []).append(c.id)
    size_kb = int(machine.cpu_settings.get("l3_kib", 32768))
    for c in machine.cpus:
        key = (c.socket, c.core // run)
        shared = members[key]
        d = f"sys/devices/system/cpu/cpu{c.id}/cache/index3"
        w.text(f"{d}/level", "3")
        w.text(f"{d}/type", "Unified")
        w.text(f"{d}/id", str(key[0] * per_socket + key[1]))
        w.text(f"{d}/size", f"{size_kb}K")
        w.text(f"{d}/coherency_line_size", "64")
        w.text(f"{d}/ways_of_associativity", "16")
        w.text(f"{d}/number_of_sets", str(size_kb * 1024 // (64 * 16)))
        w.text(f"{d}/physical_line_partition", "1")
        w.text(f"{d}/shared_cpu_list", fmt_cpulist(shared))
        w.text(f"{d}/shared_cpu_map", fmt_mask(shared, nbits))


def _write_function(w: _Writer, f: Func, link_format: str, nbits: int) -> None:
    """One PCI function's directory: ids, NUMA, link, config space, driver, IOMMU, SR-IOV."""
    d = f.relpath
    w.text(f"{d}/class", f.attrs.get("classfile", f"0x{f.cls:06x}"))
    w.text(f"{d}/vendor", f"0x{f.vendor:04x}")
    w.text(f"{d}/device", f"0x{f.device:04x}")
    w.text(f"{d}/subsystem_vendor", f"0x{f.part['_subvendor']:04x}")
    w.text(f"{d}/subsystem_device", f"0x{f.part['_subdevice']:04x}")
    w.text(f"{d}/numa_node", str(f.numa_node))
    w.text(f"{d}/local_cpulist", fmt_cpulist(f.local_cpus))
    w.text(f"{d}/local_cpus", fmt_mask(f.local_cpus, nbits))
    w.text(f"{d}/modalias", modalias(f))
    if has_vpd(f) and f.config_size:
        w.data(f"{d}/vpd", vpd_bytes(f))
    # link files
    lk = f.link
    if lk.kind == "zero":
        w.text(f"{d}/current_link_speed", speed_text(None, link_format))
        w.text(f"{d}/max_link_speed", speed_text(None, link_format))
        w.text(f"{d}/current_link_width", "0")
        w.text(f"{d}/max_link_width", "255")
    elif lk.kind == "num":
        w.text(f"{d}/current_link_speed", speed_text(lk.cur_speed, link_format))
        w.text(f"{d}/max_link_speed", speed_text(lk.max_speed, link_format))
        w.text(f"{d}/current_link_width", str(lk.cur_width))
        w.text(f"{d}/max_link_width", str(lk.max_width))
    if f.config_size:
        # A device that fell off the bus answers every config read with all ones; the
        # kernel keeps the ids and class it read at enumeration in the files above.
        offbus = f.attrs.get("offbus", "false") == "true"
        w.data(f"{d}/config", b"\xff" * f.config_size if offbus else build_config(f))
    if lk.kind != "none":  # it has an AER capability (build_config): the kernel's counters
        for name, key, table, total in _AER_FILES:
            w.text(f"{d}/{name}", aer_text(table, total, f.attrs.get(key, "")))
    if f.driver:
        w.link(f"{d}/driver", f"sys/bus/pci/drivers/{f.driver}")
        w.link(f"sys/bus/pci/drivers/{f.driver}/{f.bdf}", d)
    if f.iommu_group is not None:
        w.link(f"{d}/iommu_group", f"sys/kernel/iommu_groups/{f.iommu_group}")
        w.link(f"sys/kernel/iommu_groups/{f.iommu_group}/devices/{f.bdf}", d)
    if f.is_bridge:
        w.dir(f"{d}/pci_bus/{f.domain:04x}:{f.sec:02x}")
    if f.role == "root_port":  # PCIe port services: directories that are not functions
        w.dir(f"{d}/{f.bdf}:pcie001")
        w.dir(f"{d}/{f.bdf}:pcie002")
    for irq in f.irqs:
        w.text(f"{d}/msi_irqs/{irq}", "msix")
    # SR-IOV
    sriov = f.part.get("_sriov")
    if sriov:
        w.text(f"{d}/sriov_totalvfs", str(sriov["total"]))
        w.text(f"{d}/sriov_numvfs", str(len(f.vfs)))
        w.text(f"{d}/sriov_offset", str(sriov["offset"]))
        w.text(f"{d}/sriov_stride", str(sriov["stride"]))
        w.text(f"{d}/sriov_vf_device", f"{sriov['vf_device']:x}")
        for vf in f.vfs:
            w.link(f"{d}/virtfn{vf.vf_index}", vf.relpath)
    if f.physfn is not None:
        w.link(f"{d}/physfn", f.physfn.relpath)
    w.link(f"sys/bus/pci/devices/{f.bdf}", d)


def machine_node_cpus(machine: Machine, nid: int) -> list[int]:
    if nid < 0:
        return machine.online
    n = machine.node_by_id(nid)
    return list(n.cpus) if n else []


def _mac(f: Func, port: int) -> str:
    oui = str(f.part.get("oui", "02:00:00"))
    tail = [(f.domain * 16 + port) & 0xFF, f.bus, (f.dev << 3) | f.fn]
    return oui + ":" + ":".join(f"{x:02x}" for x in tail)


def _guid_bytes(f: Func) -> list[int]:
    oui = [int(x, 16) for x in str(f.part.get("oui", "02:00:00")).split(":")]
    return oui + [0x03, 0x00, f.domain & 0xFF, f.bus, (f.dev << 3) | f.fn]


def _guid(f: Func) -> str:
    g = _guid_bytes(f)
    return ":".join(f"{g[i]:02x}{g[i + 1]:02x}" for i in range(0, 8, 2))


def _ib_hwaddr(f: Func) -> str:
    qpn = [0x00, 0x00, 0x10, 0x49]
    prefix = [0xFE, 0x80, 0, 0, 0, 0, 0, 0]
    return ":".join(f"{x:02x}" for x in qpn + prefix + _guid_bytes(f))


def _cpuinfo(machine: Machine) -> str:
    s = machine.settings
    c = machine.cpus
    model = str(machine.cpu_settings.get("model", "")) or "Generic CPU"
    hv = bool(s.get("hypervisor", False))
    blocks = []
    if str(s.get("arch", "x86_64")) == "aarch64":
        for cpu in c:
            blocks.append(
                "\n".join(
                    [
                        f"processor\t: {cpu.id}",
                        "BogoMIPS\t: 2000.00",
                        f"Features\t: {_ARM_FEATURES}",
                        "CPU implementer\t: 0x41",
                        "CPU architecture: 8",
                        "CPU variant\t: 0x0",
                        "CPU part\t: 0xd4f",
                        "CPU revision\t: 0",
                    ]
                )
            )
        return "\n\n".join(blocks) + "\n\n"
    vendor = "AuthenticAMD" if "AMD" in model else "GenuineIntel"
    # CPUID family and model as x86 Linux prints them (arch/x86/kernel/cpu/proc.c: "cpu family",
    # "model", decimal); the description's [cpu] family/model_id, else a plausible pair per vendor.
    family = int(machine.cpu_settings.get("family", 25 if vendor == "AuthenticAMD" else 6))
    model_id = int(machine.cpu_settings.get("model_id", 17 if vendor == "AuthenticAMD" else 143))
    per_socket: dict[int, int] = {}
    cores: dict[int, set] = {}
    for cpu in c:
        per_socket[cpu.socket] = per_socket.get(cpu.socket, 0) + 1
        cores.setdefault(cpu.socket, set()).add(cpu.core)
    flags = _X86_FLAGS.replace("{hv}", " hypervisor" if hv else "")
    for cpu in c:
        blocks.append(
            "\n".join(
                [
                    f"processor\t: {cpu.id}",
                    f"vendor_id\t: {vendor}",
                    f"cpu family\t: {family}",
                    f"model\t\t: {model_id}",
                    f"model name\t: {model}",
                    f"physical id\t: {cpu.socket}",
                    f"siblings\t: {per_socket[cpu.socket]}",
                    f"core id\t\t: {cpu.core}",
                    f"cpu cores\t: {len(cores[cpu.socket])}",
                    f"apicid\t\t: {cpu.socket * 256 + cpu.core * 2 + cpu.thread}",
                    f"flags\t\t: {flags}",
                ]
            )
        )
    return "\n\n".join(blocks) + "\n\n"


# ------------------------------------------------------------------------------------------
# entry points
# ------------------------------------------------------------------------------------------
def generate(description: Any, out_root: str | os.PathLike[str]) -> Path:
    """Write the fake host tree for ``description`` under ``out_root`` and return it.

    ``description``: a dict, a path to a TOML file, or the name of a machine in
    :data:`MACHINES_DIR`.  ``out_root`` may exist but must not already hold ``sys`` or ``proc``.
    """
    machine = build(description)
    root = Path(out_root)
    for sub in ("sys", "proc"):
        if (root / sub).exists():
            raise FileExistsError(f"{root / sub} already exists; give an empty directory")
    root.mkdir(parents=True, exist_ok=True)
    write_tree(machine, root)
    return root


def _g(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def summary(description: Any) -> list[dict]:
    """One row per PCI function: what a test writing expectations needs to know."""
    m = build(description)
    rows = []
    for f in m.funcs:
        lk = f.link
        rows.append(
            {
                "bdf": f.bdf,
                "part": f.part_name,
                "id": f"{f.vendor:04x}:{f.device:04x}",
                "class": f"0x{f.cls:06x}",
                "role": f.role,
                "parent": f.parent.bdf if isinstance(f.parent, Func) else f.parent.name,
                "numa_node": f.numa_node,
                "local_cpulist": fmt_cpulist(f.local_cpus),
                "driver": f.driver,
                "link": None
                if lk.kind == "none"
                else (
                    "unknown"
                    if lk.kind == "zero"
                    else f"{_g(lk.cur_speed)}x{lk.cur_width}/{_g(lk.max_speed)}x{lk.max_width}"
                ),
                "netdevs": list(f.netdevs),
                "rdma": f.rdma,
                "nvme": f.nvme,
                "iommu_group": f.iommu_group,
                "acs_ctl": f.acs_ctl,
                "physfn": f.physfn.bdf if f.physfn else None,
                "bus_range": f"{f.sec:02x}-{f.sub:02x}" if f.is_bridge else None,
            }
        )
    return rows
