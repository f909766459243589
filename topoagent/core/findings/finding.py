"""The finding types: :class:`Severity`, :class:`Evidence` and :class:`Finding`, and the one order.

A finding is a claim someone acts on (the daemon pages on it, ``health`` drains on it,
``--fail-on`` stops a pipeline on it): it names the evidence that proves it, and its wording,
severity and remedy come from its code's entry in :mod:`~topoagent.core.findings.catalogue`.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum

import msgspec

from topoagent.core.topology import id_key


class Severity(IntEnum):
    """How bad a finding is; ordered, so ``>=`` compares with ``--fail-on``."""

    INFO = 0
    WARNING = 1
    CRITICAL = 2

    @property
    def label(self) -> str:
        """The severity's name as the JSON contract spells it (``critical``)."""
        return self.name.lower()

    @classmethod
    def parse(cls, text: str) -> Severity:
        """A severity from its name (``warning`` -> WARNING)."""
        return cls[text.upper()]


class Evidence(msgspec.Struct, frozen=True):
    """A fact that proves a finding: where it was read and what it said."""

    path: str
    value: str | None


class Finding(msgspec.Struct, frozen=True):
    """A fault found on the host: stable ``code``, ``severity``, ``subjects`` (device ids),
    a one-sentence ``message``, the ``evidence`` that proves it and a concrete ``remedy``."""

    code: str
    severity: Severity
    subjects: tuple[str, ...]
    message: str
    evidence: tuple[Evidence, ...]
    remedy: str


def sort_findings(found: Iterable[Finding]) -> tuple[Finding, ...]:
    """Most severe first, then by code and subjects: the one order every output uses."""
    return tuple(sorted(found, key=lambda f: (-f.severity, f.code, [id_key(s) for s in f.subjects])))
