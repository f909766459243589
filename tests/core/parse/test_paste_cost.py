"""Reading a pasted report costs work linear in its lines, for every paste kind.

No timing: the test counts the lines of the package's code that run (a ``sys.settrace`` hook
on the package's frames, every loop turn and comprehension item included) while
:func:`~topoagent.core.paste.read_pastes` finds, parses and joins a paste, and compares a
paste with 16 times its lines.  Linear work gives about 16 times the count; a step that
walks the whole paste again for each line (what ``_extend`` once did through ``_start_other``:
32,000 ``numactl -H`` lines took 16-20 s) gives hundreds of times.  Wall-clock numbers are
``benchmarks/bench_paste.py``'s.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from benchmarks.bench_paste import SAMPLES, glued

import topoagent
from topoagent.core.parse import segment as pk
from topoagent.core.paste import PasteInput, read_pastes

PACKAGE = str(Path(topoagent.__file__).parent)
#: The smaller paste holds at least this many lines (copies of the kind's public paste,
#: benchmarks/bench_paste.py's SAMPLES), so fixed costs (making a snapshot) hide no per-line one.
BASE_LINES = 100


def _lines_run(fn: Callable[..., Any], *args: Any) -> int:
    """How many lines of the package's code run while ``fn(*args)`` does."""
    count = 0

    def local(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal count
        count += event == "line"
        return local

    def start(frame: FrameType, event: str, arg: object) -> Any:
        return local if frame.f_code.co_filename.startswith(PACKAGE) else None

    sys.settrace(start)
    try:
        fn(*args)
    finally:
        sys.settrace(None)
    return count


def test_every_kind_has_a_sample() -> None:
    assert list(SAMPLES) == [k.name for k in pk.KINDS]


@pytest.mark.parametrize("kind", pk.KINDS, ids=lambda k: k.name)
def test_sixteen_times_the_lines_cost_at_most_twenty_times_the_work(kind: pk.PasteKind) -> None:
    small = glued(kind.name, BASE_LINES)
    large = "\n".join([small] * 16)
    assert kind in pk.find_outputs(large).kinds()
    work = [_lines_run(read_pastes, [PasteInput(kind.name, text)]) for text in (small, large)]
    assert work[1] <= 20 * work[0], f"{kind.name}: {work[0]} lines of code run, {work[1]} for 16 times the paste"
