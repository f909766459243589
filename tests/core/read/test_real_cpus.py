"""CPU and NUMA facts on hwloc's CPU-only captures (``../shared/real-sysfs-cpus``, issue 29 item 13).

Three of hwloc's Linux test captures (open-mpi/hwloc tests/hwloc/linux/, BSD-3-Clause) whose
CPU facts topoagent once read differently from ``lstopo -i``.  The kernel's rules decide:

- ``cpu/online`` lists the CPUs that run; an offline CPU stays in ``cpu/possible`` and
  ``cpu/present`` and its ``cpuN/online`` reads 0 (drivers/base/cpu.c).  Where ``cpu/online`` is
  missing (kernels before 2.6.30, captures that left it out), a ``cpuN`` is online unless its
  own ``online`` reads 0.  Nothing is counted or planned on an offline CPU.
- A node exists when ``node/online`` lists it (drivers/base/node.c makes a ``nodeN`` directory
  for each); its CPUs are its ``cpulist``/``cpumap`` less the offline ones.

Each expectation below is what the kernel's files say and what hwloc's expected outputs
(``tests/hwloc/linux/<name>.output``) hold.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests import realtrees
from topoagent.core.advice.cores import host_cores
from topoagent.core.api import scan
from topoagent.core.cpuset import CpuSet

FOLDER = Path(realtrees.__file__).resolve().parents[1].parent / "shared" / "real-sysfs-cpus"


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory):
    if not realtrees.tarballs(FOLDER):
        pytest.skip(f"hwloc's CPU captures absent: no *.tar.bz2 in {FOLDER}")
    dest = tmp_path_factory.mktemp("real-cpus")
    try:
        yield realtrees.unpack_all(dest / "trees", FOLDER)
    finally:
        shutil.rmtree(dest, ignore_errors=True)


def cpus(text: str) -> CpuSet:
    return CpuSet.parse(text)


#: name -> (online CPUs, {node: its online CPUs}); the reason is in each comment.
EXPECTED = {
    # No cpu/online; cpu2, cpu5, cpu13 and cpu14 have online = 0: 12 CPUs run, all on node 0
    # (node0 has no cpulist: its CPUs come from the cpuN links, offline ones left out).
    "16em64t-4s2c2t-offlines": ("0-1,3-4,6-12,15", {0: "0-1,3-4,6-12,15"}),
    # cpu/online = 4-20; node/online = 1 (node 0 has no directory: it is not a node);
    # node1/cpulist lists the odd CPUs 1-23, of which 5-19 run.  CPUs 4-20 even are in no node.
    "offline-cpu0-node0": ("4-20", {1: "5,7,9,11,13,15,17,19"}),
    # Every cpuN runs (no online files); six nodes from cpumap, node 2 without CPUs; the nested
    # masks of nodes 3-5 are the capture's own (hwloc's fakeheterocpunuma.output keeps them).
    "fakeheterocpunuma": (
        "0-23",
        {0: "0-3", 1: "8-11", 2: "", 3: "20-23", 4: "16-23", 5: "12-23"},
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_cpus_and_nodes_follow_the_kernel(roots, name):
    if name not in roots:
        pytest.skip(f"{name}.tar.bz2 absent from {FOLDER}")
    online, nodes = EXPECTED[name]
    t = scan(roots[name], nvml="off").topology
    assert t.all_cpus == cpus(online)
    assert {n.id: str(n.cpus) for n in t.nodes} == {k: str(cpus(v)) for k, v in nodes.items()}
    # nothing is planned on an offline CPU: the cores the plan cuts hold only online CPUs
    assert CpuSet().union(*host_cores(t.cpus)) <= cpus(online)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_cpu_count_is_lstopos(roots, name):
    """``lstopo -i`` counts the same PUs (hwloc reads the same online files)."""
    if name not in roots:
        pytest.skip(f"{name}.tar.bz2 absent from {FOLDER}")
    exe = realtrees.lstopo_path()
    if exe is None:
        pytest.skip("lstopo (hwloc) is not installed")
    out = subprocess.run(
        [exe, "-i", str(roots[name]), "--of", "console", "--only", "pu"], capture_output=True, text=True, timeout=60
    )
    pus = {int(line.split("P#")[1].rstrip(")")) for line in out.stdout.splitlines() if "P#" in line}
    assert CpuSet(pus) == scan(roots[name], nvml="off").topology.all_cpus
