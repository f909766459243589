"""Read an expected topology named on the command line or in the daemon's configuration: a
``topoagent baseline`` file, a scan JSON or a daemon ``state.json`` (file, or ``-`` for stdin)."""

from __future__ import annotations

import msgspec

from topoagent.core.baseline import Baseline, read_expectation
from topoagent.core.errors import InputError
from topoagent.core.read.textinput import read_text_input

__all__ = ["load_expectation"]


def load_expectation(name: str) -> Baseline:
    """The expectation in file ``name``; :class:`InputError` naming the file and why not."""
    try:
        return read_expectation(read_text_input(name).encode())
    except InputError as exc:
        raise InputError(f"{name}: {exc}") from None
    except (msgspec.DecodeError, ValueError) as exc:
        raise InputError(f"{name}: not an expected topology: {exc}") from None
    except RecursionError:  # values nested thousands deep, even in a field that is skipped
        raise InputError(f"{name}: not an expected topology: nested too deeply") from None
