"""What the daemon knows at one moment, as one immutable value.

The loop builds a new :class:`Status` after every scan, link sample or export and swaps it in
with one assignment; the HTTP threads read whichever value is current.  No locks: a reader
never sees half an update.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from topoagent.core.frozen import FrozenMap

if TYPE_CHECKING:
    from topoagent.core.result import ScanResult
    from topoagent.features.audit.advise import AuditReport
    from topoagent.features.daemon.linkwatch import Judgement

__all__ = ["Attempt", "Status"]


class Attempt(msgspec.Struct, frozen=True):
    """One scan attempt: when it started, whether it gave a result, how long it took."""

    at: float
    success: bool
    duration: float
    error: str | None = None
    trigger: str = "start"


class Status(msgspec.Struct, frozen=True):
    """The last good result and everything counted about the daemon's scans."""

    started_at: float
    #: The last scan that succeeded (what every export shows), None before the first.
    result: ScanResult | None = None
    good_at: float | None = None
    good_duration: float | None = None
    last: Attempt | None = None
    scans_total: int = 0
    failures_total: int = 0
    changes_total: int = 0
    judgements: FrozenMap[str, Judgement] = msgspec.field(default_factory=FrozenMap)
    #: export name (state, textfile, nfd) -> whether its last write worked.
    exports: FrozenMap[str, bool] = msgspec.field(default_factory=FrozenMap)
    #: The configured seconds between timer scans (exported, so alerts scale with it).
    interval: float | None = None
    #: Physical GPUs this node should have: ``expected_gpus`` from the configuration, else the
    #: most seen (kept in the state directory across restarts); None before the first scan.
    expected_gpus: int | None = None
    #: device key -> the display name its metric labels carry, bound at first sight
    #: (:func:`topoagent.features.daemon.labels.pin_names`): labels never renumber.
    names: FrozenMap[str, str] = msgspec.field(default_factory=FrozenMap)
    #: The processes using each GPU as the last good scan's audit judged them (``topoagent
    #: audit``); None where the audit is off or failed.
    audit: AuditReport | None = None

    @property
    def degraded(self) -> tuple[str, ...]:
        """Keys of the links judged degraded."""
        return tuple(k for k, j in self.judgements.items() if j.degraded)
