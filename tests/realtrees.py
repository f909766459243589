"""Helpers for the tests on real sysfs trees (``../shared/real-sysfs/*.tar.bz2``).

The tarballs are captures of real machines from hwloc's test suite (see the README beside
them).  They are unpacked once per test session into a temporary directory (on /dev/shm where
there is room, the test tmp dir otherwise) and removed at the end; the tests that use them
skip, with a reason, where the folder is absent.

This module also reads hwloc's view of the same trees (``lstopo -i ROOT --of xml
--whole-io``) into plain per-BDF facts, so the tests can compare the two tools.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

#: Set to a folder of ``*.tar.bz2`` captures to use instead of ``../shared/real-sysfs``.
ENV_VAR = "TOPOAGENT_REAL_SYSFS"


def real_sysfs_dir() -> Path:
    """Where the tarballs live: ``$TOPOAGENT_REAL_SYSFS`` or ``<repo>/../shared/real-sysfs``."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[1].parent / "shared" / "real-sysfs"


def tarballs(folder: Path | None = None) -> dict[str, Path]:
    """Tree name (the tarball's name without ``.tar.bz2``) -> tarball path."""
    folder = real_sysfs_dir() if folder is None else folder
    if not folder.is_dir():
        return {}
    return {p.name[: -len(".tar.bz2")]: p for p in sorted(folder.glob("*.tar.bz2"))}


def unpack(tarball: Path, dest: Path) -> Path:
    """Unpack ``tarball`` into the new, empty directory ``dest``; return its one top-level
    directory (the tree's root, holding ``sys/`` and ``proc/``).

    GNU tar is about ten times faster than :mod:`tarfile` on these trees (thousands of small
    files), so it is used where present; :mod:`tarfile` (with the ``data`` extraction filter
    where this Python has it) otherwise.
    """
    dest.mkdir(parents=True, exist_ok=False)
    tar = shutil.which("tar")
    done = False
    if tar is not None:
        proc = subprocess.run([tar, "-xjf", str(tarball), "-C", str(dest)], capture_output=True, text=True)
        done = proc.returncode == 0
    if not done:
        shutil.rmtree(dest)
        dest.mkdir()
        with tarfile.open(tarball) as tf:
            if hasattr(tarfile, "data_filter"):
                tf.extractall(dest, filter="data")
            else:  # pragma: no cover - Pythons without extraction filters
                tf.extractall(dest)
    tops = sorted(os.listdir(dest))
    if len(tops) != 1 or not (dest / tops[0]).is_dir():
        raise ValueError(f"{tarball}: expected one top-level directory, found {tops}")
    return dest / tops[0]


def unpack_all(dest: Path, folder: Path | None = None) -> dict[str, Path]:
    """Unpack every tarball of ``folder`` below ``dest``: tree name -> root directory."""
    return {name: unpack(tb, dest / name) for name, tb in tarballs(folder).items()}


def pci_entries(root: Path) -> list[str]:
    """The entries of ``sys/bus/pci/devices`` below a tree root."""
    return sorted(os.listdir(root / "sys" / "bus" / "pci" / "devices"))


# -- hwloc ------------------------------------------------------------------------------------

#: hwloc object types that are I/O objects; every other object type is a "normal" one.
_IO_TYPES = {"Bridge", "PCIDev", "OSDev", "Misc"}


def parse_hwloc_bitmap(text: str) -> frozenset[int] | None:
    """An hwloc bitmap string (``0x00000003``, ``0x0000ffff,0x0``, ``0xff,,0x1``) as a set.

    Comma-separated 32-bit words, most significant first; an empty word is zero.  A leading
    ``0xf...f`` word means "every higher bit too" (an infinite set): that is answered with
    ``None``, since it names no finite set of nodes.
    """
    text = text.strip()
    if not text:
        return frozenset()
    words = text.split(",")
    if words[0].lower() == "0xf...f":
        return None
    value = 0
    for w in words:
        value = (value << 32) | (int(w, 16) if w else 0)
    return frozenset(i for i in range(value.bit_length()) if value >> i & 1)


@dataclass(frozen=True)
class HwlocPci:
    """hwloc's facts about one PCI function."""

    bdf: str
    #: The NUMA node of the nearest normal (non-I/O) ancestor when its nodeset names exactly
    #: one node; ``None`` ("unknown") otherwise.
    numa_node: int | None
    #: Type of that normal ancestor (``Package``, ``Group``, ``Machine``...).
    attached_to: str
    #: pci_busid of the PCI-to-PCI bridges above it, from the root down (host bridges have none).
    chain: tuple[str, ...]
    #: ``PCIDev`` or ``Bridge``.
    type: str


def parse_lstopo_xml(text: str) -> dict[str, HwlocPci]:
    """Per-BDF facts from ``lstopo --of xml --whole-io`` output (hwloc 2.x XML)."""
    root = ET.fromstring(text)
    out: dict[str, HwlocPci] = {}

    def walk(el: ET.Element, normal: ET.Element | None, chain: tuple[str, ...]) -> None:
        kind = el.get("type")
        if kind not in _IO_TYPES:
            normal = el
        busid = el.get("pci_busid")
        if kind in ("PCIDev", "Bridge") and busid:
            bdf = busid.lower()
            nodes = parse_hwloc_bitmap(normal.get("nodeset", "")) if normal is not None else None
            node = next(iter(nodes)) if nodes is not None and len(nodes) == 1 else None
            out[bdf] = HwlocPci(
                bdf=bdf,
                numa_node=node,
                attached_to=normal.get("type", "?") if normal is not None else "?",
                chain=chain,
                type=kind,
            )
            if kind == "Bridge":
                chain = chain + (bdf,)
        for child in el.findall("object"):
            walk(child, normal, chain)

    for top in root.findall("object"):
        walk(top, None, ())
    return out


def lstopo_path() -> str | None:
    return shutil.which("lstopo") or shutil.which("lstopo-no-graphics")


@dataclass(frozen=True)
class HwlocReading:
    devices: dict[str, HwlocPci]
    stderr: str


def read_with_hwloc(root: Path) -> HwlocReading:
    """Run ``lstopo -i ROOT --of xml --whole-io`` and parse what it prints.

    ``HWLOC_*`` variables are removed from the environment so that nothing (a forced PCI
    locality, a hidden-error switch, another fsroot) changes hwloc's reading of the tree.
    """
    exe = lstopo_path()
    if exe is None:
        pytest.skip("lstopo (hwloc) is not installed: apt-get install -y hwloc")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HWLOC_")}
    proc = subprocess.run(
        [exe, "-i", str(root), "--of", "xml", "--whole-io"], capture_output=True, text=True, env=env, timeout=120
    )
    if proc.returncode != 0:
        raise RuntimeError(f"lstopo failed on {root} (rc {proc.returncode}): {proc.stderr.strip()}")
    return HwlocReading(parse_lstopo_xml(proc.stdout), proc.stderr)


# -- fixtures ---------------------------------------------------------------------------------


#: Unpacked, the five captures take about 70 MB in 34,000 small files.  On a memory file
#: system that is about a second; on a busy disk it can be ten times as long.
_SHM = Path("/dev/shm")
_SHM_MIN_FREE = 512 << 20


def _memory_tmpdir() -> Path | None:
    """A fresh directory on /dev/shm where it exists, is writable and has room; else None."""
    try:
        if not _SHM.is_dir() or shutil.disk_usage(_SHM).free < _SHM_MIN_FREE:
            return None
        return Path(tempfile.mkdtemp(prefix="topoagent-real-sysfs-", dir=_SHM))
    except OSError:
        return None


def _rmtree(path: Path) -> None:
    """Remove an unpacked tree, making its directories writable first (some captures have
    read-only ones)."""
    for dirpath, dirnames, _ in os.walk(path):
        for d in dirnames:
            p = os.path.join(dirpath, d)
            if not os.path.islink(p):
                os.chmod(p, 0o700)
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def real_tree_roots(tmp_path_factory: pytest.TempPathFactory):
    """Every real tree, unpacked once per session: tree name -> root directory."""
    folder = real_sysfs_dir()
    if not folder.is_dir():
        how = f"from ${ENV_VAR}" if os.environ.get(ENV_VAR) else f"set ${ENV_VAR} to use another"
        pytest.skip(f"real sysfs captures absent: no folder {folder} ({how})")
    if not tarballs(folder):
        pytest.skip(f"real sysfs captures absent: no *.tar.bz2 in {folder}")
    shm = _memory_tmpdir()
    roots = None
    if shm is not None:
        try:
            roots = unpack_all(shm, folder)
        except (OSError, ValueError, tarfile.TarError):
            _rmtree(shm)
            shm = None
    where = shm
    if roots is None:
        where = tmp_path_factory.mktemp("real-sysfs")
        roots = unpack_all(where, folder)
    try:
        yield roots
    finally:
        _rmtree(where)  # about 70 MB, made again from the tarballs by the next session
