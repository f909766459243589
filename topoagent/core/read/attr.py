"""One sysfs or procfs attribute file, read and parsed: the rule every directory's reader follows.

An optional file that is absent is normal (None, nothing recorded: as prometheus/procfs skips
``os.IsNotExist``); a required one that is absent is a probe error, so the source reports
itself partial instead of guessing; a file that cannot be read, or whose text does not parse,
is a probe error and an unknown value.  The scan carries on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from topoagent.core.digits import decimal
from topoagent.core.hostfs import HostFS

__all__ = ["numbered", "parsed", "value"]

T = TypeVar("T")


def numbered(name: str, prefix: str) -> int | None:
    """The number of a numbered sysfs directory (``node3`` -> 3 with prefix ``node``), as the
    kernel writes it (ASCII digits, no leading zero); None for any other name."""
    text = name[len(prefix) :] if name.startswith(prefix) else ""
    return decimal(text, digits=7) if text == "0" or not text.startswith("0") else None


def value(fs: HostFS, rel: str, parse: Callable[[str], T], *, quiet: bool = False) -> T | None:
    """Read and parse one optional attribute file; None when absent, unreadable or unparsable
    (``quiet``: a failed read is not recorded, for files whose read fails in normal operation)."""
    return parsed(fs, rel, fs.text(rel, quiet=quiet), parse)


def parsed(
    fs: HostFS, rel: str, text: str | None, parse: Callable[[str], T], *, required_by: str | None = None
) -> T | None:
    """The value of ``rel``, its text already read (None: absent or unreadable).

    ``required_by`` names what always has the file (``"PCI function"``): then its absence is
    recorded too.
    """
    if text is None:
        if required_by is not None and not _lost(fs, rel):
            # A read that failed is lost whatever a later look finds: a file that is back
            # by now went away while it was read (hotplug, a driver rebinding).
            fs.record(
                rel,
                f"missing (every {required_by} has this file)"
                if not fs.exists(rel)
                else "missing when read, present after: changed during the scan",
            )
        return None
    try:
        return parse(text)
    except ValueError as exc:
        fs.record(rel, f"unparsable: {exc}")
        return None


def _lost(fs: HostFS, rel: str) -> bool:
    """Whether a failed read of ``rel`` is recorded already."""
    path = fs.host_path(rel)
    return any(e.path == path for e in fs.errors)
