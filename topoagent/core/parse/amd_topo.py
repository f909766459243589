"""Parse AMD's topology tables: ``rocm-smi --showtopo`` and ``amd-smi topology``.

``rocm-smi --showtopo`` prints matrices between GPUs named ``GPU0`` … under banners, and the
GPUs' NUMA nodes (ROCm/rocm_smi_lib ``rocm_smi.py``, ``showTopology``)::

    ================================ Weight between two GPUs =================================
           GPU0         GPU1 …
    GPU0   0            15 …
    ================================= Hops between two GPUs ==================================
    =============================== Link Type between two GPUs ===============================
    GPU0   0            XGMI …
    ======================================= Numa Nodes =======================================
    GPU[0]          : (Topology) Numa Node: 0
    GPU[0]          : (Topology) Numa Affinity: 0

``amd-smi topology`` prints the same as tables named ``WEIGHT TABLE:``, ``HOPS TABLE:``,
``LINK TYPE TABLE:``, ``ACCESS TABLE:`` … whose rows and columns are the GPUs' BDFs (its
diagonal reads ``SELF`` or ``0``).  What the values mean (ROCm/amdsmi docs, "Interpreting hops
and weight"): link type ``XGMI`` or ``PCIE``; hops 1 for GPUs reachable over XGMI whatever the
physical route, 2 over PCIe inside one CPU NUMA node, 3 across NUMA nodes; weight is the KFD
io_links' cost, 15 per XGMI hop, 20 per PCIe segment.
"""

from __future__ import annotations

import re

import msgspec

from topoagent.core.bdf import PRINTED_BDF, printed_bdf
from topoagent.core.digits import decimal
from topoagent.core.errors import InputError
from topoagent.core.parse.paste import Skipped, clean_paste, merge_skipped

_BDF_WORD = re.compile(PRINTED_BDF)
__all__ = ["AmdGpuText", "AmdPair", "AmdTopoParseError", "AmdTopology", "read_amd_topology"]

# "==== Weight between two GPUs ====" (rocm-smi) or "WEIGHT TABLE:" (amd-smi).
_ROCM_BANNER = re.compile(r"^=+\s*(Weight|Hops|Link Type|Numa Nodes?)\b.*?=+\s*$", re.I)
_OTHER_BANNER = re.compile(r"^=+[ A-Za-z]*=+$")
_AMD_TABLE = re.compile(r"^\s*([A-Z][A-Z -]*?)\s+TABLE:\s*$")
_NUMA = re.compile(r"^GPU\[([0-9]{1,4})\]\s*:\s*\(Topology\)\s*Numa (Node|Affinity):\s*(-?[0-9]{1,6})\s*$")
_GPU_LABEL = re.compile(r"GPU\d{1,4}")
_TABLES = {"weight": "weight", "hops": "hops", "link type": "link", "access": "access"}


class AmdTopoParseError(InputError):
    """Text that holds no ``rocm-smi --showtopo`` / ``amd-smi topology`` table."""


class AmdGpuText(msgspec.Struct, frozen=True):
    """A GPU of the tables: ``label`` (``GPU0``, in the tool's order), its BDF (``amd-smi``
    only) and NUMA node (``rocm-smi``'s ``Numa Node``; -1 there is unknown, None)."""

    label: str
    bdf: str | None = None
    numa_node: int | None = None


class AmdPair(msgspec.Struct, frozen=True):
    """What the tables say of one GPU pair (``a`` < ``b`` in the tool's order)."""

    a: str
    b: str
    link: str | None = None  # XGMI, PCIE
    weight: int | None = None
    hops: int | None = None
    access: bool | None = None
    #: The line of the link-type cell (evidence).
    line: int = 0


class AmdTopology(msgspec.Struct, frozen=True):
    """The GPUs and pairs of one tool's tables; ``tool`` is ``rocm-smi`` or ``amd-smi``."""

    tool: str
    gpus: tuple[AmdGpuText, ...]
    pairs: tuple[AmdPair, ...]
    skipped: tuple[Skipped, ...] = ()

    def pair(self, a: str, b: str) -> AmdPair | None:
        """The pair of two labels, either order."""
        return next((p for p in self.pairs if {p.a, p.b} == {a, b}), None)


class _Tables:
    def __init__(self) -> None:
        self.tool: str | None = None
        self.table: str | None = None
        self.header: list[str] = []
        self.cells: dict[tuple[str, str, str], tuple[str, int]] = {}  # (table, row, col) -> (value, line)
        self.numa: dict[int, int] = {}
        self.order: list[str] = []

    def banner(self, line: str) -> bool:
        if m := _ROCM_BANNER.match(line):
            self.tool, self.header = "rocm-smi", []
            name = m.group(1).lower()
            self.table = "numa" if name.startswith("numa") else _TABLES.get(name)
            return True
        if m := _AMD_TABLE.match(line):
            self.tool, self.header = "amd-smi", []
            self.table = _TABLES.get(m.group(1).strip().lower())  # NUMA BW, DMA … are not read
            self.table = self.table or "other"
            return True
        return bool(_OTHER_BANNER.match(line))  # the tool's title, "End of ROCm SMI Log"

    def row(self, line: str, number: int) -> bool:
        words = line.split()
        if m := _NUMA.match(line.strip()):
            if m.group(2) == "Node" and int(m.group(3)) >= 0:
                self.numa[int(m.group(1))] = int(m.group(3))
            return True
        if self.table is None or not words:
            return False
        if all(_GPU_LABEL.fullmatch(w) or _BDF_WORD.fullmatch(w) for w in words) and not self.header:
            self.header = [w if _GPU_LABEL.fullmatch(w) else printed_bdf(w) for w in words]
            for w in self.header:
                if w not in self.order:
                    self.order.append(w)
            return True
        head = (
            words[0]
            if _GPU_LABEL.fullmatch(words[0])
            else (printed_bdf(words[0]) if _BDF_WORD.fullmatch(words[0]) else None)
        )
        if head is None or not self.header or len(words) - 1 != len(self.header):
            return False
        for col, value in zip(self.header, words[1:], strict=True):
            self.cells[(self.table, head, col)] = (value, number)
        return True


def read_amd_topology(text: str) -> AmdTopology:
    """Read a pasted ``rocm-smi --showtopo`` (or ``--showtopoweight``, ``--showtoponuma`` …)
    or ``amd-smi topology`` leniently.  Raises :class:`AmdTopoParseError` when no table row
    or NUMA line is found."""
    cleaned = clean_paste(text)
    t = _Tables()
    skipped: list[Skipped] = list(cleaned.skipped)
    for ln in cleaned.lines:
        line = ln.text.rstrip()
        if t.banner(line.strip()) or t.row(line, ln.number):
            continue
        if line.strip().startswith(("Legend:", "SELF", "ENABLED", "N/A", "T/F", "C/NC", "64,32", "<BW")):
            continue  # amd-smi's legend
        skipped.append(
            Skipped(ln.number, ln.number, f"not {t.tool or 'rocm-smi/amd-smi'} output: {line.strip()[:60]!r}")
        )
    if not t.cells and not t.numa:
        raise AmdTopoParseError("no rocm-smi --showtopo or amd-smi topology table found")
    labels = t.order or [f"GPU{i}" for i in sorted(t.numa)]
    by_bdf = not all(_GPU_LABEL.fullmatch(w) for w in labels)
    gpus = tuple(
        AmdGpuText(
            label=f"GPU{i}",
            bdf=name if by_bdf else None,
            numa_node=t.numa.get(i),
        )
        for i, name in enumerate(labels)
    )
    pairs = []
    for i, a in enumerate(labels):
        for j in range(i + 1, len(labels)):
            pairs.append(_pair(t, f"GPU{i}", f"GPU{j}", a, labels[j]))
    return AmdTopology(t.tool or "rocm-smi", gpus, tuple(pairs), tuple(merge_skipped(skipped)))


def _pair(t: _Tables, la: str, lb: str, a: str, b: str) -> AmdPair:
    def cell(table: str) -> tuple[str | None, int]:
        found = t.cells.get((table, a, b)) or t.cells.get((table, b, a))
        return (found[0], found[1]) if found else (None, 0)

    link, line = cell("link")
    weight, _ = cell("weight")
    hops, _ = cell("hops")
    access, _ = cell("access")
    return AmdPair(
        la,
        lb,
        link=link.upper() if link and link.upper() in ("XGMI", "PCIE") else None,
        weight=decimal(weight or ""),
        hops=decimal(hops or ""),
        access={"ENABLED": True, "DISABLED": False}.get(access or ""),
        line=line,
    )
