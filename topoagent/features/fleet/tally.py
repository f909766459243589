"""Many hosts grouped by hardware class and fingerprint, and why each odd one out differs.

:class:`FleetTally` takes hosts one at a time (:meth:`FleetTally.add`) and keeps, per (class,
fingerprint), the hosts (name and file) and one representative's facts -- hosts with one
fingerprint have the same facts, so one stands for all.  Fingerprints are computed here from the
facts each file holds, never taken from the file (one claiming the majority's fingerprint over
other slots hid its own fault and became the expectation); a slot list is decoded once however
many files hold it byte for byte.  Memory is the distinct slot lists plus the host names, cost
linear in hosts.

:meth:`FleetTally.verdict` then decides, per class, what is expected -- whatever the order the
hosts came in:

* a class that is another class less one GPU model, or with a part nobody could read (``unknown
  CPU``: a capture made before the CPU's name was kept), is compared with that class's hosts
  when it is the smaller (:func:`~topoagent.core.analysis.fingerprint.class_related`);
* fingerprints whose facts agree wherever both know them (a scan without root knows no ACS, one
  without NVML no NVLinks) form one *cluster*; the largest cluster is the majority, and its
  expectation is its facts with every fact one group leaves unknown taken from the groups that
  know it (their most common value): a host that knows more is never an outlier for what the
  others do not know, and a root host's ACS fault is still seen among hosts scanned without root;
* no single largest cluster (a tie) is no majority: the class says so and each side is compared
  with the other, so ``fleet a.json b.json`` and ``fleet b.json a.json`` say the same;
* ``--expect`` replaces all of that with the file's facts;
* a host whose own scan reports a fault (a critical finding, or a PCIe fault: fallen off the
  bus, a degraded link, AER errors) that most of its class does not is an outlier too, with
  those findings shown beside its differences.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable

import msgspec

from topoagent.core.analysis.fingerprint import class_related
from topoagent.core.baseline import (
    NO_SLOTS,
    Baseline,
    FindingView,
    RawDoc,
    SlotFacts,
    decode_slots,
    fingerprint,
    fingerprint_of,
)
from topoagent.core.findings import CATALOGUE, Finding
from topoagent.core.findings.expect import compare, upgraded

__all__ = ["ClassSummary", "FleetClass", "FleetTally", "FleetVerdict", "HostRef", "Outlier", "own_fault"]


class HostRef(msgspec.Struct, frozen=True, order=True):
    """A host as the fleet names it: its name (the file's, or the file name for a capture) and
    the file it came from."""

    name: str
    file: str


class FleetClass(msgspec.Struct, frozen=True):
    """The hosts of one hardware class that share one fingerprint."""

    hw_class: str
    fingerprint: str
    hosts: tuple[str, ...]
    #: Whether this is the expected fingerprint (the majority's facts, or the --expect file's).
    expected: bool
    #: Whether its facts agree with the expectation wherever both sides know them.
    matches: bool = True
    #: The class it was compared with where that is another (a class less one GPU model, or
    #: one with an unknown part), else None.
    compared_with: str | None = None


class Outlier(msgspec.Struct, frozen=True):
    """A host that differs from what its class expects, or reports a fault of its own."""

    host: str
    file: str
    hw_class: str
    fingerprint: str
    #: ``differs`` (from the majority or --expect), ``no majority`` (its class has none: compared
    #: with the other side) or ``own findings`` (only its own scan's faults).
    reason: str
    findings: tuple[Finding, ...]
    #: The faults its own scan reports that most of its class does not.
    own: tuple[FindingView, ...] = ()


class ClassSummary(msgspec.Struct, frozen=True):
    """One class as compared: how many hosts, whether it had a majority, its expected
    fingerprint, and the faults most of its hosts report (a class-wide condition, shown once)."""

    hw_class: str
    hosts: int
    majority: bool
    expected: str | None
    #: (code, hosts) of the findings more than half the class's hosts report themselves.
    class_findings: tuple[tuple[str, int], ...] = ()


class FleetVerdict(msgspec.Struct, frozen=True):
    """The fleet: how many hosts, the (class, fingerprint) groups, the outliers."""

    hosts: int
    classes: tuple[FleetClass, ...]
    outliers: tuple[Outlier, ...]
    summaries: tuple[ClassSummary, ...] = ()
    #: Host names more than one file claims, with the files (sorted).
    duplicates: tuple[tuple[str, tuple[str, ...]], ...] = ()


def own_fault(f: FindingView) -> bool:
    """Whether a host's own finding is a fault the fleet shows beside its differences: any
    critical, and the PCIe family's (fallen off the bus, a degraded link, AER errors) -- never an
    ``EXPECT_*`` one, which says what the host's own expectation found."""
    family = entry.family if (entry := CATALOGUE.get(f.code)) is not None else None
    return family != "expect" and (f.severity == "critical" or (family == "pcie" and f.severity == "warning"))


class _Group:
    """The hosts of one (class, fingerprint) and their facts."""

    __slots__ = ("facts", "hosts")

    def __init__(self, facts: Baseline) -> None:
        self.facts = facts
        self.hosts: list[HostRef] = []


def _agree(a: Baseline, b: Baseline) -> bool:
    return not compare(a, b) and not compare(b, a)


_UNKNOWN = object()


def _vote(values: Iterable[tuple[object, int]]) -> object:
    """The value most hosts give (``None`` values do not vote); ``_UNKNOWN`` on a tie or none."""
    count: Counter[bytes] = Counter()
    first: dict[bytes, object] = {}
    for value, hosts in values:
        if value is None:
            continue
        key = msgspec.json.encode(value)
        count[key] += hosts
        first.setdefault(key, value)
    ranked = count.most_common(2)
    if not ranked or (len(ranked) == 2 and ranked[0][1] == ranked[1][1]):
        return _UNKNOWN
    return first[ranked[0][0]]


_FILLED = ("acs", "iommu", "nvlinks")


def _filled_slot(s: SlotFacts, others: list[tuple[dict[str, SlotFacts], int]]) -> SlotFacts:
    changes: dict[str, object] = {}
    for field in _FILLED:
        if getattr(s, field) is not None:
            continue
        value = _vote((getattr(o, field), n) for slots, n in others if (o := slots.get(s.slot)) is not None)
        if value is not _UNKNOWN:
            changes[field] = value
    return msgspec.structs.replace(s, **changes) if changes else s


def _merged(cluster: list[_Group]) -> Baseline:
    """The cluster's expectation: its largest group's facts, with each fact that group leaves
    unknown taken from the groups that know it (weighted by hosts; a tie leaves it unknown)."""
    base = cluster[0].facts
    others = [({s.slot: s for s in g.facts.slots}, len(g.hosts)) for g in cluster[1:]]
    slots = [_filled_slot(s, others) for s in base.slots] if others else base.slots
    peers = base.peer_memory
    if peers is None:
        vote = _vote((g.facts.peer_memory, len(g.hosts)) for g in cluster)
        peers = None if vote is _UNKNOWN else vote  # type: ignore[assignment]
    shape = base.shape
    if shape is None:
        voted = _vote((g.facts.shape, len(g.hosts)) for g in cluster)
        shape = None if voted is _UNKNOWN else voted  # type: ignore[assignment]
    return msgspec.structs.replace(
        base, slots=slots, peer_memory=peers, shape=shape, fingerprint=fingerprint(peers, slots, shape)
    )


def _clusters(groups: list[_Group]) -> list[list[_Group]]:
    """Groups whose facts agree with a seed's, seeds the largest group left (then by
    fingerprint, so the input order never decides); stops once what is left cannot tie."""
    left = sorted(groups, key=lambda g: (-len(g.hosts), g.facts.fingerprint))
    out: list[list[_Group]] = []
    best = 0
    while left and sum(len(g.hosts) for g in left) >= best:
        seed, rest = left[0], left[1:]
        cluster = [seed] + [g for g in rest if _agree(seed.facts, g.facts)]
        out.append(cluster)
        best = max(best, sum(len(g.hosts) for g in cluster))
        left = [g for g in rest if g not in cluster]
    return out


def _upgrade_old(groups: list[_Group]) -> None:
    """Rename the root buses of groups written before they were numbered across the host (no
    ``shape``: an old ``state.json``) as the largest group that records its shape names them
    (:func:`~topoagent.core.findings.expect.upgraded`), so that a fleet halfway through an
    upgrade compares its old and new documents; their fingerprints are recomputed."""
    new = sorted((g for g in groups if g.facts.shape is not None), key=lambda g: (-len(g.hosts), g.facts.fingerprint))
    if not new:
        return
    ref = new[0].facts
    for g in groups:
        if g.facts.shape is None:
            facts = upgraded(g.facts, ref)
            if facts is not g.facts:
                fp = fingerprint(facts.peer_memory, facts.slots, facts.shape)
                g.facts = msgspec.structs.replace(facts, fingerprint=fp)


def _size(cluster: list[_Group]) -> int:
    return sum(len(g.hosts) for g in cluster)


class FleetTally:
    """The running summary of a fleet (see the module docstring)."""

    def __init__(self, expected: Baseline | None = None) -> None:
        self.expected = expected
        self.count = 0
        #: (class, fingerprint) -> its group, in no order that matters.
        self.groups: dict[tuple[str, str], _Group] = {}
        #: SHA-256 of a slot list's JSON -> the list decoded and encoded canonically.
        self._slots: dict[bytes, tuple[list[SlotFacts], bytes]] = {}
        #: Host -> the faults its own scan reports (only hosts that report any).
        self.own: dict[HostRef, tuple[FindingView, ...]] = {}
        #: Host name -> every file that claims it.
        self.files: dict[str, list[str]] = {}

    def _facts(self, raw: bytes) -> tuple[list[SlotFacts], bytes]:
        key = hashlib.sha256(raw).digest()
        known = self._slots.get(key)
        if known is None:
            slots = sorted(decode_slots(raw), key=lambda s: s.slot)
            known = self._slots[key] = (slots, msgspec.json.encode(slots))
        return known

    def add(self, name: str, file: str, doc: RawDoc) -> None:
        """Count one host from its document (:func:`~topoagent.core.baseline.read_head`);
        raises ``ValueError`` or ``msgspec`` errors, counting nothing, when its facts cannot be read."""
        hw, peers, shape = doc.identity
        if hw is None or doc.slots is None:
            raise ValueError(NO_SLOTS)
        slots, encoded = self._facts(doc.slots)
        fp = fingerprint_of(peers, shape, encoded)
        group = self.groups.get((hw, fp))
        if group is None:
            facts = Baseline(host=name, hw_class=hw, fingerprint=fp, peer_memory=peers, shape=shape, slots=slots)
            group = self.groups[(hw, fp)] = _Group(facts)
        ref = HostRef(name, file)
        group.hosts.append(ref)
        own = tuple(f for f in doc.findings if own_fault(f))
        if own:
            self.own[ref] = own
        self.files.setdefault(name, []).append(file)
        self.count += 1

    def add_facts(self, name: str, file: str, facts: Baseline, own: tuple[FindingView, ...] = ()) -> None:
        """Count one host from facts already decoded (their fingerprint recomputed)."""
        fp = fingerprint(facts.peer_memory, facts.slots, facts.shape)
        group = self.groups.get((facts.hw_class, fp))
        if group is None:
            group = self.groups[(facts.hw_class, fp)] = _Group(msgspec.structs.replace(facts, fingerprint=fp))
        ref = HostRef(name, file)
        group.hosts.append(ref)
        if own:
            self.own[ref] = tuple(f for f in own if own_fault(f))
        self.files.setdefault(name, []).append(file)
        self.count += 1

    # -- the verdict ------------------------------------------------------------------------------

    def _homes(self) -> dict[str, str]:
        """Each class -> the class its hosts are compared with: itself, or the largest class it
        is related to that has more hosts (:func:`class_related`)."""
        sizes: Counter[str] = Counter()
        for (hw, _), g in self.groups.items():
            sizes[hw] += len(g.hosts)
        order = sorted(sizes, key=lambda hw: (-sizes[hw], hw))
        home: dict[str, str] = {}
        for i, hw in enumerate(order):
            bigger = [b for b in order[:i] if sizes[b] > sizes[hw] and class_related(hw, b)]
            home[hw] = home[bigger[0]] if bigger else hw
        return home

    def _display(self) -> dict[HostRef, str]:
        """How each host is named in the report: by name, or ``name (file)`` where several files
        claim the name (a file claiming a healthy host's name must not put its fault there)."""
        return {
            ref: ref.name if len(self.files[ref.name]) == 1 else f"{ref.name} ({ref.file})"
            for g in self.groups.values()
            for ref in g.hosts
        }

    def verdict(self) -> FleetVerdict:
        """Groups, outliers and per-class summaries, each in a fixed order (classes by size,
        largest first; outliers by class, then name and file)."""
        homes = self._homes()
        by_home: dict[str, list[_Group]] = {}
        for (hw, _), g in self.groups.items():
            by_home.setdefault(homes[hw], []).append(g)
        for gs in by_home.values():
            _upgrade_old(gs)
        names = self._display()
        classes: list[FleetClass] = []
        outliers: list[Outlier] = []
        summaries: list[ClassSummary] = []
        for home in sorted(by_home, key=lambda h: (-sum(len(g.hosts) for g in by_home[h]), h)):
            judged = _Judged(self, home, by_home[home], names)
            classes += judged.classes
            outliers += judged.outliers
            summaries.append(judged.summary)
        outliers.sort(key=lambda o: (o.hw_class, o.host, o.file))
        duplicates = tuple((n, tuple(sorted(f))) for n, f in sorted(self.files.items()) if len(f) > 1)
        return FleetVerdict(self.count, tuple(classes), tuple(outliers), tuple(summaries), duplicates)


class _Judged:
    """One home class judged: its expectation, groups and outliers."""

    def __init__(self, tally: FleetTally, home: str, groups: list[_Group], names: dict[HostRef, str]) -> None:
        self.home = home
        self.names = names
        hosts = sum(len(g.hosts) for g in groups)
        wide = self._class_wide(tally, groups, hosts)
        want, sides = self._expectations(tally.expected, groups)
        self.classes: list[FleetClass] = []
        self.outliers: list[Outlier] = []
        for g in sorted(groups, key=lambda g: (-len(g.hosts), g.facts.fingerprint)):
            found, reason = self._judge(g, want, sides)
            fp = g.facts.fingerprint
            expected = want is not None and fp == want.fingerprint
            hw = g.facts.hw_class
            shown = tuple(sorted(names[r] for r in g.hosts))
            self.classes.append(FleetClass(hw, fp, shown, expected, not found, None if hw == home else home))
            for ref in g.hosts:
                own = tuple(f for f in tally.own.get(ref, ()) if f.code not in wide)
                if found or own:
                    why = reason if found else "own findings"
                    self.outliers.append(Outlier(names[ref], ref.file, hw, fp, why, found, own))
        self.summary = ClassSummary(
            home,
            hosts,
            majority=want is not None,
            expected=want.fingerprint if want is not None else None,
            class_findings=tuple(sorted(wide.items())),
        )

    @staticmethod
    def _class_wide(tally: FleetTally, groups: list[_Group], hosts: int) -> dict[str, int]:
        """Codes more than half the class's hosts report themselves: a class-wide condition."""
        count: Counter[str] = Counter()
        for g in groups:
            for ref in g.hosts:
                count.update({f.code for f in tally.own.get(ref, ())})
        return {code: n for code, n in count.items() if 2 * n > hosts}

    @staticmethod
    def _expectations(
        expected: Baseline | None, groups: list[_Group]
    ) -> tuple[Baseline | None, list[tuple[list[_Group], Baseline]]]:
        """The class's expectation (None: no majority) and, without one, each tied side with
        its own expectation."""
        if expected is not None:
            return expected, []
        clusters = _clusters(groups)
        top = max(_size(c) for c in clusters)
        tied = sorted((c for c in clusters if _size(c) == top), key=lambda c: c[0].facts.fingerprint)
        if len(tied) == 1:
            return _merged(tied[0]), []
        return None, [(c, _merged(c)) for c in tied]

    @staticmethod
    def _judge(
        g: _Group, want: Baseline | None, sides: list[tuple[list[_Group], Baseline]]
    ) -> tuple[tuple[Finding, ...], str]:
        """A group's differences from the expectation; without a majority, from the other side
        (a group on no side: from the side it differs least from)."""
        if want is not None:
            return (() if g.facts.fingerprint == want.fingerprint else compare(want, g.facts)), "differs"
        others = [exp for members, exp in sides if g not in members]
        found = min((compare(exp, g.facts) for exp in others), key=len)
        return found, "no majority"
