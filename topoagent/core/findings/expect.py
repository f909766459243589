"""Every difference between an expected topology and a host's, as findings, each cause once.

:func:`compare` is the one comparison ``scan --expect``, the daemon's ``expect`` setting and
``topoagent fleet`` use: both sides are :class:`~topoagent.core.baseline.Baseline`
values (a baseline file, a scan, or the majority of a hardware class).  Subjects are slot names
(docs/fleet.md); evidence names the slot's fact with ``expected`` and ``seen`` values.

One cause is one finding, with what it affects under it (issue 32: an IOMMU mode change gave
one critical per PCI function, SNC turned on up to 80, a root complex on the other socket up to
68):

* a root complex that moved to the other socket (its slots the same below their root bus) is
  one ``EXPECT_PLACEMENT``; its devices' paths to the rest are not listed again;
* a device missing (or fallen off the bus) with the devices below it is one
  ``EXPECT_DEVICE_MISSING``; an added card with its devices one ``EXPECT_DEVICE_EXTRA``;
* one ACS or IOMMU change on several devices is one ``EXPECT_STATE`` (the IOMMU's on every
  device: the host's IOMMU mode);
* a changed NUMA layout (SNC, NPS) is one ``EXPECT_HOST``, with the devices whose node and the
  GPU-NIC paths it changed under it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import msgspec

from topoagent.core.analysis.fingerprint import class_related
from topoagent.core.baseline import Baseline, HostShape, SlotFacts, SlotLink
from topoagent.core.findings.catalogue import finding
from topoagent.core.findings.finding import Evidence, Finding, Severity, sort_findings
from topoagent.core.pci import DeviceKind

__all__ = ["MAX_LISTED", "comparable", "compare", "compare_hosts", "knows_more", "upgraded"]

#: The most devices one finding lists in its evidence (the rest are counted on one more line).
MAX_LISTED = 32
#: Path classes a NUMA layout or a root complex's socket changes between (the path between
#: two devices crosses nodes, or no longer does): folded into that cause.
_NUMA_CLASSES = frozenset({"NODE", "SYS"})
_ROOT = re.compile(r"s[^./]+\.r[0-9]{1,6}")  # a socket's root bus by ordinal: a few digits


def _what(s: SlotFacts) -> str:
    role = f" {s.role}" if s.role else ""
    return f"{s.kind.value}{role} {s.model or '?'}"


def _where(s: SlotFacts) -> str:
    return f"socket {s.socket}, NUMA node {s.numa_node}"


def _ev(slot: str, fact: str, expected: object, seen: object) -> Evidence:
    return Evidence(f"slot {slot}: {fact}", f"expected {expected}, seen {seen}")


def _listed(lines: list[Evidence]) -> list[Evidence]:
    """At most :data:`MAX_LISTED` evidence lines, the rest counted on one more."""
    if len(lines) <= MAX_LISTED:
        return lines
    return [*lines[:MAX_LISTED], Evidence("slot (more)", f"{len(lines) - MAX_LISTED} more not listed")]


def _shown(slots: list[str], most: int = 2) -> str:
    return ", ".join(slots[:most]) + (" ..." if len(slots) > most else "")


def _root(slot: str) -> str | None:
    head = slot.split("/", 1)[0]
    return head if _ROOT.fullmatch(head) else None


def _fmt(value: object) -> str:
    if isinstance(value, list):
        return "[" + ",".join(value) + "]"
    return str(value)


# -- the host: CPUs, NUMA layout, memory ------------------------------------------------------


def _layout(shape: HostShape) -> list[tuple[int, int | None, bool]]:
    """The NUMA layout: each node, its socket and whether it has CPUs (how many it has is the
    CPUs' fact: cores or SMT)."""
    return [(n.id, n.socket, n.cpus > 0) for n in shape.nodes]


def _layout_text(shape: HostShape) -> str:
    per: dict[int | None, int] = {}
    for n in shape.nodes:
        if n.cpus:
            per[n.socket] = per.get(n.socket, 0) + 1
    counts = sorted(set(per.values()))
    nodes = "/".join(map(str, counts)) or "0"
    return f"{len(shape.nodes)} node(s), {nodes} with CPUs per socket"


def _cpus_changed(e: HostShape, s: HostShape) -> list[tuple[str, object, object]]:
    return [
        (fact, x, v)
        for fact, x, v in (
            ("cpu", e.cpu, s.cpu),
            ("sockets", e.sockets, s.sockets),
            ("cores", e.cores, s.cores),
            ("threads_per_core", e.threads_per_core, s.threads_per_core),
        )
        if x is not None and v is not None and x != v
    ]


def _host_findings(e: HostShape, s: HostShape, folded: list[Evidence]) -> Iterator[Finding]:
    """The host's CPUs and NUMA layout (``folded``: what the layout change explains) and, on
    an unchanged layout, each node's memory."""
    cpus = _cpus_changed(e, s)
    if cpus:
        yield finding(
            "EXPECT_HOST",
            ("host",),
            [_ev("host", f, x, v) for f, x, v in cpus],
            changes=", ".join(f"{f} {v}, expected {x}" for f, x, v in cpus),
        )
    if _layout(e) != _layout(s):
        yield finding(
            "EXPECT_HOST",
            ("host",),
            _listed([_ev("host", "numa_nodes", _layout_text(e), _layout_text(s)), *folded]),
            say="numa",
            fix="numa",
            seen=_layout_text(s),
            expected=_layout_text(e),
            explained=len(folded),
        )
        return
    got = {n.id: n for n in s.nodes}
    low = [
        (n.id, n.memory_gib, m)
        for n in e.nodes
        if n.memory_gib is not None and (m := got[n.id].memory_gib) is not None and m < n.memory_gib
    ]
    if low:
        yield finding(
            "EXPECT_HOST",
            ("host",),
            [_ev("host", f"node{i} memory GiB", x, v) for i, x, v in low],
            say="memory",
            fix="memory",
            severity=Severity.WARNING,
            nodes=", ".join(f"node {i} {v} GiB, expected {x}" for i, x, v in low),
        )


# -- pairing slots ------------------------------------------------------------------------------


class _Pairing(msgspec.Struct):
    """How the slots of both sides pair up: at the same slot, under a root complex that moved
    (expected root -> seen root), moved one by one, or missing and extra."""

    exp: dict[str, SlotFacts]
    got: dict[str, SlotFacts]
    roots: dict[str, str]
    #: expected slot -> the slot it is at on the host seen (a moved root's or device's).
    moved: dict[str, str]
    pairs: list[tuple[SlotFacts, SlotFacts, bool]]
    device_moves: list[tuple[SlotFacts, SlotFacts]]
    missing: list[SlotFacts]
    extra: list[SlotFacts]


def _signatures(slots: dict[str, SlotFacts]) -> dict[str, tuple[tuple[str, str, str | None], ...]]:
    """Each root bus's devices below it, by their place below it, kind and model."""
    below: dict[str, list[tuple[str, str, str | None]]] = {}
    for k, s in slots.items():
        r = _root(k)
        if r is not None:
            below.setdefault(r, []).append((k[len(r) :], s.kind.value, s.model))
    return {r: tuple(sorted(v)) for r, v in below.items()}


def _moved_roots(exp: dict[str, SlotFacts], got: dict[str, SlotFacts]) -> dict[str, str]:
    """Expected root bus -> the root bus it is on the host seen, for each root bus of the
    expectation the host does not have under its name but has under another with the same
    devices below it (same ordinal first): a root complex on the other socket."""
    want, have = _signatures(exp), _signatures(got)
    spare = sorted(set(have) - set(want))
    out: dict[str, str] = {}
    for root in sorted(set(want) - set(have)):
        ordinal = root.split(".", 1)[1]
        match = [r for r in spare if have[r] == want[root]]
        match.sort(key=lambda r: r.split(".", 1)[1] != ordinal)
        if match:
            out[root] = match[0]
            spare.remove(match[0])
    return out


def _pair_moves(missing: list[SlotFacts], extra: list[SlotFacts]) -> list[tuple[SlotFacts, SlotFacts]]:
    """Missing and extra devices of one kind and model, paired in slot order: moved devices."""
    pairs = []
    for e in list(missing):
        if e.kind is DeviceKind.BRIDGE:
            continue
        s = next((x for x in extra if (x.kind, x.model) == (e.kind, e.model)), None)
        if s is not None:
            pairs.append((e, s))
            missing.remove(e)
            extra.remove(s)
    return pairs


def _pairing(expected: Baseline, seen: Baseline) -> _Pairing:
    exp = {s.slot: s for s in expected.slots}
    got = {s.slot: s for s in seen.slots}
    roots = _moved_roots(exp, got)
    moved: dict[str, str] = {}
    for k in exp:
        r = _root(k)
        if r in roots:
            moved[k] = roots[r] + k[len(r) :]
    pairs: list[tuple[SlotFacts, SlotFacts, bool]] = []
    missing, taken = [], set()
    for k, e in exp.items():
        at = moved.get(k, k)
        s = got.get(at)
        if s is not None and (s.kind, s.model) == (e.kind, e.model) and not (s.fell_off_bus and not e.fell_off_bus):
            pairs.append((e, s, k not in moved))
            taken.add(at)
        else:
            missing.append(e)
    extra = [s for k, s in got.items() if k not in taken and not s.fell_off_bus]
    device_moves = _pair_moves(missing, extra)
    moved.update({e.slot: s.slot for e, s in device_moves})
    pairs += [(e, s, False) for e, s in device_moves]
    return _Pairing(exp, got, roots, moved, pairs, device_moves, missing, extra)


# -- per slot -----------------------------------------------------------------------------------


def _link_short(exp: SlotLink, seen: SlotLink) -> list[tuple[str, object, object]]:
    short: list[tuple[str, object, object]] = []
    for fact, e, s in (
        ("link width", exp.width, seen.width),
        ("max link width", exp.max_width, seen.max_width),
        ("max link speed GT/s", exp.max_gts, seen.max_gts),
    ):
        if e is not None and (s is None or s < e):
            short.append((fact, e, s))
    return short


def _placement(e: SlotFacts, s: SlotFacts) -> Finding:
    slot = s.slot
    return finding(
        "EXPECT_PLACEMENT",
        (slot,),
        [_ev(slot, "socket", e.socket, s.socket), _ev(slot, "numa_node", e.numa_node, s.numa_node)],
        what=_what(e),
        slot=slot,
        seen=_where(s),
        expected=_where(e),
    )


def _links(e: SlotFacts, s: SlotFacts, short: list[tuple[str, object, object]]) -> Iterator[Finding]:
    slot = s.slot
    if short:
        yield finding(
            "EXPECT_LINK",
            (slot,),
            [_ev(slot, f, x, v) for f, x, v in short],
            what=_what(e),
            slot=slot,
            short=", ".join(
                f"{f} {v} below the expected {x}" if v is not None else f"{f} unknown (link down?), expected {x}"
                for f, x, v in short
            ),
        )
    if e.nvlinks is not None and s.nvlinks is not None and s.nvlinks < e.nvlinks:
        yield finding(
            "EXPECT_LINK",
            (slot,),
            [_ev(slot, "nvlinks", e.nvlinks, s.nvlinks)],
            say="nvlinks",
            fix="nvlinks",
            severity=Severity.CRITICAL,
            slot=slot,
            seen=s.nvlinks,
            expected=e.nvlinks,
        )


#: Ports whose link is the one of the device directly below them (both ends report it).
_PORTS = ("root_port", "switch_downstream")


def _parent(slot: str) -> str:
    return slot.rpartition("/")[0]


def _link_findings(p: _Pairing) -> Iterator[Finding]:
    """Each paired slot's link and NVLinks below the expected, one link once: a
    downstream-facing port's shortfall is left to the device directly below it when that
    reports the same one (both ends of one link), or is gone (missing, moved away) and the
    port's link is down."""
    shorts = {e.slot: _link_short(e.link, s.link) for e, s, _ in p.pairs}
    gone = {m.slot for m in p.missing} | {m.slot for m, _ in p.device_moves}
    children: dict[str, list[str]] = {}
    for k in p.exp:
        children.setdefault(_parent(k), []).append(k)
    for e, s, _ in p.pairs:
        short = shorts[e.slot]
        if short and e.role in _PORTS:
            below = children.get(e.slot, ())
            if any((k in gone and s.link.width is None) or shorts.get(k) == short for k in below):
                short = []
        yield from _links(e, s, short)


def _state_changes(e: SlotFacts, s: SlotFacts) -> list[tuple[str, str, str]]:
    """(fact, expected, seen) for ACS and IOMMU where both sides know them: unknown on either
    side (a scan without root reads no extended config space; pasted output shows no IOMMU)
    is no difference, as NVLinks unknown without NVML are not."""
    both = (("acs", e.acs, s.acs), ("iommu", e.iommu, s.iommu))
    return [(f, _fmt(x), _fmt(v)) for f, x, v in both if x is not None and v is not None and x != v]


def _rail(e: SlotFacts, s: SlotFacts, moved: dict[str, str], numa: bool) -> Iterator[Finding]:
    slot = s.slot
    rail = moved.get(e.rail, e.rail) if e.rail is not None else None
    if rail == s.rail and (e.rail_path == s.rail_path or (numa and {e.rail_path, s.rail_path} <= _NUMA_CLASSES)):
        return
    yield finding(
        "EXPECT_PATH",
        (slot,),
        [_ev(slot, "rail", e.rail, s.rail), _ev(slot, "rail_path", e.rail_path, s.rail_path)],
        slot=slot,
        seen=s.rail,
        seen_path=s.rail_path,
        expected=e.rail,
        expected_path=e.rail_path,
    )


def _path_changes(e: SlotFacts, s: SlotFacts, moved: dict[str, str]) -> list[tuple[str, str, str, str]]:
    """(GPU slot, NIC slot, expected, seen) for each GPU-NIC path class that changed."""
    exp = {moved.get(k, k): v for k, v in (e.nic_paths or {}).items()}
    got = s.nic_paths or {}
    return [(s.slot, nic, exp[nic], got[nic]) for nic in sorted(exp) if nic in got and exp[nic] != got[nic]]


def _paths_finding(diff: list[tuple[str, str, str, str]]) -> Finding:
    gpus = tuple(dict.fromkeys(g for g, *_ in diff))
    shown = ", ".join(f"{g} to {n} {v} not {x}" for g, n, x, v in diff[:2])
    return finding(
        "EXPECT_PATH",
        gpus,
        _listed([_ev(g, f"path to {n}", x, v) for g, n, x, v in diff]),
        say="paths",
        fix="paths",
        severity=Severity.WARNING,
        pairs=len(diff),
        shown=shown + (" ..." if len(diff) > 2 else ""),
    )


# -- causes over many slots -----------------------------------------------------------------------


def _function0(slot: str) -> str:
    """Function 0 of the device at ``slot`` (``s0.r0/01.0/00.1`` -> ``s0.r0/01.0/00.0``)."""
    head, _, fn = slot.rpartition(".")
    return f"{head}.0" if fn != "0" and "/" not in fn else slot


def _tops(slots: list[SlotFacts]) -> list[tuple[SlotFacts, list[SlotFacts]]]:
    """Each slot not below another of ``slots``, with those below it: a switch and its cards
    are one device missing (or added), not one per function."""
    by_name = {s.slot: s for s in slots}
    groups: dict[str, list[SlotFacts]] = {}
    for s in slots:
        top, up = s.slot, _parent(s.slot)
        first = _function0(s.slot)
        if first in by_name:  # another function of a device one of whose functions is listed
            top = first
        while up:
            if up in by_name:
                top = up
            up = _parent(up)
        groups.setdefault(top, [])
        if top != s.slot:
            groups[top].append(s)
    return [(by_name[t], below) for t, below in groups.items()]


def _missing(missing: list[SlotFacts], got: dict[str, SlotFacts], moved: dict[str, str]) -> Iterator[Finding]:
    tops = _tops(missing)
    if len(tops) > MAX_LISTED:  # another build altogether (or a made-up expectation): one finding
        names = [e.slot for e, _ in tops]
        yield finding(
            "EXPECT_DEVICE_MISSING",
            tuple(names[:MAX_LISTED]),
            _listed([_ev(e.slot, "device", _what(e), None) for e, _ in tops]),
            say="many",
            count=len(missing),
            shown=_shown(names),
        )
        return
    for e, below in tops:
        seen = got.get(moved.get(e.slot, e.slot))
        off = seen is not None and seen.fell_off_bus
        yield finding(
            "EXPECT_DEVICE_MISSING",
            (e.slot,),
            _listed([_ev(e.slot, "device", _what(e), "fell off the bus" if off else None)])
            + _listed([_ev(b.slot, "device (with it)", _what(b), None) for b in below]),
            say="off bus" if off else "below" if below else "",
            what=_what(e),
            slot=e.slot,
            where=_where(e),
            below=len(below),
        )


def _extra(extra: list[SlotFacts]) -> Iterator[Finding]:
    for s, below in _tops(extra):
        yield finding(
            "EXPECT_DEVICE_EXTRA",
            (s.slot,),
            [_ev(s.slot, "device", None, _what(s))]
            + _listed([_ev(b.slot, "device (with it)", None, _what(b)) for b in below]),
            say="below" if below else "",
            what=_what(s),
            slot=s.slot,
            where=_where(s),
            below=len(below),
        )


def _states(changes: list[tuple[SlotFacts, str, str, str]], known_iommu: int) -> Iterator[Finding]:
    """One finding per change (fact, expected, seen) over every slot it is on; an IOMMU type
    changed on every slot both sides know it for is the host's IOMMU mode."""
    groups: dict[tuple[str, str, str], list[SlotFacts]] = {}
    for s, fact, x, v in changes:
        groups.setdefault((fact, x, v), []).append(s)
    for (fact, x, v), slots in groups.items():
        names = [s.slot for s in slots]
        evidence = _listed([_ev(n, fact, x, v) for n in names])
        if fact == "iommu" and len(slots) == known_iommu and len(slots) > 1:
            yield finding(
                "EXPECT_STATE", ("host",), evidence, say="iommu", fix="iommu", seen=v, expected=x, count=len(slots)
            )
        elif len(slots) == 1:
            s = slots[0]
            yield finding(
                "EXPECT_STATE", (s.slot,), evidence, what=_what(s), slot=s.slot, changes=f"{fact} {v}, expected {x}"
            )
        else:
            yield finding(
                "EXPECT_STATE",
                tuple(names),
                evidence,
                say="many",
                fact=fact,
                seen=v,
                expected=x,
                count=len(slots),
                shown=_shown(names),
            )


def _root_moves(p: _Pairing) -> Iterator[Finding]:
    for root, at in sorted(p.roots.items()):
        slots = [(e, s) for e, s, _ in p.pairs if _root(e.slot) == root]
        if not slots:
            continue
        e0, s0 = slots[0]
        yield finding(
            "EXPECT_PLACEMENT",
            (root, at),
            _listed([_ev(e.slot, "slot", e.slot, s.slot) for e, s in slots]),
            say="root moved",
            fix="root moved",
            root=root,
            seen_root=at,
            count=len(slots),
            expected=f"socket {e0.socket}",
            seen=f"socket {s0.socket}",
        )


def _device_moves(p: _Pairing) -> Iterator[Finding]:
    for e, s in p.device_moves:
        yield finding(
            "EXPECT_PLACEMENT",
            (e.slot, s.slot),
            [
                _ev(e.slot, "slot", e.slot, s.slot),
                _ev(e.slot, "socket", e.socket, s.socket),
                _ev(e.slot, "numa_node", e.numa_node, s.numa_node),
            ],
            say="moved",
            fix="moved",
            what=_what(e),
            slot=e.slot,
            expected=_where(e),
            seen_slot=s.slot,
            seen=_where(s),
        )


def _peer_memory(expected: Baseline, seen: Baseline) -> Iterator[Finding]:
    if expected.peer_memory != seen.peer_memory and None not in (expected.peer_memory, seen.peer_memory):
        yield finding(
            "EXPECT_STATE",
            ("host",),
            [_ev("host", "peer_memory", expected.peer_memory, seen.peer_memory)],
            say="peer memory",
            fix="peer memory",
            seen=seen.peer_memory,
            expected=expected.peer_memory,
        )


class _Slots(msgspec.Struct):
    """What the slot pairs show, before it is sorted into causes."""

    found: list[Finding]
    states: list[tuple[SlotFacts, str, str, str]]
    iommu_known: int
    paths: list[tuple[str, str, str, str]]
    #: Evidence a NUMA layout change explains (a device's node, a path NODE <-> SYS).
    numa_folded: list[Evidence]


def _gpu_paths(e: SlotFacts, s: SlotFacts, p: _Pairing, numa: bool, out: _Slots) -> None:
    """A GPU's GPU-NIC path classes that changed, less those a cause already explains: a path
    to or from a moved device (its move names it), one between NODE and SYS through a moved
    root complex (its move) or under a changed NUMA layout (that change)."""
    moved_roots = set(p.roots.values())
    moved_devices = {x.slot for _, x in p.device_moves}
    for change in _path_changes(e, s, p.moved):
        g, n, x, v = change
        if g in moved_devices or n in moved_devices:
            continue
        explained = {x, v} <= _NUMA_CLASSES
        if explained and (_root(g) in moved_roots or _root(n) in moved_roots):
            continue
        if explained and numa:
            out.numa_folded.append(_ev(g, f"path to {n}", x, v))
            continue
        out.paths.append(change)


def _pair_facts(p: _Pairing, numa: bool) -> _Slots:
    """Links, NVLinks, ACS/IOMMU, placement, rails and paths of every paired slot (a moved
    device's or root complex's too); ``numa``: the NUMA layout changed, so a device's node on
    its own socket and a path between NODE and SYS are that change's, not the slot's."""
    out = _Slots(list(_link_findings(p)), [], 0, [], [])
    moved_roots = set(p.roots.values())
    for e, s, placed in p.pairs:
        if placed and (e.socket, e.numa_node) != (s.socket, s.numa_node):
            if numa and e.socket == s.socket:
                out.numa_folded.append(_ev(s.slot, "numa_node", e.numa_node, s.numa_node))
            else:
                out.found.append(_placement(e, s))
        out.states.extend((s, *c) for c in _state_changes(e, s))
        out.iommu_known += e.iommu is not None and s.iommu is not None
        if e.kind is DeviceKind.GPU:
            out.found.extend(_rail(e, s, p.moved, numa or _root(s.slot) in moved_roots))
            _gpu_paths(e, s, p, numa, out)
    return out


def knows_more(seen: Baseline, expected: Baseline) -> bool:
    """Whether ``seen`` knows a fact :func:`compare` would skip because ``expected`` leaves it
    unknown (peer memory, the CPU/NUMA shape; a slot's ACS, IOMMU or NVLinks)."""
    if expected.peer_memory is None and seen.peer_memory is not None:
        return True
    if expected.shape is None and seen.shape is not None:
        return True
    got = {s.slot: s for s in seen.slots}
    return any(
        getattr(e, f) is None and getattr(s, f) is not None
        for e in expected.slots
        if (s := got.get(e.slot)) is not None
        for f in ("acs", "iommu", "nvlinks")
    )


def compare(expected: Baseline, seen: Baseline) -> tuple[Finding, ...]:
    """Every difference between ``expected`` and ``seen``, as findings, each cause once (the
    module docstring); none when the facts are equal (links are minimums, so a wider link
    than expected is no fault; a fact unknown on either side is not compared)."""
    p = _pairing(expected, seen)
    numa = expected.shape is not None and seen.shape is not None and _layout(expected.shape) != _layout(seen.shape)
    slots = _pair_facts(p, numa)
    out: list[Finding] = [*_peer_memory(expected, seen), *_root_moves(p), *_device_moves(p)]
    if expected.shape is not None and seen.shape is not None:
        out.extend(_host_findings(expected.shape, seen.shape, slots.numa_folded))
    out.extend(_missing(p.missing, p.got, p.moved))
    out.extend(_extra(p.extra))
    out.extend(slots.found)
    out.extend(_states(slots.states, slots.iommu_known))
    if slots.paths:
        out.append(_paths_finding(slots.paths))
    return sort_findings(out)


def _roots_per_socket(slots: list[SlotFacts]) -> dict[str, list[str]]:
    """Each socket's root-bus names (``s0.r1``) among ``slots``, in ordinal order."""
    per: dict[str, list[str]] = {}
    for r in sorted({r for s in slots if (r := _root(s.slot)) is not None}, key=lambda r: int(r.rpartition(".r")[2])):
        per.setdefault(r.partition(".r")[0], []).append(r)
    return per


def _rename(slot: str, names: dict[str, str]) -> str:
    root, sep, rest = slot.partition("/")
    return names.get(root, root) + sep + rest


def upgraded(expected: Baseline, seen: Baseline) -> Baseline:
    """``expected`` with its root buses renamed as this version names them, where it was
    written before (it records no ``shape``) and names them per socket (``s1.r0`` for the
    second socket's first root bus, now ``s1.r<n>`` counted across the host): each socket's
    root buses, in bus order, are ``seen``'s of that socket in order.  Unchanged where any
    socket has another number of root buses than ``seen`` (a root complex that moved is the
    comparison's to report) or where the names already agree."""
    if expected.shape is not None:
        return expected
    old, new = _roots_per_socket(expected.slots), _roots_per_socket(seen.slots)
    if old.keys() != new.keys() or any(len(old[k]) != len(new[k]) for k in old):
        return expected
    names = {o: n for k in old for o, n in zip(old[k], new[k], strict=True) if o != n}
    if not names:
        return expected

    def slot(s: SlotFacts) -> SlotFacts:
        return msgspec.structs.replace(
            s,
            slot=_rename(s.slot, names),
            rail=None if s.rail is None else _rename(s.rail, names),
            nic_paths=None if s.nic_paths is None else {_rename(k, names): v for k, v in s.nic_paths.items()},
        )

    slots = sorted((slot(s) for s in expected.slots), key=lambda s: s.slot)
    return msgspec.structs.replace(expected, slots=slots)


def comparable(expected: Baseline, seen: Baseline) -> bool:
    """Whether the two are compared slot by slot: of one hardware class, or of classes one of
    which is the other less what it lost or could not read (:func:`class_related`)."""
    return class_related(expected.hw_class, seen.hw_class) or class_related(seen.hw_class, expected.hw_class)


def compare_hosts(expected: Baseline, seen: Baseline) -> tuple[Finding, ...]:
    """:func:`compare` where the two are :func:`comparable`; else the one ``EXPECT_CLASS``
    finding (``scan --expect`` against another class's baseline listed 117 differences and no
    sentence saying the classes differ)."""
    if comparable(expected, seen):
        return compare(upgraded(expected, seen), seen)
    a, b = expected.hw_class, seen.hw_class
    return (finding("EXPECT_CLASS", ("host",), [_ev("host", "hw_class", a, b)], seen=b, expected=a),)
