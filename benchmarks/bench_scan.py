"""Benchmark `topoagent scan`: start-up, whole-command wall time and peak memory.

    python benchmarks/bench_scan.py [--runs 10] [--machines dgx-h100,no-gpu] [--live]
    python benchmarks/bench_scan.py --runs 1 --trees nics:1000,numa:4096 [--code DIR]

Each machine description is generated once into a temporary root; each run is a fresh
process (`python -m topoagent scan --root R --format F`), so import time is counted the way a
person or a scheduler prolog pays it.  Prints a Markdown table (median and max of the runs,
peak RSS of the child).  ``--trees`` benchmarks the generated growth trees of
``benchmarks/gen_tree.py`` (``KIND:N``) in every scan and plan format instead; ``--code`` runs the
``topoagent`` package found in another checkout (an older commit, for before/after rows).
Timings are for the docs, never asserted in tests.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


#: Where ``python -m topoagent`` finds the package (``--code``).
CODE = REPO
#: Every output format a generated tree is benchmarked in (``--trees``).
FORMATS = [("scan", f) for f in ("json", "tree", "matrix")] + [
    ("plan", f) for f in ("text", "json", "slurm", "nccl-topo", "rails", "dra")
]


def run_once(args: list[str]) -> tuple[float, int]:
    """Wall seconds and this child's own peak RSS (KiB)."""
    t0 = time.perf_counter()
    with subprocess.Popen(
        [sys.executable, "-m", "topoagent", *args], cwd=CODE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    ) as proc:
        err = proc.stderr.read() if proc.stderr else b""
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"scan failed: {err.decode()[:300]}")
    return elapsed, usage.ru_maxrss  # KiB on Linux


def bench(label: str, args: list[str], runs: int) -> str:
    times, rss = [], 0
    for _ in range(runs):
        try:
            t, r = run_once(args)
        except SystemExit as e:
            return f"| {label} | {str(e).strip().splitlines()[-1][:60]} | | |"
        times.append(t)
        rss = max(rss, r)
    return f"| {label} | {statistics.median(times) * 1000:.0f} | {max(times) * 1000:.0f} | {rss / 1024:.0f} |"


def bench_trees(specs: str, runs: int, where: Path, formats: list[tuple[str, str]]) -> list[str]:
    """Rows for generated trees (``nics:1000,numa:256``) in ``formats``; a tree already in
    ``where`` (``nics1000``) is reused."""
    from benchmarks.gen_tree import make

    rows = []
    for spec in specs.split(","):
        kind, n = spec.split(":")
        root = where / f"{kind}{n}"
        if not (root / "sys").is_dir():
            root = make(kind, int(n), root)
        try:
            run_once(["scan", "--root", str(root), "--format", "tree"])  # warm the page cache
        except SystemExit:
            pass  # the rows say how it fails
        for cmd, fmt in formats:
            rows.append(bench(f"{kind} {n} `{cmd} --format {fmt}`", [cmd, "--root", str(root), "--format", fmt], runs))
            print(rows[-1], file=sys.stderr, flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--machines", default="dgx-h100,dgx-a100-nps4,cloud-vm,no-gpu")
    ap.add_argument("--live", action="store_true", help="also scan this host's /")
    ap.add_argument("--trees", help="generated trees KIND:N,... (gen_tree.py kinds) in every format")
    ap.add_argument("--code", type=Path, default=REPO, help="the checkout whose topoagent runs")
    ap.add_argument("--tree-dir", type=Path, help="where --trees are generated (and reused); default a temporary one")
    ap.add_argument("--formats", help="COMMAND:FORMAT,... for --trees (default every scan and plan format)")
    opts = ap.parse_args()
    global CODE
    CODE = opts.code.resolve()
    from tests.fakesysfs import generate

    rows = ["| scan | median ms | max ms | peak RSS MiB |", "|---|---|---|---|"]
    rows.append(bench("`--version` (interpreter start-up)", ["--version"], opts.runs))
    with tempfile.TemporaryDirectory() as tmp:
        for name in [] if opts.trees else opts.machines.split(","):
            root = generate(name, Path(tmp) / name)
            n = len(os.listdir(root / "sys/bus/pci/devices"))
            for fmt in ("json", "tree"):
                rows.append(
                    bench(
                        f"{name} ({n} functions) `--format {fmt}`",
                        ["scan", "--root", str(root), "--format", fmt],
                        opts.runs,
                    )
                )
        if opts.trees:
            formats = [tuple(f.split(":", 1)) for f in opts.formats.split(",")] if opts.formats else FORMATS
            rows += bench_trees(opts.trees, opts.runs, opts.tree_dir or Path(tmp), formats)  # type: ignore[arg-type]
    if opts.live:
        rows.append(bench("this host `/` `--format json`", ["scan", "--format", "json"], opts.runs))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {opts.runs} runs each\n")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
