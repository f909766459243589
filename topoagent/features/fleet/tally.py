"""Many hosts grouped by hardware class and fingerprint, and why each odd one out differs.

:class:`FleetTally` takes hosts one at a time (:meth:`FleetTally.add`) and keeps, per
(class, fingerprint), the host names and one representative's slot facts -- hosts with one
fingerprint have the same facts, so one stands for all: memory is one host plus the summaries,
cost linear in hosts.  :meth:`FleetTally.verdict` then compares each minority fingerprint with
its class's majority (or an explicit expectation) through :func:`topoagent.core.findings.expect.compare`,
once per fingerprint, so ``fleet`` speaks the findings of ``scan --expect``.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from topoagent.core.analysis.fingerprint import Baseline
from topoagent.core.findings import Finding
from topoagent.core.findings.expect import compare, knows_more

__all__ = ["FleetClass", "FleetTally", "FleetVerdict", "Outlier"]


class FleetClass(msgspec.Struct, frozen=True):
    """The hosts of one hardware class that share one fingerprint."""

    hw_class: str
    fingerprint: str
    hosts: tuple[str, ...]
    #: Whether this is the class's expected fingerprint (its majority, or the --expect file's).
    expected: bool
    #: Whether its facts agree with the expectation wherever both sides know them: true for the
    #: expected fingerprint, and for one that differs only in facts it could not read itself
    #: (a scan without root or NVML); such hosts are no outliers.  A class that knows a fact the
    #: expectation leaves unknown never matches (its fault there could not be seen).
    matches: bool = True


class Outlier(msgspec.Struct, frozen=True):
    """A host outside its class's expected fingerprint, and every difference."""

    host: str
    hw_class: str
    fingerprint: str
    findings: tuple[Finding, ...]


class FleetVerdict(msgspec.Struct, frozen=True):
    """The fleet: how many hosts, the (class, fingerprint) groups, the outliers."""

    hosts: int
    classes: tuple[FleetClass, ...]
    outliers: tuple[Outlier, ...]


class FleetTally:
    """The running summary of a fleet (see the module docstring)."""

    def __init__(self, expected: Baseline | None = None) -> None:
        self.expected = expected
        self.count = 0
        #: (class, fingerprint) -> host names, in the order first seen.
        self.hosts: dict[tuple[str, str], list[str]] = {}
        #: (class, fingerprint) -> one representative's facts.
        self.facts: dict[tuple[str, str], Baseline] = {}

    def add(self, host: str, hw_class: str, fingerprint: str, facts: Callable[[], Baseline]) -> None:
        """Count one host; ``facts`` is called only for a fingerprint not seen yet."""
        key = (hw_class, fingerprint)
        names = self.hosts.get(key)
        if names is None:
            names = self.hosts[key] = []
            self.facts[key] = facts()
        names.append(host)
        self.count += 1

    def _expectation(self, hw_class: str) -> Baseline:
        if self.expected is not None:
            return self.expected
        groups = [(len(h), k) for k, h in self.hosts.items() if k[0] == hw_class]
        # The most hosts; a tie goes to the fingerprint seen first (dicts keep that order).
        best = max(groups, key=lambda g: g[0])[1]
        return self.facts[best]

    def verdict(self) -> FleetVerdict:
        """Groups and outliers, classes by size (largest first), outliers by class then name."""
        classes: list[FleetClass] = []
        outliers: list[Outlier] = []
        sizes: dict[str, int] = {}
        for (hw, _), names in self.hosts.items():
            sizes[hw] = sizes.get(hw, 0) + len(names)
        for (hw, fp), names in sorted(self.hosts.items(), key=lambda kv: (-sizes[kv[0][0]], kv[0][0], -len(kv[1]))):
            want = self._expectation(hw)
            # Another fingerprint with no difference where both sides are known (a scan without
            # root reads no ACS, one without NVML counts no NVLinks) is no odd host: nothing to
            # act on.  Its class still shows its own fingerprint.  Not so a group that knows
            # what the expectation does not (root scans against a majority scanned without
            # root): its silence would hide a fault, so it stays an outlier.
            facts = self.facts[(hw, fp)]
            ok = fp == want.fingerprint
            found = () if ok else compare(want, facts)
            matches = ok or (not found and not knows_more(facts, want))
            classes.append(FleetClass(hw, fp, tuple(names), ok, matches))
            if not matches:
                outliers.extend(Outlier(h, hw, fp, found) for h in names)
        outliers.sort(key=lambda o: (o.hw_class, o.host))
        return FleetVerdict(self.count, tuple(classes), tuple(outliers))
