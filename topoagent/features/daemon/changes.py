"""What changed between two scans: a pure diff of two :class:`~topoagent.core.result.ScanResult`.

The daemon compares each scan with the last good one and logs every :class:`ScanChange` as one
event.  Devices are matched by their stable key (the BDF), never by their display id: when a
GPU falls off the bus, ``gpu5`` becomes ``gpu4`` but ``0000:c3:00.0`` stays itself.  Findings
are matched by ``(code, subject keys)``, so a finding that moves to another device is one
cleared and one raised.

A GPU's *current* link speed is left out on purpose: an idle GPU drops its link to 2.5 GT/s
and retrains under load many times a minute, so its current speed between two scans says
nothing (the daemon's link watch judges it over time instead).  Its width and maximum speed,
and every link of other devices, are compared.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

import msgspec

from topoagent.core.findings import Finding
from topoagent.core.findings.catalogue import Output, carries
from topoagent.core.pci import DeviceKind
from topoagent.core.result import ScanResult
from topoagent.core.topology import Device

__all__ = ["ChangeKind", "ScanChange", "device_faults", "diff", "finding_keys", "link_verdict_changes"]


class ChangeKind(str, Enum):
    """What changed between two scans (the ``kind`` of a :class:`ScanChange`)."""

    DEVICE_ADDED = "device_added"
    DEVICE_REMOVED = "device_removed"
    NUMA_NODE_CHANGED = "numa_node_changed"
    LINK_WIDTH_CHANGED = "link_width_changed"
    LINK_SPEED_CHANGED = "link_speed_changed"
    FINDING_RAISED = "finding_raised"
    FINDING_CLEARED = "finding_cleared"
    LINK_DEGRADED = "link_degraded"
    LINK_RECOVERED = "link_recovered"
    DEVICE_FAULT = "device_fault"


class ScanChange(msgspec.Struct, frozen=True):
    """One change observed between two scans (not a change to make on the host: that is
    :class:`topoagent.features.act.changes.HostChange`).

    ``subject`` is the device's stable key, or the finding's code; ``keys`` are the stable
    keys of the devices a finding names.  ``severity`` (``info``, ``warning``, ``critical``)
    says how loudly to log it.  ``before``/``after`` are short readable values (``x16``,
    ``32 GT/s``, ``node 1``) or None where there was nothing.
    """

    kind: ChangeKind
    subject: str
    severity: str
    message: str
    device_kind: str | None = None
    before: str | None = None
    after: str | None = None
    keys: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """The change as plain JSON data (the state file's ``changes[]`` entry)."""
        return {
            "kind": self.kind.value,
            "subject": self.subject,
            "severity": self.severity,
            "message": self.message,
            "device_kind": self.device_kind,
            "before": self.before,
            "after": self.after,
            "keys": list(self.keys),
        }


#: Kinds whose loss is worth a warning (a GPU or NIC falling off the bus is an outage).
_IMPORTANT = (DeviceKind.GPU, DeviceKind.NIC, DeviceKind.ACCELERATOR, DeviceKind.NVSWITCH)


def _describe(d: Device) -> str:
    return f"{d.kind.value} {d.key} ({d.name})" if d.name else f"{d.kind.value} {d.key}"


def _gts(v: float | None) -> str | None:
    return None if v is None else f"{v:g} GT/s"


def _width(v: int | None) -> str | None:
    return None if v is None else f"x{v}"


def _node(v: int | None) -> str | None:
    return None if v is None else f"node {v}"


def _devices(old: ScanResult, new: ScanResult) -> list[ScanChange]:
    before = {d.key: d for d in old.topology.devices}
    after = {d.key: d for d in new.topology.devices}
    out: list[ScanChange] = []
    for key in sorted(before.keys() - after.keys()):
        d = before[key]
        out.append(
            ScanChange(
                ChangeKind.DEVICE_REMOVED,
                key,
                "warning" if d.kind in _IMPORTANT else "info",
                f"{_describe(d)} disappeared (it was {d.id})",
                d.kind.value,
                before=d.id,
            )
        )
    for key in sorted(after.keys() - before.keys()):
        d = after[key]
        out.append(
            ScanChange(
                ChangeKind.DEVICE_ADDED, key, "info", f"{_describe(d)} appeared as {d.id}", d.kind.value, after=d.id
            )
        )
    for key in sorted(before.keys() & after.keys()):
        out.extend(_device_changes(before[key], after[key]))
    return out


def _device_changes(a: Device, b: Device) -> list[ScanChange]:
    out: list[ScanChange] = []
    kind = b.kind.value
    if a.numa_node != b.numa_node:
        out.append(
            ScanChange(
                ChangeKind.NUMA_NODE_CHANGED,
                b.key,
                "warning",
                f"{_describe(b)} moved from NUMA {_node(a.numa_node) or 'unknown'} "
                f"to {_node(b.numa_node) or 'unknown'}",
                kind,
                _node(a.numa_node),
                _node(b.numa_node),
            )
        )
    la, lb = a.link, b.link
    for attr, fmt, change in (
        ("current_width", _width, ChangeKind.LINK_WIDTH_CHANGED),
        ("max_width", _width, ChangeKind.LINK_WIDTH_CHANGED),
        ("current_gts", _gts, ChangeKind.LINK_SPEED_CHANGED),
        ("max_gts", _gts, ChangeKind.LINK_SPEED_CHANGED),
    ):
        if attr == "current_gts" and b.kind is DeviceKind.GPU:
            continue  # idle GPUs downclock constantly (see the module docstring)
        old, new = getattr(la, attr), getattr(lb, attr)
        if old == new:
            continue
        worse = old is not None and (new is None or new < old)
        what = "maximum " if attr.startswith("max") else ""
        out.append(
            ScanChange(
                change,
                b.key,
                "warning" if worse else "info",
                f"{_describe(b)} {what}link {'width' if 'width' in attr else 'speed'} "
                f"changed from {fmt(old) or 'unknown'} to {fmt(new) or 'unknown'}",
                kind,
                fmt(old),
                fmt(new),
            )
        )
    return out


def finding_keys(result: ScanResult, finding: Finding) -> tuple[str, ...]:
    """The stable keys of a finding's subjects (ids the result does not know stay as they are)."""
    by_id = result.topology.by_id
    return tuple(d.key if (d := by_id(s)) is not None else s for s in finding.subjects)


def _index(result: ScanResult) -> dict[tuple[str, tuple[str, ...]], Finding]:
    return {(f.code, finding_keys(result, f)): f for f in result.findings}


def _findings(old: ScanResult, new: ScanResult) -> list[ScanChange]:
    before, after = _index(old), _index(new)
    out: list[ScanChange] = []
    for ident in sorted(before.keys() - after.keys()):
        f = before[ident]
        out.append(
            ScanChange(
                ChangeKind.FINDING_CLEARED,
                f.code,
                "info",
                f"cleared: {f.message}",
                before=f.severity.label,
                keys=ident[1],
            )
        )
    for ident in sorted(after.keys() - before.keys()):
        f = after[ident]
        out.append(
            ScanChange(
                ChangeKind.FINDING_RAISED, f.code, f.severity.label, f.message, after=f.severity.label, keys=ident[1]
            )
        )
    return out


class _Fault(msgspec.Struct, frozen=True):
    """One fault of one device (a finding or a probe error), before they are grouped."""

    code: str
    critical: bool
    text: str
    keys: tuple[str, ...]


def _new_faults(old: ScanResult | None, new: ScanResult) -> dict[str, list[_Fault]]:
    """The faults ``new`` shows and ``old`` did not, by device key, in the result's order: a
    device's own faults (:attr:`~topoagent.core.findings.catalogue.Output.DEVICE_FAULT`, not
    its placement) and probe errors on its files."""
    before = {(f.code, finding_keys(old, f)): f.message for f in old.findings} if old is not None else {}
    out: dict[str, list[_Fault]] = {}
    for f in new.findings:
        keys = finding_keys(new, f)
        if not carries(f, Output.DEVICE_FAULT) or before.get((f.code, keys)) == f.message:
            continue
        for key in keys:
            out.setdefault(key, []).append(
                _Fault(f.code, f.severity.label == "critical", f"{f.code}: {f.message}", keys)
            )
    seen = {p.path for p in old.topology.probe_errors} if old is not None else set()
    for p in new.topology.probe_errors:
        owner = p.path.rsplit("/", 2)[-2] if p.path.count("/") >= 2 else ""
        d = new.topology.by_key(owner.lower()) if owner else None
        if d is None or p.path in seen:
            continue
        out.setdefault(d.key, []).append(_Fault("probe_error", False, f"{_describe(d)}: {p.path}: {p.error}", (d.key,)))
    return out


def _join_sentences(texts: list[str]) -> str:
    """Sentences joined by ``; ``: each but the last without its full stop."""
    return "; ".join([*(t.removesuffix(".") for t in texts[:-1]), texts[-1]])


def device_faults(old: ScanResult | None, new: ScanResult) -> tuple[ScanChange, ...]:
    """Faults of devices that ``new`` shows and ``old`` did not (everything ``new`` shows
    when ``old`` is None: the daemon's first scan logs the faults it starts with): a fault
    finding raised or changed (AER counts that grew), and a probe error on a PCI function's
    own file (a class file that could not be parsed).  One change per device, keyed by its
    BDF, listing all of that device's new faults (``after``: their codes, comma-separated;
    the message: each fault's, ``; ``-separated), at the most severe fault's severity (at
    least ``warning``): a GPU that fell off the bus and counted AER errors is one event."""
    out: list[ScanChange] = []
    for key, faults in _new_faults(old, new).items():
        d = new.topology.by_key(key)
        codes = dict.fromkeys(f.code for f in faults)
        out.append(
            ScanChange(
                ChangeKind.DEVICE_FAULT,
                key,
                "critical" if any(f.critical for f in faults) else "warning",
                _join_sentences([f.text for f in faults]),
                d.kind.value if d is not None else None,
                after=",".join(codes),
                keys=tuple(dict.fromkeys(k for f in faults for k in (key, *f.keys))),
            )
        )
    return tuple(out)


def diff(old: ScanResult | None, new: ScanResult) -> tuple[ScanChange, ...]:
    """Every change from ``old`` to ``new``: devices removed, added, moved to another NUMA
    node, links retrained; then findings cleared and raised.  Deterministic order.  Nothing
    when ``old`` is None (the first scan is a baseline, not a change)."""
    if old is None:
        return ()
    return tuple(_devices(old, new) + _findings(old, new)) + device_faults(old, new)


def link_verdict_changes(
    before: Mapping[str, tuple[str, str]], after: Mapping[str, tuple[str, str]]
) -> tuple[ScanChange, ...]:
    """Links that became degraded or recovered between two judgements of the link watch.

    Each map holds the links judged degraded: device key -> ``(device kind, reason)``.
    """
    out = []
    for key in sorted(after.keys() - before.keys()):
        kind, reason = after[key]
        out.append(
            ScanChange(
                ChangeKind.LINK_DEGRADED, key, "warning", f"{kind} {key} link degraded: {reason}", kind, after=reason
            )
        )
    for key in sorted(before.keys() - after.keys()):
        kind, reason = before[key]
        out.append(
            ScanChange(
                ChangeKind.LINK_RECOVERED, key, "info", f"{kind} {key} link no longer degraded", kind, before=reason
            )
        )
    return tuple(out)
