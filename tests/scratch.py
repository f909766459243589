"""Scratch trees: a fixture machine's tree that a test may damage, shared by the whole session
and put back as generated after each test.

Copying a DGX-sized tree for every test that changes one file wrote ~20 MB and ~6,000 entries a
test (and deleting them cost more than making them).  A scratch tree is generated once per
machine; after each test only the entries it changed are put back from the session's pristine
copy (``fixture_root``): what was added is removed, what was removed, replaced, rewritten or
re-moded is copied back.  An entry counts as changed when its type, mode, size, modification
time or link target differs from what was recorded when the tree was made (a directory: its
type and mode), so a write that restores the old bytes is put back too.  Where putting back
fails, the tree is made anew.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

__all__ = ["ScratchTrees"]

#: What a test can change of an entry that a scan can see.
_State = tuple[int, int, int, int, str | None]


def _state(st: os.stat_result, path: str) -> _State:
    kind, mode = stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode)
    if kind == stat.S_IFDIR:  # its size and time change with its entries, which count themselves
        return (kind, mode, 0, 0, None)
    link = os.readlink(path) if kind == stat.S_IFLNK else None
    return (kind, mode, st.st_size, st.st_mtime_ns, link)


def _manifest(root: str) -> dict[str, _State]:
    """Every entry below ``root`` (relative path -> its state), ``""`` for the root itself."""
    out = {"": _state(os.lstat(root), root)}
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(top, name)
            out[os.path.relpath(path, root)] = _state(os.lstat(path), path)
    return out


def _remove(path: str) -> None:
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode):
        os.chmod(path, 0o700)  # a test may have made it unreadable
        for top, dirs, _ in os.walk(path):
            for d in dirs:
                full = os.path.join(top, d)
                if not os.path.islink(full):
                    os.chmod(full, 0o700)
        shutil.rmtree(path)
    else:
        os.unlink(path)


def _copy_back(src: str, dst: str) -> None:
    """``src`` (pristine) to ``dst``, which does not exist: a file, a link, or a whole directory."""
    st = os.lstat(src)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(src), dst)
    elif stat.S_ISDIR(st.st_mode):
        shutil.copytree(src, dst, symlinks=True)
    else:
        shutil.copy2(src, dst)


class ScratchTrees:
    """``get(name)``: the scratch tree of a machine; ``restore()``: put back what tests changed."""

    def __init__(self, base: Path, pristine: Callable[[str], Path], make: Callable[[str, Path], Path]) -> None:
        self.base = base
        self.pristine = pristine
        self.make = make
        self.trees: dict[str, tuple[Path, dict[str, _State]]] = {}
        self.used: set[str] = set()

    def get(self, name: str) -> Path:
        """The scratch tree of machine ``name``, made on first use."""
        if name not in self.trees:
            root = self.make(name, self.base / name)
            self.trees[name] = (root, _manifest(str(root)))
        self.used.add(name)
        return self.trees[name][0]

    def restore(self) -> None:
        """Put back every tree a test asked for; one that cannot be put back is made anew."""
        for name in sorted(self.used):
            root, manifest = self.trees[name]
            try:
                self.trees[name] = (root, self._put_back(root, manifest, self.pristine(name)))
            except OSError:
                if os.path.lexists(root):
                    _remove(str(root))
                self.trees.pop(name)
                self.get(name)
        self.used.clear()

    @staticmethod
    def _put_back(root: Path, manifest: dict[str, _State], pristine: Path) -> dict[str, _State]:
        if not os.path.isdir(root) or os.path.islink(root):
            raise OSError(f"{root}: no longer a directory")
        os.chmod(root, manifest[""][1])
        now = _manifest(str(root))
        changed = sorted(rel for rel, state in now.items() if rel and manifest.get(rel) != state)
        missing = sorted(rel for rel in manifest if rel and rel not in now)
        # Remove what was added or changed (a directory with all below it), then copy back what
        # is missing (parents first: a removed directory comes back whole).
        removed: list[str] = []
        for rel in changed:
            if any(rel.startswith(r + "/") for r in removed):
                continue
            _remove(str(root / rel))
            removed.append(rel)
        restored: list[str] = []
        for rel in sorted(set(missing) | {r for r in removed if r in manifest}):
            if any(rel.startswith(r + "/") for r in restored):
                continue  # came back with its directory
            parent = os.path.dirname(rel)
            if parent and not os.path.isdir(root / parent):
                continue  # its directory comes back whole
            _copy_back(str(pristine / rel), str(root / rel))
            restored.append(rel)
        return _manifest(str(root)) if removed or restored else now
