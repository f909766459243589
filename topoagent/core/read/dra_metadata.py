"""The DRA device metadata files the kubelet mounts into a container (KEP-5304), read below
the scan's root: ``var/run/dra-device-attributes/<claim>/<request>/<driver>-metadata.json``.
Parsing is :mod:`topoagent.core.parse.dra_metadata`'s."""

from __future__ import annotations

import msgspec

from topoagent.core.hostfs import HostFS
from topoagent.core.parse.dra_metadata import DraMetadataError, parse_device_metadata

__all__ = ["METADATA_DIR", "DraMetadata", "read_dra_metadata"]

#: Where the container sees the files (KEP-5304, "Within the container").
METADATA_DIR = "var/run/dra-device-attributes"
#: A metadata file is small JSON; a larger one is no metadata file.
_LIMIT = 1 << 20


class DraMetadata(msgspec.Struct, frozen=True):
    """The devices' PCI addresses the metadata files name, the files read, and what could not be."""

    bdfs: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()


def read_dra_metadata(fs: HostFS) -> DraMetadata:
    """Every ``*-metadata.json`` below :data:`METADATA_DIR` (claims, then requests, sorted)."""
    bdfs: list[str] = []
    files: list[str] = []
    problems: list[str] = []
    for claim in fs.listdir(METADATA_DIR):
        for request in fs.listdir(f"{METADATA_DIR}/{claim}"):
            base = f"{METADATA_DIR}/{claim}/{request}"
            for name in fs.listdir(base):
                if not name.endswith("-metadata.json"):
                    continue
                rel = f"{base}/{name}"
                text = fs.text(rel, limit=_LIMIT, quiet=True)
                if text is None:
                    problems.append(f"{fs.host_path(rel)}: unreadable")
                    continue
                try:
                    found = parse_device_metadata(text)
                except DraMetadataError as exc:
                    problems.append(f"{fs.host_path(rel)}: {exc}")
                    continue
                files.append(fs.host_path(rel))
                bdfs.extend(b for b in found if b not in bdfs)
    return DraMetadata(tuple(bdfs), tuple(files), tuple(problems))
