"""Find the tool outputs in a pasted text: which lines are which tool's, and which are none.

A bug report, an e-mail or a ``nvidia-bug-report`` excerpt holds several outputs glued
together, wrapped (prompts, fences, ``<details>``, quotes, C comments -- undone first by
:func:`~topoagent.core.parse.paste.unwrap_lines`) and with prose between them.  Each output is
recognised by the lines only its tool prints (its header, its banner, its line format) and
runs as long as its lines do; blank lines may sit inside an output, a prompt or a fence ends
it.  Pure: text in, :class:`Found` out (line numbers are the paste's, 1-based).

The kinds read (:data:`KINDS`): ``nvidia-smi topo -m``, ``nvidia-smi topo -p2p``,
``nvidia-smi -q``, ``nvidia-smi nvlink -s``, ``numactl -H``, ``ibdev2netdev``,
``ibv_devinfo``, ``rocm-smi --showtopo``, ``amd-smi topology``, ``lstopo``, ``dmesg`` (AER),
``lspci -tv`` and ``lspci -vvv``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import msgspec

from topoagent.core.bdf import PRINTED_BDF
from topoagent.core.parse import dmesg_aer, lstopo, nvsmi_nvlink, nvsmi_query, rdma_tools
from topoagent.core.parse.nvsmi_p2p import is_p2p_row
from topoagent.core.parse.paste import Skipped, dropped_why, is_prompt, merge_skipped, unwrap_lines

__all__ = [
    "AMD_SMI",
    "DMESG",
    "Found",
    "IBDEV2NETDEV",
    "IBV_DEVINFO",
    "KINDS",
    "LSPCI_TREE",
    "LSPCI_VERBOSE",
    "LSTOPO",
    "NUMACTL",
    "NVLINK",
    "P2P",
    "QUERY",
    "ROCM_SMI",
    "Segment",
    "TOPO_M",
    "find_outputs",
    "segment_text",
]

TOPO_M = "nvidia-smi topo -m"
P2P = "nvidia-smi topo -p2p"
QUERY = "nvidia-smi -q"
NVLINK = "nvidia-smi nvlink -s"
NUMACTL = "numactl -H"
IBDEV2NETDEV = "ibdev2netdev"
IBV_DEVINFO = "ibv_devinfo"
ROCM_SMI = "rocm-smi --showtopo"
AMD_SMI = "amd-smi topology"
LSTOPO = "lstopo"
DMESG = "dmesg (AER)"
LSPCI_TREE = "lspci -tv"
LSPCI_VERBOSE = "lspci -vvv"
#: Every kind, in the order a report lists them.
KINDS = (
    TOPO_M,
    P2P,
    QUERY,
    NVLINK,
    NUMACTL,
    IBDEV2NETDEV,
    IBV_DEVINFO,
    ROCM_SMI,
    AMD_SMI,
    LSTOPO,
    DMESG,
    LSPCI_TREE,
    LSPCI_VERBOSE,
)


class Segment(msgspec.Struct, frozen=True):
    """Lines ``first``..``last`` of the paste are one output of ``kind``; ``command`` is the
    command line seen just before it (a prompt, a heading), where one was."""

    kind: str
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

    def kinds(self) -> tuple[str, ...]:
        """The kinds found, in :data:`KINDS` order."""
        seen = {s.kind for s in self.segments}
        return tuple(k for k in KINDS if k in seen)

    def of(self, kind: str) -> tuple[Segment, ...]:
        """The segments of one kind."""
        return tuple(s for s in self.segments if s.kind == kind)


# -- what each kind's lines look like ---------------------------------------------------------

_TOPO_TOKEN = re.compile(r"(?<![A-Za-z])(?:NV\d{1,3}|PIX|PXB|PHB|NODE|SYS|SOC)(?![a-z])")
_LABELS = re.compile(r"^[\s|]*(?:GPU\s*[|]\s*)?(?:GPU\d|\|)")
_MATRIX_ROW = re.compile(r"^[\s|#]*(?:GPU\d{1,4}|NIC\d{1,4}|mlx\d+_\w+|mlx\d+)\b")
_LEGEND = re.compile(r"^\s*(?:\*\*)?(?:NIC )?Legend:?(?:\*\*)?\s*$|^\s*[A-Z#]{1,4}\s*=\s+\S|^\s*NIC\d+:\s*\S+\s*$")
_TABLE_RULE = re.compile(r"^\s*\|?[-:| ]+\|?\s*$")
_NVSMI_LOG = re.compile(r"^=+\s*NVSMI LOG\s*=+$")
_QUERY_TOP = re.compile(r"^(?:Timestamp|Driver Version|CUDA Version|Attached GPUs|Attached Units)\s*:")
_NUMACTL = re.compile(r"^\s*(?:available:\s*\d+\s+nodes?|node\s+\d+\s+(?:cpus|size|free):|node distances:)")
_NUMACTL_DIST = re.compile(r"^\s*(?:node(?:\s+\d+)+|\d+:(?:\s+\d+)+)\s*$")
_HCA = re.compile(r"^\s*hca_id:\s*\S+")
# (``Device ports:`` heads the port blocks of older libibverbs, rdma-core's ibv_devinfo.c)
_IBV_ATTR = re.compile(r"^\s+[A-Za-z_][\w]*(?: [a-z]+)?(?:\[\s*\d+\])?:\s*")
_ROCM_BANNER = re.compile(
    r"^=+\s*(?:ROCm System Management Interface|Weight between|Hops between|Link Type between|Numa Nodes?|"
    r"End of ROCm SMI Log)\b.*=+\s*$"
)
_ROCM_ROW = re.compile(r"^\s*(?:GPU\d+\b|GPU\[\d+\]\s*:)")
_AMD_TABLE = re.compile(r"^\s*[A-Z][A-Z -]*TABLE:\s*$")
_BDF_WORD = re.compile("^" + PRINTED_BDF + "$")
_LSTOPO_START = re.compile(r"^\s*(?:Machine\b|Package L#|Package P#|NUMANode [LP]#)")
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
    r"Capabilities|Kernel driver in use|Kernel modules|Subsystem|Control|Status|Physical Slot):|\[[0-9a-f]+\])"
)
_COMMAND = re.compile(
    r"\b(nvidia-smi(?:\s+-\S+)*(?:\s+(?:topo|nvlink|-q)\b[^\n]*)?|numactl\s+-H|numactl\s+--hardware|ibdev2netdev[^\n]*|"
    r"ibv_devinfo[^\n]*|rocm-smi[^\n]*|amd-smi[^\n]*|lstopo[^\n]*|dmesg[^\n]*|lspci[^\n]*)"
)


def _is_topo_header(line: str, nxt: list[str]) -> str | None:
    """TOPO_M or P2P where ``line`` is a matrix header (GPU0 … labels) and the rows after it say
    which; None otherwise."""
    if not _LABELS.match(line) or "GPU0" not in line:
        return None
    if re.search(r"CPU\s*Affinity|NUMA\s*Affinity", line):
        return TOPO_M
    for row in nxt[:3]:
        plain = row.replace("|", " ")
        if is_p2p_row(plain):
            return P2P
        if _MATRIX_ROW.match(row) and _TOPO_TOKEN.search(plain):
            return TOPO_M
    return None


def _start(lines: list[str], i: int) -> str | None:
    """The kind whose output starts at ``lines[i]``, or None."""
    line = lines[i]
    nxt = [t for t in lines[i + 1 : i + 6] if t.strip()]
    if kind := _is_topo_header(line, nxt):
        return kind
    stripped = line.strip()
    checks: tuple[tuple[str, Callable[[], bool]], ...] = (
        (
            QUERY,
            lambda: bool(
                _NVSMI_LOG.match(stripped) or nvsmi_query._GPU_HEADER.match(line) or _QUERY_TOP.match(stripped)
            ),
        ),
        (NVLINK, lambda: bool(nvsmi_nvlink.GPU_LINE.match(line) and nxt and nvsmi_nvlink.LINK_LINE.match(nxt[0]))),
        (NUMACTL, lambda: bool(_NUMACTL.match(line))),
        (IBDEV2NETDEV, lambda: bool(rdma_tools.IBDEV2NETDEV.match(line))),
        (IBV_DEVINFO, lambda: bool(_HCA.match(line))),
        (ROCM_SMI, lambda: bool(_ROCM_BANNER.match(stripped) or re.match(r"^GPU\[\d+\]\s*:\s*\(Topology\)", stripped))),
        (AMD_SMI, lambda: bool(_AMD_TABLE.match(line))),
        (LSTOPO, lambda: bool(_LSTOPO_START.match(line))),
        (DMESG, lambda: bool(_KERNEL_LINE.match(line) and dmesg_aer.AER_LINE.search(line))),
        (LSPCI_TREE, lambda: bool(_TREE_START.match(line) or (_TREE_LINE.match(line) and "-" in line))),
        (LSPCI_VERBOSE, lambda: bool(_DEVICE_LINE.match(line) or _LSPCI_FIELD.match(line) and ":" in line)),
    )
    return next((kind for kind, test in checks if test()), None)


def _continues(kind: str, line: str) -> bool:
    """Whether ``line`` can be part of an output of ``kind`` that started above it."""
    s = line.strip()
    tests: dict[str, Callable[[], bool]] = {
        TOPO_M: lambda: bool(
            _MATRIX_ROW.match(line) or _LEGEND.match(line) or _TABLE_RULE.match(line) or _LABELS.match(line)
        ),
        P2P: lambda: bool(_MATRIX_ROW.match(line) or _LEGEND.match(line)),
        QUERY: lambda: bool(
            line[:1].isspace() or _QUERY_TOP.match(s) or nvsmi_query._GPU_HEADER.match(line) or _NVSMI_LOG.match(s)
        ),
        NVLINK: lambda: bool(nvsmi_nvlink.GPU_LINE.match(line) or nvsmi_nvlink.LINK_LINE.match(line)),
        NUMACTL: lambda: bool(_NUMACTL.match(line) or _NUMACTL_DIST.match(line)),
        IBDEV2NETDEV: lambda: bool(rdma_tools.IBDEV2NETDEV.match(line)),
        IBV_DEVINFO: lambda: bool(_HCA.match(line) or _IBV_ATTR.match(line)),
        ROCM_SMI: lambda: bool(_ROCM_BANNER.match(s) or _ROCM_ROW.match(line) or re.match(r"^\s+GPU\d", line)),
        AMD_SMI: lambda: bool(
            _AMD_TABLE.match(line)
            or (s.split() and all(_BDF_WORD.match(w) for w in s.split()[:1]))
            or s.startswith(("Legend:", "SELF", "ENABLED", "N/A", "T/F", "C/NC", "64,32", "<BW"))
        ),
        LSTOPO: lambda: bool(lstopo.OBJECT.match(s)),
        DMESG: lambda: bool(_KERNEL_LINE.match(line)),
        LSPCI_TREE: lambda: bool(_TREE_LINE.match(line) or _TREE_START.match(line)),
        LSPCI_VERBOSE: lambda: bool(_DEVICE_LINE.match(line) or line[:1].isspace()),
    }
    return tests[kind]()


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
        if is_prompt(line) or _fence_or_summary(line):
            command = _command(line) or command
            i += 1
            continue
        if not line.strip() or dropped_why(line):
            i += 1
            continue
        kind = _start(lines, i)
        if kind is None:
            unrecognised.append(Skipped(number, number, "not recognised as any tool's output"))
            command = _command(line) or command  # "`nvidia-smi topo -p2p r` says:" in prose
            i += 1
            continue
        last = _extend(kind, numbered, i)
        segments.append(Segment(kind, number, numbered[last][0], command))
        command = None
        i = last + 1
    return Found(tuple(segments), tuple(merge_skipped(unrecognised)), dict(numbered))


def _fence_or_summary(line: str) -> bool:
    return bool(re.match(r"^\s*(?:```|~~~|</?(?:details|summary|pre|code)\b)", line, re.I))


def _extend(kind: str, numbered: list[tuple[int, str]], i: int) -> int:
    """The index of the last line of the output of ``kind`` that starts at ``i``: it runs over
    lines of its kind and blank lines between them; a prompt, a fence or another line ends it."""
    last = i
    for j in range(i + 1, len(numbered)):
        line = numbered[j][1]
        if is_prompt(line) or _fence_or_summary(line):
            break
        if not line.strip() or dropped_why(line):
            continue
        if kind != LSPCI_VERBOSE and kind != TOPO_M and _start_other(kind, numbered, j):
            break
        if not _continues(kind, line):
            break
        last = j
    return last


def _start_other(kind: str, numbered: list[tuple[int, str]], j: int) -> bool:
    other = _start([t for _, t in numbered], j)
    return other is not None and other != kind and other not in (LSPCI_VERBOSE, LSPCI_TREE)


def segment_text(found: Found, kind: str) -> str:
    """The text of every output of ``kind``, each line at its number in the paste and every
    other line blank, so a parser's line numbers are the paste's."""
    keep = {n for s in found.of(kind) for n in range(s.first, s.last + 1)}
    if not keep:
        return ""
    top = max(keep)
    return "\n".join(found.lines.get(n, "") if n in keep else "" for n in range(1, top + 1))
