"""Two builds of topoagent against each other and against lstopo, on the same trees, interleaved.

    python benchmarks/compare_versions.py --before /tmp/bv-before/bin/python --after /tmp/bv-after/bin/python
    python benchmarks/compare_versions.py --before A --after B --trees dgx-h100,aws-p5.toml --reps 15

Each interpreter must have its build installed the regular way (``pip install .``: cached
bytecode, as a person's install has).  For each tree, each repetition runs, in an order that
turns round between repetitions:

* the whole process of each build, ``<venv>/bin/topoagent scan --root ROOT --format json``;
* ``lstopo -i ROOT --of xml --whole-io``, the yardstick;
* the in-process scan of each build: a child of that interpreter imports topoagent, scans once
  to warm up, then times ``topoagent.run(Inputs(root, nvml="off"))`` three times and reports
  the fastest (the API call the daemon makes; imports not counted).

Medians are printed as a Markdown table for docs/benchmarks.md.  The machine is shared and
drifts, so only interleaved medians mean anything; timings are never asserted in tests.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import compare_lstopo as cl  # the trees, lstopo's command, the child runner

#: The in-process probe, run by each build's interpreter: the fastest of three scans, in ms.
_PROBE = """
import sys, time, topoagent
inputs = topoagent.Inputs(root=sys.argv[1], nvml="off")
topoagent.run(inputs)
times = []
for _ in range(3):
    t0 = time.perf_counter()
    topoagent.run(inputs)
    times.append(time.perf_counter() - t0)
print(min(times) * 1000)
"""

DEFAULT_TREES = "dgx-h100,real:" + cl.DELL + ",sriov-56,aws-p5.toml"


def _script(python: str) -> list[str]:
    script = Path(python).with_name("topoagent")
    if not script.exists():
        raise SystemExit(f"no topoagent console script beside {python}: pip install . into that venv")
    return [str(script)]


def _inproc(python: str, root: Path) -> float:
    out = subprocess.run([python, "-c", _PROBE, str(root)], capture_output=True, text=True, cwd=cl.CHILD_CWD)
    if out.returncode != 0:
        raise SystemExit(f"{python}: in-process scan failed: {out.stderr[-400:]}")
    return float(out.stdout.strip()) / 1000


def measure(label: str, root: Path, builds: dict[str, str], reps: int) -> dict[str, list[float]]:
    """Seconds per measurement name (``before process``, ``after in-process``, ``lstopo`` ...)."""
    runs: dict[str, list[float]] = {}

    def whole(name: str, python: str) -> None:
        t, rc = cl.timed_child([*_script(python), "scan", "--root", str(root), "--format", "json"])
        if rc not in (0, 1):
            raise SystemExit(f"{label}: {name} exited {rc}")
        runs.setdefault(f"{name} process", []).append(t)

    def inproc(name: str, python: str) -> None:
        runs.setdefault(f"{name} in-process", []).append(_inproc(python, root))

    def hw() -> None:
        t, rc = cl.timed_child(cl.lstopo_argv(root), env=cl._lstopo_env())
        if rc != 0:
            raise SystemExit(f"{label}: lstopo exited {rc}")
        runs.setdefault("lstopo", []).append(t)

    steps = [hw]
    for name, python in builds.items():
        steps += [lambda n=name, p=python: whole(n, p), lambda n=name, p=python: inproc(n, p)]
    for i in range(reps):
        for step in steps if i % 2 == 0 else reversed(steps):
            step()
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True, metavar="PYTHON", help="the interpreter of the build before")
    ap.add_argument("--after", required=True, metavar="PYTHON", help="the interpreter of the build after")
    ap.add_argument("--trees", default=DEFAULT_TREES)
    ap.add_argument("--reps", type=int, default=11)
    args = ap.parse_args()
    builds = {"before": args.before, "after": args.after}
    scratch = cl._scratch()
    lines = [
        "| tree | functions | lstopo ms | before in-process ms | after in-process ms "
        "| before process ms | after process ms | after process / lstopo |",
        "|---|---|---|---|---|---|---|---|",
    ]
    started = time.strftime("%Y-%m-%d %H:%M")
    for label in args.trees.split(","):
        tree = cl.make_tree(label, scratch)
        runs = measure(label, tree.root, builds, args.reps)
        ms = {k: statistics.median(v) * 1000 for k, v in runs.items()}
        lines.append(
            f"| {label} | {tree.functions} | {ms['lstopo']:.0f} | {ms['before in-process']:.0f} "
            f"| {ms['after in-process']:.0f} | {ms['before process']:.0f} | {ms['after process']:.0f} "
            f"| {ms['after process'] / ms['lstopo']:.2f} |"
        )
        print(lines[-1], file=sys.stderr)
        cl._remove(tree, label)
    print(f"{started}, {args.reps} interleaved repetitions, medians; {cl.machine()}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
