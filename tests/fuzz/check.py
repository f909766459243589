"""Scan a (damaged) tree in this process and check what the suite promises: only the project's
own errors, every view showing every device once, a bounded time."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.fuzz import ABSURD_SECONDS, views_agree
from topoagent.core.errors import TopoagentError

__all__ = ["read_paths", "scan_and_check"]


def scan_and_check(root: Path) -> list[str]:
    """Problems with the scan of ``root``: views that disagree, an absurd time.  A
    :class:`TopoagentError` (nothing to scan) is no problem; any other exception propagates."""
    from tests.formats import renderer
    from topoagent.core.api import run
    from topoagent.core.inputs import Inputs

    start = time.perf_counter()
    try:
        result = run(Inputs(root=str(root), nvml="off"))
    except TopoagentError:
        return []
    tree = renderer("scan", "tree")(result, show_all=True)
    doc = json.loads(renderer("scan", "json")(result))
    renderer("scan", "matrix")(result)
    problems = views_agree(tree, doc)
    took = time.perf_counter() - start
    if took > ABSURD_SECONDS:
        problems.append(f"scan and render took {took:.1f} s")
    return problems


def read_paths(root: Path) -> set[str]:
    """The root-relative paths a clean scan of ``root`` asks the reader for (where damage
    matters most)."""
    from topoagent.core.api import run
    from topoagent.core.hostfs import HostFS
    from topoagent.core.inputs import Inputs

    seen: set[str] = set()
    names = ("bytes", "listdir", "link_name", "resolve", "exists", "isdir")
    originals = {n: getattr(HostFS, n) for n in names}

    def wrapper(orig: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(self: HostFS, rel: str, *args: Any, **kwargs: Any) -> Any:
            seen.add(rel.strip("/"))
            return orig(self, rel, *args, **kwargs)

        return wrapped

    try:
        for n, orig in originals.items():
            setattr(HostFS, n, wrapper(orig))
        run(Inputs(root=str(root), nvml="off"))
    finally:
        for n, orig in originals.items():
            setattr(HostFS, n, orig)
    return seen
