"""Parse a function's Vital Product Data (the sysfs ``vpd`` file).

VPD is a list of resources (PCI Local Bus Spec 3.0, appendix I; PCIe Base Spec 6.28): a
large resource has a tag byte with bit 7 set and a 16-bit little-endian length, a small one
holds its length in the tag's low three bits.  The identifier string (tag ``0x82``) names the
product; the read-only resource VPD-R (tag ``0x90``) holds keywords, each two ASCII letters, a
length byte and the value.  The end tag is ``0x78`` (small) -- some devices write ``0x79``.
NVIDIA's ``rdma_topo`` (linux-rdma/rdma-core ``kernel-boot/rdma_topo``, ``parse_vpd``) reads the
name, ``V3`` and ``SN`` the same way; a value that is not ASCII is left out, never guessed.
"""

from __future__ import annotations

from collections.abc import Iterator

from topoagent.core.snapshot import VpdInfo

__all__ = ["MAX_VPD_BYTES", "parse_vpd", "vpd_keyword_spans"]

#: The VPD address space is 15 bits (PCI Local Bus Spec 3.0, I.3): 32 KiB at most.
MAX_VPD_BYTES = 32 * 1024

_LARGE = 0x80
_END_SMALL = 0x78
_END_LARGE = 0x79
_ID_STRING = 0x82
_VPD_R = 0x90
#: The VPD-R keywords kept, and the VpdInfo field each fills.
_KEYWORDS = {"V3": "v3", "SN": "serial", "PN": "part"}


def _resource_spans(data: bytes) -> Iterator[tuple[int, int, int]]:
    """(tag, start, end) of each resource's body up to the end tag or the first one that runs
    past the data."""
    at = 0
    while at < len(data):
        tag = data[at]
        if tag in (_END_SMALL, _END_LARGE):
            return
        if tag & _LARGE:
            if at + 3 > len(data):
                return
            start, length = at + 3, int.from_bytes(data[at + 1 : at + 3], "little")
        else:
            start, length = at + 1, tag & 0x07
        if start + length > len(data):
            return
        yield tag, start, start + length
        at = start + length


def _resources(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(tag, body) of each resource."""
    for tag, start, end in _resource_spans(data):
        yield tag, data[start:end]


def _keyword_spans(body: bytes) -> Iterator[tuple[bytes, int, int]]:
    """(keyword, start, end) of each value in a VPD-R resource's body."""
    at = 0
    while at + 3 <= len(body):
        length = body[at + 2]
        if at + 3 + length > len(body):
            return
        yield body[at : at + 2], at + 3, at + 3 + length
        at += 3 + length


def _keywords(body: bytes) -> Iterator[tuple[bytes, bytes]]:
    """(keyword, value) pairs of a VPD-R resource."""
    for key, start, end in _keyword_spans(body):
        yield key, body[start:end]


def vpd_keyword_spans(data: bytes) -> Iterator[tuple[str, int, int]]:
    """(keyword, start, end) of every VPD-R keyword's value in ``data``, as offsets into it (a
    capture's scrubber rewrites values in place, keeping every length)."""
    for tag, start, end in _resource_spans(data[:MAX_VPD_BYTES]):
        if tag == _VPD_R:
            for key, a, b in _keyword_spans(data[start:end]):
                yield key.decode("ascii", "replace"), start + a, start + b


def _ascii(raw: bytes) -> str | None:
    try:
        text = raw.decode("ascii").strip().strip("\0").strip()
    except UnicodeDecodeError:
        return None
    return text if text and text.isprintable() else None


def parse_vpd(data: bytes) -> VpdInfo | None:
    """The name and the ``V3``, ``SN`` and ``PN`` keywords of VPD bytes; None where none is there
    (an empty file: a device whose VPD reads nothing)."""
    fields: dict[str, str] = {}
    for tag, body in _resources(data[:MAX_VPD_BYTES]):
        if tag == _ID_STRING and "name" not in fields:
            name = _ascii(body)
            if name is not None:
                fields["name"] = name
        elif tag == _VPD_R:
            for key, value in _keywords(body):
                field = _KEYWORDS.get(key.decode("ascii", "replace"))
                text = _ascii(value) if field is not None else None
                if field is not None and text is not None:
                    fields.setdefault(field, text)
    return VpdInfo(**fields) if fields else None
