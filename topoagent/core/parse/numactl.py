"""Parse the text of ``numactl -H`` (``--hardware``): the NUMA nodes, their CPUs, memory and
distances as the kernel gives them (numactl reads ``/sys/devices/system/node``)::

    available: 2 nodes (0-1)
    node 0 cpus: 0 1 2 3 ...
    node 0 size: 515673 MB
    node 0 free: 505063 MB
    node 1 cpus:
    node 1 size: 97280 MB
    node 1 free: 97005 MB
    node distances:
    node   0   1
      0:  10  21
      1:  21  10

A node with memory and an empty ``cpus:`` is CPU-less (Grace GPU memory, CXL, HBM).
``No NUMA available on this system`` is one node with every CPU (unknown here).
"""

from __future__ import annotations

import re

import msgspec

from topoagent.core.cpuset import CpuSet
from topoagent.core.errors import InputError
from topoagent.core.parse.paste import Skipped, clean_paste, merge_skipped

__all__ = ["CPU_WRAP", "NumaNodeText", "NumactlParseError", "NumactlReport", "read_numactl"]

_AVAILABLE = re.compile(r"^available:\s*(\d+)\s+nodes?\b")
_NODE = re.compile(r"^node\s+(\d{1,4})\s+(cpus|size|free):\s*(.*?)\s*$")
_DIST_HEADER = re.compile(r"^node(?:\s+\d{1,4})+\s*$")
_DIST_ROW = re.compile(r"^(\d{1,4}):((?:\s+\d{1,4})+)\s*$")
_SIZE = re.compile(r"^(\d{1,12})\s*MB$")
_CPU_WORDS = re.compile(r"^[0-9 ]*$")
#: A line of CPU numbers only: the rest of a ``node N cpus:`` line a mail client wrapped.
CPU_WRAP = re.compile(r"^\s*\d{1,5}(?:\s+\d{1,5})*\s*$")


class NumactlParseError(InputError):
    """Text that holds no ``numactl -H`` output."""


class NumaNodeText(msgspec.Struct, frozen=True):
    """One node as ``numactl -H`` prints it (None where a line was missing)."""

    id: int
    cpus: CpuSet | None = None
    size_bytes: int | None = None
    free_bytes: int | None = None
    #: The line the CPUs were printed on (evidence).
    cpus_line: int | None = None


class NumactlReport(msgspec.Struct, frozen=True):
    """The nodes in output order, the distance table (rows in the header's node order) and the
    lines skipped."""

    nodes: tuple[NumaNodeText, ...]
    distance_nodes: tuple[int, ...] = ()
    distances: tuple[tuple[int, ...], ...] = ()
    skipped: tuple[Skipped, ...] = ()

    def distance_row(self, node: int, order: tuple[int, ...]) -> tuple[int, ...]:
        """``node``'s distances to the nodes of ``order``; () where the table lacks any."""
        if node not in self.distance_nodes or not set(order) <= set(self.distance_nodes):
            return ()
        row = self.distances[self.distance_nodes.index(node)]
        if len(row) != len(self.distance_nodes):
            return ()
        return tuple(row[self.distance_nodes.index(n)] for n in order)


def read_numactl(text: str) -> NumactlReport:
    """Read a pasted ``numactl -H`` leniently.  Raises :class:`NumactlParseError` when it names
    no node."""
    cleaned = clean_paste(text)
    fields: dict[int, dict[str, object]] = {}
    header: tuple[int, ...] = ()
    rows: dict[int, tuple[int, ...]] = {}
    skipped: list[Skipped] = list(cleaned.skipped)
    cpus_of: dict[str, object] | None = None  # the node whose CPU list the last line gave
    for ln in cleaned.lines:
        line = ln.text.strip()
        if cpus_of is not None and CPU_WRAP.match(line):
            # a CPU list a mail client wrapped ("… 108" / "109 110 …"): the same node's CPUs
            before: CpuSet = cpus_of["cpus"]  # type: ignore[assignment]
            cpus_of["cpus"] = before | CpuSet(int(w) for w in line.split())
            continue
        cpus_of = None
        if _AVAILABLE.match(line) or line == "node distances:":
            continue
        if m := _NODE.match(line):
            node = fields.setdefault(int(m.group(1)), {})
            _field(node, m.group(2), m.group(3), ln.number)
            cpus_of = node if m.group(2) == "cpus" and "cpus" in node else None
            continue
        if _DIST_HEADER.match(line):
            header = tuple(int(w) for w in line.split()[1:])
            continue
        if (m := _DIST_ROW.match(line)) and header:
            rows[int(m.group(1))] = tuple(int(w) for w in m.group(2).split())
            continue
        skipped.append(Skipped(ln.number, ln.number, f"not numactl -H output: {line[:60]!r}"))
    if not fields:
        raise NumactlParseError("no numactl -H node lines ('node N cpus: …') found")
    nodes = tuple(
        NumaNodeText(
            id=n,
            cpus=f.get("cpus"),  # type: ignore[arg-type]
            size_bytes=f.get("size"),  # type: ignore[arg-type]
            free_bytes=f.get("free"),  # type: ignore[arg-type]
            cpus_line=f.get("cpus_line"),  # type: ignore[arg-type]
        )
        for n, f in sorted(fields.items())
    )
    order = tuple(n for n in header if n in rows)
    return NumactlReport(nodes, order, tuple(rows[n] for n in order), tuple(merge_skipped(skipped)))


def _field(node: dict[str, object], name: str, value: str, line: int) -> None:
    if name == "cpus":
        if _CPU_WORDS.match(value):
            node["cpus"] = CpuSet(int(w) for w in value.split() if len(w) <= 5)
            node["cpus_line"] = line
    elif m := _SIZE.match(value):
        node[name] = int(m.group(1)) * 1024 * 1024
