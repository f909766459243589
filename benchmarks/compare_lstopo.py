"""topoagent against hwloc's lstopo on the same trees, in the same run, interleaved.

    python benchmarks/compare_lstopo.py                  # the docs table (7 repetitions)
    python benchmarks/compare_lstopo.py --reps 3 --trees dgx-h100,growth-500
    python benchmarks/compare_lstopo.py --startup        # start-up and -X importtime only
    python benchmarks/compare_lstopo.py --list           # the trees it knows

For each tree, each repetition runs, in an order that alternates between repetitions:

* ``topoagent scan --root ROOT --format json`` (the installed console script) -- the whole
  process, as a person or a scheduler prolog pays it (interpreter, imports, sysfs walk,
  analysis, JSON);
* ``lstopo -i ROOT --of xml --whole-io`` -- hwloc's whole run (C), the yardstick;
* ``topoagent.core.api.run(Inputs(root=ROOT, nvml="off"))`` in this process -- discover + analyse,
  the library call the daemon and API users make (imports already paid).

It prints medians (this machine drifts by +-30 %, so only medians of interleaved runs mean
anything), the ratios, and the peak RSS of each child (``/usr/bin/time -f %M``, MiB).  Trees:

* fixtures from tests/fixtures/machines (``dgx-h100``, ``cloud-vm`` ...);
* real captures from ``../shared/real-sysfs`` (``real:NAME``, unpacked like tests/realtrees.py);
* ``growth-N``: N endpoint functions, ``sriov-N``: the DGX layout with 16 ConnectX-7 x N VFs
  (benchmarks/gen_tree.py);
* ``NAME.toml``: a machine description kept in benchmarks/trees (``aws-p5.toml``).

Timings are for the docs (docs/benchmarks.md), never asserted in tests.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for p in (REPO, REPO / "tests", REPO / "benchmarks"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import gen_tree  # noqa: E402  found through the sys.path set above

DELL = "32em64t-2n8c+dax+nvme+mic+dimms"
DEFAULT_TREES = (
    "cloud-vm,dgx-h100,real:" + DELL + ",growth-10,growth-500,growth-1000,growth-2000,"
    "growth-4000,sriov-0,sriov-16,sriov-56,sriov-125,sriov-250"
)


@dataclass
class Tree:
    label: str
    root: Path
    functions: int
    endpoints: int


@dataclass
class Row:
    tree: Tree
    inproc: list[float] = field(default_factory=list)
    proc: list[float] = field(default_factory=list)
    lstopo: list[float] = field(default_factory=list)
    proc_rss: int = 0
    lstopo_rss: int = 0
    phases: dict[str, list[float]] = field(default_factory=dict)


# -- running things -----------------------------------------------------------------------------


def timed_child(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, int]:
    """Run ``argv`` with stdout and stderr discarded: (seconds, exit status)."""
    t0 = time.perf_counter()
    rc = subprocess.call(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=CHILD_CWD)
    return time.perf_counter() - t0, rc


def peak_rss(argv: list[str], env: dict[str, str] | None = None) -> int:
    """Peak RSS (KiB) of one run of ``argv``, measured by ``/usr/bin/time -f %M``.

    Not from this process's ``wait4``: a child forked from a large Python process is charged
    the parent's pages it touched before ``exec``, which would hide a small tool's footprint.
    """
    gnu_time = shutil.which("time", path="/usr/bin:/bin")
    if gnu_time is None:
        return 0
    with tempfile.NamedTemporaryFile("r") as out:
        subprocess.call(
            [gnu_time, "-f", "%M", "-o", out.name, *argv],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=CHILD_CWD,
        )
        text = out.read().strip().splitlines()
    return int(text[-1]) if text and text[-1].isdecimal() else 0


#: Children run outside the checkout, so ``-m topoagent`` imports the installed package.
CHILD_CWD = tempfile.gettempdir()


def topoagent_cmd() -> list[str]:
    """How a person runs topoagent: the console script beside this interpreter, else ``-m``."""
    script = Path(sys.executable).with_name("topoagent")
    return [str(script)] if script.exists() else [sys.executable, "-m", "topoagent"]


def topoagent_argv(root: Path) -> list[str]:
    return [*topoagent_cmd(), "scan", "--root", str(root), "--format", "json"]


def install_note() -> str:
    """Which topoagent the children import, and whether its bytecode is cached (else every run
    compiles the sources: an editable install, or PYTHONDONTWRITEBYTECODE, costs ~30 ms)."""
    probe = (
        "import importlib.util, os, topoagent; f = topoagent.__file__; "
        "print(os.path.dirname(f), os.path.exists(importlib.util.cache_from_source(f)))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=CHILD_CWD)
    where, _, cached = out.stdout.strip().rpartition(" ")
    if cached != "True":
        return (
            f"WARNING: topoagent from {where or '?'} has no cached bytecode, so whole-process times include "
            "compiling it; measure from a regular install (pip install .) for the docs"
        )
    return f"topoagent from {where} ({' '.join(topoagent_cmd())}), bytecode cached"


def lstopo_argv(root: Path) -> list[str]:
    exe = shutil.which("lstopo-no-graphics") or shutil.which("lstopo")
    if exe is None:
        raise SystemExit("lstopo not found: apt-get install -y hwloc")
    return [exe, "-i", str(root), "--of", "xml", "--whole-io"]


def _lstopo_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("HWLOC_")}


def inprocess(root: Path) -> tuple[float, dict[str, float]]:
    """Seconds for discover + analyse in this process, and the result's own phase timings."""
    from topoagent.core.api import run
    from topoagent.core.inputs import Inputs

    gc.collect()
    t0 = time.perf_counter()
    result = run(Inputs(root=str(root), nvml="off"))
    elapsed = time.perf_counter() - t0
    phases = dict(result.timings)
    del result
    return elapsed, phases


def check_tree(row: Row) -> None:
    """Once per tree, outside the timings: both tools succeed (their output is counted) and
    their peak RSS is taken."""
    tree = row.tree
    out = subprocess.run(topoagent_argv(tree.root), capture_output=True, text=True, cwd=CHILD_CWD)
    if out.returncode not in (0, 1):
        raise SystemExit(f"{tree.label}: topoagent failed ({out.returncode}): {out.stderr[-500:]}")
    import json

    doc = json.loads(out.stdout)
    hw = subprocess.run(lstopo_argv(tree.root), capture_output=True, text=True, env=_lstopo_env())
    if hw.returncode != 0:
        raise SystemExit(f"{tree.label}: lstopo failed: {hw.stderr[-300:]}")
    n_hw = len(re.findall(r'type="(?:PCIDev|Bridge)"[^>]*pci_busid', hw.stdout))
    row.proc_rss = peak_rss(topoagent_argv(tree.root))
    row.lstopo_rss = peak_rss(lstopo_argv(tree.root), env=_lstopo_env())
    print(
        f"  {tree.label}: topoagent {len(doc['devices'])} devices, lstopo {n_hw} PCI objects, "
        f"sysfs {tree.functions} functions",
        file=sys.stderr,
    )


def measure(tree: Tree, reps: int) -> Row:
    row = Row(tree)
    check_tree(row)

    def proc() -> None:
        t, rc = timed_child(topoagent_argv(tree.root))
        if rc not in (0, 1):
            raise SystemExit(f"{tree.label}: topoagent exit {rc}")
        row.proc.append(t)

    def hw() -> None:
        t, rc = timed_child(lstopo_argv(tree.root), env=_lstopo_env())
        if rc != 0:
            raise SystemExit(f"{tree.label}: lstopo exit {rc}")
        row.lstopo.append(t)

    def lib() -> None:
        t, phases = inprocess(tree.root)
        row.inproc.append(t)
        for k, v in phases.items():
            row.phases.setdefault(k, []).append(v)

    steps: list[tuple[str, Callable[[], None]]] = [("process", proc), ("lstopo", hw), ("in-process", lib)]
    lib()  # warm the page cache and this process's imports; not counted
    row.inproc.clear()
    row.phases.clear()
    for r in range(reps):
        order = steps if r % 2 == 0 else steps[::-1]
        for _, step in order:
            step()
    return row


# -- trees --------------------------------------------------------------------------------------


def _scratch() -> Path:
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="topoagent-bench-", dir=base))


def make_tree(label: str, scratch: Path) -> Tree:
    dest = scratch / label.replace(":", "_").replace("+", "_")
    if label.endswith(".toml"):  # a description kept with the benchmarks (benchmarks/trees/)
        from fakesysfs import generate

        root = generate(REPO / "benchmarks" / "trees" / label, scratch / label.removesuffix(".toml"))
        return Tree(label, root, gen_tree.count_functions(root), gen_tree.count_endpoints(root))
    if label.startswith("real:"):
        import realtrees

        name = label[len("real:") :]
        tarball = realtrees.tarballs().get(name)
        if tarball is None:
            raise SystemExit(f"no capture {name} in {realtrees.real_sysfs_dir()}")
        root = realtrees.unpack(tarball, dest)
    elif re.fullmatch(r"(growth|sriov)-\d+", label):
        kind, n = label.split("-")
        root = gen_tree.make(kind, int(n), dest)
    else:
        from fakesysfs import generate

        root = generate(label, dest)
    return Tree(label, root, gen_tree.count_functions(root), gen_tree.count_endpoints(root))


def _remove(tree: Tree, label: str) -> None:
    if label.startswith("real:"):
        import realtrees

        realtrees._rmtree(tree.root.parent)  # some captures hold read-only directories
    else:
        shutil.rmtree(tree.root, ignore_errors=True)


# -- start-up -------------------------------------------------------------------------------------


#: The modules a ``scan --format json`` process imports (its fast path, the sources, the analysis
#: and the JSON report): importing them alone is the start-up a scan pays before any work.
SCAN_IMPORTS = ", ".join(
    (
        "topoagent.cli",
        "topoagent.core.command.scan",
        "topoagent.core.api",
        "topoagent.core.read.sysfs",
        "topoagent.core.render.json_report",
    )
)


def startup(reps: int, dgx_root: Path) -> list[str]:
    """Median wall time of a bare interpreter, of importing msgspec (the floor under any process
    that uses the model) and everything a scan imports, ``--version``, the DGX scan and lstopo
    on the same tree; the importtime top."""
    cases = [
        ("`python -c pass` (bare interpreter)", [sys.executable, "-c", "pass"]),
        ("`python -S -c pass`", [sys.executable, "-S", "-c", "pass"]),
        ("`python -c 'import msgspec'` (the model's library)", [sys.executable, "-c", "import msgspec"]),
        ("`python -c 'import <what scan imports>'`", [sys.executable, "-c", f"import {SCAN_IMPORTS}"]),
        ("`topoagent --version`", [*topoagent_cmd(), "--version"]),
        ("`scan --root dgx-h100 --format json`", topoagent_argv(dgx_root)),
        ("`lstopo -i dgx-h100 --of xml --whole-io`", lstopo_argv(dgx_root)),
    ]
    times: dict[str, list[float]] = {label: [] for label, _ in cases}
    rss: dict[str, int] = {label: 0 for label, _ in cases}
    for label, argv in cases:
        rss[label] = peak_rss(argv)
    for r in range(reps):
        for label, argv in cases if r % 2 == 0 else cases[::-1]:
            times[label].append(timed_child(argv)[0])
    lines = ["| command | median ms | peak RSS MiB |", "|---|---|---|"]
    for label, _ in cases:
        lines.append(f"| {label} | {statistics.median(times[label]) * 1000:.0f} | {rss[label] / 1024:.0f} |")
    lines += [
        "",
        "`-X importtime` of the DGX scan, top 12 modules by cumulative time"
        " (one run, microseconds; nested modules count in their importer too):",
        "",
        "```",
    ]
    lines += importtime_top(dgx_root, 12)
    lines.append("```")
    return lines


def importtime_top(root: Path, n: int) -> list[str]:
    cmd = topoagent_cmd()  # the console script (as a person runs it), else -m topoagent
    argv = [
        sys.executable,
        "-X",
        "importtime",
        *(cmd[1:] if cmd[0] == sys.executable else cmd),
        "scan",
        "--root",
        str(root),
        "--format",
        "json",
    ]
    out = subprocess.run(argv, capture_output=True, text=True, cwd=CHILD_CWD)
    rows = []
    for line in out.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if m:
            rows.append((int(m.group(2)), int(m.group(1)), len(m.group(3)) - 1, m.group(4)))
    total = sum(c for c, _, depth, _ in rows if depth == 0)
    top = sorted(rows, reverse=True)[:n]
    lines = [f"total of top-level imports: {total / 1000:.0f} ms"]
    lines += [f"{c:>8} cumulative {s:>7} self  {name}" for c, s, _, name in top]
    return lines


# -- report ---------------------------------------------------------------------------------------


def _ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def table(rows: list[Row]) -> list[str]:
    lines = [
        "| tree | PCI functions (endpoints) | in-process ms | whole process ms | lstopo ms "
        "| in-process / lstopo | process / lstopo | topoagent RSS MiB | lstopo RSS MiB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ip, pr, hw = _ms(r.inproc), _ms(r.proc), _ms(r.lstopo)
        lines.append(
            f"| {r.tree.label} | {r.tree.functions} ({r.tree.endpoints}) | {ip:.0f} | {pr:.0f} | "
            f"{hw:.0f} | {ip / hw:.2f} | {pr / hw:.2f} | {r.proc_rss / 1024:.0f} | "
            f"{r.lstopo_rss / 1024:.0f} |"
        )
    return lines


def phases(rows: list[Row]) -> list[str]:
    names = sorted({k for r in rows for k in r.phases})
    lines = [
        "| tree | " + " | ".join(f"{n} ms" for n in names) + " | ms per 1,000 functions (in-process) |",
        "|---|" + "---|" * (len(names) + 1),
    ]
    for r in rows:
        cells = [f"{_ms(r.phases[n]):.1f}" if n in r.phases else "" for n in names]
        per_k = _ms(r.inproc) / r.tree.functions * 1000
        lines.append(f"| {r.tree.label} | " + " | ".join(cells) + f" | {per_k:.0f} |")
    return lines


def machine() -> str:
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    hw = subprocess.run([lstopo_argv(Path("/"))[0], "--version"], capture_output=True, text=True).stdout.strip()
    return (
        f"{platform.node() or 'host'}: {model or platform.processor()}, {os.cpu_count()} CPUs, "
        f"Linux {platform.release()}, Python {platform.python_version()}, {hw}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description="topoagent vs lstopo, interleaved")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--trees", default=DEFAULT_TREES)
    ap.add_argument("--startup", action="store_true", help="only start-up and -X importtime")
    ap.add_argument("--no-startup", action="store_true")
    ap.add_argument("--list", action="store_true")
    opts = ap.parse_args()
    if opts.list:
        print(DEFAULT_TREES.replace(",", "\n"))
        return
    scratch = _scratch()
    try:
        print(f"{machine()}; {opts.reps} interleaved repetitions, medians\n{install_note()}\n")
        if not opts.startup:
            rows = []
            for label in opts.trees.split(","):
                tree = make_tree(label, scratch)
                rows.append(measure(tree, opts.reps))
                print(table(rows[-1:])[-1], file=sys.stderr, flush=True)
                _remove(tree, label)
            print("\n".join(table(rows)))
            print()
            print("\n".join(phases(rows)))
            print()
        if opts.startup or not opts.no_startup:
            dgx = make_tree("dgx-h100", scratch)
            print("\n".join(startup(max(opts.reps, 9), dgx.root)))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
