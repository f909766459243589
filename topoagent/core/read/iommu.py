"""IOMMU groups: ``/sys/kernel/iommu_groups`` (drivers/iommu/iommu.c;
Documentation/ABI/testing/sysfs-kernel-iommu_groups).

The directory is absent without an IOMMU; each group's ``type`` (``identity``, ``DMA``,
``DMA-FQ``...) is optional (older kernels have none).
"""

from __future__ import annotations

from topoagent.core.hostfs import HostFS
from topoagent.core.read.attr import numbered
from topoagent.core.snapshot import IommuGroup

__all__ = ["IOMMU_GROUPS", "iommu_groups"]

IOMMU_GROUPS = "sys/kernel/iommu_groups"


def iommu_groups(fs: HostFS) -> tuple[IommuGroup, ...]:
    """The IOMMU groups and their types, by group number."""
    types = fs.texts_below(IOMMU_GROUPS, "type", lambda n: numbered(n, "") is not None)
    return tuple(IommuGroup(id=int(n), type=t) for n, t in sorted(types.items(), key=lambda kv: int(kv[0])))
