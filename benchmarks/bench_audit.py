"""``topoagent audit`` on a fake ``/proc``: what finding the GPU users by their open files costs.

    python benchmarks/bench_audit.py [--processes 1000,5000] [--users 64] [--fds 40] [--runs 5]

Writes, once per N, the DGX H100 fixture with N processes under ``proc/`` (each with ``--fds``
open files; ``--users`` of them hold a ``/dev/nvidiaN``, with 8 threads and a numa_maps) and times,
in one process that has imported topoagent (as the daemon calls it):

* ``scan``: ``topoagent.core.api.run`` of the tree (what every audit pays first);
* ``audit fd``: :func:`~topoagent.features.audit.read.read_audit` by open device nodes, then
  :func:`~topoagent.features.audit.advise.advise` -- every pid's fd links read;
* ``audit nvml``: the same with the GPU users given (as NVML gives them): only their files read.

Also the live host's own ``audit --no-nvml`` fd scan when ``--live``.  Prints a Markdown table
(medians of ``--runs``).  Standard library plus topoagent and the test suite's fake-sysfs
generator; run from the repository root.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def make_host(n: int, users: int, fds: int, out: Path) -> Path:
    """The DGX H100 fixture with ``n`` processes, ``users`` of them holding a GPU."""
    from tests.fakesysfs import generate, load_machine

    desc = load_machine("dgx-h100")
    desc["machine"]["nvidia_procfs"] = True
    procs = []
    for i in range(n):
        gpu = i % 8
        holder = i < users
        procs.append(
            {
                "pid": 1000 + i,
                "name": "python3" if holder else "daemon",
                "fds": ["/dev/null"] * (fds - 1) + ([f"/dev/nvidia{gpu}"] if holder else ["/dev/null"]),
                "threads": ["0-55,112-167" if gpu < 4 else "56-111,168-223"] * (8 if holder else 1),
                "memory": {str(0 if gpu < 4 else 1): 4096} if holder else {},
                "environ": {"NCCL_IB_HCA": "=mlx5_0"} if holder else {},
            }
        )
    desc["process"] = procs
    return generate(desc, out / f"procs-{n}")


def median_ms(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--processes", default="1000,5000")
    ap.add_argument("--users", type=int, default=64)
    ap.add_argument("--fds", type=int, default=40)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--live", action="store_true")
    args = ap.parse_args()

    from topoagent.core.api import scan
    from topoagent.core.hostfs import HostFS
    from topoagent.features.audit.advise import advise
    from topoagent.features.audit.read import read_audit

    print("| processes | GPU users | fds each | scan ms | audit fd ms | audit nvml ms | findings |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in args.processes.split(",")):
            root = str(make_host(n, args.users, args.fds, Path(tmp)))
            result = scan(root, nvml="off")
            gpus = [g.bdf for g in result.topology.gpus]
            given = {b: tuple(1000 + i for i in range(args.users) if i % 8 == k) for k, b in enumerate(gpus)}
            report = advise(result, read_audit(HostFS(root)))
            row = [
                n,
                args.users,
                args.fds,
                f"{median_ms(lambda: scan(root, nvml='off'), args.runs):.0f}",  # noqa: B023
                f"{median_ms(lambda: advise(result, read_audit(HostFS(root))), args.runs):.0f}",  # noqa: B023
                f"{median_ms(lambda: advise(result, read_audit(HostFS(root), nvml_pids=given)), args.runs):.0f}",  # noqa: B023
                len(report.findings),
            ]
            print("| " + " | ".join(map(str, row)) + " |")
    if args.live:
        live = scan("/", nvml="off")
        facts = read_audit(HostFS("/"))
        ms = median_ms(lambda: advise(live, read_audit(HostFS("/"))), args.runs)
        print(f"\nlive host: {facts.examined} processes examined, audit fd {ms:.0f} ms")


if __name__ == "__main__":
    main()
