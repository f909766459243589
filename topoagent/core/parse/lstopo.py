"""Parse ``lstopo`` / ``lstopo-no-graphics`` console text (hwloc 2.x): NUMA nodes with their
CPUs and memory, and the PCI devices below them.

hwloc prints the topology as an indented tree (two spaces a level; open-mpi/hwloc
``utils/lstopo/lstopo-text.c``)::

    Machine (504GB total)
      Package L#0
        NUMANode L#0 (P#0 252GB)
        L3 L#0 (22MB)
          L2 L#0 (1024KB) + L1d L#0 (32KB) + L1i L#0 (32KB) + Core L#0
            PU L#0 (P#0)
            PU L#1 (P#32)
        HostBridge
          PCIBridge
            PCI 18:00.0 (3D)
              CoProc(CUDA) "cuda0"
            PCI 19:00.0 (InfiniBand)
              Net "ib0"
              OpenFabrics "mlx5_0"

A NUMA node is a memory child of the object it hangs below; the CPUs (``PU … (P#n)``, the
OS's numbering) below that object are its CPUs, and so is the locality of the I/O below it.
``-v`` adds each object's attributes: ``busid=0000:18:00.0 id=10de:2330 class=0302(3D)
link=31.51GB/s`` for PCI objects and ``busid=`` ``buses=0000:[19-1a]`` for bridges; only with
them is the PCIe tree known (a plain ``PCIBridge`` names no function).  ``-p`` prints
physical indexes (``NUMANode P#0``, ``PU P#0``), read the same.
"""

from __future__ import annotations

import re

import msgspec

from topoagent.core.bdf import printed_bdf
from topoagent.core.cpuset import CpuSet
from topoagent.core.errors import InputError
from topoagent.core.parse.paste import Skipped, clean_paste, merge_skipped

__all__ = ["LstopoDevice", "LstopoNode", "LstopoParseError", "LstopoReport", "OBJECT", "read_lstopo"]

#: The first word of every object line lstopo prints (hwloc_obj_type_string, plus the
#: OS device kinds of lstopo-text).
OBJECT = re.compile(
    r"^(Machine|Package|Socket|Die|Group\d*|NUMANode|MemCache|L\d[id]?Cache|L\d[id]?|Core|PU|HostBridge|PCIBridge|"
    r"PCI|Bridge|Misc|Net|Network|OpenFabrics|Block|Storage|CoProc|GPU|DMA|Co-Processor|OSDev)\b"
)
_PHYS = re.compile(r"\bP#(\d{1,6})")
_SIZE = re.compile(r"(?<![\w.])([0-9]{1,12}(?:\.[0-9]{1,6})?)\s*(KB|MB|GB|TB)\b")  # not the tail of a longer number
_PCI = re.compile(
    r"^PCI\s+(?:L#\d+\s+)?(?:(?P<bdf>(?:[0-9a-f]{4,8}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])\s*)?(?:\((?P<cls>[^)]*)\))?"
)
_BUSID = re.compile(r"busid=((?:[0-9a-f]{4,8}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])")
_IDS = re.compile(r"\bid=([0-9a-f]{4}):([0-9a-f]{4})")
_CLASS = re.compile(r"\bclass=([0-9a-f]{4})")
# ``-v`` adds the object's attributes in parentheses (``OpenFabrics L#15 (NodeGUID=… Port1State=4)
# "mlx5_6"``); hwloc >= 2.5 prints Net and Block devices as ``Network`` and ``Storage``.
_OSDEV = re.compile(
    r'^(Net|Network|OpenFabrics|Block|Storage|CoProc|GPU|DMA)(?:\(([^)]*)\))?(?:\s+L#\d+)?(?:\s+\([^)]*\))?\s+"([^"]+)"'
)
_OSDEV_KIND = {"Network": "Net", "Storage": "Block"}
_UNITS = {"KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}
#: hwloc's class words (lstopo-text's ``hwloc_pci_class_string``) -> class code (class and subclass).
CLASS_WORDS = {
    "3D": 0x0302,
    "VGA": 0x0300,
    "Display": 0x0380,
    "Ethernet": 0x0200,
    "InfiniBand": 0x0207,
    "Network": 0x0280,
    "NVMExp": 0x0108,
    "NVM": 0x0108,
    "SATA": 0x0106,
    "RAID": 0x0104,
    "SAS": 0x0107,
    "ProcessingAccelerators": 0x1200,
    "Co-Processor": 0x0B40,
    "PCIBridge": 0x0604,
    "OtherBridge": 0x0680,
}


class LstopoParseError(InputError):
    """Text that holds no ``lstopo`` tree."""


class LstopoNode(msgspec.Struct, frozen=True):
    """A NUMA node: its OS index, CPUs (OS indexes) and memory (bytes; None where not printed)."""

    id: int
    cpus: CpuSet
    memory_bytes: int | None = None


class LstopoDevice(msgspec.Struct, frozen=True):
    """A PCI object (device or bridge) and where it sits.

    ``bdf`` is None for a bridge printed without ``-v`` (no busid).  ``parent`` is the BDF of the
    bridge above it (None on a host bridge or where that bridge has no busid); ``host_bridge``
    the index of its HostBridge in output order; ``numa_node`` the node of the object its
    HostBridge hangs below (None where that object holds no single node)."""

    bdf: str | None
    bridge: bool
    class_code: int | None = None
    vendor_id: int | None = None
    device_id: int | None = None
    parent: str | None = None
    ancestors: tuple[str, ...] = ()
    host_bridge: int | None = None
    numa_node: int | None = None
    #: OS devices below it: (kind, name), as ``("OpenFabrics", "mlx5_0")``, ``("Net", "ib0")``.
    osdevs: tuple[tuple[str, str], ...] = ()
    #: Whether every bridge between it and its HostBridge has a busid (the path is whole).
    path_known: bool = False
    #: The bridges between its HostBridge and it, top first, by their place in the output:
    #: without ``-v`` they name no function, but the nesting still shows which devices share
    #: which bridges.
    bridges: tuple[int, ...] = ()


class LstopoReport(msgspec.Struct, frozen=True):
    """The NUMA nodes and PCI objects of one lstopo tree, and the lines skipped."""

    nodes: tuple[LstopoNode, ...]
    devices: tuple[LstopoDevice, ...]
    skipped: tuple[Skipped, ...] = ()


class _Obj(msgspec.Struct):
    indent: int
    kind: str
    line: str
    numa: list[int] = msgspec.field(default_factory=list)
    cpus: set[int] = msgspec.field(default_factory=set)
    bdf: str | None = None
    host_bridge: int | None = None
    order: int = 0


def _size(text: str) -> int | None:
    m = _SIZE.search(text)
    return int(float(m.group(1)) * _UNITS[m.group(2)]) if m else None


def read_lstopo(text: str) -> LstopoReport:
    """Read a pasted lstopo console tree leniently.  Raises :class:`LstopoParseError` when no
    ``Machine`` (or ``Package``/``NUMANode``) line starts one."""
    cleaned = clean_paste(text)
    stack: list[_Obj] = []
    objs: list[_Obj] = []
    devices: list[dict[str, object]] = []
    node_memory: dict[int, int | None] = {}
    skipped: list[Skipped] = list(cleaned.skipped)
    bridges = 0
    for ln in cleaned.lines:
        raw = ln.text.expandtabs(2)
        body = raw.strip()
        parts = [p.strip() for p in body.split(" + ")]  # "L2 L#0 (1024KB) + L1d … + Core L#0"
        if not OBJECT.match(parts[0]):
            skipped.append(Skipped(ln.number, ln.number, f"not lstopo output: {body[:60]!r}"))
            continue
        indent = len(raw) - len(raw.lstrip())
        while stack and stack[-1].indent >= indent:
            stack.pop()
        kind = OBJECT.match(parts[-1]).group(1) if OBJECT.match(parts[-1]) else parts[0].split()[0]  # type: ignore[union-attr]
        obj = _Obj(indent, kind, body, order=len(objs))
        if kind == "HostBridge":
            obj.host_bridge = bridges
            bridges += 1
        elif stack and stack[-1].host_bridge is not None:
            obj.host_bridge = stack[-1].host_bridge
        _attach(obj, stack, devices, node_memory)
        stack.append(obj)
        objs.append(obj)
    if not objs:
        raise LstopoParseError("no lstopo tree (a 'Machine', 'Package' or 'NUMANode' line and objects below it) found")
    nodes = _nodes(objs, node_memory)
    sole = nodes[0].id if len(nodes) == 1 else None  # one node: all I/O is local to it
    return LstopoReport(nodes, tuple(_devices(devices, sole)), tuple(merge_skipped(skipped)))


def _attach(obj: _Obj, stack: list[_Obj], devices: list[dict[str, object]], node_memory: dict[int, int | None]) -> None:
    """Record what ``obj`` adds to the objects above it (``stack``)."""
    body = obj.line
    if obj.kind == "NUMANode":
        m = _PHYS.search(body)
        if m and stack:
            stack[-1].numa.append(int(m.group(1)))
            node_memory[int(m.group(1))] = _size(body)
    elif obj.kind == "PU":
        m = _PHYS.search(body)
        if m:
            for s in stack:
                s.cpus.add(int(m.group(1)))
    elif obj.kind in ("PCI", "PCIBridge"):
        busid = _BUSID.search(body)
        pci = _PCI.match(body)
        bdf = busid.group(1) if busid else (pci.group("bdf") if pci and obj.kind == "PCI" else None)
        obj.bdf = printed_bdf(bdf) if bdf else None
        ids = _IDS.search(body)
        cls = _CLASS.search(body)
        code = int(cls.group(1), 16) if cls else (CLASS_WORDS.get(pci.group("cls") or "") if pci else None)
        if obj.kind == "PCIBridge":
            code = code or 0x0604
        above = [s for s in stack if s.kind in ("PCI", "PCIBridge")]
        devices.append(
            {
                "obj": obj,
                "bdf": obj.bdf,
                "bridge": obj.kind == "PCIBridge",
                "class_code": code,
                "vendor_id": int(ids.group(1), 16) if ids else None,
                "device_id": int(ids.group(2), 16) if ids else None,
                "above": above,
                "holder": next((s for s in reversed(stack) if s.kind not in ("HostBridge", "PCI", "PCIBridge")), None),
                "osdevs": [],
            }
        )
    elif (m := _OSDEV.match(body)) and stack and stack[-1].kind == "PCI":
        entry = next(d for d in reversed(devices) if d["obj"] is stack[-1])
        kind = _OSDEV_KIND.get(m.group(1), m.group(1))
        entry["osdevs"].append((kind if not m.group(2) else f"{kind}({m.group(2)})", m.group(3)))  # type: ignore[attr-defined]


def _nodes(objs: list[_Obj], memory: dict[int, int | None]) -> tuple[LstopoNode, ...]:
    out: dict[int, LstopoNode] = {}
    for o in objs:
        if len(o.numa) == 1 or (o.numa and not o.cpus):
            # One node below an object: its CPUs are the node's; several nodes below one object
            # with CPUs (hwloc never prints that for a well-formed topology) are left without.
            for n in o.numa:
                cpus = CpuSet(o.cpus) if len(o.numa) == 1 else CpuSet()
                out.setdefault(n, LstopoNode(n, cpus, memory.get(n)))
    return tuple(out[n] for n in sorted(out))


def _devices(entries: list[dict[str, object]], sole: int | None) -> list[LstopoDevice]:
    out = []
    for e in entries:
        obj: _Obj = e["obj"]  # type: ignore[assignment]
        above: list[_Obj] = e["above"]  # type: ignore[assignment]
        holder: _Obj | None = e["holder"]  # type: ignore[assignment]
        chain = tuple(a.bdf for a in above if a.bdf)
        out.append(
            LstopoDevice(
                bdf=obj.bdf,
                bridge=bool(e["bridge"]),
                class_code=e["class_code"],  # type: ignore[arg-type]
                vendor_id=e["vendor_id"],  # type: ignore[arg-type]
                device_id=e["device_id"],  # type: ignore[arg-type]
                parent=above[-1].bdf if above else None,
                ancestors=chain,
                host_bridge=obj.host_bridge,
                numa_node=holder.numa[0] if holder is not None and len(holder.numa) == 1 else sole,
                osdevs=tuple(e["osdevs"]),  # type: ignore[arg-type]
                path_known=obj.host_bridge is not None and all(a.bdf for a in above),
                bridges=tuple(a.order for a in above if a.kind == "PCIBridge"),
            )
        )
    return out
