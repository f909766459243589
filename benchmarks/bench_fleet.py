"""``topoagent fleet`` over N hosts' scan JSON against merely parsing the same files.

    python benchmarks/bench_fleet.py [--hosts 1000,10000] [--dir /tmp/fleet-bench]

    python benchmarks/bench_fleet.py --hosts '' --captures 50,200

Writes, once per N, a directory of N scan JSON files: the dgx-h100 fixture scanned once, copies
with other host names, and one host per faulty variant of tests/fleet_hosts.py among them (each
fault a single cause).  Then times, each as a whole process with peak RSS from
``/usr/bin/time -f %M``:

* ``fleet``: ``python -m topoagent fleet DIR --format json``;
* ``json.loads``: a process that reads and ``json.loads`` every file (the floor any tool that
  reads the fleet's JSON pays);
* ``msgspec``: the same with ``msgspec.json.decode`` (untyped).

With ``--captures N``: N capture tarballs (``topoagent capture`` of the dgx-h100 fixture, and of
dgx-h100-faults for two of them), timed through ``fleet DIR``: each capture is scanned (issue
32: 50 captures took 67.5 s while each was unpacked in full).

Prints Markdown tables (best of ``--runs``).  Standard library plus topoagent and the test
suite's fake-sysfs generator; run from the repository root.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PARSE = """
import os, sys
{imp}
d = sys.argv[1]
n = 0
for name in sorted(os.listdir(d)):
    with open(os.path.join(d, name), 'rb') as f:
        {call}(f.read())
    n += 1
print(n)
"""


def make_fleet(n: int, out: Path) -> Path:
    """``out/hosts-N``: N scan JSON files (copies of the good host, one per faulty variant)."""
    from tests.fakesysfs import generate
    from tests.fleet_hosts import FAULTY, MOVED, variant_result
    from topoagent.core.api import scan
    from topoagent.core.render.json_report import render

    d = out / f"hosts-{n}"
    if d.is_dir() and len(os.listdir(d)) == n:
        return d
    d.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        good_snap = scan(str(generate("dgx-h100", Path(tmp) / "dgx")), nvml="off").snapshot
        docs = {v: render(variant_result(good_snap, v, hostname=f"odd-{v}")) for v in ("good", *FAULTY, *MOVED)}
    good = json.loads(docs.pop("good"))
    for i in range(n - len(docs)):
        good["host"]["hostname"] = f"node-{i:05d}"
        (d / f"node-{i:05d}.json").write_text(json.dumps(good, separators=(",", ":")))
    for v, text in docs.items():
        (d / f"odd-{v}.json").write_text(text)
    return d


def make_captures(n: int, out: Path) -> Path:
    """``out/captures-N``: N capture tarballs (N - 2 of the dgx-h100 fixture, 2 of dgx-h100-faults)."""
    from tests.fakesysfs import generate

    d = out / f"captures-{n}"
    if d.is_dir() and len(os.listdir(d)) == n:
        return d
    d.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        made = {}
        for machine in ("dgx-h100", "dgx-h100-faults"):
            tree = generate(machine, Path(tmp) / machine)
            made[machine] = Path(tmp) / f"{machine}.tar.gz"
            cmd = [sys.executable, "-m", "topoagent", "capture", "--root", str(tree), "-o", str(made[machine]), "-q"]
            subprocess.run(cmd, check=True, capture_output=True)
        for i in range(n):
            src = made["dgx-h100-faults" if i >= n - 2 else "dgx-h100"]
            (d / f"node-{i:05d}.tar.gz").write_bytes(src.read_bytes())
    return d


def timed(cmd: list[str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS (KiB) and stdout of one process."""
    with tempfile.NamedTemporaryFile("r") as rss:
        t0 = time.perf_counter()
        p = subprocess.run(
            ["/usr/bin/time", "-f", "%M", "-o", rss.name, *cmd], capture_output=True, text=True, check=False
        )
        wall = time.perf_counter() - t0
        if p.returncode not in (0, 1):
            raise SystemExit(f"{cmd[:4]} failed: {p.stderr}")
        return wall, int(rss.read().strip().splitlines()[-1]), p.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", default="1000,10000")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "topoagent-fleet-bench"))
    ap.add_argument("--captures", default="", help="also time fleet over N capture tarballs (e.g. 50,200)")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    py = sys.executable
    rows = [
        (
            "| hosts | MB of JSON | fleet s | fleet peak RSS MiB | json.loads s | json.loads peak MiB | "
            "msgspec decode s | outliers |"
        ),
        "|---|---|---|---|---|---|---|---|",
    ]
    for n in (int(h) for h in args.hosts.split(",") if h):
        d = make_fleet(n, Path(args.dir))
        size = sum(f.stat().st_size for f in d.iterdir()) / 1e6
        cmds = {
            "fleet": [py, "-m", "topoagent", "fleet", str(d), "--format", "json"],
            "json": [py, "-c", PARSE.format(imp="import json", call="json.loads"), str(d)],
            "msgspec": [py, "-c", PARSE.format(imp="import msgspec", call="msgspec.json.decode"), str(d)],
        }
        best: dict[str, tuple[float, int, str]] = {}
        for _ in range(args.runs):
            for name, cmd in cmds.items():  # interleaved: drift hits all three alike
                got = timed(cmd)
                if name not in best or got[0] < best[name][0]:
                    best[name] = got
        outliers = len(json.loads(best["fleet"][2])["outliers"])
        rows.append(
            f"| {n} | {size:.0f} | {best['fleet'][0]:.2f} | {best['fleet'][1] / 1024:.0f} | "
            f"{best['json'][0]:.2f} | {best['json'][1] / 1024:.0f} | {best['msgspec'][0]:.2f} | {outliers} |"
        )
    print("\n".join(rows))
    if args.captures:
        print()
        print(_captures(args, py))


def _captures(args: argparse.Namespace, py: str) -> str:
    """The captures table: fleet over N tarballs, seconds per capture."""
    rows = ["| captures | fleet s | s per capture | fleet peak RSS MiB | outliers |", "|---|---|---|---|---|"]
    for n in (int(c) for c in args.captures.split(",") if c):
        d = make_captures(n, Path(args.dir))
        best = min(
            (timed([py, "-m", "topoagent", "fleet", str(d), "--format", "json"]) for _ in range(args.runs)),
            key=lambda t: t[0],
        )
        outliers = len(json.loads(best[2])["outliers"])
        rows.append(f"| {n} | {best[0]:.1f} | {best[0] / n:.2f} | {best[1] / 1024:.0f} | {outliers} |")
    return "\n".join(rows)


if __name__ == "__main__":
    main()
