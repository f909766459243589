"""Structured events (structlog): JSON lines for machines, ``key=value`` lines for people.

JSON when the stream is not a terminal or the process runs under systemd (``$JOURNAL_STREAM``
or ``$INVOCATION_ID`` set: see systemd.exec(5), "Environment variables in spawned processes"),
so journald and log shippers get one parseable object per line; the console renderer on a
terminal.  The logger is built with :func:`structlog.wrap_logger`, not the global
``structlog.configure``, so the daemon never changes logging for a host program.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import IO, TYPE_CHECKING, Any, TextIO, cast

import structlog

if TYPE_CHECKING:
    from topoagent.features.daemon.changes import ScanChange

__all__ = ["log_change", "make_logger", "wants_json"]

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}


def wants_json(fmt: str, stream: IO[str], environ: Mapping[str, str] | None = None) -> bool:
    """Whether to write JSON lines: ``fmt`` is ``json``, or ``auto`` off a terminal or under systemd."""
    if fmt != "auto":
        return fmt == "json"
    env = os.environ if environ is None else environ
    if env.get("JOURNAL_STREAM") or env.get("INVOCATION_ID"):
        return True
    try:
        return not stream.isatty()
    except (AttributeError, ValueError):
        return True


def make_logger(fmt: str = "auto", stream: IO[str] | None = None, level: str = "info") -> Any:
    """A structlog logger writing one event per line to ``stream`` (stderr by default)."""
    out = stream if stream is not None else sys.stderr
    renderer: Any = (
        structlog.processors.JSONRenderer(default=str)
        if wants_json(fmt, out)
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    return structlog.wrap_logger(
        structlog.PrintLogger(cast("TextIO", out)),
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
    ).bind(logger="topoagent")


_CHANGE_LEVEL = {"info": "info", "warning": "warning", "critical": "critical"}


def log_change(log: Any, change: ScanChange) -> None:
    """One event per change: the event name is the change kind (``device_removed`` ...)."""
    fields = {k: v for k, v in change.as_dict().items() if k != "kind" and v not in (None, [], ())}
    getattr(log, _CHANGE_LEVEL.get(change.severity, "info"))(change.kind.value, **fields)
