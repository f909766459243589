"""Renderers: values in, text out.  A format is one module and one line in :data:`RENDERERS`.

Each renderer is ``render(result, **options) -> str`` (``options`` are the command's render
options, such as ``show_all`` or ``pretty``; a renderer takes the ones it knows and ignores the
rest).  Modules are imported only when their format is asked for, so a command pays for the
renderer it uses and no other.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any

__all__ = ["RENDERERS", "formats", "renderer"]

#: (command, format) -> "module:function".
RENDERERS: dict[tuple[str, str], str] = {
    ("scan", "tree"): "topoagent.outputs.tree:render",
    ("scan", "json"): "topoagent.outputs.json_report:render",
    ("scan", "matrix"): "topoagent.outputs.matrix:render",
    ("draw", "svg"): "topoagent.outputs.draw_svg:render",
    ("draw", "html"): "topoagent.outputs.draw_html:render",
    ("draw", "dot"): "topoagent.outputs.draw_dot:render",
    ("plan", "text"): "topoagent.outputs.plan_text:render",
    ("plan", "json"): "topoagent.outputs.plan_json:render",
    ("plan", "env"): "topoagent.outputs.plan_env:render",
    ("plan", "slurm"): "topoagent.outputs.plan_slurm:render",
    ("plan", "nccl-topo"): "topoagent.outputs.plan_nccl_topo:render",
    ("plan", "rails"): "topoagent.outputs.plan_rails:render",
    ("plan", "dra"): "topoagent.outputs.plan_dra:render",
    ("vms", "text"): "topoagent.outputs.vms_text:render",
    ("vms", "json"): "topoagent.outputs.vms_json:render",
}


def formats(command: str) -> tuple[str, ...]:
    """The formats a command can render, in registration order."""
    return tuple(fmt for cmd, fmt in RENDERERS if cmd == command)


#: The formats read by people on a terminal: control characters in them are shown, not sent.
TEXT_FORMATS = frozenset(
    {("scan", "tree"), ("scan", "matrix"), ("plan", "text"), ("plan", "env"), ("plan", "slurm"), ("vms", "text")}
)


def renderer(command: str, fmt: str) -> Callable[..., str]:
    """The render function of a command's format (``KeyError`` when there is none).  A text
    format's output has its control characters shown as ``\\x1b`` (:mod:`topoagent.outputs.escape`)."""
    module, _, name = RENDERERS[(command, fmt)].partition(":")
    fn: Callable[..., Any] = getattr(import_module(module), name)
    if (command, fmt) not in TEXT_FORMATS:
        return fn

    def text(*args: Any, **kwargs: Any) -> str:
        from topoagent.outputs.escape import text_output

        return text_output(fn(*args, **kwargs))

    return text
