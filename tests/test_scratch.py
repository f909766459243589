"""The scratch trees (tests/scratch.py) come back as generated whatever a test did to them."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tests.fakesysfs import generate
from tests.scratch import ScratchTrees


def _contents(root: Path) -> dict[str, tuple[int, int, bytes | str | None]]:
    """What a scan can see of a tree: each entry's type, mode and bytes or link target."""
    out = {}
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(top, name)
            st = os.lstat(path)
            kind = stat.S_IFMT(st.st_mode)
            body: bytes | str | None = None
            if kind == stat.S_IFLNK:
                body = os.readlink(path)
            elif kind == stat.S_IFREG:
                body = Path(path).read_bytes()
            out[os.path.relpath(path, root)] = (kind, stat.S_IMODE(st.st_mode), body)
    return out


def test_every_kind_of_damage_is_put_back(tmp_path, fixture_root):
    trees = ScratchTrees(tmp_path / "scratch", fixture_root, generate)
    pristine = _contents(fixture_root("workstation"))
    root = trees.get("workstation")
    first = root
    dev = Path(os.path.realpath(root / "sys/bus/pci/devices" / sorted(os.listdir(root / "sys/bus/pci/devices"))[-1]))
    (root / "proc/sys/kernel/hostname").write_text("other\n")  # rewritten
    (dev / "class").write_text("0x060400\n")  # same size, new bytes
    (dev / "vendor").unlink()  # removed
    os.chmod(dev / "device", 0o000)  # re-moded
    (dev / "new").write_text("x")  # added
    os.mkfifo(dev / "fifo")  # a FIFO
    os.unlink(root / "sys/bus/pci/devices" / dev.name)  # a link removed ...
    os.symlink("/etc", root / "sys/bus/pci/devices" / dev.name)  # ... and made another
    os.rename(root / "sys/devices/system/node", root / "sys/devices/system/gone")  # a directory moved
    os.chmod(root / "sys/class", 0o000)  # a directory made unreadable
    trees.restore()
    assert trees.get("workstation") == first
    assert _contents(first) == pristine


def test_a_tree_that_cannot_be_put_back_is_made_anew(tmp_path, fixture_root):
    trees = ScratchTrees(tmp_path / "scratch", fixture_root, generate)
    root = trees.get("workstation")
    import shutil

    shutil.rmtree(root)
    root.write_text("not a directory")
    trees.restore()
    assert _contents(trees.get("workstation")) == _contents(fixture_root("workstation"))
