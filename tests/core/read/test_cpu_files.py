"""CPUs and NUMA nodes as the kernel writes them, on copies of a real-shaped tree (the DGX H100
fixture) damaged or aged the way real kernels and firmware leave them.

Each case names the kernel behaviour it reproduces; every assertion compares with what the
intact tree gives, so a case cannot pass by reading nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from topoagent.core.api import scan
from topoagent.core.cpuset import CpuSet
from topoagent.core.findings import CATALOGUE
from topoagent.core.findings.doc import example_text

NODE = "sys/devices/system/node"
CPU = "sys/devices/system/cpu"
NODE0 = CpuSet.parse("0-55,112-167")
NODE1 = CpuSet.parse("56-111,168-223")


@pytest.fixture
def dgx(scratch_root) -> Path:
    """The DGX H100 fixture to damage (put back after the test)."""
    return scratch_root("dgx-h100")


def nodes(result) -> dict[int, CpuSet]:
    return {n.id: n.cpus for n in result.topology.nodes}


def codes(result) -> set[str]:
    return {f.code for f in result.findings}


def gpu_sockets(result) -> list[int | None]:
    return [g.socket for g in result.topology.gpus]


def assert_placed_as_intact(result) -> None:
    """Every GPU on its own socket and every GPU's plan on its own node: gpu0-3 node 0."""
    assert nodes(result) == {0: NODE0, 1: NODE1}
    assert len(result.topology.all_cpus) == 224
    assert gpu_sockets(result) == [0, 0, 0, 0, 1, 1, 1, 1]
    plan = result.plan_with()
    assert len(plan.gpus) == 8
    for g in plan.gpus:
        assert g.cpus is not None and g.cpus <= (NODE0 if g.cuda_index < 4 else NODE1), g


def test_intact_tree_is_the_reference(dgx):
    result = scan(dgx)
    assert_placed_as_intact(result)
    assert "CPU_LESS_NUMA_NODE" not in codes(result)
    assert "NUMA_NODES_OVERLAP" not in codes(result)


def test_cpumap_only_nodes_read_as_older_kernels_write_them(dgx):
    # Kernels before 2.6.26 (and hwloc's 16em64t/96em64t/256ia64 captures) have no cpulist.
    for node in ("node0", "node1"):
        (dgx / NODE / node / "cpulist").unlink()
    result = scan(dgx)
    assert_placed_as_intact(result)
    assert "CPU_LESS_NUMA_NODE" not in codes(result)
    assert [n.cpus_file for n in result.snapshot.numa_nodes] == ["cpumap", "cpumap"]
    assert not result.snapshot.probe_errors


@pytest.mark.parametrize("name", ["cpulist", "cpumap"])
def test_trailing_nul_after_newline(dgx, name):
    # Linux 5.15-rc's bitmap_print_to_buf wrote "0-31\n\0".
    for node in ("node0", "node1"):
        f = dgx / NODE / node / name
        f.write_bytes(f.read_bytes().rstrip(b"\n") + b"\n\0")
        if name == "cpumap":
            (dgx / NODE / node / "cpulist").unlink()
    for topo in (dgx / CPU).glob("cpu*/topology"):
        for f in (topo / "thread_siblings_list", topo / "package_cpus_list"):
            f.write_bytes(f.read_bytes().rstrip(b"\n") + b"\n\0")
    result = scan(dgx)
    assert_placed_as_intact(result)
    assert not result.snapshot.probe_errors
    assert all(c.siblings is not None and len(c.siblings) == 2 for c in result.snapshot.cpus)


def test_unreadable_cpulist_falls_back_to_cpumap(dgx):
    # A cpulist that cannot be read (here: not a regular file) loses that probe, not the node.
    f = dgx / NODE / "node0" / "cpulist"
    f.unlink()
    f.mkdir()
    result = scan(dgx)
    assert_placed_as_intact(result)
    assert any(e.path.endswith("node0/cpulist") for e in result.snapshot.probe_errors)
    assert result.snapshot.numa_nodes[0].cpus_file == "cpumap"


def test_unreadable_node_files_fall_back_to_the_cpus_node_links(dgx):
    for name in ("cpulist", "cpumap"):
        f = dgx / NODE / "node1" / name
        f.unlink()
        f.mkdir()
    result = scan(dgx)
    assert_placed_as_intact(result)
    assert result.snapshot.numa_nodes[1].cpus_file == "cpu/cpu*/node*"
    assert "CPU_LESS_NUMA_NODE" not in codes(result)


def test_node_whose_cpus_no_file_gives_is_unknown_not_cpu_less(dgx):
    for name in ("cpulist", "cpumap"):
        f = dgx / NODE / "node1" / name
        f.unlink()
        f.mkdir()
    for link in (dgx / CPU).glob("cpu*/node1"):
        link.unlink()
    result = scan(dgx)
    assert result.snapshot.numa_nodes[1].cpus is None
    assert "CPU_LESS_NUMA_NODE" not in codes(result)
    assert nodes(result)[0] == NODE0
    assert gpu_sockets(result)[:4] == [0, 0, 0, 0]


def test_unlistable_node_directory_keeps_both_nodes(dgx, monkeypatch):
    # The node directory exists but cannot be listed: never one implied node0 with every CPU.
    from topoagent.core.hostfs import HostFS

    real = HostFS.listdir

    def listdir(self, rel):
        if rel == NODE:
            self.record(rel, "permission denied")
            return []
        return real(self, rel)

    monkeypatch.setattr(HostFS, "listdir", listdir)
    result = scan(dgx)
    assert nodes(result) == {0: NODE0, 1: NODE1}
    assert gpu_sockets(result) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert any(e.path == "/" + NODE for e in result.snapshot.probe_errors)


def test_offline_cpus_are_never_handed_out(dgx):
    # 32 of 224 CPUs online (maxcpus=, or CPUs taken offline): nodes and plans hold online CPUs.
    (dgx / CPU / "online").write_text("0-15,56-71\n")
    for d in (dgx / CPU).glob("cpu[0-9]*"):
        if int(d.name[3:]) not in CpuSet.parse("0-15,56-71"):
            shutil.rmtree(d / "topology")  # the kernel removes an offline CPU's topology
    result = scan(dgx)
    online = CpuSet.parse("0-15,56-71")
    assert result.topology.all_cpus == online
    assert {c.id for c in result.snapshot.cpus} == set(online)
    for g in result.plan_with().gpus:
        assert g.cpus is not None and g.cpus and g.cpus <= online
        for rank in g.rank_cpus:
            assert rank <= online


def test_package_id_minus_one_numbers_packages_from_sibling_lists(dgx):
    # s390 and some POWER kernels write physical_package_id = -1.
    for f in (dgx / CPU).glob("cpu*/topology/physical_package_id"):
        f.write_text("-1\n")
    result = scan(dgx)
    assert [s.id for s in result.topology.sockets] == [0, 1]
    assert [s.cpus for s in result.topology.sockets] == [NODE0, NODE1]
    assert gpu_sockets(result) == [0, 0, 0, 0, 1, 1, 1, 1]


def test_nodes_claiming_the_same_cpus_are_a_finding(dgx):
    # A buggy SRAT: every node claims every CPU.
    for node in ("node0", "node1"):
        (dgx / NODE / node / "cpulist").write_text("0-223\n")
    result = scan(dgx)
    found = [f for f in result.findings if f.code == "NUMA_NODES_OVERLAP"]
    assert len(found) == 1
    assert found[0].severity.name == "WARNING"
    assert set(found[0].subjects) == {"node0", "node1"}
    assert any("node1/cpulist" in e.path and e.value == "0-223" for e in found[0].evidence)
    assert example_text(found[0]) == CATALOGUE["NUMA_NODES_OVERLAP"].examples[0].text  # docs/findings.md's


@pytest.mark.parametrize("text, quoted", [("-2", "-2"), ("0x1", "0x1"), ("1\0", "\\x00")])
def test_numa_evidence_quotes_the_file(dgx, text, quoted):
    gpu = next(
        p
        for p in (dgx / "sys/bus/pci/devices").iterdir()
        if (p / "vendor").read_text().strip() == "0x10de" and (p / "class").read_text().startswith("0x0302")
    )
    (gpu / "numa_node").write_text(text)
    (gpu / "local_cpulist").write_text("0-223\n")  # spans both nodes: no placement by CPUs either
    result = scan(dgx)
    f = next(f for f in result.findings if f.code == "NUMA_UNKNOWN")
    values = [e.value for e in f.evidence]
    assert "-1" not in values
    assert any(quoted in v for v in values), values


def test_a_capture_keeps_what_the_cpu_fallbacks_read(dgx, tmp_path):
    # cpumap-only nodes, an unreadable node, offline CPUs: the capture replays to the same nodes.
    from topoagent.features.capture.collect import collect_capture
    from topoagent.features.capture.pack import entries_to_tar

    for node in ("node0", "node1"):
        (dgx / NODE / node / "cpulist").unlink()
    (dgx / NODE / "node1" / "cpumap").unlink()
    (dgx / CPU / "online").write_text("0-15,56-71\n")
    live = scan(dgx)
    archive = tmp_path / "cap.tar.gz"
    with open(archive, "wb") as fh:
        entries_to_tar(collect_capture(str(dgx), tools=False).ordered(), fh)
    replayed = scan(str(archive))
    assert (
        nodes(replayed) == nodes(live) == {0: NODE0 & CpuSet.parse("0-15,56-71"), 1: NODE1 & CpuSet.parse("0-15,56-71")}
    )
