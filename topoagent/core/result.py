"""The result of a scan and the pure analysis that makes it: ``analyse(snapshot) -> ScanResult``.

This module imports no source: a snapshot read from a host, a capture or pasted text goes in,
the tree, path classes, rails, findings and plan come out.  Everything here is immutable, so a
result can be shared with a server thread or hashed.

Identity: a device's ``id`` (``gpu0``, ``nic3``) is its position in PCI order, for people and
for the JSON contract; its ``key`` (the BDF, or ``nvidia-smi:GPU0`` for a device known only by
a tool's label) is stable when other devices come and go.  Events, metrics labels and undo
journals use the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from topoagent.core.advice.plan import Plan, PlanOptions, base_plan, plan_for
from topoagent.core.analysis.fingerprint import baseline, slot_names
from topoagent.core.analysis.given import matrix_vs_tree
from topoagent.core.analysis.paths import Path, pair_path, path_index, scan_paths
from topoagent.core.analysis.rails import Rails, pair_rails
from topoagent.core.analysis.unknown import Unknown, unknown_facts
from topoagent.core.aside import Aside, derived
from topoagent.core.baseline import Baseline
from topoagent.core.findings import CATALOGUE, Finding, Severity, find_all, sort_findings
from topoagent.core.findings.catalogue import Output, carries
from topoagent.core.findings.expect import comparable, compare_hosts
from topoagent.core.frozen import FrozenMap
from topoagent.core.pci import DeviceKind
from topoagent.core.snapshot import Snapshot, SourceStatus
from topoagent.core.topology import Device, Topology, build_topology

__all__ = [
    "Expectation",
    "ScanResult",
    "analyse",
    "failing",
    "reanalyse",
    "with_expected",
    "with_findings",
    "with_timings",
]

_UNTIMED: Mapping[str, float] = FrozenMap()
_PAIRED = {DeviceKind.GPU, DeviceKind.NIC}


class Expectation(msgspec.Struct, frozen=True):
    """What a scan was compared with (``scan --expect``, the daemon's ``expect``) and how it
    came out, so every output can say the comparison ran -- also when it found nothing."""

    #: Where the expectation was taken (its ``host``), and its class and fingerprint.
    host: str | None
    hw_class: str
    fingerprint: str
    #: Whether the slots were compared (False: another hardware class, ``EXPECT_CLASS``).
    compared: bool
    #: How many ``EXPECT_*`` findings the comparison raised.
    differences: int


class ScanResult(msgspec.Struct, frozen=True, weakref=True):
    """A scan and everything derived from it.

    ``timings`` holds the seconds each source and the analysis took (``sysfs``, ``nvml``,
    ``analyse`` …); they are not part of the result's value (two scans of one host compare
    equal and diff cleanly) but the daemon exports them.  They are a note in :attr:`aside`
    (:func:`with_timings`), and the baseline and path index are derived values kept there
    (:mod:`topoagent.core.aside`): equality and hashing ignore them, and every copy
    (``msgspec.structs.replace``) keeps them -- a derived one only while the fields it comes
    from are the same.
    """

    topology: Topology
    #: GPU-GPU and GPU-NIC pairs, and NIC-NIC pairs up to a bound (:func:`~topoagent.core.analysis.paths.scan_paths`).
    paths: tuple[Path, ...]
    #: The rail pairing: every GPU's rail NICs and every NIC's role.
    rails: Rails
    findings: tuple[Finding, ...]
    plan: Plan
    #: Timings and derived values, outside the result's value.
    aside: Aside = msgspec.field(default_factory=Aside)

    @property
    def timings(self) -> Mapping[str, float]:
        """Seconds per source and for the analysis (empty when not timed)."""
        timings: Mapping[str, float] = self.aside.notes.get("timings", _UNTIMED)
        return timings

    @property
    def expectation(self) -> Expectation | None:
        """What the scan was compared with (:func:`with_expected`), None when it was not."""
        expected: Expectation | None = self.aside.notes.get("expected")
        return expected

    @derived("topology", "paths", "rails")
    def baseline(self) -> Baseline:
        """The host's hardware class, fingerprint and slot facts (:mod:`topoagent.core.analysis.fingerprint`)."""
        return baseline(self.topology, self.paths, self.rails)

    @property
    def snapshot(self) -> Snapshot:
        """The facts the result was built from (the topology's own, never a stale copy)."""
        return self.topology.snapshot

    def plan_with(self, options: PlanOptions = PlanOptions()) -> Plan:
        """The plan under ``options`` (what ``plan``, ``exec`` and ``apply`` hand out): per GPU
        its CPUs, ranks' cores, rail NICs and environment, none for a GPU :attr:`unusable`
        names.  Pure."""
        return plan_for(
            self.topology,
            self.plan,
            paths=self.paths,
            findings=self.findings,
            pairing=self.rails,
            options=options,
            unusable=self.unusable,
        )

    def worst(self) -> Severity | None:
        """The most severe finding's severity, or None when there are none."""
        return max((f.severity for f in self.findings), default=None)

    def counts(self) -> dict[str, int]:
        """How many findings of each severity, by label, most severe first, zeros included (the
        Nagios perfdata, ``topoagent_findings{severity}``)."""
        counts = {s.label: 0 for s in sorted(Severity, reverse=True)}
        for f in self.findings:
            counts[f.severity.label] += 1
        return counts

    def failing(self, threshold: Severity, *, expect_warns: bool = False) -> tuple[Finding, ...]:
        """The findings at or above ``threshold`` (:func:`failing`): what every command's exit
        status, ``health``'s drain and node-problem-detector's NonOK are decided by."""
        return failing(self.findings, threshold, expect_warns=expect_warns)

    @derived("topology", "paths")
    def unknown(self) -> tuple[Unknown, ...]:
        """What the scan could not read (:mod:`topoagent.core.analysis.unknown`): every output
        that prints such a fact says it is unknown, from this one list."""
        return unknown_facts(self.topology, self.paths)

    @derived("findings")
    def unusable(self) -> Mapping[str, tuple[str, ...]]:
        """Each unusable GPU (by id) and the codes that make it so: a finding whose entry carries
        :attr:`~topoagent.core.findings.catalogue.Output.GPU_UNUSABLE` names it (FELL_OFF_BUS).
        Every output reads a GPU's state here: the plan gives it no rank, ``exec`` refuses it."""
        gpus = {g.id for g in self.topology.gpus}
        out: dict[str, list[str]] = {}
        for f in self.findings:
            if carries(f, Output.GPU_UNUSABLE):
                for s in f.subjects:
                    if s in gpus and f.code not in out.setdefault(s, []):
                        out[s].append(f.code)
        return FrozenMap({k: tuple(v) for k, v in out.items()})

    # -- lookups ------------------------------------------------------------------------------
    def device(self, ref: str) -> Device | None:
        """A device by id (``gpu0``), stable key or BDF (any case)."""
        topo = self.topology
        return topo.by_id(ref) or topo.by_key(ref) or topo.by_bdf(ref.lower())

    def by_bdf(self, bdf: str) -> Device | None:
        """The device at a BDF (``0000:1b:00.0``), or None."""
        return self.topology.by_bdf(bdf.lower())

    def key(self, ident: str) -> str:
        """The stable key of a device id (``gpu3`` -> ``0000:61:00.0``)."""
        d = self.topology.by_id(ident)
        if d is None:
            raise KeyError(ident)
        return d.key

    @derived("paths")
    def _path_index(self) -> Mapping[tuple[str, str], Path]:
        """The scan's paths by their two device ids, both ways round."""
        return FrozenMap(path_index(self.paths))

    def path(self, a: str, b: str) -> Path | None:
        """The path between two GPUs/NICs named by id, key or BDF (either order); a VF's path
        is its PF's.  None when either is not a GPU or NIC the scan knows.  A NIC-NIC pair the
        scan left out (:data:`~topoagent.core.analysis.paths.NIC_PAIR_LIMIT`) is computed on request."""
        da, db = self.device(a), self.device(b)
        if da is None or db is None:
            return None
        pa, pb = self.topology.physical(da), self.topology.physical(db)
        if pa is pb or not {pa.kind, pb.kind} <= _PAIRED:
            return None
        return pair_path(self.topology, self._path_index, pa, pb)


def analyse(snapshot: Snapshot, *, tool_findings: Any = None) -> ScanResult:
    """Build the topology of a snapshot and analyse it.  Pure.

    ``tool_findings`` is a callable ``(topology, paths) -> findings`` that compares the result
    with another tool's view of the same host (``--cross-check``); its findings join the rest.
    """
    topo = build_topology(snapshot)
    note = matrix_vs_tree(topo)
    if note is not None:
        topo = msgspec.structs.replace(topo, snapshot=_note_on(snapshot, "nvidia-smi", note))
    paths = scan_paths(topo)
    rails = pair_rails(topo, paths)
    findings = find_all(topo, paths, rails)
    if tool_findings is not None:
        findings = sort_findings(findings + tuple(tool_findings(topo, paths)))
    return ScanResult(topo, paths, rails, findings, base_plan(topo, rails))


def reanalyse(result: ScanResult, ids: Mapping[str, Mapping[str, Any]]) -> ScanResult:
    """The facts of ``result`` analysed again with some functions' identifiers replaced: ``ids``
    maps a BDF to :class:`~topoagent.core.snapshot.PciFunction` fields (``vendor_id``,
    ``class_code`` ...) and their values.  Only what analysis makes is redone: no timings, and
    no findings of another tool's view (``tool_findings``); an expected topology ``result``
    was compared with (:func:`with_expected`) is compared with again, after the analysis, so
    its ``EXPECT_*`` findings and note are those of the new facts."""
    snap = result.snapshot
    pci = tuple(msgspec.structs.replace(f, **ids[f.bdf]) if f.bdf is not None and f.bdf in ids else f for f in snap.pci)
    redone = analyse(msgspec.structs.replace(snap, pci=pci))
    expected: Baseline | None = result.aside.notes.get("expected_from")
    return redone if expected is None else with_expected(redone, expected)


def failing(findings: tuple[Finding, ...], threshold: Severity, *, expect_warns: bool = False) -> tuple[Finding, ...]:
    """The findings at or above ``threshold``, in their order; with ``expect_warns`` (``--expect``
    without ``--fail-on``) an ``EXPECT_*`` warning too: asked whether the host is the build, a
    GPU at x8 or an added card answers no (a warning by severity, since the host still works).
    The one rule of every verdict: ``scan``'s and ``plan``'s exit status, ``health``'s drain,
    node-problem-detector's NonOK."""
    return tuple(
        f
        for f in findings
        if f.severity >= threshold
        or (expect_warns and CATALOGUE[f.code].family == "expect" and f.severity >= Severity.WARNING)
    )


def with_findings(result: ScanResult, found: tuple[Finding, ...]) -> ScanResult:
    """``result`` with more findings of the same host (the audit's, which read its processes)
    among its own, in the one order: every view of the result then carries them."""
    if not found:
        return result
    return msgspec.structs.replace(result, findings=sort_findings((*result.findings, *found)))


def with_timings(result: ScanResult, timings: Mapping[str, float]) -> ScanResult:
    """A copy of ``result`` that carries ``timings`` (outside its value; see :class:`ScanResult`)."""
    return msgspec.structs.replace(result, aside=result.aside.noting(timings=FrozenMap(timings)))


def with_expected(result: ScanResult, expected: Baseline) -> ScanResult:
    """``result`` with every difference from an expected topology added to its findings
    (``scan --expect``, the daemon's ``expect``; :func:`topoagent.core.findings.expect.compare_hosts`)
    and a note of what it was compared with (:attr:`ScanResult.expectation`)."""
    found = compare_hosts(expected, result.baseline)
    note = Expectation(
        host=expected.host,
        hw_class=expected.hw_class,
        fingerprint=expected.fingerprint,
        compared=comparable(expected, result.baseline),
        differences=len(found),
    )
    aside = result.aside.noting(expected=note, expected_from=expected)
    if not found:
        return msgspec.structs.replace(result, aside=aside)
    # Subjects as every other finding names them (device ids) where the slot is on this host;
    # the message and evidence keep the slots.
    ids = {slot: ident for ident, slot in slot_names(result.topology).items()}
    found = tuple(msgspec.structs.replace(f, subjects=tuple(ids.get(s, s) for s in f.subjects)) for f in found)
    return msgspec.structs.replace(result, findings=sort_findings((*result.findings, *found)), aside=aside)


def _note_on(snap: Snapshot, source: str, note: str) -> Snapshot:
    """The snapshot with ``source``'s status turned partial and ``note`` added to its detail."""
    sources = tuple(
        SourceStatus(s.name, "partial", f"{s.detail}; {note}" if s.detail else note) if s.name == source else s
        for s in snap.sources
    )
    return msgspec.structs.replace(snap, sources=sources)
