"""Parse KFD's topology files (``/sys/class/kfd/kfd/topology/nodes/N/properties`` and
``io_links/M/properties``): one ``name value`` line per property, as the kernel prints them
(drivers/gpu/drm/amd/amdkfd/kfd_topology.c, ``sysfs_show_32bit_prop`` / ``_64bit_prop``)::

    cpu_cores_count 0
    simd_count 1216
    ...
    location_id 3072
    domain 0
    drm_render_minor 128
    hive_id 5533232834312453297

Pure: text in, values out.
"""

from __future__ import annotations

from topoagent.core.digits import decimal

__all__ = ["bdf_of", "gfx_name", "parse_properties"]

#: The largest value a property holds (``sysfs_show_64bit_prop``: an unsigned 64-bit number).
_U64 = (1 << 64) - 1


def parse_properties(text: str) -> dict[str, int]:
    """The properties of one KFD file; ValueError for a line that is no ``name value`` pair
    of a name and an unsigned decimal number."""
    out: dict[str, int] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        name, _, value = line.partition(" ")
        number = decimal(value.strip())
        if not name or number is None or number > _U64:
            raise ValueError(f"not a 'name value' property line: {line[:60]!r}")
        out[name] = number
    return out


def bdf_of(domain: int, location_id: int) -> str:
    """A GPU node's PCI address: KFD's ``location_id`` is the function's routing ID, bus
    above the device and function (``pci_dev_id``: ``bus << 8 | devfn``), and ``domain``
    its PCI domain (kfd_topology.c, ``kfd_topology_add_device``)."""
    return f"{domain:04x}:{location_id >> 8 & 0xFF:02x}:{location_id >> 3 & 0x1F:02x}.{location_id & 7}"


def gfx_name(version: int) -> str | None:
    """The gfx target of a ``gfx_target_version`` (``90402`` -> ``gfx942``: major, minor and
    stepping as decimal pairs, the name prints minor and stepping in hex); None for 0 (a CPU)."""
    if version <= 0:
        return None
    major, rest = divmod(version, 10000)
    minor, stepping = divmod(rest, 100)
    return f"gfx{major}{minor:x}{stepping:x}"
