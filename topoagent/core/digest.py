"""Short SHA-256 digests: the fingerprints and journal checksums name values by them."""

from __future__ import annotations

import hashlib

__all__ = ["short_sha256"]


def short_sha256(data: bytes) -> str:
    """The first 16 hex digits of ``data``'s SHA-256 (64 bits: names a value among the few
    thousand a fleet holds, never a security boundary)."""
    return hashlib.sha256(data).hexdigest()[:16]
