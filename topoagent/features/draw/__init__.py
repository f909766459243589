"""``topoagent draw``: the host as a picture, with the problem paths marked.

:mod:`.layout` places every tile once (pure geometry over the scan); :mod:`.svg`, :mod:`.html`
and :mod:`.dot` draw that layout (:data:`FORMATS`); :mod:`.command` adds ``png`` through
Graphviz's ``neato -n2``.
"""

from __future__ import annotations

from topoagent.core.render import Render
from topoagent.features.draw import dot, html, svg

__all__ = ["FORMATS"]

#: ``draw --format`` name -> renderer (``png`` is the DOT drawn by Graphviz, in the command).
FORMATS: dict[str, Render] = {"svg": svg.render, "html": html.render, "dot": dot.render}
