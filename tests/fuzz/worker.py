"""The audited fuzz worker: damage fixture trees, scan each in this process under an audit hook,
and report as JSON what went wrong.

    python -m tests.fuzz.worker --count 500 --seed 1 --fixtures sriov-nic,cloud-vm [--base DIR]

Run as a subprocess by tests/core/read/test_fuzz_trees.py, since an audit hook (PEP 578) cannot be
removed once added.  While a scan runs, every ``open``/``os.listdir``/``os.scandir`` outside the
damaged tree's root (and outside Python's own files) is a leak; any exception that is not a
:class:`~topoagent.core.errors.TopoagentError` is a crash; views that disagree are a lost or doubled
device.  Output: one JSON object ``{"count": N, "applied": M, "failures": [...]}`` on stdout,
each failure with its fixture, mutations and what happened.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
for _p in (str(REPO), str(REPO / "tests")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

_active: list[str] = []  # the root being scanned, while a scan runs
_leaks: list[str] = []
_ALLOWED: list[str] = []


def _hook(event: str, args: tuple[object, ...]) -> None:
    if not _active or event not in ("open", "os.listdir", "os.scandir") or not args:
        return
    path = args[0]
    if not isinstance(path, (str, bytes)):
        return  # a descriptor (fdopen, listdir of an fd)
    p = os.fsdecode(path)
    if not os.path.isabs(p):
        p = os.path.join(os.getcwd(), p)  # relative paths: the scan has no business with them
    root = _active[0]
    if p == root or p.startswith(root + "/"):
        return
    if any(p == a or p.startswith(a + "/") for a in _ALLOWED):
        return
    _leaks.append(p)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fixtures", default="sriov-nic,cloud-vm,faulty-gpu-node,grace-hopper,no-gpu,dgx-h100")
    ap.add_argument("--base", default=None, help="where to generate the trees (default: a temp dir)")
    opts = ap.parse_args()

    from tests.fakesysfs import generate
    from tests.fuzz.check import read_paths, scan_and_check
    from tests.fuzz.trees import apply_all, draw_mutations, targets

    base = Path(tempfile.mkdtemp(prefix="topoagent-fuzz-", dir=opts.base))
    try:
        trees = {}
        for name in opts.fixtures.split(","):
            root = generate(name, base / name / "root")
            trees[name] = (root, targets(root, read_paths(root)))
        # Python's own files (lazy imports during a scan) are no leak; nothing else outside.
        _ALLOWED.extend(
            os.path.realpath(p).rstrip("/")
            for p in {sys.prefix, sys.base_prefix, str(REPO), *[p for p in sys.path if p]}
        )
        _ALLOWED.append("/dev/null")
        sys.addaudithook(_hook)

        rng = random.Random(opts.seed)
        names = sorted(trees)
        failures: list[dict[str, object]] = []
        applied = 0
        slowest = 0.0
        for i in range(opts.count):
            name = rng.choice(names)
            root, t = trees[name]
            done, undo = apply_all(root, draw_mutations(rng, t))
            applied += len(done)
            what = [str(m) for m in done]
            _leaks.clear()
            start = time.perf_counter()
            try:
                _active.append(os.path.realpath(root))
                try:
                    problems = scan_and_check(root)
                finally:
                    _active.clear()
            except Exception as exc:  # noqa: BLE001 - a crash: record it, go on
                problems = [f"{type(exc).__name__}: {exc}", "".join(traceback.format_exception(exc)[-6:])]
            finally:
                undo()
            slowest = max(slowest, time.perf_counter() - start)
            if _leaks:
                problems.append(f"read outside the root: {sorted(set(_leaks))[:5]}")
            if problems:
                failures.append({"example": i, "fixture": name, "mutations": what, "problems": problems})
        print(
            json.dumps({"count": opts.count, "applied": applied, "slowest_s": round(slowest, 3), "failures": failures})
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
