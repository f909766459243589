"""Option tables: a command's options declared once, for click and for the fast path.

click builds a good command line (help, errors, "did you mean"), but importing it costs about
20 ms, a third of a whole ``topoagent scan`` on a 2-vCPU VM.  So a command that people and
prologs run often (``scan``) declares its options here as :class:`Opt` rows; click's options
are made from the rows (:func:`click_options`), and :func:`parse` reads a plain command line
from the same rows without importing click.  :func:`parse` accepts only what it can read
without doubt (known long options, ``--opt value`` and ``--opt=value``, flags, choices) and
returns None for anything else -- help, an unknown or misspelt option, a value that looks like
an option, a bad choice -- which click then handles, so every error still reads as click's.
``tests/core/test_argspec.py`` checks that both read every generated command line alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

__all__ = ["Opt", "click_options", "parse"]


class Opt(msgspec.Struct, frozen=True):
    """One option: ``--name`` stored as ``dest``; a flag, or a value (from ``choices`` if given)."""

    name: str
    dest: str
    help: str
    default: Any = None
    flag: bool = False
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    show_default: bool = False


def parse(opts: Sequence[Opt], argv: Sequence[str]) -> dict[str, Any] | None:
    """The options' values from ``argv`` (defaults for those not given), or None when click must
    read it (see the module docstring).  A repeated option keeps its last value, as in click."""
    by_name = {o.name: o for o in opts}
    values: dict[str, Any] = {o.dest: False if o.flag else o.default for o in opts}
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        opt = by_name.get(name)
        if opt is None:
            return None
        if opt.flag:
            if eq:
                return None
            values[opt.dest] = True
        else:
            if not eq:
                i += 1
                if i == len(argv):
                    return None
                value = argv[i]
                if value.startswith("-") and value != "-":
                    return None  # "--root --all": click decides what that means
            if opt.choices is not None and value not in opt.choices:
                return None
            values[opt.dest] = value
        i += 1
    return values


def click_options(opts: Sequence[Opt]) -> Callable[[Any], Any]:
    """A decorator adding the rows as click options (in the rows' order in ``--help``)."""
    import click

    def decorate(fn: Any) -> Any:
        for o in reversed(opts):
            kwargs: dict[str, Any] = {"help": o.help}
            if o.flag:
                kwargs["is_flag"] = True
            else:
                kwargs["default"] = o.default
                kwargs["show_default"] = o.show_default
                if o.metavar is not None:
                    kwargs["metavar"] = o.metavar
                if o.choices is not None:
                    kwargs["type"] = click.Choice(o.choices)
            fn = click.option(o.name, o.dest, **kwargs)(fn)
        return fn

    return decorate


def fast_runner(
    options: Callable[[], Sequence[Opt]], run: Callable[[dict[str, Any]], None]
) -> Callable[[Sequence[str]], bool]:
    """A command's ``fast(argv)``: run a plain command line without click; False leaves it to
    click (a line :func:`parse` does not take)."""

    def fast(argv: Sequence[str]) -> bool:
        params = parse(options(), argv)
        if params is None:
            return False
        run(params)
        return True

    return fast


def click_command(
    name: str, help_text: str, options: Callable[[], Sequence[Opt]], run: Callable[[dict[str, Any]], None]
) -> Any:
    """The click command of the same rows: help, errors, and every line the fast path leaves."""
    import click

    @click.command(name=name, help=help_text)
    @click_options(options())
    def command(**params: Any) -> None:
        run(params)

    return command
