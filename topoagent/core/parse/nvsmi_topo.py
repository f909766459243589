"""Parse the text of ``nvidia-smi topo -m`` (the GPU/NIC connectivity matrix).

The matrix has been printed in several shapes since 2015, and users paste it in worse ones.
This parser reads all of those seen in the wild (see ``tests/core/parse/samples/nvsmi/``):

* a header row of device labels -- ``GPU0 … NIC0 …`` with a ``NIC Legend:`` block that maps
  ``NIC0: mlx5_0``, or (older drivers) raw RDMA names ``mlx5_0`` / ``mlx4_0`` -- followed by
  the column titles ``CPU Affinity``, ``NUMA Affinity`` (absent from older drivers) and
  ``GPU NUMA ID`` (newer drivers; numeric on Grace, ``N/A`` elsewhere);
* one row per device: the label, one cell per device (``X``, ``NV#``, ``PIX``, ``PXB``,
  ``PHB``, ``NODE``, ``SYS``, or ``SOC`` from ≈2017 drivers, which had no ``NODE``), then, on
  GPU rows only, the affinity values;
* a ``Legend:`` block (ignored) and a ``NIC Legend:`` block (used).

Cells are separated by tabs or runs of spaces.  Pastes glue cells (``NODENODE``), glue the
affinity to the last cell (``SYS0-47,96-143``) or the NUMA column to the CPU column
(``0-45,92-1370``), glue the header (``GPU0GPU1``, ``NIC28NIC29``), prefix lines with ``#``,
keep the ANSI underline nvidia-smi puts around the header on a terminal, and drop the final
newline.  Cells are split by the known token vocabulary; numbers glued to numbers are split by
position and column count, and where more than one reading fits, by evidence from the rest of
the matrix (the symmetric cell, identical affinities on other rows, equal CPU counts).  When
the evidence does not decide, the value is left unknown and a warning says so: the parser never
guesses silently.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator

import msgspec

from topoagent.core.cpuset import CpuSet, format_cpulist
from topoagent.core.errors import InputError
from topoagent.core.parse.nvsmi_p2p import is_p2p_row
from topoagent.core.parse.paste import Line, Skipped, clean_paste, merge_skipped

__all__ = [
    "TopoDevice",
    "TopoMatrix",
    "TopoParseError",
    "parse_topo_matrix",
    "read_topo_matrix",
]

#: NVLink counts seen in real matrices: NV1 (DGX-1) … NV18 (H100/B200 NVSwitch).  Only used to
#: split a count glued to the digits of an affinity (``NV180-47``); a count written apart from
#: its neighbours is taken as printed.
MAX_GLUED_NVLINKS = 18

# Linux limits (NR_CPUS with MAXSMP, MAX_NUMNODES with NODES_SHIFT=10): bounds that rule out
# impossible readings of glued numbers, nothing more.
_MAX_CPU = 8191
_MAX_NODE = 1023
#: nvidia-smi lists one host's GPUs and NICs: a header naming more is no host's matrix, and the
#: bound keeps the n x n work of reading one small.
MAX_DEVICES = 1024
#: Glued affinity text is split only where the fields after the cut (NUMA Affinity, GPU NUMA
#: ID: node numbers) fit in this many characters, so the number of readings tried per row is
#: bounded and the work stays linear in the row's length however long its CPU list is.
MAX_GLUED_TAIL = 64

_COLUMN_TITLES = (
    ("cpu", re.compile(r"CPU\s*Affinity")),
    ("numa", re.compile(r"NUMA\s*Affinity")),
    ("gpu_numa", re.compile(r"GPU\s*NUMA\s*ID")),
)

# The cells nvidia-smi prints (topoagent.core.pathclass.PathClass.from_token reads them; SOC is
# old drivers' SYS, turned into SYS below).
# XGMI: two AMD GPUs joined by Infinity Fabric, as topoagent's matrix of an AMD host prints it
# (rocm-smi's Link Type word); before X, which would take its first letter.
_CELL = re.compile(r"XGMI|X|NV([0-9]{1,4})|PIX|PXB|PHB|NODE|SYS|SOC")
_LABEL_START = re.compile(r"(?=GPU[0-9]|NIC[0-9]|mlx[0-9]+_)")
_LABEL = re.compile(r"(?:GPU|NIC)[0-9]+|[A-Za-z][A-Za-z0-9_]*[0-9]")
_LEGEND_ENTRY = re.compile(r"^\s*(NIC[0-9]+)\s*:\s*(\S+)\s*$")
# Numbers are bounded in length: int() of a 5000-digit string raises, and no CPU id is that long.
_LIST = re.compile(r"[0-9]{1,5}(?:-[0-9]{1,5})?(?:,[0-9]{1,5}(?:-[0-9]{1,5})?)*")


class TopoParseError(InputError):
    """Text that is not an ``nvidia-smi topo -m`` matrix."""


class TopoDevice(msgspec.Struct, frozen=True):
    """One row (and column) of the matrix.

    ``label`` is the name the matrix uses (``GPU0``, ``NIC3``, or a raw ``mlx5_0`` on older
    drivers).  ``rdma_name`` is the RDMA device behind a NIC: from the ``NIC Legend`` block, or
    the label itself when the header used raw names; ``None`` for GPUs or when the legend is
    missing.  The affinities are the kernel list format, normalised (``0-47,96-143``; ``1-1``
    becomes ``1``); ``""`` is an empty CPU affinity (the caller's cpuset excluded every local
    CPU), ``None`` means ``N/A``, absent (NIC rows, older drivers) or unresolved -- in the last
    case ``unresolved_affinity`` keeps the text that could not be split and a warning explains.
    """

    label: str
    kind: str
    rdma_name: str | None = None
    cpu_affinity: CpuSet | None = None
    numa_affinity: str | None = None
    gpu_numa_id: int | None = None
    unresolved_affinity: str | None = None


class TopoMatrix(msgspec.Struct, frozen=True):
    """The parsed matrix.

    ``cells[i][j]`` is the path class between ``devices[i]`` and ``devices[j]``: ``X``,
    ``NV<n>``, ``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``, or ``?`` where the text could not
    be read.  Old ``SOC`` cells are stored as ``SYS`` with ``legacy_soc`` set.  ``warnings``
    lists every repair and every ambiguity the parser met, one sentence each.
    """

    devices: tuple[TopoDevice, ...]
    cells: tuple[tuple[str, ...], ...]
    legacy_soc: bool = False
    warnings: tuple[str, ...] = ()
    #: Line ranges of the paste not read (lenient reading only), with why.
    skipped: tuple[Skipped, ...] = ()
    #: The paste's author left columns out (``...`` in the header or rows): devices and
    #: affinities beyond those shown are unknown, so the matrix cannot show an absence.
    elided: bool = False

    @property
    def labels(self) -> tuple[str, ...]:
        """Device labels in matrix order."""
        return tuple(d.label for d in self.devices)

    def index(self, name: str) -> int:
        """Position of a device given its label (``GPU0``) or RDMA name (``mlx5_0``)."""
        for i, d in enumerate(self.devices):
            if d.label == name:
                return i
        for i, d in enumerate(self.devices):
            if d.rdma_name == name:
                return i
        raise KeyError(name)

    def device(self, name: str) -> TopoDevice:
        """The device with this label or RDMA name."""
        return self.devices[self.index(name)]

    def cell(self, a: str, b: str) -> str:
        """Path class between two devices named by label or RDMA name."""
        return self.cells[self.index(a)][self.index(b)]


# --------------------------------------------------------------------------------------------
# Value validation


def _parse_list(text: str, limit: int) -> list[tuple[int, int]] | None:
    """Ranges of a kernel list if ``text`` is one nvidia-smi could print, else None.

    nvidia-smi prints ranges in ascending order without overlap; a range may be degenerate
    (``1-1``) when the caller's cpuset cuts a node down to one CPU.
    """
    if not _LIST.fullmatch(text):
        return None
    ranges: list[tuple[int, int]] = []
    prev = -1
    for chunk in text.split(","):
        lo_s, _, hi_s = chunk.partition("-")
        # A leading zero ("05") is no number nvidia-smi prints: it can only come from gluing.
        if (len(lo_s) > 1 and lo_s[0] == "0") or (len(hi_s) > 1 and hi_s[0] == "0"):
            return None
        lo = int(lo_s)
        hi = int(hi_s) if hi_s else lo
        if hi < lo or lo <= prev or hi > limit:
            return None
        ranges.append((lo, hi))
        prev = hi
    return ranges


def _norm_list(text: str, limit: int) -> str | None:
    ranges = _parse_list(text, limit)
    if ranges is None:
        return None
    return format_cpulist(c for lo, hi in ranges for c in range(lo, hi + 1))


@functools.lru_cache(maxsize=4096)
def _cpu_count(text: str | None) -> int | None:
    if not text:
        return 0 if text == "" else None
    ranges = _parse_list(text, _MAX_CPU)
    return None if ranges is None else sum(hi - lo + 1 for lo, hi in ranges)


_DIGITS = frozenset("0123456789")
_NA = object()  # an "N/A" value, distinct from an empty or missing one


@functools.lru_cache(maxsize=4096)
def _read_value(field: str, text: str) -> object:
    """The value of one affinity field, ``_NA``, or None if ``text`` cannot be that field."""
    if text == "N/A":
        return _NA
    if field == "cpu":
        return "" if text == "" else _norm_list(text, _MAX_CPU)
    if text == "":
        return None  # only the CPU list can be empty
    if field == "numa":
        return _norm_list(text, _MAX_NODE)
    if re.fullmatch(r"0|[1-9][0-9]{0,4}", text) and int(text) <= _MAX_NODE:
        return int(text)
    return None


# --------------------------------------------------------------------------------------------
# Line handling


def _clean(line: str) -> str:
    """A line :func:`~topoagent.core.parse.paste.clean_paste` kept (ANSI codes and trailing space
    already gone), without the ``#`` a script or issue template put before it."""
    stripped = line.lstrip()
    # Pastes into scripts and issue templates prefix every line with "#" (or "# ").
    if stripped.startswith("#"):
        line = stripped[1:]
    return line


def _read_header(line: str) -> tuple[list[str], list[str]] | None:
    """Labels and column fields of a header line, or None if the line is no header."""
    found: list[tuple[int, str]] = []
    rest = line
    for name, pattern in _COLUMN_TITLES:
        m = pattern.search(rest)
        if m:
            found.append((m.start(), name))
            rest = rest[: m.start()] + " " * (m.end() - m.start()) + rest[m.end() :]
    labels: list[str] = []
    for word in rest.split():
        # Glued labels: "GPU0GPU1", "NIC28NIC29", "mlx5_0mlx5_1".
        for piece in _LABEL_START.split(word):
            if not piece:
                continue
            if not _LABEL.fullmatch(piece) or _CELL.fullmatch(piece):
                return None
            labels.append(piece)
    if not labels or not re.fullmatch(r"GPU[0-9]+", labels[0]):
        return None
    if not found and len(labels) < 2:
        return None  # "GPU0 X" alone is a row of a one-GPU matrix, not a header
    return labels, [name for _, name in sorted(found)]


def _row_label(line: str, labels: frozenset[str], lengths: tuple[int, ...]) -> str | None:
    """The header label this line starts with (longest match, ``GPU1`` is not ``GPU10``).

    ``lengths`` are the distinct label lengths, longest first: one set lookup per length.
    """
    text = line.lstrip()
    for n in lengths:
        label = text[:n]
        if len(label) == n and label in labels:
            nxt = text[n : n + 1]
            if nxt in _DIGITS or nxt in ("_", ":"):
                continue
            return label
    return None


# A markdown or reStructuredText table row ("| GPU0 | X | NV18 |") and its rules ("|---|",
# "+------+").
_TABLE_RULE = re.compile(r"^\s*[|+][-=:|+ ]*$")


def _table_cells(line: str) -> list[str] | None:
    """The cells of a table row; None for a rule line."""
    if _TABLE_RULE.match(line):
        return None
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _table_order(cells: list[str]) -> list[int] | None:
    """For a table's header row, its columns in nvidia-smi's order -- the corner, the GPUs, the
    NICs, then ``CPU Affinity``, ``NUMA Affinity``, ``GPU NUMA ID`` -- as indices into ``cells``; None
    for a row that is no header with exactly one corner cell (a person may move the columns of
    a markdown table: ``| CPU Affinity | NUMA Affinity | | GPU0 | …``)."""
    titles: dict[str, int] = {}
    labels: list[int] = []
    corner: list[int] = []
    for i, cell in enumerate(cells):
        title = next((name for name, pattern in _COLUMN_TITLES if pattern.fullmatch(cell)), None)
        if title is not None and title not in titles:
            titles[title] = i
        elif _LABEL.fullmatch(cell) and not _CELL.fullmatch(cell):
            labels.append(i)
        else:
            corner.append(i)
    gpus = [i for i in labels if re.fullmatch(r"GPU[0-9]+", cells[i])]
    if len(corner) != 1 or _CELL.fullmatch(cells[corner[0]]) or not gpus:
        return None
    others = [i for i in labels if i not in gpus]  # NICs after the GPUs, as nvidia-smi lists them
    return corner + gpus + others + [titles[name] for name, _ in _COLUMN_TITLES if name in titles]


def _untable(line: str, order: list[int] | None = None) -> str | None:
    """A table row as the tab-separated line nvidia-smi prints; None for a rule line.  ``order``:
    the header's column order (:func:`_table_order`), applied to rows with as many cells."""
    cells = _table_cells(line)
    if cells is None:
        return None
    if order is not None and len(cells) == len(order):
        cells = [cells[i] for i in order]
    # The top-left corner of a header row: empty, or a word such as "GPU" that is no label.
    if len(cells) > 1 and (not cells[0] or (not _LABEL.fullmatch(cells[0]) and _LABEL.fullmatch(cells[1]))):
        cells[0] = ""
    return "\t".join(cells)


class _Reading(msgspec.Struct, frozen=True):
    """One way to read a row: its cells and its affinity values (cpu, numa, gpu_numa)."""

    cells: tuple[str, ...]
    values: tuple[object, ...] | None  # None: no affinity text on the row
    repaired: bool  # the reading split glued digits or assumed an empty field
    split: bool = False  # the reading split glued digits
    nv_cell: str | None = None  # the last cell, when its NVLink count was split off digits

    def describe(self, fields: list[str]) -> str:
        parts = [self.nv_cell] if self.nv_cell else []
        if self.values is not None:
            parts.append(_describe(self.values, fields))
        return ", ".join(parts) or "cells only"


def _scan_cells(body: str, n: int) -> tuple[list[str], list[tuple[int, int]], int, list[str]]:
    """Split the cell part of a row by vocabulary.

    Returns the cells, the span of each cell's text, the position where the affinity text
    starts, and notes about unreadable cells.
    """
    cells: list[str] = []
    spans: list[tuple[int, int]] = []
    notes: list[str] = []
    pos = 0
    while len(cells) < n:
        while pos < len(body) and body[pos].isspace():
            pos += 1
        if pos >= len(body):
            break
        if body[pos] in _DIGITS or body.startswith("N/A", pos):
            break  # the affinity columns begin
        m = _CELL.match(body, pos)
        if m:
            cells.append(m.group())
            spans.append((m.start(), m.end()))
            pos = m.end()
            continue
        # Not a path token: one unreadable cell, up to the next space or known token.
        end = pos + 1
        while end < len(body) and not body[end].isspace() and not _CELL.match(body, end):
            end += 1
        notes.append(f"unreadable cell {_short(body[pos:end], 20)}")
        cells.append("?")
        spans.append((pos, end))
        pos = end
    return cells, spans, pos, notes


def _tail_tokens(text: str) -> list[str]:
    # "N/A" is a word of its own even when glued ("0N/A", "N/AN/A").
    return text.replace("N/A", " N/A ").split()


def _assignments(tokens: list[str], fields: list[str]) -> Iterator[tuple[tuple[object, ...], bool, bool]]:
    """Every way to read ``tokens`` as the affinity ``fields``.

    A field takes a whole token, or a piece of a token glued to the next field (split between
    two digits), or -- the CPU list only -- nothing at all.  Yields the values with two flags:
    whether a field was assumed empty, and whether a token was split.
    """

    def walk(
        fi: int, ti: int, off: int, acc: tuple[object, ...], empty: bool, split: bool
    ) -> Iterator[tuple[tuple[object, ...], bool, bool]]:
        if fi == len(fields):
            if ti == len(tokens):
                yield acc, empty, split
            return
        field = fields[fi]
        if field == "cpu" and off == 0:
            yield from walk(fi + 1, ti, 0, acc + ("",), True, split)
        if ti >= len(tokens):
            return
        token = tokens[ti]
        rest = token[off:]
        value = _read_value(field, rest)
        if value is not None and rest:
            yield from walk(fi + 1, ti + 1, 0, acc + (value,), empty, split or off > 0)
        for cut in range(max(off + 1, len(token) - MAX_GLUED_TAIL), len(token)):
            if token[cut - 1] in _DIGITS and token[cut] in _DIGITS:
                value = _read_value(field, token[off:cut])
                if value is not None:
                    yield from walk(fi + 1, ti, cut, acc + (value,), empty, True)

    yield from walk(0, 0, 0, (), False, False)


def _row_readings(
    body: str, n: int, fields: list[str], is_gpu: bool
) -> tuple[list[_Reading], tuple[str, ...], list[str], str]:
    """All readings of one row's text after its label.

    Returns the readings (possibly none, or several when glued digits allow more than one),
    the cells as first scanned, notes on unreadable text, and the raw text the readings
    disagree about (for warnings).
    """
    cells, spans, pos, notes = _scan_cells(body, n)
    if len(cells) < n:
        notes.append(f"{n - len(cells)} of {n} cells missing")
        cells += ["?"] * (n - len(cells))
    tail = body[pos:].strip()
    raw = tail
    variants: list[tuple[list[str], str, bool]] = [(cells, tail, False)]

    # The last cell's NVLink count may have swallowed the first digits of the CPU list:
    # "NV180-47" is NV18 + "0-47" (or NV1 + "80-47").  Offer every split with a plausible
    # count; the affinity columns, the symmetric cell and the other rows decide.
    if fields and spans and len(spans) == n and cells[-1].startswith("NV"):
        start, end = spans[-1]
        digits = cells[-1][2:]
        glued = end < len(body) and not body[end].isspace()
        if glued or not tail:
            raw = body[start:].strip()
            for k in range(1, len(digits)):
                if 1 <= int(digits[:k]) <= MAX_GLUED_NVLINKS:
                    split_tail = (digits[k:] + body[end:]).strip()
                    variants.append((cells[:-1] + ["NV" + digits[:k]], split_tail, True))
            if glued and int(digits) > MAX_GLUED_NVLINKS:
                variants.pop(0)  # "NV180-47" read as NV180 is no reading at all

    readings: list[_Reading] = []
    for vcells, vtail, nv_split in variants:
        if not fields or (not vtail and not is_gpu):
            # No affinity columns, or a NIC row (nvidia-smi prints no affinity for NICs).
            nv_cell = vcells[-1] if nv_split else None
            readings.append(_Reading(tuple(vcells), None, nv_split, nv_split, nv_cell))
            continue
        seen: set[tuple[object, ...]] = set()
        for values, empty, split in _assignments(_tail_tokens(vtail), fields):
            if values not in seen:
                seen.add(values)
                split = split or nv_split
                nv_cell = vcells[-1] if nv_split else None
                readings.append(_Reading(tuple(vcells), values, empty or split, split, nv_cell))
    # A reading that needed no repair wins outright: the text says what it means.
    clean = [r for r in readings if not r.repaired]
    if clean:
        readings = clean[:1]
    return readings, tuple(cells), notes, " ".join(raw.split())


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _values_key(values: tuple[object, ...] | None, fields: list[str]) -> dict[str, object]:
    out: dict[str, object] = {"cpu": None, "numa": None, "gpu_numa": None}
    if values is not None:
        for name, value in zip(fields, values, strict=True):
            out[name] = None if value is _NA else value
    return out


_FIELD_NAMES = {"cpu": "CPU Affinity", "numa": "NUMA Affinity", "gpu_numa": "GPU NUMA ID"}


def _short(text: str, limit: int = 60) -> str:
    """``repr`` of a raw text for a warning, cut to a readable length."""
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _describe(values: tuple[object, ...], fields: list[str]) -> str:
    return ", ".join(
        f"{_FIELD_NAMES[name]} {'N/A' if value is _NA else _short(value) if isinstance(value, str) else repr(value)}"
        for name, value in zip(fields, values, strict=True)
    )


def parse_topo_matrix(text: str) -> TopoMatrix:
    """Parse the output of ``nvidia-smi topo -m`` (or a paste of it) into a :class:`TopoMatrix`.

    Lines before the header (prompts, ``NVIDIA Topology:``) and after the matrix (legends,
    comments) are skipped; the ``NIC Legend`` block names the NICs.  Raises
    :class:`TopoParseError` when no header is found, a label repeats, or a device has no row.
    """
    return _read(text, lenient=False)


def read_topo_matrix(text: str) -> TopoMatrix:
    """Read a pasted matrix leniently: a truncated matrix keeps every row it has (the cells and
    affinities of devices without a row are unknown), a markdown table is read as the matrix it
    shows, and lines inside the matrix that are no row are skipped and listed in
    :attr:`TopoMatrix.skipped`.  Raises :class:`TopoParseError` only when there is no header
    or the header repeats a label."""
    return _read(text, lenient=True)


def _read(text: str, lenient: bool) -> TopoMatrix:
    if not isinstance(text, str):
        raise TopoParseError(f"expected text, got {type(text).__name__}")
    cleaned = clean_paste(text)
    numbered, elided_at = _without_ellipses(_numbered_lines(cleaned.lines))
    header_at, labels, fields = _find_header([line for _, line in numbered])
    warnings: list[str] = []
    elided = bool(elided_at & {number for number, _ in numbered[header_at:]})
    if elided:
        warnings.append(_elision_warning(numbered[header_at][0] in elided_at, labels, len(elided_at)))
    legend, row_text, legacy, odd_lines, last_row = _read_rows(
        numbered[header_at + 1 :], labels, numbered[header_at][0], warnings
    )
    if row_text and all(is_p2p_row(f"{lb} {text}") for lb, text in row_text.items()):
        # Its cells are NVML's P2P status (OK, NS, GNS …), not path classes: reading them as a
        # topology would invent paths.
        raise TopoParseError(
            "this is nvidia-smi topo -p2p output (each GPU pair's P2P status), not a topology matrix: "
            "give it with --paste, which reads it as P2P status"
        )
    skipped = list(cleaned.skipped) if lenient else []
    skipped += [
        Skipped(number, number, f"not a matrix row: {_short(line, 60)}")
        for number, line in odd_lines
        if number < last_row
    ]
    _check_missing_rows(labels, row_text, lenient, warnings)
    readings, raw_tails, unresolved = _all_readings(labels, row_text, fields, warnings)
    chosen = _choose_readings(labels, readings, raw_tails, unresolved, fields, warnings)
    devices, rows, soc = _devices(labels, chosen, legend, fields, unresolved)
    for lb in legend:
        if lb not in row_text:
            warnings.append(f"NIC Legend names {lb}, which is not in the matrix")
    warnings += _consistency_warnings(labels, rows)
    return TopoMatrix(
        devices=tuple(devices),
        cells=tuple(rows),
        legacy_soc=legacy or soc,
        warnings=tuple(warnings),
        skipped=tuple(merge_skipped(skipped)),
        elided=elided,
    )


# An author's "..." (or "…") standing for cells or columns left out: a word of its own.
_ELLIPSIS = re.compile(r"(?<!\S)(?:\.{3,}|…)(?=\s|$)")


def _without_ellipses(numbered: list[tuple[int, str]]) -> tuple[list[tuple[int, str]], set[int]]:
    """The lines with every ``...`` word removed, and the numbers of the lines that had one.

    nvidia-smi never prints ``...``: it is a person shortening a wide matrix, at the end of
    every line (``GPU0  X  NV4  NODE ...``) or in its middle.  Removed from the header and the
    rows alike, the cells left line up with the labels left; what was cut is unknown.
    """
    out: list[tuple[int, str]] = []
    elided: set[int] = set()
    for number, line in numbered:
        if "..." in line or "…" in line:
            cut = _ELLIPSIS.sub(" ", line)
            if cut != line:
                elided.add(number)
                line = cut.rstrip()
        out.append((number, line))
    return out, elided


def _elision_warning(in_header: bool, labels: list[str], lines: int) -> str:
    where = f"the header (after {labels[-1]})" if in_header else "the rows"
    return (
        f"'...' in {where} on {lines} line(s): the author left columns out; devices, cells and affinities "
        "beyond those shown are unknown"
    )


def _numbered_lines(lines: Iterable[Line]) -> list[tuple[int, str]]:
    """The kept lines of the paste with their line numbers, ``#`` prefixes gone and table rows
    read as the tab-separated rows nvidia-smi prints (table rules dropped)."""
    numbered: list[tuple[int, str]] = []
    order: list[int] | None = None  # the column order of the first table header
    for ln in lines:
        line = _clean(ln.text)
        if line.lstrip().startswith(("|", "+")):
            cells = _table_cells(line) if order is None else None
            if cells is not None:
                order = _table_order(cells)
            table_row = _untable(line, order)
            if table_row is None:
                continue
            line = table_row
        numbered.append((ln.number, line))
    return numbered


def _find_header(lines: list[str]) -> tuple[int, list[str], list[str]]:
    """Index, labels and column fields of the first header line; raises when there is none or
    its labels are no one host's (too many, or one repeated)."""
    for i, line in enumerate(lines):  # noqa: B007  i is the header's index, returned below
        parsed = _read_header(line)
        if parsed:
            labels, fields = parsed
            break
    else:
        raise TopoParseError("no nvidia-smi topo -m header (a line of GPU0 … labels) found")
    if len(labels) > MAX_DEVICES:
        raise TopoParseError(f"the header names {len(labels)} devices, more than {MAX_DEVICES}: not one host's matrix")
    if len(set(labels)) != len(labels):
        seen: set[str] = set()
        dup = next(lb for lb in labels if lb in seen or seen.add(lb))  # type: ignore[func-returns-value]
        raise TopoParseError(f"device label {dup} appears twice in the header")
    return i, labels, fields


def _read_rows(
    numbered: list[tuple[int, str]], labels: list[str], last_row: int, warnings: list[str]
) -> tuple[dict[str, str], dict[str, str], bool, list[tuple[int, str]], int]:
    """Sort the lines after the header into legend entries and device rows.

    Returns the ``NIC Legend`` (label -> RDMA name), each device's row text after its label,
    whether the legend explains ``SOC``, the lines inside the matrix that are no row, and the
    number of the last row's line (``last_row`` on entry: the header's).
    """
    label_set = frozenset(labels)
    lengths = tuple(sorted({len(lb) for lb in labels}, reverse=True))
    legacy = False
    legend: dict[str, str] = {}
    row_text: dict[str, str] = {}
    in_legend = False
    odd_lines: list[tuple[int, str]] = []  # lines inside the matrix that are no row
    for number, line in numbered:
        stripped = line.strip()
        if not stripped:
            continue
        entry = _LEGEND_ENTRY.match(line)
        if entry:
            legend[entry.group(1)] = entry.group(2)
            continue
        if stripped.startswith(("Legend:", "NIC Legend:")):
            in_legend = True
            continue
        if in_legend:
            # Legend lines ("  SOC  = Connection traversing …") only matter for the flag.
            if re.match(r"SOC\s*=", stripped):
                legacy = True
            continue
        label = _row_label(line, label_set, lengths)
        if label is None:
            if re.match(r"(GPU|NIC)[0-9]+\b", stripped):
                first = _short(stripped.split()[0], 20)
                warnings.append(f"row {first} is not in the header; ignored")
            else:
                odd_lines.append((number, stripped))
            continue
        if label in row_text:
            warnings.append(f"second row for {label} ignored")
            continue
        row_text[label] = line.lstrip()[len(label) :]
        last_row = number
    return legend, row_text, legacy, odd_lines, last_row


def _check_missing_rows(labels: list[str], row_text: dict[str, str], lenient: bool, warnings: list[str]) -> None:
    """Raise (strict) or warn (lenient) when header devices have no row."""
    n = len(labels)
    missing = [lb for lb in labels if lb not in row_text]
    if missing and not lenient:
        raise TopoParseError(f"header names {n} devices but {len(missing)} have no row (first: {missing[0]})")
    if missing:
        warnings.append(
            f"{len(missing)} of {n} devices have no row (the paste ends early or rows were left out; "
            f"first: {missing[0]}): their own cells and affinities are unknown"
        )


def _all_readings(
    labels: list[str], row_text: dict[str, str], fields: list[str], warnings: list[str]
) -> tuple[dict[str, list[_Reading]], dict[str, str], dict[str, str]]:
    """Pass 1: every reading of every row, the raw affinity text of each row, and the rows
    whose affinity text fits no reading (label -> that text)."""
    n = len(labels)
    readings: dict[str, list[_Reading]] = {}
    raw_tails: dict[str, str] = {}
    unresolved: dict[str, str] = {}
    for label in labels:
        if label not in row_text:  # a row the paste does not have: every cell unknown
            readings[label], raw_tails[label] = [_Reading(("?",) * n, None, False)], ""
            continue
        is_gpu = label.startswith("GPU")
        rs, cells, notes, raw = _row_readings(row_text[label], n, fields, is_gpu)
        raw_tails[label] = raw
        warnings.extend(f"{label}: {note}" for note in notes)
        if not rs:
            # No reading of the affinity text fits the columns: keep the cells, drop values.
            rs = [_Reading(cells, None, True)]
            if raw or is_gpu:
                cols = ", ".join(_FIELD_NAMES[f] for f in fields) or "(none)"
                warnings.append(f"{label}: affinity text {_short(raw)} does not fit the columns {cols}; left unknown")
                unresolved[label] = raw
        readings[label] = rs
    return readings, raw_tails, unresolved


def _evidence(known: list[dict[str, object]]) -> tuple[tuple[str, Callable[[dict[str, object]], bool]], ...]:
    """The tests that prefer one reading of an ambiguous row, strongest first, each named for
    the warning: agreement with the values of the rows that have one reading (``known``)."""
    return (
        ("the same affinities on another row", lambda v: v in known),
        ("the same CPU list on another row", lambda v: any(v["cpu"] == k["cpu"] for k in known)),
        (
            "the same NUMA affinity on another row",
            lambda v: v["numa"] is not None and any(v["numa"] == k["numa"] for k in known),
        ),
        (
            "the CPU count of another row",
            lambda v: (
                _cpu_count(_str(v["cpu"])) is not None
                and any(_cpu_count(_str(v["cpu"])) == _cpu_count(_str(k["cpu"])) for k in known)
            ),
        ),
    )


def _choose_readings(
    labels: list[str],
    readings: dict[str, list[_Reading]],
    raw_tails: dict[str, str],
    unresolved: dict[str, str],
    fields: list[str],
    warnings: list[str],
) -> dict[str, _Reading]:
    """Pass 2: settle ambiguous rows with evidence from the rows that have one reading; a row
    still ambiguous keeps what its readings agree on (and joins ``unresolved``)."""
    settled = {lb: rs[0] for lb, rs in readings.items() if len(rs) == 1}
    known = [
        _values_key(r.values, fields) for lb, r in settled.items() if r.values is not None and lb not in unresolved
    ]
    evidence = _evidence(known)
    chosen: dict[str, _Reading] = dict(settled)
    for label, r in settled.items():
        if r.split:
            warnings.append(
                f"{label}: glued text {_short(raw_tails[label])} read as {r.describe(fields)} "
                "(the only reading that fits)"
            )
    for i, label in enumerate(labels):
        if label in chosen:
            continue
        pool, reason = _narrow(readings[label], i, labels, settled, evidence, fields)
        if len(pool) == 1:
            chosen[label] = pool[0]
            warnings.append(
                f"{label}: glued text {_short(raw_tails[label])} read as "
                f"{pool[0].describe(fields)} (decided by {reason})"
            )
            continue
        chosen[label] = _agreed_reading(label, pool, labels, raw_tails, unresolved, fields, warnings)
    return chosen


def _narrow(
    rs: list[_Reading],
    i: int,
    labels: list[str],
    settled: dict[str, _Reading],
    evidence: tuple[tuple[str, Callable[[dict[str, object]], bool]], ...],
    fields: list[str],
) -> tuple[list[_Reading], str]:
    """The readings of row ``i`` that the evidence leaves, and the evidence that decided."""

    def mirrors(r: _Reading) -> bool:
        # Evidence 1: the matrix is symmetric; compare with the settled rows' column i.
        return all(
            r.cells[j] == settled[other].cells[i]
            for j, other in enumerate(labels)
            if other in settled and "?" not in (r.cells[j], settled[other].cells[i])
        )

    pool = [r for r in rs if mirrors(r)] or rs
    reason = "the symmetric cell" if len(pool) < len(rs) else "elimination"
    for why, test in evidence:
        if len(pool) == 1:
            break
        hits = [r for r in pool if test(_values_key(r.values, fields))]
        if hits and len(hits) < len(pool):
            pool, reason = hits, why
    return pool, reason


def _agreed_reading(
    label: str,
    pool: list[_Reading],
    labels: list[str],
    raw_tails: dict[str, str],
    unresolved: dict[str, str],
    fields: list[str],
    warnings: list[str],
) -> _Reading:
    """A row still ambiguous: keep what every reading agrees on, leave the rest unknown."""
    n = len(labels)
    agreed = tuple(pool[0].cells[j] if all(r.cells[j] == pool[0].cells[j] for r in pool) else "?" for j in range(n))
    for j in range(n):
        if agreed[j] == "?" and pool[0].cells[j] != "?":
            options = " or ".join(sorted({r.cells[j] for r in pool}))
            warnings.append(f"{label}/{labels[j]}: cell could be {options}; left unknown")
    readings_text = sorted({r.describe(fields) for r in pool})
    if readings_text:
        warnings.append(
            f"{label}: affinity text {_short(raw_tails[label])} could be read as "
            f"{' or as '.join(readings_text)}; left unknown"
        )
        unresolved[label] = raw_tails[label]
    return _Reading(agreed, None, True)


def _devices(
    labels: list[str],
    chosen: dict[str, _Reading],
    legend: dict[str, str],
    fields: list[str],
    unresolved: dict[str, str],
) -> tuple[list[TopoDevice], list[tuple[str, ...]], bool]:
    """The devices and cell rows of the chosen readings, and whether a cell was ``SOC`` (stored
    as ``SYS``)."""
    legacy = False
    devices: list[TopoDevice] = []
    rows: list[tuple[str, ...]] = []
    for label in labels:
        r = chosen[label]
        kind = "gpu" if label.startswith("GPU") else "nic"
        if kind == "nic":
            rdma = legend.get(label) if re.fullmatch(r"NIC[0-9]+", label) else label
        else:
            rdma = None
        v = _values_key(r.values, fields)
        row: list[str] = []
        for c in r.cells:
            if c == "SOC":
                legacy = True
                c = "SYS"
            row.append(c)
        rows.append(tuple(row))
        devices.append(
            TopoDevice(
                label=label,
                kind=kind,
                rdma_name=rdma,
                cpu_affinity=CpuSet.parse(v["cpu"]) if isinstance(v["cpu"], str) else None,
                numa_affinity=v["numa"],  # type: ignore[arg-type]
                gpu_numa_id=v["gpu_numa"],  # type: ignore[arg-type]
                unresolved_affinity=unresolved.get(label),
            )
        )
    return devices, rows, legacy


def _consistency_warnings(labels: list[str], rows: list[tuple[str, ...]]) -> list[str]:
    """Consistency notes: a diagonal cell that is not ``X``, an asymmetric pair of cells."""
    warnings: list[str] = []
    n = len(labels)
    for i in range(n):
        if rows[i][i] not in ("X", "?"):
            warnings.append(f"{labels[i]}/{labels[i]}: diagonal cell is {rows[i][i]}, not X")
        for j in range(i + 1, n):
            a, b = rows[i][j], rows[j][i]
            if a != b and "?" not in (a, b):
                warnings.append(f"{labels[i]}/{labels[j]} is {a} but {labels[j]}/{labels[i]} is {b}")
    return warnings
