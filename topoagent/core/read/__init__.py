"""Sources: the only code that reads the host.  One module per kind of evidence.

A source is a module with ``collect(c: Collection) -> None`` that reads its evidence and adds
it to the collection (the snapshot so far, and parsed views of other tools for cross-checks);
:data:`topoagent.core.api.SOURCES` says, in order, which sources a scan runs and when.  Adding
a source is one module and one line there.

The sysfs source (:mod:`.sysfs`) composes one reader per kernel directory, each with its table
of required and optional files: :mod:`.pci`, :mod:`.node`, :mod:`.cpu`, :mod:`.net`,
:mod:`.infiniband`, :mod:`.iommu`, :mod:`.modules`, :mod:`.dmi`, :mod:`.hypervisor`,
:mod:`.proc`; :mod:`.attr` is the rule they share for one file.
"""

from __future__ import annotations

from typing import Any

import msgspec

from topoagent.core.inputs import Inputs
from topoagent.core.snapshot import Snapshot
from topoagent.core.tree import is_this_host

__all__ = ["NVML_RECORDING", "Collection", "is_live"]


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


def is_live(inputs: Inputs) -> bool:
    """Whether the scan reads the machine it runs on (``--root /``, nothing pasted)."""
    return not inputs.offline and is_this_host(inputs.root)


#: Where a capture keeps NVML's view (``topoagent capture``), below its root.
NVML_RECORDING = "tools/nvml.json"
