"""Names from the pci.ids database of the machine doing the analysis.

Pasted ``lspci`` output names a device ``NVIDIA Corporation Device 2335`` when the pasting
host's pci.ids was older than the part.  The analysing machine may know it: its
``/usr/share/misc/pci.ids`` (Debian's ``pci.ids`` package, pulled in by ``pciutils``) or
``/usr/share/hwdata/pci.ids`` (Red Hat's ``hwdata``) is read -- through
:class:`~topoagent.core.hostfs.HostFS`, only when an offline paste has such a name, once per
process, bounded in size -- and consulted after topoagent's own table (:mod:`topoagent.core.pci`).
"""

from __future__ import annotations

import functools

from topoagent.core.hostfs import HostFS
from topoagent.core.parse.pciids import PciIds, parse_pci_ids

__all__ = ["PCI_IDS_PATHS", "database", "lookup"]

#: Where distributions install pci.ids, most common first.
PCI_IDS_PATHS = ("usr/share/misc/pci.ids", "usr/share/hwdata/pci.ids", "usr/share/pci.ids")
#: pci.ids is about 1.4 MB (2025); a file much larger than that is not one.
_MAX_BYTES = 16 * 1024 * 1024


@functools.lru_cache(maxsize=4)
def database(root: str = "/") -> tuple[PciIds, str | None]:
    """The parsed pci.ids below ``root`` and its host path; an empty database and None when
    there is none (or it cannot be read: pci.ids is a convenience, never an error)."""
    fs = HostFS(root)
    for rel in PCI_IDS_PATHS:
        data = fs.bytes(rel, limit=_MAX_BYTES, quiet=True)  # None when larger
        if data is not None:
            return parse_pci_ids(data.decode("utf-8", errors="replace")), fs.host_path(rel)
    return PciIds(), None


def lookup(vendor: int, device: int, root: str = "/") -> str | None:
    """lspci's name for ``vendor:device`` from the analysing machine's pci.ids, or None."""
    return database(root)[0].name(vendor, device)
