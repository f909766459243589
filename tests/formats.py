"""Every renderer of every command, by (command, format): what the tests that run all formats
walk.  The tables are the features' own (``FORMATS`` of each package)."""

from __future__ import annotations

from collections.abc import Callable

from topoagent.core.render import FORMATS as SCAN
from topoagent.features.draw import FORMATS as DRAW
from topoagent.features.plan import FORMATS as PLAN
from topoagent.features.vms import FORMATS as VMS

TABLES = {"scan": SCAN, "plan": PLAN, "draw": DRAW, "vms": VMS}
RENDERERS = {(command, fmt): fn for command, table in TABLES.items() for fmt, fn in table.items()}


def formats(command: str) -> tuple[str, ...]:
    """A command's formats, in the order its ``--help`` lists them."""
    return tuple(TABLES[command])


def renderer(command: str, fmt: str) -> Callable[..., str]:
    """The renderer of a command's format."""
    return TABLES[command][fmt]
