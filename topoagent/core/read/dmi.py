"""What the host is meant to be: ``/sys/class/dmi/id`` (drivers/firmware/dmi-id.c).

Both files are optional (no DMI on most arm64 and POWER hosts) and readable without privilege
(the serial numbers beside them are not, and are not read).
"""

from __future__ import annotations

from topoagent.core.hostfs import HostFS

__all__ = ["DMI", "FILES", "system"]

DMI = "sys/class/dmi/id"
#: Optional: the system vendor and product name.
FILES = ("sys_vendor", "product_name")


def system(fs: HostFS) -> tuple[str | None, str | None]:
    """The DMI system vendor and product name; None where absent."""
    return fs.text(f"{DMI}/sys_vendor"), fs.text(f"{DMI}/product_name")
