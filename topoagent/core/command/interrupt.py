"""Ctrl-C, one way at any moment: ``topoagent: interrupted`` on stderr and exit 130.

Two SIGINT handlers, each for a kind of work (:mod:`topoagent.__main__` and
:func:`topoagent.cli.main` use them):

* :func:`deferred`, around imports: the handler only notes the interrupt, which is taken when
  the block ends.  An import is not cut short: Python's import machinery runs callbacks of its
  own (its module locks' weakref callbacks), and an exception a signal handler raises inside
  one is printed as "Exception ignored" and lost -- the command would go on, or wait on its
  input for ever.  Imports end by themselves within a second.
* :func:`raising`, around a command's work: the handler raises :class:`Interrupted`, which cuts
  short whatever runs, a blocking read included.

A signal handler can be set only by the main thread; elsewhere (a library calling
:func:`topoagent.cli.main` from a thread) both leave the handler as it is.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

__all__ = ["EXIT_INTERRUPTED", "Interrupted", "deferred", "raising"]

#: The shell's 128 + SIGINT, as an interrupted program's exit reads there.
EXIT_INTERRUPTED = 130


class Interrupted(BaseException):
    """Ctrl-C (SIGINT) while a command runs.

    Not an :class:`Exception`, so no command's own error handling takes it for a failure, and
    not a :class:`KeyboardInterrupt`, which click answers with a blank line and ``Abort`` (a
    second, different ending): :func:`topoagent.cli.main` alone turns it into one line.
    """


def _raise(_signum: int, _frame: FrameType | None) -> None:
    raise Interrupted


@contextmanager
def _handler(handler: Any) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def deferred() -> Iterator[None]:
    """Ctrl-C in this block is noted, then raised as :class:`Interrupted` when it ends."""
    noted: list[int] = []
    with _handler(lambda signum, _frame: noted.append(signum)):
        yield
    if noted:
        raise Interrupted


def raising() -> Any:
    """A block in which Ctrl-C raises :class:`Interrupted` at once."""
    return _handler(_raise)
