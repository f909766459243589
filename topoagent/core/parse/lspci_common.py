"""What the two lspci parsers share: their error and the ``[vvvv:dddd]`` ids that ``-nn`` adds.

``lspci`` is a fallback and a cross-check for sysfs: pasted ``lspci`` output is what users attach
to bug reports, and ``lspci -vvv`` shows ACS control bits that sysfs only exposes as raw config
space.  The parsers (:mod:`~topoagent.core.parse.lspci_tree`, :mod:`~topoagent.core.parse.lspci_verbose`)
are pure: they take the text, never a path.
"""

from __future__ import annotations

import re

from topoagent.core.errors import InputError

__all__ = ["LineError", "LspciParseError", "split_ids"]


class LspciParseError(InputError):
    """Text that is not the lspci output the parser was asked to read."""


class LineError(Exception):
    """One line a parser cannot read; ``why`` says what was expected.  The parser's loop turns
    it into an :class:`LspciParseError` naming the line (strict) or a skipped line (lenient)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


_IDS = re.compile(r"\[([0-9a-fA-F]{4}):([0-9a-fA-F]{4})\]")
_IDS_LEN = len("[vvvv:dddd]")


def split_ids(text: str) -> tuple[int | None, int | None, str]:
    """Strip a trailing ``[vvvv:dddd]`` (added by ``-nn``) and return the ids and the text
    before it (without the space between).  Only the text's last characters are looked at: a
    search that starts by matching spaces would be quadratic in a long run of them."""
    body = text.rstrip()
    m = _IDS.fullmatch(body, len(body) - _IDS_LEN) if len(body) >= _IDS_LEN else None
    if not m:
        return None, None, text
    return int(m.group(1), 16), int(m.group(2), 16), body[: m.start()].rstrip()
