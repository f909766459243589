"""What ``scan --exit-codes nagios|npd`` prints: a monitoring check's status text.

Nagios (Nagios Plugin API, "Plugin Output"; the Monitoring Plugins Development Guidelines): the
first line is ``SERVICE STATUS - text | perfdata``, with perfdata ``'label'=value[UOM];[warn];
[crit];[min];[max]``; further lines are long output; a ``|`` anywhere in the text would start
perfdata, so none is written there.  Exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.

node-problem-detector custom plugins (kubernetes/node-problem-detector,
docs/custom_plugin_monitor.md and pkg/custompluginmonitor): exit 0 OK, 1 NonOK, anything else
Unknown; stdout is the condition's message, cut to ``maxOutputLength`` (80 by default), so the
first 80 characters name the fault.
"""

from __future__ import annotations

from topoagent.core.findings import Finding, Severity
from topoagent.core.result import ScanResult

__all__ = ["NAGIOS_EXIT", "NPD_LIMIT", "nagios_text", "nagios_unknown", "npd_text"]

#: Nagios exit code of the worst finding (None: no finding).
NAGIOS_EXIT = {None: 0, Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}
_NAGIOS_WORD = {0: "OK", 1: "WARNING", 2: "CRITICAL", 3: "UNKNOWN"}
#: node-problem-detector's default ``maxOutputLength``.
NPD_LIMIT = 80
#: Findings named on the first line (the rest are counted, and listed in the long output).
_NAMED = 3


def _clean(text: str) -> str:
    """One line without ``|`` (Nagios's perfdata separator) or control characters."""
    return " ".join("".join(ch if ch.isprintable() else " " for ch in text).replace("|", "/").split())


def _ordered(result: ScanResult) -> list[Finding]:
    return sorted(result.findings, key=lambda f: -int(f.severity))


#: Subjects named per finding in a short text (the rest are counted).
_SUBJECTS = 3


def _named(f: Finding, every: bool = False) -> str:
    """``CODE subject ...``: the first few subjects, or ``every`` one (for the long output)."""
    subjects = list(f.subjects if every or len(f.subjects) <= _SUBJECTS else f.subjects[:_SUBJECTS])
    if len(subjects) < len(f.subjects):
        subjects.append(f"+{len(f.subjects) - len(subjects)}")
    return _clean(" ".join((f.code, *subjects)))


def nagios_text(result: ScanResult) -> tuple[str, int]:
    """The plugin output (status line, perfdata, long output) and its exit code."""
    code = NAGIOS_EXIT[result.worst()]
    counts = result.counts()
    shown = [f for f in _ordered(result) if f.severity >= Severity.WARNING] or _ordered(result)
    summary = ", ".join(f"{n} {label}" for label, n in counts.items() if n or label != "info")
    if not result.findings:
        summary = "no findings"
    named = ", ".join(_named(f) for f in shown[:_NAMED])
    if len(shown) > _NAMED:
        named += f" and {len(shown) - _NAMED} more"
    text = summary + (f": {named}" if named else "")
    perf = " ".join(f"{label}={n};;;0" for label, n in counts.items())
    lines = [f"TOPOAGENT {_NAGIOS_WORD[code]} - {text} | {perf}"]
    lines += [_clean(f"{f.severity.label.upper()} {_named(f, every=True)}: {f.message}") for f in _ordered(result)]
    return "\n".join(lines) + "\n", code


def nagios_unknown(message: str) -> str:
    """The UNKNOWN line of a check that could not run."""
    return f"TOPOAGENT UNKNOWN - {_clean(message)}\n"


def npd_text(result: ScanResult, fail_on: Severity) -> tuple[str, int]:
    """node-problem-detector's message (fault first, within :data:`NPD_LIMIT`) and exit code:
    1 (NonOK) when a finding is at or above ``fail_on``."""
    bad = sorted(result.failing(fail_on), key=lambda f: -int(f.severity))
    if not bad:
        return f"topoagent: no finding at or above {fail_on.label}\n", 0
    head = _named(bad[0])
    rest = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
    text = head + rest
    if len(text) > NPD_LIMIT:  # the fault's code and first device always fit
        text = text[: NPD_LIMIT - 3].rstrip() + "..."
    return text + "\n", 1
