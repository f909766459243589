"""A hostile tree: a chain of PCI bridges nested ``depth`` directories deep in sysfs, a GPU at
the bottom.  Paths grow past PATH_MAX (4096) at about 300 levels, so the tree is written
relative to open directories, and ``bus/pci/devices`` lists only the functions whose link fits
in a symlink (4095 bytes): the rest are there but unlisted, as in a truncated capture."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["deep_chain"]

_ATTRS_BRIDGE = {"class": "0x060400", "vendor": "0x10b5", "device": "0x8796", "numa_node": "0"}
_ATTRS_GPU = {"class": "0x030200", "vendor": "0x10de", "device": "0x2330", "numa_node": "0", "local_cpulist": "0-3"}


def _bdf(i: int) -> str:
    return f"{i // 255:04x}:{i % 255 + 1:02x}:00.0"


def _write(dir_fd: int, name: str, text: str) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=dir_fd)
    try:
        os.write(fd, text.encode() + b"\n")
    finally:
        os.close(fd)


def deep_chain(root: Path, depth: int) -> tuple[Path, list[str]]:
    """Write the tree; (root, BDFs from the top bridge down to the GPU)."""
    (root / "sys/devices/system/node/node0").mkdir(parents=True)
    (root / "sys/devices/system/node/node0/cpulist").write_text("0-3\n")
    links = root / "sys/bus/pci/devices"
    links.mkdir(parents=True)
    top = root / "sys/devices/pci0000:00"
    top.mkdir(parents=True)
    bdfs = [_bdf(i) for i in range(depth)] + [_bdf(depth)]
    cur = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    rel = "../../../devices/pci0000:00"
    try:
        for i, bdf in enumerate(bdfs):
            os.mkdir(bdf, dir_fd=cur)
            nxt = os.open(bdf, os.O_RDONLY | os.O_DIRECTORY, dir_fd=cur)
            os.close(cur)
            cur = nxt
            for name, value in (_ATTRS_GPU if i == depth else _ATTRS_BRIDGE).items():
                _write(cur, name, value)
            rel += "/" + bdf
            if len(rel) < 4000:
                os.symlink(rel, links / bdf)
    finally:
        os.close(cur)
    return root, bdfs
