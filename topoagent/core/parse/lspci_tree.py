"""Parse ``lspci -t`` / ``-tv`` / ``-tvv`` / ``-tvnn``: the PCI bus tree as lspci draws it.

Two entry points: :func:`parse_lspci_tree` (strict: any line it cannot read raises) and
:func:`read_lspci_tree` (a paste is evidence: it reads what it can, skips what it cannot and
says so by line number, and raises only when nothing in the text is a tree).  Both first drop
what a paste adds (:mod:`topoagent.core.parse.paste`).

Pastes seen in public reports that the lenient reader takes (samples in
``tests/core/parse/samples/lspci/``): a prompt, heading or second command before, between or
after trees; a branch hand-edited one column off; an excerpt that starts below the root-bus
line (its top functions' bus is unknown: those lines are skipped, the subtrees under their
bridges kept, placed under an unknown parent); several trees concatenated.

Everything is iterative: a chain of bridges as deep as the text allows is read, frozen and
walked without recursion.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import msgspec

from topoagent.core.parse.lspci_common import LineError, LspciParseError, split_ids
from topoagent.core.parse.paste import Skipped, clean_paste, merge_skipped

__all__ = ["LspciTree", "LspciTreeNode", "parse_lspci_tree", "read_lspci_tree"]


class LspciTreeNode(msgspec.Struct, frozen=True):
    """One PCI function in ``lspci -t`` output.

    ``bdf`` is the full ``dddd:bb:dd.f`` (lower case): the domain comes from the root bus
    (``[0000:00]``) and the bus is the secondary bus of the parent bridge, read from its
    ``[bb]`` / ``[bb-ss]`` range.  ``description`` is the device name printed by ``-tv``
    (``None`` with plain ``-t``, and for bridges, which lspci prints without a name);
    ``vendor_id``/``device_id`` come from the ``[vvvv:dddd]`` that ``-nn`` appends.  A bridge
    has ``secondary_bus``/``subordinate_bus`` and its children; an empty bridge has no
    children.
    """

    bdf: str
    description: str | None = None
    children: tuple[LspciTreeNode, ...] = ()
    secondary_bus: int | None = None
    subordinate_bus: int | None = None
    vendor_id: int | None = None
    device_id: int | None = None

    @property
    def is_bridge(self) -> bool:
        """Whether the node has a secondary bus (is a bridge)."""
        return self.secondary_bus is not None

    def walk(self) -> Iterator[LspciTreeNode]:
        """This node and every node below it, depth first (iterative: any depth)."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))


class LspciTree(msgspec.Struct, frozen=True):
    """What :func:`read_lspci_tree` read.

    ``roots``: the functions on the root buses, with their subtrees.  ``orphans``: subtrees
    whose parent is a function the paste shows on a bus it does not name (an excerpt that
    starts below the root-bus line): their own BDFs are known (domain ``0000`` assumed), their
    place above that bridge is not.  ``skipped``: the line ranges not read, with why;
    ``notes``: repairs made (a branch one column off), one sentence each.
    """

    roots: tuple[LspciTreeNode, ...]
    orphans: tuple[LspciTreeNode, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    notes: tuple[str, ...] = ()
    #: The drawing is a filtered tree (``lspci -t -d``: root buses drawn as branches of
    #: another): it shows only the functions the filter kept.
    filtered: bool = False

    def walk(self) -> Iterator[LspciTreeNode]:
        """Every node of the roots and orphans, depth first."""
        for top in (*self.roots, *self.orphans):
            yield from top.walk()


class _Node(msgspec.Struct):
    bdf: str | None  # None: on a bus the paste does not name
    description: str | None = None
    secondary: int | None = None
    subordinate: int | None = None
    children: list[_Node] = msgspec.field(default_factory=list)


def _freeze(top: _Node) -> LspciTreeNode:
    """The frozen tree of ``top`` (post-order with an explicit stack: no recursion)."""
    done: dict[int, LspciTreeNode] = {}
    stack: list[tuple[_Node, bool]] = [(top, False)]
    while stack:
        node, expanded = stack.pop()
        if not expanded:
            stack.append((node, True))
            stack.extend((c, False) for c in reversed(node.children))
            continue
        vendor = device = None
        desc = node.description
        if desc is not None:
            vendor, device, desc = split_ids(desc)
        done[id(node)] = LspciTreeNode(
            bdf=node.bdf or "",
            description=desc,
            children=tuple(done.pop(id(c)) for c in node.children if c.bdf is not None),
            secondary_bus=node.secondary,
            subordinate_bus=node.subordinate,
            vendor_id=vendor,
            device_id=device,
        )
    return done[id(top)]


# A root bus: "[0000:00]" (or "[00]" from lspci without domain support; VMD domains have five
# hex digits, "[10000:e0]").
_ROOT = re.compile(r"\[(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2})\]-")
_TREE_START = re.compile(r"-(?:[+\\]-)?\[(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}\]-")
_DEV = re.compile(r"([0-9a-fA-F]{2})\.([0-7])")
_BRIDGE = re.compile(r"-\[([0-9a-fA-F]{2})(?:-([0-9a-fA-F]{2}))?\]-")
# A line that can only be a tree line: branch or continuation marks, then a device.
_BRANCH_LINE = re.compile(r"^[ |]*[+\\]-(?:[0-9a-fA-F]{2}\.[0-7]|\[)")
_DASHES = re.compile(r"-*")


def _after_dashes(line: str, pos: int) -> int:
    """The position after the run of ``-`` that starts at ``pos``."""
    m = _DASHES.match(line, pos)
    return m.end() if m else pos


class _Bus(msgspec.Struct):
    domain: int | None  # None: not named by the paste (an excerpt below the root-bus line)
    number: int | None
    children: list[_Node]


class _Reader:
    """State of one read: the trees so far and the open branch columns."""

    def __init__(self) -> None:
        self.roots: list[_Node] = []
        self.orphan_parents: list[_Node] = []  # nodes on an unnamed bus, parents of orphans
        self.host = _Bus(0, 0, self.roots)
        # Column of a branch character -> the bus whose siblings hang off that column.
        self.branches: dict[int, _Bus | None] = {}  # None: the list of root buses
        self.added: list[tuple[list[_Node], _Node]] = []  # this line's additions (for undo)
        self.started = False
        self.later_root = False  # the excerpt starts at a root bus drawn as a branch
        self.nested_roots = False  # root buses drawn as branches of another bus (lspci -t -d)

    # -- one line, all or nothing -------------------------------------------------------------
    def line(self, line: str, lenient: bool) -> str | None:
        """Read one line; on failure undo it and return why (a note is returned with ``+``)."""
        saved, started = dict(self.branches), self.started
        self.added = []
        try:
            return self._line(line, lenient)
        except LineError:
            for siblings, node in reversed(self.added):
                siblings.remove(node)
            self.branches, self.started = saved, started
            raise

    def _line(self, line: str, lenient: bool) -> str | None:
        col = len(line) - len(line.lstrip(" |"))
        if col >= len(line):
            return None  # only "|" continuation marks
        if _TREE_START.match(line, col):
            # "-[0000:00]-…" (one root bus) or "-+-[0000:00]-…" (several); a second one starts
            # a further tree (outputs concatenated).
            self.started = True
            self.branches = {}
            if line.startswith("-+-", col) or line.startswith("-\\-", col):
                self.branches[col + 1] = None
                self._root_bus(line, col + 3)
            else:
                self._root_bus(line, col + 1)
            return None
        ch = line[col]
        if ch not in "+\\" or line[col + 1 : col + 2] != "-":
            raise LineError("expected '+-' or '\\-' where a branch continues")
        note = None
        if not self.started:
            if not lenient:
                raise LineError("a branch before any root bus")
            self.started = True
            if _ROOT.match(line, col + 2):
                # An excerpt that starts at a later root bus (" +-[0000:44]-+-…"): the lines of
                # the buses above it are lost, but this bus and all below it are named.
                self.branches = {col: None}
                self.later_root = True
            else:
                # An excerpt that starts below the root-bus line: the top bus is unnamed.
                self.branches = {col: _Bus(None, None, self.orphan_parents)}
        at = col  # where this line's text is; ``col`` is the branch it continues
        if col not in self.branches:
            near = [c for c in (col - 1, col + 1) if c in self.branches]
            if not lenient or len(near) != 1:
                raise LineError("branch in a column no earlier line opened")
            note = f"branch drawn at column {col + 1}, one column off the open branch at column {near[0] + 1}"
            col = near[0]
        bus = self.branches[col]
        # Everything right of this column belonged to the previous sibling's subtree.
        for c in [c for c in self.branches if c > col]:
            del self.branches[c]
        if bus is None:
            self._root_bus(line, at + 2)
        else:
            nxt = self._device(line, at + 2, bus)
            if nxt is not None:
                self._bus_children(line, *nxt)
        return note

    # -- the pieces of a line ---------------------------------------------------------------------
    def _root_bus(self, line: str, pos: int) -> None:
        m = _ROOT.match(line, pos)
        if not m:
            raise LineError("expected a root bus like [0000:00]")
        domain = int(m.group(1), 16) if m.group(1) else 0
        self._bus_children(line, m.end(), _Bus(domain, int(m.group(2), 16), self.roots))

    def _bus_children(self, line: str, pos: int, bus: _Bus) -> None:
        """The devices of ``bus``, drawn from ``pos`` on: nothing, dashes + one device, or a
        branch.  A chain of single children continues on the same line, so this loops."""
        while True:  # positions, not slices: a chain line is read in time linear in its length
            for lead in (0, 1):
                if line.startswith("-" * lead, pos) and line.startswith(("+-", "\\-"), pos + lead):
                    if _ROOT.match(line, pos + lead + 2):
                        # A bus drawn as a branch of another ("-[0000:00]-+-[0000:14]---02.0",
                        # lspci -t -d): no bridge above it is shown, so lspci found none (its
                        # ls-tree.c draws a bus with its domain only where no bridge owns it):
                        # it is a root bus, as are the siblings drawn in this column.
                        self.branches[pos + lead] = None
                        self.nested_roots = True
                        self._root_bus(line, pos + lead + 2)
                        return
                    self.branches[pos + lead] = bus
                    nxt = self._device(line, pos + lead + 2, bus)
                    break
            else:
                dashes_end = _after_dashes(line, pos)
                if dashes_end == len(line):
                    return  # an empty bus: a bridge with nothing behind it ("-[08]--")
                if dashes_end == pos:
                    raise LineError("expected '--', '+-' or '\\-' after a bus")
                nxt = self._device(line, dashes_end, bus)
            if nxt is None:
                return
            pos, bus = nxt

    def _device(self, line: str, pos: int, bus: _Bus) -> tuple[int, _Bus] | None:
        """Read one device at ``pos``; for a bridge, where its own bus's drawing starts."""
        m = _DEV.match(line, pos)
        if not m:
            raise LineError("expected a device and function like 00.0")
        bdf = None
        if bus.number is not None and bus.domain is not None:
            bdf = f"{bus.domain:04x}:{bus.number:02x}:{m.group(1).lower()}.{m.group(2)}"
        node = _Node(bdf)
        bus.children.append(node)
        self.added.append((bus.children, node))
        b = _BRIDGE.match(line, m.end())
        if b:
            node.secondary = int(b.group(1), 16)
            node.subordinate = int(b.group(2) or b.group(1), 16)
            if node.subordinate < node.secondary:
                raise LineError("bridge bus range runs backwards")
            # Under an unnamed bus the domain is unknown too: 0000, the only one most hosts have.
            domain = bus.domain if bus.domain is not None else 0
            return b.end(), _Bus(domain, node.secondary, node.children)
        rest = line[m.end() :]
        if rest.strip():
            if not rest.startswith(" "):
                raise LineError("unexpected text after a device")
            node.description = rest.strip()
        return None


def _read(text: str, lenient: bool) -> LspciTree:
    if not isinstance(text, str):
        raise LspciParseError(f"expected text, got {type(text).__name__}")
    cleaned = clean_paste(text)
    reader = _Reader()
    skipped: list[Skipped] = list(cleaned.skipped)
    notes: list[str] = []
    for ln in cleaned.lines:
        line = ln.text.expandtabs(8)
        if not reader.started:
            # Text before the tree (a heading, the author's words) is not part of it.
            col = len(line) - len(line.lstrip(" |"))
            if not (_TREE_START.match(line, col) or (lenient and _BRANCH_LINE.match(line))):
                continue
        try:
            note = reader.line(line, lenient)
        except LineError as exc:
            if not lenient:
                raise LspciParseError(f"lspci tree line {ln.number}: {exc.why}: {line.strip()[:80]!r}") from None
            skipped.append(Skipped(ln.number, ln.number, f"not lspci -t output ({exc.why}): {line.strip()[:60]!r}"))
            continue
        if note:
            notes.append(f"line {ln.number}: {note}")
    if not reader.started:
        if text.strip():
            raise LspciParseError("no lspci tree found")
        return LspciTree(())
    if reader.later_root:
        notes.append(
            "the excerpt starts at a root bus drawn as a branch (+-[dddd:bb]): the root buses before it are not shown"
        )
    if reader.nested_roots:
        notes.append(
            "root buses drawn as branches of another bus (a filtered tree, lspci -t -d): each is read as a "
            "root bus of its own, and the listing shows only the functions the filter kept"
        )
    roots = tuple(_freeze(n) for n in reader.roots)
    orphans: list[LspciTreeNode] = []
    unnamed = 0
    for parent in reader.orphan_parents:
        unnamed += 1
        orphans.extend(_freeze(c) for c in parent.children)
    if unnamed:
        notes.append(
            f"the excerpt starts below its root-bus line: {unnamed} function(s) on an unnamed bus "
            "are left out, the subtrees under them kept (domain 0000 assumed) with their place unknown"
        )
    if lenient and not roots and not orphans:
        raise LspciParseError("no lspci tree found")
    return LspciTree(roots, tuple(orphans), tuple(merge_skipped(skipped)), tuple(notes), filtered=reader.nested_roots)


def parse_lspci_tree(text: str) -> tuple[LspciTreeNode, ...]:
    """Parse ``lspci -t`` / ``-tv`` / ``-tvnn`` into the functions on the root buses.

    Returns the functions of every root bus in output order, each with its subtree; the root
    bus itself is the ``dddd:bb`` part of their BDFs.  Blank input gives ``()``.  Strict: a
    line that is not part of the drawing raises :class:`LspciParseError` (prompts, fences and
    tool messages are dropped first, and text before the tree is ignored).

    lspci draws the tree on a character grid (pciutils ``ls-tree.c``): a bus with one device
    continues the line with ``--``/``----``, a bus with several opens a branch ``+-`` whose
    later siblings start further lines with ``+-`` or ``\\-`` in the same column, and ``|``
    carries an open branch down.  So the parent of a line's first node is known by its column.
    """
    return _read(text, lenient=False).roots


def read_lspci_tree(text: str) -> LspciTree:
    """Read a pasted ``lspci -t`` tree leniently: what cannot be read is skipped and reported.

    Raises :class:`LspciParseError` only when the text holds no tree at all.
    """
    return _read(text, lenient=True)
