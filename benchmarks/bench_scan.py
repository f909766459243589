"""Benchmark `topoagent scan`: start-up, whole-command wall time and peak memory.

    python benchmarks/bench_scan.py [--runs 10] [--machines dgx-h100,no-gpu] [--live]

Each machine description is generated once into a temporary root; each run is a fresh
process (`python -m topoagent scan --root R --format F`), so import time is counted the way a
person or a scheduler prolog pays it.  Prints a Markdown table (median and max of the runs,
peak RSS of the child).  Timings are for the docs, never asserted in tests.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def run_once(args: list[str]) -> tuple[float, int]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "topoagent", *args], capture_output=True, cwd=REPO)
    elapsed = time.perf_counter() - t0
    if proc.returncode not in (0, 1):
        raise SystemExit(f"scan failed: {proc.stderr.decode()[:300]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return elapsed, max(before, after)  # KiB on Linux; max over children so far


def bench(label: str, args: list[str], runs: int) -> str:
    times, rss = [], 0
    for _ in range(runs):
        t, r = run_once(args)
        times.append(t)
        rss = max(rss, r)
    return (f"| {label} | {statistics.median(times) * 1000:.0f} | {max(times) * 1000:.0f} | "
            f"{rss / 1024:.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--machines", default="dgx-h100,dgx-a100-nps4,cloud-vm,no-gpu")
    ap.add_argument("--live", action="store_true", help="also scan this host's /")
    opts = ap.parse_args()
    from tests.fakesysfs import generate

    rows = ["| scan | median ms | max ms | peak RSS MiB |", "|---|---|---|---|"]
    rows.append(bench("`--version` (interpreter start-up)", ["--version"], opts.runs))
    with tempfile.TemporaryDirectory() as tmp:
        for name in opts.machines.split(","):
            root = generate(name, Path(tmp) / name)
            n = len(os.listdir(root / "sys/bus/pci/devices"))
            for fmt in ("json", "tree"):
                rows.append(bench(f"{name} ({n} functions) `--format {fmt}`",
                                  ["scan", "--root", str(root), "--format", fmt], opts.runs))
    if opts.live:
        rows.append(bench("this host `/` `--format json`", ["scan", "--format", "json"], opts.runs))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {opts.runs} runs each\n")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
