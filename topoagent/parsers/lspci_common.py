"""What the two lspci parsers share: their error and the ``[vvvv:dddd]`` ids that ``-nn`` adds.

``lspci`` is a fallback and a cross-check for sysfs: pasted ``lspci`` output is what users attach
to bug reports, and ``lspci -vvv`` shows ACS control bits that sysfs only exposes as raw config
space.  The parsers (:mod:`~topoagent.parsers.lspci_tree`, :mod:`~topoagent.parsers.lspci_verbose`)
are pure: they take the text, never a path.
"""

from __future__ import annotations

import re

from topoagent.errors import InputError

__all__ = ["LspciParseError", "split_ids"]


class LspciParseError(InputError):
    """Text that is not the lspci output the parser was asked to read."""


def split_ids(text: str) -> tuple[int | None, int | None, str]:
    """Strip a trailing ``[vvvv:dddd]`` (added by ``-nn``) and return the ids and the text."""
    m = re.search(r"\s*\[([0-9a-fA-F]{4}):([0-9a-fA-F]{4})\]\s*$", text)
    if not m:
        return None, None, text
    return int(m.group(1), 16), int(m.group(2), 16), text[: m.start()]


