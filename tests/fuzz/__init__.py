"""Helpers of the hostile-input suite (tests/test_fuzz_*.py): sizes, the exception contract,
and the cross-view check that no device is lost or doubled.

Size: ``TOPOAGENT_FUZZ_EXAMPLES`` (default :data:`DEFAULT_EXAMPLES`) is the number of generated
inputs *per property*; CI keeps the default, a long sitting raises it::

    TOPOAGENT_FUZZ_EXAMPLES=2000 .venv/bin/python -m pytest -q \
        tests/core/parse/test_fuzz_parsers.py tests/core/read/test_fuzz_trees.py

Every property is derandomized (hypothesis draws from a seed fixed by the test itself, no example
database), so a CI run is deterministic: a failure is found again on every run until fixed.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings

from topoagent.core.errors import TopoagentError

__all__ = [
    "ABSURD_SECONDS",
    "DEFAULT_EXAMPLES",
    "HOSTILE_TEXTS",
    "examples",
    "fuzz_settings",
    "own_errors_only",
    "tree_bdfs",
    "views_agree",
]

ENV_VAR = "TOPOAGENT_FUZZ_EXAMPLES"
DEFAULT_EXAMPLES = 60
#: Nothing a parser or a scan of a fixture-sized tree does should take this long; the bound is
#: absurd on purpose (other jobs share the machine): it catches hangs and blow-ups, not slowness.
ABSURD_SECONDS = 10.0

T = TypeVar("T")


def examples(scale: float = 1.0) -> int:
    """Generated inputs for one property: ``$TOPOAGENT_FUZZ_EXAMPLES`` (or the default) x scale."""
    raw = os.environ.get(ENV_VAR, "")
    base = int(raw) if raw.isdecimal() else DEFAULT_EXAMPLES
    return max(1, int(base * scale))


def fuzz_settings(scale: float = 1.0) -> settings:
    """Deterministic hypothesis settings sized by :func:`examples`."""
    return settings(
        max_examples=examples(scale),
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )


def own_errors_only(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
    """Call ``fn``; a :class:`TopoagentError` (refusing bad input) is fine and answers None,
    any other exception propagates (a bug), and so does a call that takes absurdly long."""
    start = time.perf_counter()
    try:
        return fn(*args, **kwargs)
    except TopoagentError:
        return None
    finally:
        took = time.perf_counter() - start
        assert took < ABSURD_SECONDS, f"{getattr(fn, '__name__', fn)} took {took:.1f} s"


#: Values a hostile capture or paste puts where a number, a list or a name belongs.
HOSTILE_TEXTS: tuple[str, ...] = (
    "",
    " ",
    "\n",
    "\x00",
    "-",
    "--",
    "-1",
    "0",
    "00",
    "+1",
    "0x",
    "0xg",
    "1e9",
    "nan",
    "inf",
    "²",
    "١",
    "٣-٥",
    "߀",
    "𝟙",
    "Ⅻ",
    "0-999999999",
    "0-4294967295",
    "4294967296",
    "99999999999999999999",
    "9" * 5000,  # past int()'s 4,300 digits
    "0-3,",
    ",",
    "3-1",
    "0-3-5",
    "1,,2",
    "ffffffff," * 40,
    "f" * 5000,
    "0x" + "f" * 300,
    "Number of VFs: 1000000000",
    "Total VFs: 65536, Number of VFs: 70000",
    "32.0 GT/s PCIe" * 50,
    "Unknown",
    "16 GT/s",
    "2.5 GT/s",
    "8.0 GT/s PCIe",
    "x16",
    "255",
    "-2",
    "\u202e0",
    "0\u200b1",
    "üñí",
    "\ufffd",
    "\udcff",
    "\t\t\t",
    "\r\n",
    "é" * 3000,
)


# Device lines of ``scan --all``'s tree: box drawing, then the BDF (domain of 4+ hex digits).
_TREE_BDF = re.compile(r"^[\s│├└─]*([0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])\s", re.MULTILINE)


def tree_bdfs(tree_text: str) -> Counter[str]:
    """The BDFs the tree view shows as devices, with how often each appears."""
    return Counter(_TREE_BDF.findall(tree_text))


def views_agree(tree_text: str, doc: dict[str, Any]) -> list[str]:
    """What is wrong between ``scan --all`` (tree) and ``scan --format json`` of one result:
    devices lost or doubled in a view, ids or BDFs not unique.  Empty when they agree."""
    problems = []
    ids = Counter(d["id"] for d in doc["devices"])
    bdfs = Counter(d["bdf"] for d in doc["devices"] if d["bdf"] is not None)
    problems += [f"device id {i} appears {n} times in the JSON" for i, n in ids.items() if n > 1]
    problems += [f"BDF {b} appears {n} times in the JSON" for b, n in bdfs.items() if n > 1]
    shown = tree_bdfs(tree_text)
    problems += [f"BDF {b} appears {n} times in the tree" for b, n in shown.items() if n > 1]
    lost = set(bdfs) - set(shown)
    extra = set(shown) - set(bdfs)
    if lost:
        problems.append(f"in the JSON, not in the tree: {sorted(lost)[:5]}")
    if extra:
        problems.append(f"in the tree, not in the JSON: {sorted(extra)[:5]}")
    return problems
