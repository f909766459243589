"""Read pasted tool output given on the command line: a file, or stdin for ``-``.

Bounded: a paste of ``lspci -vvv`` from the largest host is a few MB, so anything past
:data:`MAX_INPUT_BYTES` is refused with a clear message rather than read whole; only regular
files (or stdin) are read, so a FIFO or a device cannot stall or exhaust the scan.
"""

from __future__ import annotations

import os
import stat
import sys

from topoagent.errors import InputError

__all__ = ["MAX_INPUT_BYTES", "read_text_input"]

#: The most a pasted input may hold.
MAX_INPUT_BYTES = 64 * 1024 * 1024


def _decode(data: bytes) -> str:
    """UTF-8 (a BOM from a Windows editor dropped) or UTF-16 (a Windows console's redirect)."""
    from topoagent.parsers.paste import decode_text

    return decode_text(data)


def _read_bounded(fd: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > MAX_INPUT_BYTES:
            raise InputError(f"larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB: not a tool's output")
        chunks.append(chunk)


def read_text_input(name: str) -> str:
    """The text of file ``name`` (``-``: stdin); :class:`InputError` when it cannot be read."""
    if name == "-":
        try:
            fd = sys.stdin.fileno()
        except (AttributeError, ValueError, OSError):
            raise InputError("stdin is closed") from None
        try:
            return _decode(_read_bounded(fd))
        except OSError as exc:
            raise InputError(f"stdin: {exc.strerror or exc}") from None
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(exc.strerror or str(exc)) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError("not a regular file")
        return _decode(_read_bounded(fd))
    except OSError as exc:
        raise InputError(exc.strerror or str(exc)) from None
    finally:
        os.close(fd)
