"""Display names in metric labels that never renumber.

A device's display id (``gpu5``) is its position in PCI order among its kind, so it shifts
when a device before it disappears; a Prometheus series whose labels change is another series,
and a dashboard or alert keyed on ``gpu="gpu5"`` would silently follow another GPU.  The
daemon therefore binds each display name to the device's stable key (its BDF) the first time it
sees the device and keeps that binding for its lifetime: a GPU that disappears leaves a gap,
the others keep their names, and a device that appears later takes the next free number of its
kind.  Restarting the daemon starts afresh from the scan's own ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from topoagent.core.digits import trailing_number
from topoagent.core.frozen import FrozenMap
from topoagent.core.topology import Device

__all__ = ["pin_names"]


def pin_names(pinned: Mapping[str, str], devices: Iterable[Device]) -> FrozenMap[str, str]:
    """``pinned`` (key -> display name) extended by the devices it does not know yet: each
    keeps its scan id where no other key holds that name, else takes the next number of its
    kind above every number held.  Existing bindings never change."""
    out = dict(pinned)
    used = set(out.values())
    for d in devices:
        if d.key in out:
            continue
        name = d.id
        if name in used:
            prefix, _ = trailing_number(d.id)
            numbers = [n for p, n in map(trailing_number, used) if p == prefix and n is not None]
            name = f"{prefix}{max(numbers, default=-1) + 1}"
        out[d.key] = name
        used.add(name)
    return FrozenMap(out)
