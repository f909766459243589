"""The paste kinds, one record each (:data:`KINDS`), and where each one's output is in a text.

:func:`find_outputs` finds the outputs in a bug report, an e-mail or a ``nvidia-bug-report``
excerpt: glued together, wrapped (prompts, fences, ``<details>``, quotes, C comments -- undone
first by :func:`~topoagent.core.parse.paste.unwrap_lines`) and with prose between them.  Each
output starts at a line only its tool prints and runs as long as its lines do; blank lines may
sit inside it, a prompt or a fence ends it.  Each line is looked at once or twice: the work is
linear in the paste.  Pure: text in, :class:`Found` out (line numbers are the paste's, 1-based).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

import msgspec

from topoagent.core.bdf import PRINTED_BDF
from topoagent.core.parse import dmesg_aer, lstopo, nccl_xml, numactl, nvsmi_nvlink, nvsmi_query, rdma_tools
from topoagent.core.parse.amd_topo import read_amd_topology
from topoagent.core.parse.lspci_tree import read_lspci_tree
from topoagent.core.parse.lspci_verbose import read_lspci_verbose
from topoagent.core.parse.nvsmi_p2p import is_p2p_row, read_p2p_matrix
from topoagent.core.parse.nvsmi_topo import read_topo_matrix
from topoagent.core.parse.paste import Skipped, dropped_why, is_prompt, merge_skipped, unwrap_lines

__all__ = [
    "AMD_SMI",
    "DMESG",
    "IBDEV2NETDEV",
    "IBV_DEVINFO",
    "KINDS",
    "LSPCI_TREE",
    "LSPCI_VERBOSE",
    "LSTOPO",
    "NCCL_XML",
    "NUMACTL",
    "NVLINK",
    "P2P",
    "QUERY",
    "ROCM_SMI",
    "TOPO_M",
    "Found",
    "PasteKind",
    "Segment",
    "find_outputs",
    "segment_text",
]


class PasteKind(msgspec.Struct, frozen=True, eq=False):
    """One kind of pasted tool output, the one place it is known (compared by identity).

    ``evidence``: what every evidence line citing it starts with (the findings catalogue reads
    such a line as pasted proof, at most ``bound``).  ``starts(line, after)``: whether its
    output starts at ``line`` (``after``: the next non-blank lines); ``goes_on(line)``: whether
    ``line`` is part of its output.  ``read(text, command)``: its lenient parser, given the
    command line seen before it.  ``typed``: its command as people type it, a pattern (default:
    its tool's name and the rest of the line).  ``ended_by_others``: another kind's start ends
    its output; ``ends_others``: its start ends another kind's.  ``one_per_host``: a second one
    is set aside (False: outputs of it add up); ``lists_nics``: it lists every NIC;
    ``own_report``: the snapshot made of it reports its skipped lines itself; ``restarts``:
    each of its starts begins another output (a matrix's header line), so two in one text are
    two outputs.  ``census(value)``: what the parsed output states that a host has one of --
    ``(fact, value)`` pairs such as ``("GPU count", "8")``, ``("PCI ids of 0000:18:00.0",
    "10de:2330")``: two outputs stating one fact differently are two hosts' (the reader refuses
    them, :mod:`topoagent.core.paste.whole`).
    """

    name: str
    evidence: str
    starts: Callable[[str, Sequence[str]], bool]
    goes_on: Callable[[str], bool]
    read: Callable[[str, str | None], Any]
    typed: str = ""
    bound: Literal["critical", "warning", "info"] = "critical"
    ended_by_others: bool = True
    ends_others: bool = True
    one_per_host: bool = True
    lists_nics: bool = False
    own_report: bool = False
    restarts: bool = False
    census: Callable[[Any], Iterable[tuple[str, str]]] = lambda _: ()


def _any(*patterns: re.Pattern[str]) -> Callable[..., bool]:
    """Whether a line matches one of ``patterns`` (as ``starts`` or ``goes_on``)."""
    return lambda line, *_: any(p.match(line) for p in patterns)


def _text(parser: Callable[[str], Any]) -> Callable[[str, str | None], Any]:
    """A parser of the text alone, as ``read``."""
    return lambda text, _: parser(text)


def _ids(items: Iterable[Any]) -> list[tuple[str, str]]:
    """``("PCI ids of BDF", "vvvv:dddd")`` of each item (a parsed function, port or event) that
    states its bus id and both ids: one function has one pair of ids."""
    return [
        (f"PCI ids of {x.bdf}", f"{x.vendor_id:04x}:{x.device_id:04x}")
        for x in items
        if x.bdf and x.vendor_id is not None and x.device_id is not None
    ]


def _query_census(r: nvsmi_query.QueryReport) -> list[tuple[str, str]]:
    """A ``-q``'s GPU count (each header's ``Attached GPUs``; more bus ids than that is a
    second host's), driver versions and each GPU's ids."""
    out = [("driver version", d) for d in r.drivers] + [("GPU count", str(n)) for n in r.attached]
    buses = {q.bdf for q in r.gpus if q.bdf}
    if r.attached and len(buses) > max(r.attached):
        out.append(("GPU count", f"{len(buses)} (bus ids)"))
    return out + _ids(r.gpus)


# -- nvidia-smi: topo -m, topo -p2p, -q, nvlink -s / -R ---------------------------------------------

_NVIDIA_SMI = r"nvidia-smi(?:\s+-\S+)*(?:\s+(?:topo|nvlink|-q)\b[^\n]*)?"
_TOPO_TOKEN = re.compile(r"(?<![A-Za-z])(?:NV\d{1,3}|PIX|PXB|PHB|NODE|SYS|SOC)(?![a-z])")
_LABELS = re.compile(r"^[\s|]*(?:GPU\s*[|]\s*)?(?:GPU\d|\|)")
_MATRIX_ROW = re.compile(r"^[\s|#]*(?:GPU\d{1,4}|NIC\d{1,4}|mlx\d+_\w+|mlx\d+)\b")
_LEGEND = re.compile(r"^\s*(?:\*\*)?(?:NIC )?Legend:?(?:\*\*)?\s*$|^\s*[A-Z#]{1,4}\s*=\s+\S|^\s*NIC\d+:\s*\S+\s*$")
_TABLE_RULE = re.compile(r"^\s*\|?[-:| ]+\|?\s*$")
_QUERY_TOP = re.compile(
    r"^\s*(?:=+\s*NVSMI LOG\s*=+\s*$|(?:Timestamp|Driver Version|CUDA Version|Attached GPUs|Attached Units)\s*:)"
)


def _matrix_header(line: str, after: Sequence[str]) -> str | None:
    """``topo`` or ``p2p`` where ``line`` is a matrix header (GPU0 … labels) and the rows after
    it say which; None otherwise."""
    if not _LABELS.match(line) or "GPU0" not in line:
        return None
    if re.search(r"CPU\s*Affinity|NUMA\s*Affinity", line):
        return "topo"
    for row in after[:3]:
        plain = row.replace("|", " ")
        if is_p2p_row(plain):
            return "p2p"
        if _MATRIX_ROW.match(row) and _TOPO_TOKEN.search(plain):
            return "topo"
    return None


TOPO_M = PasteKind(
    "nvidia-smi topo -m",
    "nvidia-smi topo -m",
    lambda line, after: _matrix_header(line, after) == "topo",
    _any(_MATRIX_ROW, _LEGEND, _TABLE_RULE, _LABELS),
    _text(read_topo_matrix),
    ended_by_others=False,
    lists_nics=True,
    own_report=True,
    typed=_NVIDIA_SMI,
    restarts=True,
    census=lambda m: () if m.elided else [("GPU count", str(sum(d.kind == "gpu" for d in m.devices)))],
)
P2P = PasteKind(
    "nvidia-smi topo -p2p",
    "nvidia-smi topo -p2p",
    lambda line, after: _matrix_header(line, after) == "p2p",
    _any(_MATRIX_ROW, _LEGEND),
    read_p2p_matrix,
    typed=_NVIDIA_SMI,
    census=lambda m: [("GPU count", str(len(m.labels)))],
)
QUERY = PasteKind(
    "nvidia-smi -q",
    "nvidia-smi -q",
    lambda line, after: (
        bool(_QUERY_TOP.match(line) or nvsmi_query.GPU_HEADER.match(line)) or nvsmi_query.fragment_starts(line, after)
    ),
    _any(re.compile(r"\s"), _QUERY_TOP, nvsmi_query.GPU_HEADER, nvsmi_query.FRAGMENT),
    _text(nvsmi_query.read_nvsmi_query),
    typed=_NVIDIA_SMI,
    census=_query_census,
)
NVLINK = PasteKind(
    "nvidia-smi nvlink",
    "nvidia-smi nvlink",
    lambda line, after: bool(nvsmi_nvlink.GPU_LINE.match(line) and after and nvsmi_nvlink.LINK_LINE.match(after[0])),
    _any(nvsmi_nvlink.GPU_LINE, nvsmi_nvlink.LINK_LINE),
    _text(nvsmi_nvlink.read_nvlink_status),
    typed=_NVIDIA_SMI,
    one_per_host=False,
)

# -- numactl, the RDMA tools ------------------------------------------------------------------

_NUMACTL = re.compile(r"^\s*(?:available:\s*\d+\s+nodes?|node\s+\d+\s+(?:cpus|size|free):|node distances:)")
_NUMACTL_DIST = re.compile(r"^\s*(?:node(?:\s+\d+)+|\d+:(?:\s+\d+)+)\s*$")
_HCA = re.compile(r"^\s*hca_id:\s*\S+")

NUMACTL = PasteKind(
    "numactl -H",
    "numactl -H",
    _any(_NUMACTL),
    _any(_NUMACTL, _NUMACTL_DIST, numactl.CPU_WRAP),
    _text(numactl.read_numactl),
    typed=r"numactl\s+-H|numactl\s+--hardware",
)
IBDEV2NETDEV = PasteKind(
    "ibdev2netdev",
    "ibdev2netdev",
    _any(rdma_tools.IBDEV2NETDEV),
    _any(rdma_tools.IBDEV2NETDEV),
    _text(rdma_tools.read_ibdev2netdev),
    lists_nics=True,
    one_per_host=False,
    census=lambda v: _ids(v[0]) + [(f"PCI address of {p.device}", p.bdf) for p in v[0] if p.bdf],
)
IBV_DEVINFO = PasteKind(
    "ibv_devinfo",
    "ibv_devinfo",
    _any(_HCA),
    _any(_HCA, re.compile(r"\s")),  # every line of a block is indented (-v's flag lists too)
    _text(rdma_tools.read_ibv_devinfo),
    lists_nics=True,
    one_per_host=False,
)

# -- the AMD tools ------------------------------------------------------------------------------

_ROCM_BANNER = re.compile(
    r"^\s*=+\s*(?:ROCm System Management Interface|Weight between|Hops between|Link Type between|Numa Nodes?|"
    r"End of ROCm SMI Log)\b.*=+\s*$"
)
_AMD_TABLE = re.compile(r"^\s*[A-Z][A-Z -]*TABLE:\s*$")

ROCM_SMI = PasteKind(
    "rocm-smi --showtopo",
    "rocm-smi",
    _any(_ROCM_BANNER, re.compile(r"^\s*GPU\[\d+\]\s*:\s*\(Topology\)")),
    _any(_ROCM_BANNER, re.compile(r"^\s*(?:GPU\d+\b|GPU\[\d+\]\s*:)|^\s+GPU\d")),
    _text(read_amd_topology),
    own_report=True,
)
AMD_SMI = PasteKind(
    "amd-smi topology",
    "amd-smi",
    _any(_AMD_TABLE),
    _any(_AMD_TABLE, re.compile(r"^\s*(?:" + PRINTED_BDF + r"(?:\s|$)|Legend:|SELF|ENABLED|N/A|T/F|C/NC|64,32|<BW)")),
    _text(read_amd_topology),
    own_report=True,
)

# -- NCCL's topology file -----------------------------------------------------------------------

_XML_COMMENT = re.compile(r"^\s*<!--")

NCCL_XML = PasteKind(
    "NCCL topology XML",
    "NCCL topology",
    # <system>, or a comment right before it (RCCL's models open with their licence)
    lambda line, after: bool(
        nccl_xml.START.match(line) or (_XML_COMMENT.match(line) and any(map(nccl_xml.START.match, after)))
    ),
    # (" - " lines: such a comment's own)
    _any(re.compile(r"^\s*(?:<[/!?A-Za-z]|-->|-\s)")),
    _text(nccl_xml.read_nccl_xml),
    # what people show it with: the file, or the variables that name it
    typed=r"(?:cat|less|more|head)\s+\S*\.xml\b[^\n]*|NCCL_TOPO_(?:DUMP_)?FILE\S*",
    lists_nics=True,
    own_report=True,
)

# -- lstopo, dmesg, lspci -------------------------------------------------------------------------

_KERNEL_LINE = re.compile(
    r"^\s*(?:\[[^\]]{1,40}\]\s*)?(?:[A-Z][a-z]{2} [ \d]\d [\d:]{8} \S+ kernel:\s*)?(?:\[[^\]]{1,20}\]\s*)?"
    r"\S+\s+(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]:"
)
_TREE_START = re.compile(r"^[ |]*-(?:[+\\]-)?\[(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}\]-")
_TREE_LINE = re.compile(r"^[ |]*(?:[+\\]-(?:[0-9a-fA-F]{2}\.[0-7]|\[)|\|\s*$)")
_DEVICE_LINE = re.compile(
    r"^[ \t]*(?:[-*+][ \t]+)?(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]\s+"
    r"\S[^:]*(?:\[[0-9a-fA-F]{4}\])?:\s"
)
_LSPCI_FIELD = re.compile(
    r"^\s+(?:(?:LnkCap|LnkSta|LnkCtl|LnkCap2|LnkSta2|LnkCtl2|ACSCap|ACSCtl|DevCap|DevSta|DevCtl|Bus|NUMA node|"
    r"Capabilities|Kernel driver in use|Kernel modules|Subsystem|Control|Status|Physical Slot):|\[[0-9a-f]+\].*:)"
)

LSTOPO = PasteKind(
    "lstopo",
    "lstopo",
    _any(re.compile(r"^\s*(?:Machine\b|Package L#|Package P#|NUMANode [LP]#)")),
    lambda line: bool(lstopo.OBJECT.match(line.strip())),
    _text(lstopo.read_lstopo),
    lists_nics=True,
    own_report=True,
)
DMESG = PasteKind(
    "dmesg (AER)",
    "dmesg",
    lambda line, _: bool(_KERNEL_LINE.match(line) and dmesg_aer.AER_LINE.search(line)),
    _any(_KERNEL_LINE, dmesg_aer.WRAPPED),
    _text(dmesg_aer.read_dmesg_aer),
    one_per_host=False,
    census=lambda v: _ids(v[0]),
)
LSPCI_TREE = PasteKind(
    "lspci -tv",
    "lspci",
    lambda line, _: bool(_TREE_START.match(line) or (_TREE_LINE.match(line) and "-" in line)),
    _any(_TREE_LINE, _TREE_START),
    _text(read_lspci_tree),
    ends_others=False,
    lists_nics=True,
    own_report=True,
    census=lambda t: _ids(t.walk()),
)
LSPCI_VERBOSE = PasteKind(
    "lspci -vvv",
    "lspci",
    _any(_DEVICE_LINE, _LSPCI_FIELD),
    _any(_DEVICE_LINE, re.compile(r"\s")),
    _text(read_lspci_verbose),
    ended_by_others=False,
    ends_others=False,
    lists_nics=True,
    own_report=True,
    one_per_host=False,
    census=lambda v: _ids(v.functions),
)

#: Every kind, in the order of the records above: the order a report lists them and
#: :func:`find_outputs` tries them (the first whose ``starts`` holds names a line).
KINDS = tuple(v for v in list(globals().values()) if isinstance(v, PasteKind))
_COMMAND = re.compile(
    r"\b(" + "|".join(dict.fromkeys(k.typed or re.escape(k.evidence.split()[0]) + r"[^\n]*" for k in KINDS)) + ")"
)


class Segment(msgspec.Struct, frozen=True):
    """Lines ``first``..``last`` of the paste are one output of ``kind``; ``command`` is the
    command line seen just before it (a prompt, a heading), where one was."""

    kind: PasteKind
    first: int
    last: int
    command: str | None = None

    @property
    def where(self) -> str:
        """``line 12`` or ``lines 12-40``."""
        return f"line {self.first}" if self.first == self.last else f"lines {self.first}-{self.last}"


class Found(msgspec.Struct, frozen=True):
    """The outputs found (in paste order), the lines that are none (prose, other commands'
    output), and the paste's lines (number -> text, unwrapped) to cut each kind's text from."""

    segments: tuple[Segment, ...]
    unrecognised: tuple[Skipped, ...]
    lines: dict[int, str]

    def kinds(self) -> tuple[PasteKind, ...]:
        """The kinds found, in :data:`KINDS` order."""
        return tuple(k for k in KINDS if any(s.kind is k for s in self.segments))

    def of(self, kind: PasteKind) -> tuple[Segment, ...]:
        """The segments of one kind."""
        return tuple(s for s in self.segments if s.kind is kind)


def _start(lines: list[str], i: int) -> PasteKind | None:
    """The first kind whose output starts at ``lines[i]``, or None."""
    after = [t for t in lines[i + 1 : i + 6] if t.strip()]
    return next((k for k in KINDS if k.starts(lines[i], after)), None)


def _ends(line: str) -> bool:
    """A prompt, a fence or a ``<details>`` tag: what ends any output."""
    return is_prompt(line) or bool(re.match(r"^\s*(?:```|~~~|</?(?:details|summary|pre|code)\b)", line, re.I))


def _command(line: str) -> str | None:
    m = _COMMAND.search(line)
    return m.group(1).strip() if m else None


def find_outputs(text: str) -> Found:
    """The tool outputs in ``text`` and the lines that are none (see the module's docstring)."""
    numbered = unwrap_lines(text)
    lines = [t for _, t in numbered]
    segments: list[Segment] = []
    unrecognised: list[Skipped] = []
    command: str | None = None
    i = 0
    while i < len(numbered):
        number, line = numbered[i]
        if _ends(line):
            command = _command(line) or command
        elif not line.strip() or dropped_why(line):
            pass
        elif (kind := _start(lines, i)) is None:
            unrecognised.append(Skipped(number, number, "not recognised as any tool's output"))
            command = _command(line) or command  # "`nvidia-smi topo -p2p r` says:" in prose
        else:
            i = _extend(kind, lines, i)
            segments.append(Segment(kind, number, numbered[i][0], command))
            command = None
        i += 1
    return Found(tuple(segments), tuple(merge_skipped(unrecognised)), dict(numbered))


def _extend(kind: PasteKind, lines: list[str], i: int) -> int:
    """The index of the last line of the output of ``kind`` that starts at ``i``: it runs over
    lines of its kind and blank lines between them; a prompt, a fence, another kind's start
    (where it ends ``kind``) or another line ends it."""
    last = i
    for j in range(i + 1, len(lines)):
        line = lines[j]
        if _ends(line):
            break
        if not line.strip() or dropped_why(line):
            continue
        if kind.ended_by_others and (other := _start(lines, j)) is not None and other is not kind and other.ends_others:
            break
        if not kind.goes_on(line):
            break
        last = j
    return last


def segment_text(found: Found, kind: PasteKind, segments: Sequence[Segment] | None = None) -> str:
    """The text of every output of ``kind`` (or of ``segments``), each line at its number in
    the paste and every other line blank, so a parser's line numbers are the paste's."""
    spans = [(s.first, s.last) for s in (found.of(kind) if segments is None else segments)]
    if not spans:
        return ""
    start = spans[0][0]  # the lines before the first are blank: one string, not a line each
    keep = {n for first, last in spans for n in range(first, last + 1)}
    body = "\n".join(found.lines.get(n, "") if n in keep else "" for n in range(start, spans[-1][1] + 1))
    return "\n" * (start - 1) + body
