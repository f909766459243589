"""Short SHA-256 digests without OpenSSL's start-up cost.

``hashlib`` imports ``_hashlib``, which loads and initialises OpenSSL: about 3 ms of a
``topoagent scan`` process that costs ~50 ms in all, paid only to hash a few kilobytes.
CPython also builds its own SHA-256 (HACL*), the module hashlib falls back to when OpenSSL is
absent: ``_sha256`` up to 3.11, ``_sha2`` from 3.12 (python/cpython#99108).  Both give the
same digest as OpenSSL's; hashlib stays the fallback for a build that has neither.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from importlib import import_module
from typing import Any

__all__ = ["short_sha256"]


@cache
def _sha256() -> Callable[[bytes], Any]:
    for name in ("_sha2", "_sha256"):  # CPython >= 3.12, <= 3.11
        try:
            sha256: Callable[[bytes], Any] = import_module(name).sha256
            return sha256
        except (ImportError, AttributeError):
            continue
    from hashlib import sha256

    return sha256


def short_sha256(data: bytes) -> str:
    """The first 16 hex digits of ``data``'s SHA-256 (64 bits: names a value among the few
    thousand a fleet holds, never a security boundary)."""
    return str(_sha256()(data).hexdigest()[:16])
