"""Changing a fake host tree the way a real host changes, for the daemon and diff tests; and
the tests that the changes read back through a scan as meant.

The fixture trees are shared by the whole session, so a copy is made of hard links (fast) and
every change here *replaces* a file (unlink, then write) instead of writing into it.
"""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

from topoagent.core.api import scan

__all__ = ["copy_tree", "remove_function", "set_attr", "set_link"]

#: PCIe Link Status speed codes (REFERENCE §2: 1-6 = 2.5 ... 64 GT/s).
_SPEED_CODE = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


def copy_tree(src: Path, dst: Path) -> Path:
    """A copy of a fixture tree: directories and symlinks copied, files hard-linked."""
    shutil.copytree(src, dst, symlinks=True, copy_function=os.link)
    return dst


def _replace(path: Path, data: bytes) -> None:
    path.unlink()  # the old file is a hard link into the shared fixture: never write into it
    path.write_bytes(data)


def set_attr(root: Path, bdf: str, attr: str, text: str) -> None:
    """Replace a sysfs attribute of a PCI function."""
    _replace(root / "sys/bus/pci/devices" / bdf / attr, (text + "\n").encode())


def remove_function(root: Path, bdf: str) -> None:
    """Take a PCI function off the bus: its sysfs directory and its bus/pci/devices link."""
    link = root / "sys/bus/pci/devices" / bdf
    real = link.resolve()
    assert real.is_dir() and str(real).startswith(str(root.resolve()))
    shutil.rmtree(real)
    link.unlink()


def _pcie_capability(config: bytes) -> int:
    """Offset of the PCI Express capability (id 0x10) in a config space (PCI 3.0 §6.7)."""
    at, hops = config[0x34] & 0xFC, 0
    while at and hops < 48:
        if config[at] == 0x10:
            return at
        at, hops = config[at + 1] & 0xFC, hops + 1
    raise AssertionError("no PCI Express capability")


def set_link(root: Path, bdf: str, *, gts: float | None = None, width: int | None = None) -> None:
    """Retrain a function's link: the Link Status register in its config space (which the scan
    reads where it can) and the sysfs files the kernel derives from it, kept in agreement."""
    cfg_path = root / "sys/bus/pci/devices" / bdf / "config"
    cfg = bytearray(cfg_path.read_bytes())
    status_at = _pcie_capability(bytes(cfg)) + 0x12
    (status,) = struct.unpack_from("<H", cfg, status_at)
    if gts is not None:
        status = (status & ~0x000F) | _SPEED_CODE[gts]
    if width is not None:
        status = (status & ~0x03F0) | (width << 4)
    struct.pack_into("<H", cfg, status_at, status)
    _replace(cfg_path, bytes(cfg))
    if gts is not None:
        set_attr(root, bdf, "current_link_speed", f"{gts:g} GT/s PCIe" if gts != int(gts) else f"{gts:.1f} GT/s PCIe")
    if width is not None:
        set_attr(root, bdf, "current_link_width", str(width))


NIC = "0000:18:00.0"
GPU = "0000:c3:00.0"


def test_set_link_reads_back(fixture_root, tmp_path):
    src = fixture_root("dgx-h100")
    root = copy_tree(src, tmp_path / "t")
    set_link(root, NIC, width=8)
    set_link(root, GPU, gts=2.5)
    r = scan(root, nvml="off")
    assert (r.by_bdf(NIC).link.current_width, r.by_bdf(NIC).link.max_width) == (8, 16)
    assert (r.by_bdf(GPU).link.current_gts, r.by_bdf(GPU).link.max_gts) == (2.5, 32.0)
    assert (root / "sys/bus/pci/devices" / NIC / "current_link_width").read_text() == "8\n"
    assert (root / "sys/bus/pci/devices" / GPU / "current_link_speed").read_text() == "2.5 GT/s PCIe\n"
    # The shared fixture is untouched.
    assert scan(src, nvml="off").by_bdf(NIC).link.current_width == 16


def test_remove_function_reads_back(fixture_root, tmp_path):
    src = fixture_root("dgx-h100")
    root = copy_tree(src, tmp_path / "t")
    remove_function(root, GPU)
    assert scan(root, nvml="off").by_bdf(GPU) is None
    assert scan(src, nvml="off").by_bdf(GPU) is not None
