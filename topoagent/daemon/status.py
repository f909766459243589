"""What the daemon knows at one moment, as one immutable value.

The loop builds a new :class:`Status` after every scan, link sample or export and swaps it in
with one assignment; the HTTP threads read whichever value is current.  No locks: a reader
never sees half an update.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from topoagent.frozen import FrozenMap
from topoagent.records import field, record

if TYPE_CHECKING:
    from topoagent.daemon.linkwatch import Judgement
    from topoagent.result import ScanResult

__all__ = ["Attempt", "Status"]


@record
class Attempt:
    """One scan attempt: when it started, whether it gave a result, how long it took."""

    at: float
    success: bool
    duration: float
    error: str | None = None
    trigger: str = "start"


@record
class Status:
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
    judgements: FrozenMap[str, Judgement] = field(default_factory=FrozenMap)
    #: export name (state, textfile, nfd) -> whether its last write worked.
    exports: FrozenMap[str, bool] = field(default_factory=FrozenMap)
    #: device key -> the display name its metric labels carry, bound at first sight
    #: (:func:`topoagent.daemon.labels.pin_names`): labels never renumber.
    names: FrozenMap[str, str] = field(default_factory=FrozenMap)

    @property
    def degraded(self) -> tuple[str, ...]:
        """Keys of the links judged degraded."""
        return tuple(k for k, j in self.judgements.items() if j.degraded)
