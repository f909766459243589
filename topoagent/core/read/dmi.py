"""What the host is meant to be: ``/sys/class/dmi/id`` (drivers/firmware/dmi-id.c), and where
a platform has no DMI (most arm64 and POWER hosts) the device tree's ``model``
(``/sys/firmware/devicetree/base/model``, drivers/of/kobj.c).

Every file is optional and readable without privilege (the serial numbers beside them are not,
and are not read).
"""

from __future__ import annotations

from topoagent.core.hostfs import HostFS
from topoagent.core.parse.sysfs_values import parse_device_tree_model

__all__ = ["DEVICE_TREE_MODEL", "DMI", "FILES", "device_tree_model", "system"]

DMI = "sys/class/dmi/id"
#: Optional: the system vendor and product name.
FILES = ("sys_vendor", "product_name")
#: Optional: the board's name on a device-tree platform (NUL-terminated).
DEVICE_TREE_MODEL = "sys/firmware/devicetree/base/model"


def system(fs: HostFS) -> tuple[str | None, str | None]:
    """The DMI system vendor and product name; None where absent."""
    return fs.text(f"{DMI}/sys_vendor"), fs.text(f"{DMI}/product_name")


def device_tree_model(fs: HostFS) -> str | None:
    """The device tree's ``model`` (``IBM Power System AC922``, a board name on arm64); None
    where absent (x86, or no device tree)."""
    text = fs.text(DEVICE_TREE_MODEL, limit=4096, quiet=True)
    return parse_device_tree_model(text) if text else None
