"""topoagent on real machines' sysfs trees, compared with hwloc's reading of the same trees.

The trees are hwloc's own test captures (``../shared/real-sysfs``, see its README); they are
unpacked once per session and the tests skip, with a reason, where that folder is absent.

Two readings are compared per PCI function: the NUMA node, and the chain of PCI-to-PCI
bridges from the root bus down to the function.  They agree everywhere except where a table
below says otherwise; each entry records both answers, which one is right, why, and the files
in the tree that show it (checked by a test, so the reasoning cannot go stale).  A new
disagreement, or one that goes away, fails the test: decide which tool is right, then fix
topoagent or add the entry.  ``docs/real-trees.md`` has the same tables for people.

How hwloc 2.x reads a tree (hwloc/topology-linux.c, hwloc/pci-common.c):

- It lists ``/sys/bus/pci/devices`` and builds the bridge tree from config space: a function
  is a bridge when its class is 0x0604 and its header type is 1; a bridge whose secondary or
  subordinate bus number is not above its own bus is dropped (``find_bridge_buses``).
- It never reads ``numa_node`` for a PCI function.  Each host bridge's whole tree is placed
  by the ``local_cpus`` mask of its *first* child (``hwloc_pcidisc_tree_attach``); an
  all-CPU mask puts it on the Machine object ("unknown").
- Stock builds ignore PCI domains wider than 16 bits.

topoagent trusts each function's own ``numa_node`` first, falls back to matching its
``local_cpulist``/``local_cpus`` against the nodes' CPU lists, and takes the bridge chain from
the function's real sysfs path.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import realtrees
from topoagent.core.api import scan

#: The captures README.md describes; listed so the tests keep their ids (and skip with a
#: reason) where the folder is absent.  Any other tarball found there is tested as well.
EXPECTED_TREES = (
    "2pa-pcidomain32bits",
    "32em64t-2n8c+dax+nvme+mic+dimms",
    "40intel64-2g2n4c+pcilocality",
    "40intel64-4n10c+pci-conflicts",
    "nvidiagpunumanodes",
)
TREES = sorted(set(EXPECTED_TREES) | set(realtrees.tarballs()))


@dataclass(frozen=True)
class Evidence:
    """A file of the tree and what it holds: stripped text, or bytes at config offsets."""

    path: str
    text: str | None = None
    config_bytes: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class Disagreement:
    """One function where the two tools answer differently, and the verdict."""

    ours: object
    hwloc: object
    right: str  # "topoagent", "hwloc" or "neither"
    why: str
    evidence: tuple[Evidence, ...] = ()


@dataclass(frozen=True)
class Absent:
    """A PCI function one tool lists and the other does not."""

    why: str
    evidence: tuple[Evidence, ...] = ()
    #: A line hwloc prints on stderr about it, where it says anything.
    hwloc_stderr: str | None = None


_ALL_40 = "0000,000000ff,ffffffff"  # CPUs 0-39: every CPU of that machine

#: tree -> BDF -> (topoagent's node, hwloc's node, verdict).
KNOWN_NUMA: dict[str, dict[str, Disagreement]] = {
    "40intel64-2g2n4c+pcilocality": {
        "0000:43:00.0": Disagreement(
            ours=2,
            hwloc=None,
            right="topoagent",
            why=(
                "The QLogic InfiniBand HCA (ib_qib, qib0) has numa_node 2, the only explicit "
                "locality in the tree; the kernel uses that node for the driver's memory. "
                "hwloc never reads numa_node for PCI: it places root bus 0000:40 by the "
                "local_cpus of its first function, 0000:40:01.0, which holds every CPU (no "
                "locality), so the whole bus goes on the Machine. The device's own local_cpus "
                "is all CPUs too (this kernel printed the bus's mask, not the device node's). "
                "hwloc has no answer, topoagent has the kernel's. Caveat: every other "
                "function on 0000:40, its root port 0000:40:03.0 included, says -1, so the "
                "2 was set for this device alone (device _PXM or a write to numa_node)."
            ),
            evidence=(
                Evidence("sys/bus/pci/devices/0000:43:00.0/numa_node", "2"),
                Evidence("sys/bus/pci/devices/0000:43:00.0/local_cpus", _ALL_40),
                Evidence("sys/bus/pci/devices/0000:43:00.0/local_cpulist", "0-39"),
                Evidence("sys/bus/pci/devices/0000:40:01.0/local_cpus", _ALL_40),
                Evidence("sys/bus/pci/devices/0000:40:03.0/numa_node", "-1"),
                Evidence("sys/class/infiniband/qib0/device/numa_node", "2"),
            ),
        ),
    },
}

#: tree -> BDF -> bridge chain disagreement (none found so far).
KNOWN_CHAIN: dict[str, dict[str, Disagreement]] = {}

#: tree -> BDF listed by topoagent but not by hwloc.
ONLY_OURS: dict[str, dict[str, Absent]] = {
    "2pa-pcidomain32bits": {
        bdf: Absent(
            why=(
                "PCI domain 0x10000 (a KVM guest's second, 32-bit domain). Stock hwloc builds "
                "ignore domains wider than 16 bits (--enable-32bits-pci-domain breaks its ABI). "
                "The function exists; topoagent is right to list it."
            ),
            evidence=(Evidence(f"sys/bus/pci/devices/{bdf}/class", cls),),
            hwloc_stderr="non-16bit domain",
        )
        for bdf, cls in (("10000:00:00.0", "0x060000"), ("10000:00:04.0", "0x010000"))
    },
    "32em64t-2n8c+dax+nvme+mic+dimms": {
        "0000:00:11.0": Absent(
            why=(
                "Intel C600 root port (8086:1d3e) that was never given a bus: header type 1 "
                "with secondary and subordinate bus 0. hwloc drops a bridge whose bus range is "
                "not above its own bus; nothing is below it, so no chain changes. The port "
                "exists (pcieport driver bound); topoagent is right to list it (as a root "
                "port with no children)."
            ),
            evidence=(
                Evidence("sys/bus/pci/devices/0000:00:11.0/class", "0x060400"),
                Evidence(
                    "sys/bus/pci/devices/0000:00:11.0/config",
                    config_bytes=((0x0E, 0x01), (0x18, 0x00), (0x19, 0x00), (0x1A, 0x00)),
                ),
            ),
        ),
    },
}

#: tree -> BDF listed by hwloc but not by topoagent (none found so far).
ONLY_HWLOC: dict[str, dict[str, Absent]] = {}


# -- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(params=TREES)
def tree(request: pytest.FixtureRequest, real_tree_roots: dict[str, Path]) -> tuple[str, Path]:
    name = request.param
    if name not in real_tree_roots:
        pytest.skip(f"{name}.tar.bz2 is not in {realtrees.real_sysfs_dir()}")
    return name, real_tree_roots[name]


@pytest.fixture(scope="session")
def scans():
    cache: dict[Path, object] = {}

    def get(root: Path):
        if root not in cache:
            cache[root] = scan(root)
        return cache[root]

    return get


@pytest.fixture(scope="session")
def hwloc_readings():
    cache: dict[Path, realtrees.HwlocReading] = {}

    def get(root: Path) -> realtrees.HwlocReading:
        if root not in cache:
            cache[root] = realtrees.read_with_hwloc(root)
        return cache[root]

    return get


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "topoagent", *args], capture_output=True, text=True, timeout=120)


def _no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    for stream in (proc.stdout, proc.stderr):
        assert "Traceback (most recent call last)" not in stream
        assert "internal error" not in stream


# -- the CLI on each tree ---------------------------------------------------------------------


def test_scan_text(tree: tuple[str, Path]) -> None:
    _, root = tree
    proc = _cli("scan", "--root", str(root))
    _no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()


def test_scan_json(tree: tuple[str, Path], scans) -> None:
    _, root = tree
    proc = _cli("scan", "--root", str(root), "--format", "json")
    _no_traceback(proc)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    entries = realtrees.pci_entries(root)
    assert len(report["devices"]) == len(entries)
    assert {d["bdf"] for d in report["devices"]} == {e.lower() for e in entries}
    # The JSON says what the API says.
    api = {d.bdf: d for d in scans(root).topology.devices}
    for d in report["devices"]:
        assert d["numa_node"] == api[d["bdf"]].numa_node, d["bdf"]


# -- comparison with hwloc --------------------------------------------------------------------


def _ours(scans, root: Path):
    return {d.bdf: d for d in scans(root).topology.devices}


def test_same_functions_as_hwloc(tree: tuple[str, Path], scans, hwloc_readings) -> None:
    name, root = tree
    ours = _ours(scans, root)
    hw = hwloc_readings(root)
    assert set(ours) - set(hw.devices) == set(ONLY_OURS.get(name, {}))
    assert set(hw.devices) - set(ours) == set(ONLY_HWLOC.get(name, {}))
    for entry in (*ONLY_OURS.get(name, {}).values(), *ONLY_HWLOC.get(name, {}).values()):
        if entry.hwloc_stderr is not None:
            assert entry.hwloc_stderr in hw.stderr


def test_numa_matches_hwloc(tree: tuple[str, Path], scans, hwloc_readings) -> None:
    name, root = tree
    ours = _ours(scans, root)
    hw = hwloc_readings(root).devices
    both = sorted(set(ours) & set(hw))
    assert both, "no PCI function known to both tools"
    found = {b: (ours[b].numa_node, hw[b].numa_node) for b in both if ours[b].numa_node != hw[b].numa_node}
    known = {b: (k.ours, k.hwloc) for b, k in KNOWN_NUMA.get(name, {}).items()}
    assert found == known


def test_bridge_chain_matches_hwloc(tree: tuple[str, Path], scans, hwloc_readings) -> None:
    name, root = tree
    ours = _ours(scans, root)
    hw = hwloc_readings(root).devices
    found = {
        b: (ours[b].ancestors, hw[b].chain) for b in sorted(set(ours) & set(hw)) if ours[b].ancestors != hw[b].chain
    }
    known = {b: (k.ours, k.hwloc) for b, k in KNOWN_CHAIN.get(name, {}).items()}
    assert found == known


def _all_evidence():
    for table in (KNOWN_NUMA, KNOWN_CHAIN, ONLY_OURS, ONLY_HWLOC):
        for name, rows in table.items():
            for bdf, row in rows.items():
                for ev in row.evidence:
                    yield pytest.param(name, ev, id=f"{name}-{bdf}-{ev.path.rsplit('/', 1)[-1]}")


@pytest.mark.parametrize(("name", "ev"), list(_all_evidence()))
def test_verdict_evidence(name: str, ev: Evidence, real_tree_roots: dict[str, Path]) -> None:
    """The files each verdict rests on hold what the verdict says."""
    if name not in real_tree_roots:
        pytest.skip(f"{name}.tar.bz2 is not in {realtrees.real_sysfs_dir()}")
    path = real_tree_roots[name] / ev.path
    if ev.text is not None:
        assert path.read_text().strip() == ev.text
    data = path.read_bytes()
    for offset, value in ev.config_bytes:
        assert data[offset] == value, f"{ev.path}[{offset:#x}]"


def test_tables_name_known_trees() -> None:
    for table in (KNOWN_NUMA, KNOWN_CHAIN, ONLY_OURS, ONLY_HWLOC):
        assert set(table) <= set(TREES)
    for rows in (*KNOWN_NUMA.values(), *KNOWN_CHAIN.values()):
        for row in rows.values():
            assert row.right in ("topoagent", "hwloc", "neither")


# -- CPU-less GPU memory nodes (POWER9 + V100) ------------------------------------------------


def test_gpu_memory_nodes_follow_their_gpu(real_tree_roots: dict[str, Path], scans) -> None:
    name = "nvidiagpunumanodes"
    if name not in real_tree_roots:
        pytest.skip(f"{name}.tar.bz2 is not in {realtrees.real_sysfs_dir()}")
    root = real_tree_roots[name]
    topo = scans(root).topology
    wrong = []
    for gpu_dir in sorted((root / "proc" / "driver" / "nvidia" / "gpus").iterdir()):
        status = (gpu_dir / "numa_status").read_text()
        mem = int(re.search(r"^Node:\s*(\d+)", status, re.M).group(1))
        gpu = topo.by_bdf(gpu_dir.name.lower())
        node = topo.node(mem)
        assert gpu is not None and node is not None and node.cpu_less
        if node.nearest_cpu_node not in (None, gpu.numa_node) or node.socket not in (None, gpu.socket):
            wrong.append((mem, gpu.bdf, gpu.numa_node, node.nearest_cpu_node, node.socket))
    assert not wrong, f"(memory node, GPU, GPU's node, nearest_cpu_node, socket): {wrong}"


def test_power9_gpus_with_memory_nodes_are_not_nvlink_c2c(real_tree_roots: dict[str, Path], scans) -> None:
    """POWER9 onlines its V100s' memory as NUMA nodes, as Grace does, but reaches them over
    NVLink 2.0, not C2C: no GPU there is C2C, and the GPU-GPU classes stay the tree's."""
    from topoagent.core.analysis.c2c import is_c2c

    name = "nvidiagpunumanodes"
    if name not in real_tree_roots:
        pytest.skip(f"{name}.tar.bz2 is not in {realtrees.real_sysfs_dir()}")
    result = scans(real_tree_roots[name])
    topo = result.topology
    assert topo.snapshot.cpu_identity is not None and topo.snapshot.cpu_identity.arch == "ppc64"
    assert topo.snapshot.gpu_memory_nodes and not any(is_c2c(topo, g) for g in topo.gpus)
    assert not any("NVLink-C2C" in f.message for f in result.findings)


# -- the helpers ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "members"),
    [
        ("0x00000003", {0, 1}),
        ("0x00000100", {8}),
        ("0x0000ffff,0x0", set(range(32, 48))),
        ("0x000000ff,0xff000000,,0x0000ffff", set(range(16)) | set(range(88, 104))),
        ("0x0", set()),
        ("", set()),
    ],
)
def test_parse_hwloc_bitmap(text: str, members: set[int]) -> None:
    assert realtrees.parse_hwloc_bitmap(text) == frozenset(members)


def test_parse_hwloc_bitmap_infinite() -> None:
    assert realtrees.parse_hwloc_bitmap("0xf...f,0xffffff00") is None


def test_parse_lstopo_xml() -> None:
    xml = """<?xml version="1.0" encoding="UTF-8"?>
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x0000000f" nodeset="0x00000003">
    <object type="Package" os_index="0" cpuset="0x00000003" nodeset="0x00000001">
      <object type="NUMANode" os_index="0" cpuset="0x00000003" nodeset="0x00000001"/>
      <object type="Bridge" bridge_type="0-1" depth="0" bridge_pci="0000:[00-01]">
        <object type="Bridge" bridge_type="1-1" depth="1" pci_busid="0000:00:01.0">
          <object type="PCIDev" pci_busid="0000:01:00.0">
            <object type="OSDev" name="eth0" osdev_type="2"/>
          </object>
        </object>
      </object>
    </object>
    <object type="Bridge" bridge_type="0-1" depth="0" bridge_pci="0000:[80-80]">
      <object type="PCIDev" pci_busid="0000:80:00.0"/>
    </object>
  </object>
</topology>
"""
    got = realtrees.parse_lstopo_xml(xml)
    assert set(got) == {"0000:00:01.0", "0000:01:00.0", "0000:80:00.0"}
    assert got["0000:01:00.0"].numa_node == 0
    assert got["0000:01:00.0"].chain == ("0000:00:01.0",)
    assert got["0000:01:00.0"].attached_to == "Package"
    assert got["0000:00:01.0"].chain == ()
    assert got["0000:00:01.0"].type == "Bridge"
    assert got["0000:80:00.0"].numa_node is None  # on the Machine: two nodes
    assert got["0000:80:00.0"].attached_to == "Machine"
