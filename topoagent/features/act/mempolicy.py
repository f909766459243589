"""The memory policy syscalls, through ctypes: set a NUMA policy for this process, read it back.

``set_mempolicy(2)``/``get_mempolicy(2)`` have no wrapper in Python's standard library and
libnuma may not be installed, so they are called as raw syscalls through libc's
``syscall()``.  A task's memory policy survives ``execve``, which is what ``topoagent exec``
relies on.  Syscall numbers: arch/x86/entry/syscalls/syscall_64.tbl and
include/uapi/asm-generic/unistd.h (arm64).
"""

from __future__ import annotations

import ctypes
import os
import platform

from topoagent.core.errors import TopoagentError

MPOL_PREFERRED, MPOL_BIND = 1, 2  # include/uapi/linux/mempolicy.h
MODES = {"prefer": MPOL_PREFERRED, "bind": MPOL_BIND}

#: (set_mempolicy, get_mempolicy) by machine.
_SYSCALLS = {"x86_64": (238, 239), "aarch64": (237, 236), "arm64": (237, 236), "ppc64le": (261, 260)}
_MASK_BITS = 1024  # MAX_NUMNODES is at most 1024 (NODES_SHIFT <= 10)
_ULONG_BITS = ctypes.sizeof(ctypes.c_ulong) * 8


class MempolicyError(TopoagentError, OSError):
    """The policy could not be set or read; the message says why in one line.  Also an
    :class:`OSError` (``errno`` set when the kernel refused), as a syscall's callers expect."""


def _numbers() -> tuple[int, int]:
    machine = platform.machine()
    if machine not in _SYSCALLS:
        raise MempolicyError(f"set_mempolicy: syscall number unknown on {machine}")
    return _SYSCALLS[machine]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def set_policy(mode: int, nodes: set[int]) -> None:
    """Set this process's memory policy (``prefer`` or ``bind`` to ``nodes``)."""
    number, _ = _numbers()
    words = (ctypes.c_ulong * (_MASK_BITS // _ULONG_BITS))()
    for n in nodes:
        if not 0 <= n < _MASK_BITS:
            raise MempolicyError(f"set_mempolicy: NUMA node {n} out of range")
        words[n // _ULONG_BITS] |= 1 << (n % _ULONG_BITS)
    libc = _libc()
    # maxnode counts bits of the mask; the kernel reads maxnode - 1 of them (mm/mempolicy.c get_nodes).
    if libc.syscall(ctypes.c_long(number), ctypes.c_int(mode), words, ctypes.c_ulong(_MASK_BITS + 1)) != 0:
        err = ctypes.get_errno()
        raise MempolicyError(err, f"set_mempolicy: {os.strerror(err)}")


def get_policy() -> tuple[int, set[int]]:
    """This process's memory policy: (mode, nodes)."""
    _, number = _numbers()
    mode = ctypes.c_int(0)
    words = (ctypes.c_ulong * (_MASK_BITS // _ULONG_BITS))()
    libc = _libc()
    if (
        libc.syscall(
            ctypes.c_long(number),
            ctypes.byref(mode),
            words,
            ctypes.c_ulong(_MASK_BITS + 1),
            ctypes.c_ulong(0),
            ctypes.c_ulong(0),
        )
        != 0
    ):
        err = ctypes.get_errno()
        raise MempolicyError(err, f"get_mempolicy: {os.strerror(err)}")
    nodes = {i * _ULONG_BITS + b for i, w in enumerate(words) for b in range(_ULONG_BITS) if w >> b & 1}
    return mode.value, nodes
