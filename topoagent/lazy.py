"""Importing a module by its dotted name, for the registries that import on first use.

:func:`importlib.import_module` does the same, but :mod:`importlib` brings :mod:`warnings`
with it (~0.3 ms of a scan's start-up); ``__import__`` is the built-in it rests on.
"""

from __future__ import annotations

import sys
from types import ModuleType

__all__ = ["import_module"]


def import_module(name: str) -> ModuleType:
    """The module ``name`` (absolute, dotted), imported now if it was not yet."""
    module = sys.modules.get(name)
    if module is None:
        __import__(name)
        module = sys.modules[name]
    return module
