"""Numbers as the kernel and tools write them: ASCII decimal digits only.

``str.isdigit()`` and ``int()`` accept far more than the kernel ever writes: ``"²"`` passes
``isdigit()`` and then makes ``int()`` raise; ``"١"`` (Arabic-Indic one) passes both and reads
as 1, so a hostile capture could name a real NUMA node with it; past 4,300 digits ``int()``
raises.  A decimal number read from a file, an environment or a paste becomes an ``int`` here,
in :func:`decimal` (None for what is no number) or :func:`parse_decimal` (an error), unless the
pattern that found it already holds it to ASCII digits and a few of them (``[0-9]{1,4}``).
"""

from __future__ import annotations

from topoagent.core.errors import InputError

__all__ = ["MAX_DIGITS", "decimal", "is_decimal", "is_hex", "parse_decimal", "trailing_number"]

_HEX = frozenset("0123456789abcdefABCDEF")
#: The most digits a number read from input may have: a 64-bit value has at most 20.  Python's
#: ``int()`` refuses more than 4,300 with a ValueError of its own (CVE-2020-10735,
#: ``sys.set_int_max_str_digits``), so a longer run of digits is refused here, as not a number.
MAX_DIGITS = 20


def is_decimal(text: str) -> bool:
    """Whether ``text`` is one to :data:`MAX_DIGITS` ASCII decimal digits (no sign, no spaces)."""
    return len(text) <= MAX_DIGITS and text.isascii() and text.isdigit()  # the only ASCII digits are 0-9


def is_hex(text: str) -> bool:
    """Whether ``text`` is one or more ASCII hex digits (no prefix, no sign, no ``_``)."""
    return bool(text) and set(text) <= _HEX


def decimal(text: str, *, digits: int = MAX_DIGITS) -> int | None:
    """The number ``text`` writes in one to ``digits`` (at most :data:`MAX_DIGITS`) ASCII
    decimal digits, no sign, no spaces; None for anything else."""
    return int(text) if len(text) <= digits and is_decimal(text) else None


def trailing_number(name: str) -> tuple[str, int | None]:
    """``name`` without the decimal number it ends in, and that number (``mlx5_10`` ->
    ``("mlx5_", 10)``); ``(name, None)`` where it ends in none, or in more digits than a number has."""
    head = name.rstrip("0123456789")
    number = decimal(name[len(head) :])
    return (name, None) if number is None else (head, number)


def parse_decimal(text: str, *, signed: bool = False) -> int:
    """The integer written in ASCII decimal digits (``-`` allowed when ``signed``); surrounding
    whitespace is ignored.  Raises :class:`~topoagent.core.errors.InputError` (a
    :class:`ValueError`) for anything else."""
    t = text.strip()
    negative = signed and t.startswith("-")
    value = decimal(t[1:] if negative else t, digits=19)
    if value is None:
        raise InputError(f"not a decimal number: {t[:40]!r}")
    return -value if negative else value
