"""Renderers of a scan: values in, text out, one module per format.

A renderer is ``render(result, **options) -> str`` (``options`` are the command's render
options, such as ``show_all`` or ``pretty``; a renderer takes the ones it knows and ignores the
rest).  :data:`FORMATS` names ``scan``'s formats; each feature that renders (``plan``,
``draw``, ``vms``) keeps its own table the same way in its package.  A format read by people
on a terminal is wrapped by :func:`for_people`, so a control character a host put in a name is
shown, never sent (:mod:`topoagent.core.render.escape`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from topoagent.core.render import json_report, matrix, tree
from topoagent.core.render.escape import text_output

__all__ = ["FORMATS", "Render", "for_people"]

#: A renderer: ``render(result, **options) -> str``.
Render = Callable[..., str]


def for_people(fn: Render) -> Render:
    """``fn`` with its output's control characters shown as ``\\x1b`` (a text format)."""

    def text(*args: Any, **kwargs: Any) -> str:
        return text_output(fn(*args, **kwargs))

    return text


#: ``scan --format`` name -> renderer, in the order ``--help`` lists them.
FORMATS: dict[str, Render] = {
    "tree": for_people(tree.render),
    "json": json_report.render,
    "matrix": for_people(matrix.render),
}
