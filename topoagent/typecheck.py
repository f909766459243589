"""Names only type checkers read, without importing :mod:`typing` at run time.

Importing :mod:`typing` costs ~3 ms on a 2-vCPU VM (it brings :mod:`contextlib` and
builds a few hundred objects), a tenth of a whole ``topoagent scan`` on a small host.  The
modules a scan imports therefore annotate under ``from __future__ import annotations``, take
annotation-only names from :mod:`typing` inside ``if TYPE_CHECKING:``, and take the few names
that must exist at run time from here.  A type checker sees typing's own objects (mypy,
which the test command runs, takes any name ``TYPE_CHECKING`` as true); at run time they are
the cheap stand-ins below, which behave as typing's do where this package uses them (a
``TypeVar`` only ever subscripts a generic base class, whose alias accepts any object;
``overload`` stubs are replaced by the implementation that follows them).
"""

from __future__ import annotations

TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import TypeVar as TypeVar
    from typing import overload as overload

    from typing_extensions import dataclass_transform as dataclass_transform
else:
    def TypeVar(name, *_constraints, **_options):
        """A stand-in type variable: its name."""
        return name

    def overload(fn):
        """A stand-in for ``typing.overload``: the stub itself, replaced by the implementation."""
        return fn

    def dataclass_transform(**_options):
        """A stand-in for ``typing.dataclass_transform``: leaves the decorator as it is."""
        return lambda fn: fn

__all__ = ["TYPE_CHECKING", "TypeVar", "dataclass_transform", "overload"]
