"""Every difference between an expected topology and a host's, as findings.

:func:`compare` is the one comparison ``scan --expect``, the daemon's ``expect`` setting and
``topoagent fleet`` use: both sides are :class:`~topoagent.core.analysis.fingerprint.Baseline`
values (a baseline file, a scan, or the majority of a hardware class).  Subjects are slot names
(docs/fleet.md); evidence names the slot's fact with ``expected`` and ``seen`` values.
"""

from __future__ import annotations

from collections.abc import Iterator

from topoagent.core.analysis.fingerprint import Baseline, SlotFacts, SlotLink
from topoagent.core.findings.catalogue import finding
from topoagent.core.findings.finding import Evidence, Finding, Severity, sort_findings
from topoagent.core.pci import DeviceKind

__all__ = ["compare"]

#: Kinds whose loss costs a GPU, a rail or the fabric: their absence is critical.
_VITAL = (DeviceKind.GPU, DeviceKind.NIC, DeviceKind.NVSWITCH)


def _what(s: SlotFacts) -> str:
    role = f" {s.role}" if s.role else ""
    return f"{s.kind.value}{role} {s.model or '?'}"


def _where(s: SlotFacts) -> str:
    return f"socket {s.socket}, NUMA node {s.numa_node}"


def _ev(slot: str, fact: str, expected: object, seen: object) -> Evidence:
    return Evidence(f"slot {slot}: {fact}", f"expected {expected}, seen {seen}")


def _vital(s: SlotFacts) -> bool:
    return s.kind in _VITAL or s.role == "switch_upstream"


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


def _same_slot(e: SlotFacts, s: SlotFacts, moved: dict[str, str], *, placement: bool = True) -> Iterator[Finding]:
    """The differences of one device, at slot ``s.slot`` on the host seen: its expected slot,
    or another for a moved device (whose placement the move's finding already names)."""
    slot = s.slot
    if placement and (e.socket, e.numa_node) != (s.socket, s.numa_node):
        yield finding(
            "EXPECT_PLACEMENT",
            (slot,),
            [_ev(slot, "socket", e.socket, s.socket), _ev(slot, "numa_node", e.numa_node, s.numa_node)],
            what=_what(e),
            slot=slot,
            seen=_where(s),
            expected=_where(e),
        )
    short = _link_short(e.link, s.link)
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
    # ACS or IOMMU unknown on either side (a scan without root reads no extended config space;
    # pasted output shows no IOMMU) is no difference, as NVLinks unknown without NVML are not.
    both = (("acs", e.acs, s.acs), ("iommu", e.iommu, s.iommu))
    state = [(f, x, v) for f, x, v in both if x is not None and v is not None and x != v]
    if state:
        yield finding(
            "EXPECT_STATE",
            (slot,),
            [_ev(slot, f, _fmt(x), _fmt(v)) for f, x, v in state],
            what=_what(e),
            slot=slot,
            changes=", ".join(f"{f} {_fmt(v)}, expected {_fmt(x)}" for f, x, v in state),
        )
    if e.kind is DeviceKind.GPU:
        yield from _rail(e, s, moved)


def _fmt(value: object) -> str:
    if isinstance(value, list):
        return "[" + ",".join(value) + "]"
    return str(value)


def _rail(e: SlotFacts, s: SlotFacts, moved: dict[str, str]) -> Iterator[Finding]:
    slot = s.slot
    rail = moved.get(e.rail, e.rail) if e.rail is not None else None
    if (rail, e.rail_path) != (s.rail, s.rail_path):
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
        [_ev(g, f"path to {n}", x, v) for g, n, x, v in diff],
        say="paths",
        fix="paths",
        severity=Severity.WARNING,
        pairs=len(diff),
        shown=shown + (" ..." if len(diff) > 2 else ""),
    )


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


def knows_more(seen: Baseline, expected: Baseline) -> bool:
    """Whether ``seen`` knows a fact :func:`compare` would skip because ``expected`` leaves it
    unknown (peer memory; a slot's ACS, IOMMU or NVLinks): then an empty comparison proves
    nothing about it -- a root scan's ACS redirect against a baseline taken without root."""
    if expected.peer_memory is None and seen.peer_memory is not None:
        return True
    got = {s.slot: s for s in seen.slots}
    return any(
        getattr(e, f) is None and getattr(s, f) is not None
        for e in expected.slots
        if (s := got.get(e.slot)) is not None
        for f in ("acs", "iommu", "nvlinks")
    )


def compare(expected: Baseline, seen: Baseline) -> tuple[Finding, ...]:
    """Every difference between ``expected`` and ``seen``, as findings (none when the
    fingerprints are equal; links are minimums, so a wider link than expected is no fault)."""
    exp = {s.slot: s for s in expected.slots}
    got = {s.slot: s for s in seen.slots}
    same = [k for k in exp if k in got and (exp[k].kind, exp[k].model) == (got[k].kind, got[k].model)]
    missing = [exp[k] for k in exp if k not in same]
    extra = [got[k] for k in got if k not in same]
    moves = _pair_moves(missing, extra)
    moved = {e.slot: s.slot for e, s in moves}
    out: list[Finding] = []
    if expected.peer_memory != seen.peer_memory and None not in (expected.peer_memory, seen.peer_memory):
        out.append(
            finding(
                "EXPECT_STATE",
                ("host",),
                [_ev("host", "peer_memory", expected.peer_memory, seen.peer_memory)],
                say="peer memory",
                fix="peer memory",
                seen=seen.peer_memory,
                expected=expected.peer_memory,
            )
        )
    for e, s in moves:
        out.append(
            finding(
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
        )
    for e in missing:
        out.append(
            finding(
                "EXPECT_DEVICE_MISSING",
                (e.slot,),
                [_ev(e.slot, "device", _what(e), None)],
                severity=None if _vital(e) else Severity.WARNING,
                what=_what(e),
                slot=e.slot,
                where=_where(e),
            )
        )
    for s in extra:
        out.append(
            finding(
                "EXPECT_DEVICE_EXTRA",
                (s.slot,),
                [_ev(s.slot, "device", None, _what(s))],
                what=_what(s),
                slot=s.slot,
                where=_where(s),
            )
        )
    paths = []
    # A moved device's other facts (link, NVLinks, ACS/IOMMU, rail, paths) are compared too.
    pairs = [(exp[k], got[k], True) for k in same] + [(e, s, False) for e, s in moves]
    for e, s, placed in pairs:
        out.extend(_same_slot(e, s, moved, placement=placed))
        if e.kind is DeviceKind.GPU:
            paths.extend(_path_changes(e, s, moved))
    if paths:
        out.append(_paths_finding(paths))
    return sort_findings(out)
