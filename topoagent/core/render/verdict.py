"""The words every text output uses for a scan's verdict beside its findings: what is unknown
(:attr:`~topoagent.core.result.ScanResult.unknown`) and which GPUs are unusable
(:attr:`~topoagent.core.result.ScanResult.unusable`), so the tree, the matrix, the plan and
the audit say them alike.  Values in, text out."""

from __future__ import annotations

from topoagent.core.analysis.unknown import Unknown
from topoagent.core.render.escape import shown
from topoagent.core.result import ScanResult

__all__ = ["unknown_line", "unusable_line", "unusable_words"]


def _span(ids: tuple[str, ...]) -> str:
    """Ids as a person reads them: all of them up to four, else the first three and a count."""
    return ", ".join(ids) if len(ids) <= 4 else f"{', '.join(ids[:3])} and {len(ids) - 3} more"


def _said(u: Unknown) -> str:
    return f"{u.fact} ({_span(u.subjects) + ': ' if u.subjects else ''}{u.why})"


def unknown_line(result: ScanResult) -> str | None:
    """``Unknown: nvlinks (gpu0, gpu1 ...: why); acs (...)``; None when nothing is unknown."""
    if not result.unknown:
        return None
    return shown("Unknown: " + "; ".join(_said(u) for u in result.unknown))


def unusable_words(result: ScanResult, gpu: str) -> str | None:
    """``unusable: FELL_OFF_BUS`` for a GPU the findings make unusable, else None."""
    codes = result.unusable.get(gpu)
    return f"unusable: {', '.join(codes)}" if codes else None


def unusable_line(result: ScanResult) -> str | None:
    """``Unusable: gpu0 (FELL_OFF_BUS) ...``: the GPUs no plan places work on; None when every
    GPU is usable."""
    if not result.unusable:
        return None
    return "Unusable: " + ", ".join(f"{g} ({', '.join(codes)})" for g, codes in result.unusable.items())
