"""Parse ``lspci -t`` / ``-tv`` / ``-tvnn``: the PCI bus tree as lspci draws it."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from topoagent.parsers.lspci_common import LspciParseError, split_ids

__all__ = ["LspciTreeNode", "parse_lspci_tree"]




@dataclass(frozen=True)
class LspciTreeNode:
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
        return self.secondary_bus is not None

    def walk(self) -> Iterator[LspciTreeNode]:
        """This node and every node below it, depth first."""
        yield self
        for child in self.children:
            yield from child.walk()


@dataclass
class _Node:
    bdf: str
    description: str | None = None
    secondary: int | None = None
    subordinate: int | None = None
    children: list[_Node] = field(default_factory=list)

    def freeze(self) -> LspciTreeNode:
        vendor = device = None
        desc = self.description
        if desc is not None:
            vendor, device, desc = split_ids(desc)
        return LspciTreeNode(
            bdf=self.bdf,
            description=desc,
            children=tuple(c.freeze() for c in self.children),
            secondary_bus=self.secondary,
            subordinate_bus=self.subordinate,
            vendor_id=vendor,
            device_id=device,
        )


# A root bus: "[0000:00]" (or "[00]" from lspci without domain support; VMD domains have five
# hex digits, "[10000:e0]").
_ROOT = re.compile(r"\[(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2})\]-")
_TREE_START = re.compile(r"-(?:[+\\]-)?\[(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}\]-")
_DEV = re.compile(r"([0-9a-fA-F]{2})\.([0-7])")
_BRIDGE = re.compile(r"-\[([0-9a-fA-F]{2})(?:-([0-9a-fA-F]{2}))?\]-")


@dataclass
class _Bus:
    domain: int
    number: int
    children: list[_Node]


def parse_lspci_tree(text: str) -> tuple[LspciTreeNode, ...]:
    """Parse ``lspci -t`` / ``-tv`` / ``-tvnn`` into the functions on the root buses.

    Returns the functions of every root bus in output order, each with its subtree; the root
    bus itself is the ``dddd:bb`` part of their BDFs.  Blank input gives ``()``.

    lspci draws the tree on a character grid (pciutils ``ls-tree.c``): a bus with one device
    continues the line with ``--``/``----``, a bus with several opens a branch ``+-`` whose
    later siblings start further lines with ``+-`` or ``\\-`` in the same column, and ``|``
    carries an open branch down.  So the parent of a line's first node is known by its column.
    """
    if not isinstance(text, str):
        raise LspciParseError(f"expected text, got {type(text).__name__}")
    roots: list[_Node] = []
    host = _Bus(0, 0, roots)
    # Column of a branch character -> the bus whose siblings hang off that column.
    branches: dict[int, _Bus | None] = {}  # None: the list of root buses
    seen_any = False

    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line.strip():
            continue

        def fail(why: str, lineno: int = lineno, line: str = line) -> LspciParseError:
            return LspciParseError(f"lspci tree line {lineno}: {why}: {line.strip()[:80]!r}")

        col = len(line) - len(line.lstrip(" |"))
        if col >= len(line):
            continue  # only "|" continuation marks
        ch = line[col]
        if not seen_any:
            # First line: "-[0000:00]-…" (one root bus) or "-+-[0000:00]-…" (several).
            # Anything before it (a shell prompt, a heading) is not part of the tree.
            if not _TREE_START.match(line, col):
                continue
            seen_any = True
            if line.startswith("-+-", col) or line.startswith("-\\-", col):
                branches[col + 1] = None
                _root_bus(line, col + 3, host, branches, fail)
            else:
                _root_bus(line, col + 1, host, branches, fail)
            continue
        if ch not in "+\\" or line[col + 1 : col + 2] != "-":
            raise fail("expected '+-' or '\\-' where a branch continues")
        if col not in branches:
            raise fail("branch in a column no earlier line opened")
        bus = branches[col]
        # Everything right of this column belonged to the previous sibling's subtree.
        for c in [c for c in branches if c > col]:
            del branches[c]
        if bus is None:
            _root_bus(line, col + 2, host, branches, fail)
        else:
            _device(line, col + 2, bus, branches, fail)
    if not seen_any and text.strip():
        raise LspciParseError("no lspci tree found")
    return tuple(n.freeze() for n in roots)


_Branches = dict[int, "_Bus | None"]
_Fail = Callable[[str], LspciParseError]


def _root_bus(line: str, pos: int, host: _Bus, branches: _Branches, fail: _Fail) -> None:
    m = _ROOT.match(line, pos)
    if not m:
        raise fail("expected a root bus like [0000:00]")
    domain = int(m.group(1), 16) if m.group(1) else 0
    _bus_children(line, m.end(), _Bus(domain, int(m.group(2), 16), host.children), branches, fail)


def _bus_children(line: str, pos: int, bus: _Bus, branches: _Branches, fail: _Fail) -> None:
    """The devices of ``bus``, drawn from ``pos`` on: nothing, dashes + one device, or a branch.

    After a bridge's ``-[bb]-`` lspci prints one more ``-`` and then the bus: ``""`` (empty),
    ``--`` + device (one device) or ``+-`` + device (the first of several).  After a root
    bus's ``[dddd:bb]-`` the bus follows directly.
    """
    rest = line[pos:]
    for lead in (0, 1):
        if rest[:lead] == "-" * lead and rest[lead : lead + 2] in ("+-", "\\-"):
            branches[pos + lead] = bus
            _device(line, pos + lead + 2, bus, branches, fail)
            return
    if rest.strip("-") == "":
        return  # an empty bus: a bridge with nothing behind it ("-[08]--")
    if rest.startswith("-"):
        _device(line, pos + len(rest) - len(rest.lstrip("-")), bus, branches, fail)
        return
    raise fail("expected '--', '+-' or '\\-' after a bus")


def _device(line: str, pos: int, bus: _Bus, branches: _Branches, fail: _Fail) -> None:
    m = _DEV.match(line, pos)
    if not m:
        raise fail("expected a device and function like 00.0")
    node = _Node(f"{bus.domain:04x}:{bus.number:02x}:{m.group(1).lower()}.{m.group(2)}")
    bus.children.append(node)
    b = _BRIDGE.match(line, m.end())
    if b:
        node.secondary = int(b.group(1), 16)
        node.subordinate = int(b.group(2) or b.group(1), 16)
        if node.subordinate < node.secondary:
            raise fail("bridge bus range runs backwards")
        child_bus = _Bus(bus.domain, node.secondary, node.children)
        _bus_children(line, b.end(), child_bus, branches, fail)
        return
    rest = line[m.end() :]
    if rest.strip():
        if not rest.startswith(" "):
            raise fail("unexpected text after a device")
        node.description = rest.strip()


