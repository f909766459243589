"""Read pasted tool output given on the command line: a file, or stdin for ``-``.

Bounded: a paste of ``lspci -vvv`` from the largest host is a few MB, so anything past
:data:`MAX_INPUT_BYTES` is refused with a clear message rather than read whole; only regular
files (or stdin) are read, so a FIFO or a device cannot stall or exhaust the scan.
"""

from __future__ import annotations

import os
import stat
import sys

from topoagent.core.errors import InputError
from topoagent.core.filekind import kind_of
from topoagent.core.parse.paste import decode_text

__all__ = ["MAX_INPUT_BYTES", "open_regular", "read_fd", "read_regular", "read_text_input"]

#: The most a pasted input may hold.
MAX_INPUT_BYTES = 64 * 1024 * 1024


def _decode(data: bytes) -> str:
    """UTF-8 (a BOM from a Windows editor dropped) or UTF-16 (a Windows console's redirect)."""
    return decode_text(data)


def _read_bounded(fd: int, limit: int) -> bytes:
    """At most ``limit + 1`` bytes (one more than allowed tells the caller it was too large)."""
    chunks: list[bytes] = []
    want = limit + 1
    while want > 0:
        chunk = os.read(fd, min(want, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        want -= len(chunk)
    return b"".join(chunks)


#: An open descriptor's bytes, at most ``limit + 1`` (for a caller that opened and checked it).
read_fd = _read_bounded


def open_regular(path: str) -> int:
    """A read-only descriptor of the regular file ``path`` (the caller closes it).

    Anything else named instead -- a FIFO, a socket, a directory, a character device such as
    ``/dev/watchdog``, whose mere opening arms a hardware watchdog (the kernel's
    Documentation/watchdog/watchdog-api.rst) -- is refused from ``stat`` before it is ever
    opened, with :class:`InputError`; ``open`` errors raise :class:`OSError`.  The descriptor
    is checked again (non-blocking) in case the name changed in between.
    """
    _refuse_special(os.stat(path).st_mode)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        _refuse_special(os.fstat(fd).st_mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _refuse_special(mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise InputError(f"not a regular file ({kind_of(mode)})")


def read_regular(path: str, limit: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit + 1`` (more than ``limit``: the
    caller refuses it); errors as :func:`open_regular`."""
    fd = open_regular(path)
    try:
        return _read_bounded(fd, limit)
    finally:
        os.close(fd)


def _checked(data: bytes) -> str:
    if len(data) > MAX_INPUT_BYTES:
        raise InputError(f"larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB: not a tool's output")
    return _decode(data)


def read_text_input(name: str) -> str:
    """The text of file ``name`` (``-``: stdin); :class:`InputError` when it cannot be read."""
    if name == "-":
        try:
            fd = sys.stdin.fileno()
        except (AttributeError, ValueError, OSError):
            raise InputError("stdin is closed") from None
        try:
            return _checked(_read_bounded(fd, MAX_INPUT_BYTES))
        except OSError as exc:
            raise InputError(f"stdin: {exc.strerror or exc}") from None
    try:
        return _checked(read_regular(name, MAX_INPUT_BYTES))
    except OSError as exc:
        raise InputError(exc.strerror or str(exc)) from None
