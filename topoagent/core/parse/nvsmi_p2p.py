"""Parse the text of ``nvidia-smi topo -p2p r|w|n|a|p``: the P2P status of every GPU pair.

The matrix looks like ``topo -m``'s, GPUs only, and its cells are NVML's P2P status
(``nvmlDeviceGetP2PStatus``) for one capability -- read, write, NVLink, atomics or prop --
worded as its legend says::

     X    = Self
     OK   = Status Ok
     CNS  = Chipset not supported
     GNS  = GPU not supported
     TNS  = Topology not supported
     NS   = Not supported
     DR   = Disabled by regkey   (newer drivers)
     U    = Unknown

The capability asked for is printed nowhere in the output: only the command line says it
(``-p2p r``), so it is read from a prompt or a mention before the matrix where the segmenter
found one (:mod:`topoagent.core.parse.segment`), else it is unknown.  A cell is a status, never
a path: nothing here says how two GPUs are connected.
"""

from __future__ import annotations

import re

import msgspec

from topoagent.core.errors import InputError
from topoagent.core.parse.paste import Skipped, clean_paste, merge_skipped

__all__ = ["CAPABILITIES", "P2PMatrix", "P2PParseError", "STATUS", "is_p2p_row", "read_p2p_matrix"]

#: Each status word, as the legend words it.
STATUS = {
    "OK": "Status Ok",
    "CNS": "Chipset not supported",
    "GNS": "GPU not supported",
    "TNS": "Topology not supported",
    "NS": "Not supported",
    "DR": "Disabled by regkey",
    "U": "Unknown",
}
#: ``-p2p`` option letters -> the capability they ask about.
CAPABILITIES = {"r": "read", "w": "write", "n": "nvlink", "a": "atomics", "p": "prop"}

_LABEL = re.compile(r"GPU[0-9]{1,4}")
_CELL = re.compile(r"X|OK|CNS|GNS|TNS|NS|DR|U")
_LEGEND = re.compile(r"^\s*(?:Legend:|X\s*=\s*Self|(?:OK|CNS|GNS|TNS|NS|DR|U)\s*=\s*\S)")


class P2PParseError(InputError):
    """Text that holds no ``nvidia-smi topo -p2p`` matrix."""


class P2PMatrix(msgspec.Struct, frozen=True):
    """The parsed matrix: ``cells[i][j]`` is the status from ``labels[i]`` to ``labels[j]``
    (``X`` on the diagonal, ``?`` where unreadable); ``capability`` is ``read``, ``write``,
    ``nvlink``, ``atomics`` or ``prop`` where the command line was seen, else None."""

    labels: tuple[str, ...]
    cells: tuple[tuple[str, ...], ...]
    capability: str | None = None
    skipped: tuple[Skipped, ...] = ()
    #: The line of each row (label -> line number in the text read): evidence names it.
    row_lines: dict[str, int] = msgspec.field(default_factory=dict)

    def status(self, a: str, b: str) -> str | None:
        """The status from GPU ``a`` to ``b`` (labels), or None where unknown."""
        if a not in self.labels or b not in self.labels:
            return None
        cell = self.cells[self.labels.index(a)][self.labels.index(b)]
        return None if cell == "?" else cell


def _labels(line: str) -> list[str] | None:
    words = re.findall(r"GPU[0-9]{1,4}|\S+", line)
    return words if words and all(_LABEL.fullmatch(w) for w in words) else None


def is_p2p_row(line: str) -> bool:
    """Whether a line is a row of a P2P matrix: a GPU label, then only status words (one ``X``)."""
    words = line.split()
    if len(words) < 2 or not _LABEL.fullmatch(words[0]):
        return False
    cells = words[1:]
    return all(_CELL.fullmatch(c) for c in cells) and cells.count("X") == 1 and any(c != "X" for c in cells)


def read_p2p_matrix(text: str, command: str | None = None) -> P2PMatrix:
    """Read a pasted ``nvidia-smi topo -p2p`` matrix leniently (``command``: the command line
    seen before it, whose option letter names the capability).  Raises :class:`P2PParseError`
    when there is no header of GPU labels followed by a status row."""
    cleaned = clean_paste(text)
    labels: list[str] | None = None
    rows: dict[str, tuple[str, ...]] = {}
    n = 0
    row_lines: dict[str, int] = {}
    skipped: list[Skipped] = list(cleaned.skipped)
    for ln in cleaned.lines:
        line = ln.text.strip()
        if labels is None:
            labels = _labels(line)
            continue
        if _LEGEND.match(line):
            continue
        words = line.split()
        if words and words[0] in labels and words[0] not in rows:
            row = tuple(c if _CELL.fullmatch(c) else "?" for c in words[1:])
            rows[words[0]] = (row + ("?",) * len(labels))[: len(labels)]
            n = len(labels)
            row_lines[words[0]] = ln.number
        else:
            skipped.append(Skipped(ln.number, ln.number, f"not a -p2p matrix row: {line[:60]!r}"))
    if not labels or not rows:
        raise P2PParseError("no nvidia-smi topo -p2p matrix (a header of GPU labels and a row of OK/NS/... cells)")
    cells: tuple[tuple[str, ...], ...] = tuple(rows.get(lb, ("?",) * n) for lb in labels)
    words = (command or "").split()
    cap = CAPABILITIES.get(words[words.index("-p2p") + 1]) if "-p2p" in words[:-1] else None
    return P2PMatrix(tuple(labels), cells, cap, tuple(merge_skipped(skipped)), row_lines)
