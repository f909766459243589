"""Sources: the only code that reads the host.  One module per kind of evidence, registered here.

A source is a module with ``collect(c: Collection) -> None`` that reads its evidence and adds
it to the collection (the snapshot so far, and parsed views of other tools for cross-checks);
:data:`SOURCES` says, in order, which sources a scan runs and when.  Adding a source is one
module and one line here.  :func:`topoagent.core.api.run` runs them, timing each.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from importlib import import_module
from typing import Any

import msgspec

from topoagent.core.inputs import NVML_AUTO, NVML_OFF, Inputs
from topoagent.core.snapshot import Snapshot

__all__ = ["NVML_RECORDING", "SOURCES", "Collection", "Registration", "is_live"]


class Collection(msgspec.Struct):
    """What the sources of one scan have gathered so far (mutable; lives for one scan).

    ``snapshot`` is None until a primary source (sysfs, or pasted text) sets it; later
    sources enrich it.  ``views`` holds other tools' parsed outputs for the cross-check.
    """

    inputs: Inputs
    snapshot: Snapshot | None = None
    views: dict[str, Any] = msgspec.field(default_factory=dict)

    def require_snapshot(self) -> Snapshot:
        """The snapshot so far; raises when no primary source has set it."""
        if self.snapshot is None:
            raise RuntimeError("a source ran before the primary source set the snapshot")
        return self.snapshot


class Registration(msgspec.Struct, frozen=True):
    """A source: its name, its module (imported only when it runs) and when it runs."""

    name: str
    module: str
    wanted: Callable[[Inputs], bool]

    def collector(self) -> Callable[[Collection], None]:
        """The source's ``collect`` function (importing its module now)."""
        fn: Callable[[Collection], None] = import_module(self.module).collect
        return fn


def is_live(inputs: Inputs) -> bool:
    """Whether the scan reads the machine it runs on (``--root /``, nothing pasted)."""
    return not inputs.offline and os.path.realpath(inputs.root) == "/"


#: Where a capture keeps NVML's view (``topoagent capture``), below its root.
NVML_RECORDING = "tools/nvml.json"


def _nvml_wanted(inputs: Inputs) -> bool:
    # Under a non-live root, "auto" replays the NVML recording a capture holds; where there is
    # none the source would add nothing, and is not even imported.
    if inputs.offline or inputs.nvml in (NVML_OFF, None, False):
        return False
    if inputs.nvml == NVML_AUTO and not is_live(inputs):
        from topoagent.core.hostfs import HostFS

        return HostFS(inputs.root).exists(NVML_RECORDING)
    return True


#: The sources, in the order they run.
SOURCES: tuple[Registration, ...] = (
    Registration("sysfs", "topoagent.core.read.sysfs", lambda i: not i.offline),
    Registration("offline", "topoagent.core.paste", lambda i: i.offline),
    Registration("nvml", "topoagent.core.read.nvml", _nvml_wanted),
    Registration("cross-check", "topoagent.core.read.tools", lambda i: i.cross_check),
)
