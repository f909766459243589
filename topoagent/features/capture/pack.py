"""A capture's entries as a gzip tarball: the form ``--root capture.tar.gz`` replays
(:mod:`topoagent.core.read.archive` reads it)."""

from __future__ import annotations

import gzip
import io
import tarfile
from collections.abc import Iterable
from typing import BinaryIO

from topoagent.features.capture.collect import Entry

__all__ = ["entries_to_tar"]


def entries_to_tar(entries: Iterable[Entry], fileobj: BinaryIO, *, mtime: int = 0) -> None:
    """Write capture entries as a gzip tarball to a binary file object (deterministic: fixed
    mtime, owner and mode, so the same host gives the same bytes)."""
    with (
        gzip.GzipFile(fileobj=fileobj, mode="wb", mtime=mtime) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for e in entries:
            info = tarfile.TarInfo(e.path)
            info.mtime, info.uid, info.gid, info.uname, info.gname = mtime, 0, 0, "", ""
            if e.kind == "dir":
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            elif e.kind == "link":
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, e.target, 0o777
                tar.addfile(info)
            else:
                info.size, info.mode = len(e.data), 0o644
                tar.addfile(info, io.BytesIO(e.data))
