"""Offline analysis of pasted outputs: ``topoagent scan --nvidia-smi-topo/--lspci-tree/--lspci-verbose``.

Samples: tests/core/parse/samples/ (public captures, see their READMEs) and tests/offline_samples/
(a constructed 4-GPU PLX box: ``lspci -tv``, ``lspci -vvvnn`` and ``nvidia-smi topo -m`` of the
same machine, see its README).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from tests.paths import REPO
from tests.plan_helpers import run_cli
from topoagent.core.api import analyse, read_offline
from topoagent.core.parse.lspci_tree import parse_lspci_tree
from topoagent.core.parse.lspci_verbose import parse_lspci_verbose
from topoagent.core.parse.nvsmi_topo import parse_topo_matrix
from topoagent.core.paste import (
    MATCH_ASSUMPTION,
    OfflineInputError,
    merge,
    snapshot_from_lspci,
    snapshot_from_topo_matrix,
)
from topoagent.core.pathclass import PathClass
from topoagent.core.snapshot import GivenPath, Snapshot, from_dict, to_dict

NVSMI = REPO / "tests/core/parse/samples/nvsmi"
LSPCI = REPO / "tests/core/parse/samples/lspci"
OFFLINE = REPO / "tests/offline_samples"
SCHEMA = json.loads((REPO / "topoagent/schema/scan.schema.json").read_text())

H100 = NVSMI / "h100_nv18_9nic_tabs.txt"
RTX4090 = NVSMI / "rtx4090_ansi_header_no_legend.txt"  # GPU0-5,7 reach their NICs only by SYS
PLX_TREE = OFFLINE / "plx4_v100_tv.txt"
PLX_VVV = OFFLINE / "plx4_v100_vvvnn.txt"
PLX_TOPO = OFFLINE / "plx4_v100_topo.txt"


def text(path: Path) -> str:
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``topoagent scan ARGS``: in this process, or, given ``stdin``, as a child process (``-``
    is read from descriptor 0, which only a real process has)."""
    if stdin is None:
        return run_cli("scan", *args)
    return subprocess.run(
        [sys.executable, "-m", "topoagent", "scan", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )


def by_code(result, code):
    return [f for f in result.findings if f.code == code]


# -- nvidia-smi topo -m -----------------------------------------------------------------------


def test_matrix_snapshot_facts():
    snap = snapshot_from_topo_matrix(parse_topo_matrix(text(H100)))
    assert snap.root is None and not snap.from_host_tree
    assert [f.label for f in snap.pci] == [f"GPU{i}" for i in range(8)] + [f"NIC{i}" for i in range(9)]
    assert all(f.bdf is None and f.sysfs_path is None for f in snap.pci)
    gpu0, nic3 = snap.pci[0], snap.pci[11]
    assert (gpu0.kind, gpu0.numa_node, gpu0.numa_source, str(gpu0.local_cpus)) == ("gpu", 0, "nvidia-smi", "0-79")
    assert (nic3.kind, nic3.rdma_names, nic3.rdma, nic3.numa_node) == ("nic", ("mlx5_3",), True, None)
    assert [(n.id, str(n.cpus)) for n in snap.numa_nodes] == [(0, "0-79"), (1, "80-159")]
    assert not snap.cpus  # sockets unknown
    assert len(snap.given_paths) == 17 * 16 // 2
    assert GivenPath("GPU0", "NIC8", "PIX") in snap.given_paths
    assert GivenPath("GPU0", "GPU1", "NV18") in snap.given_paths
    assert snap.sources[0].name == "nvidia-smi" and snap.sources[0].status == "ok"


def test_matrix_topology_paths_rails_and_findings():
    r = analyse(read_offline(nvidia_smi_topo=text(H100)))
    topo = r.topology
    assert [d.id for d in topo.devices] == [f"gpu{i}" for i in range(8)] + [f"nic{i}" for i in range(9)]
    assert all(d.parent is None and d.ancestors == () and d.root_bus is None for d in topo.devices)
    assert topo.by_bdf("None") is None and topo.by_id("gpu0").label == "GPU0"
    # A NIC's node follows its best GPU (PIX here); NIC0 is SYS to every GPU: unknown.
    nics = {d.id: d for d in topo.nics}
    assert (nics["nic8"].numa_node, nics["nic8"].numa_source) == (0, "nvidia-smi")
    assert nics["nic1"].numa_node == 1
    assert nics["nic0"].numa_node is None
    paths = {(p.a, p.b): p for p in r.paths}
    nv = paths[("gpu0", "gpu1")]
    assert (nv.token, nv.nvlinks, nv.pcie, nv.locality_known) == ("NV18", 18, PathClass.SYS, False)
    assert paths[("gpu0", "nic8")].token == "PIX"
    sys_path = paths[("gpu0", "nic1")]
    assert (sys_path.token, sys_path.same_socket, sys_path.locality_known) == ("SYS", None, True)
    rails = {rail.gpu: (rail.nic, rail.cls) for rail in r.rails.rails}
    assert rails["gpu0"] == ("nic8", PathClass.PIX) and rails["gpu7"] == ("nic1", PathClass.PIX)
    # No peer-memory finding: pasted output does not say which modules are loaded.
    assert [(f.code, f.severity.label, f.subjects) for f in r.findings] == [("NUMA_UNKNOWN", "info", ("nic0",))]
    plan = {g.gpu: g for g in r.plan.gpus}
    assert str(plan["gpu0"].cpus) == "0-79" and plan["gpu0"].env["UCX_NET_DEVICES"] == "mlx5_8:1"
    # One NCCL_IB_HCA for every rank: every HCA.  mlx5_0 is SYS to every GPU, but nothing in a
    # paste proves it is for storage (issue 42 item 8): no GPU is near it, and it stays listed.
    assert {g.env["NCCL_IB_HCA"] for g in plan.values()} == {"=" + ",".join(f"mlx5_{i}" for i in range(9))}
    assert r.rails.roles["nic0"].value == "compute" and r.rails.far == ("nic0",)
    assert plan["gpu0"].bdf is None


def test_sys_best_nic_is_cross_numa_with_socket_unknown():
    """SYS in today's legend crosses "the SMP interconnect between NUMA nodes": a paste shows no
    sockets, so the finding is GPU_NIC_CROSS_NUMA at its warning, naming what is unknown (issue
    29 item 1; NVIDIA/go-gpuallocator#17's 8x RTX 4090 box prints SYS between GPUs of one node)."""
    r = analyse(read_offline(nvidia_smi_topo=text(RTX4090)))
    assert by_code(r, "GPU_NIC_CROSS_SOCKET") == []
    found = by_code(r, "GPU_NIC_CROSS_NUMA")
    # Every SYS GPU takes nic0 on channel 0 as NCCL does (src/graph/topo.cc ncclTopoGetLocalNetType:
    # nic0's only local GPU is gpu6, so dev % 1 = 0) and nic1 on channel 1.
    assert sorted(f.subjects for f in found) == sorted((f"gpu{i}", "nic0") for i in (0, 1, 2, 3, 4, 5, 7))
    assert all(rail.nics == ("nic0", "nic1") for rail in r.rails.rails)
    assert {f.severity.label for f in found} == {"warning"}
    f = found[0]
    assert "whether that is another socket is unknown from this input" in f.message
    assert "is on socket" not in f.message
    assert any(e.path == "nvidia-smi topo -m GPU0/NIC0" and e.value == "SYS" for e in f.evidence)
    # gpu4 and nic0 share node 1 by the paste's own words only through an inferred NIC node
    gpu4 = next(f for f in found if f.subjects[0] == "gpu4")
    assert "another NUMA node than the GPU's node 1 (the NIC's node is not shown)" in gpu4.message
    # gpu6 is PHB to nic0: via the host bridge, not cross-NUMA
    assert [f.subjects for f in by_code(r, "GPU_NIC_VIA_HOST_BRIDGE")] == [("gpu6", "nic0")]
    # NICs without a NIC Legend are still RDMA devices (nvidia-smi lists NICs from ibverbs)
    assert all(n.rdma_capable and n.rdma_devices == () for n in r.topology.nics)


def test_a_sys_paste_does_not_fail_on_critical():
    """--fail-on critical on a paste exits 1 only where the paste proves the fault: SYS proves
    no socket (issue 29)."""
    out = run("--nvidia-smi-topo", str(RTX4090))
    assert out.returncode == 0, out.stderr
    assert "[GPU_NIC_CROSS_NUMA]" in out.stdout and "[GPU_NIC_CROSS_SOCKET]" not in out.stdout
    assert run("--nvidia-smi-topo", str(RTX4090), "--fail-on", "warning").returncode == 1


def test_grace_gpu_numa_id_is_a_cpu_less_node_and_c2c():
    r = analyse(read_offline(nvidia_smi_topo=text(NVSMI / "gh200_gpu_numa_id.txt")))
    node1 = r.topology.node(1)
    assert node1.cpu_less and node1.nearest_cpu_node == 0
    assert [f.code for f in r.findings] == ["CPU_LESS_NUMA_NODE"]  # NODE to the NIC is P2C on Grace


# -- round trip ---------------------------------------------------------------------------


def test_matrix_round_trip_is_byte_identical_for_a_current_driver_matrix():
    out = run("--nvidia-smi-topo", str(H100), "--format", "matrix")
    assert out.returncode == 0, out.stderr
    assert out.stdout == text(H100)


ROUND_TRIP = [
    "h100_nv18_9nic_tabs.txt",
    "dgx_a100_nv12_12nic_spaces.txt",
    "rtx6000ada_4gpu_4nic.txt",
    "gb200_tray_gpu_numa_ids.txt",
    "gh200_gpu_numa_id.txt",
    "slurm_cpuset_affinities.txt",
    "rtx4090_ansi_header_no_legend.txt",
    "five_gpu_glued_cells.txt",
    "tesla_p4_single_gpu.txt",
    "h20_40dev_glued_header.txt",
    "v100_nv1_nv2_one_mlx5.txt",
    "k8s_2017_mlx4_trailing_spaces.txt",
]


@pytest.mark.parametrize("name", ROUND_TRIP)
def test_matrix_round_trip_keeps_cells_and_affinities(name, tmp_path):
    original = parse_topo_matrix(text(NVSMI / name))
    out = run("--nvidia-smi-topo", str(NVSMI / name), "--format", "matrix")
    assert out.returncode in (0, 1), out.stderr
    again = parse_topo_matrix(out.stdout)
    assert again.cells == original.cells
    keep = lambda d: (d.kind, d.rdma_name, d.cpu_affinity, d.numa_affinity, d.gpu_numa_id)  # noqa: E731
    assert [keep(d) for d in again.devices] == [keep(d) for d in original.devices]
    # labels too, except raw RDMA names, which the current layout prints as NIC<n> + legend
    assert [d.label for d in again.devices if d.kind == "gpu"] == [d.label for d in original.devices if d.kind == "gpu"]


# -- JSON ---------------------------------------------------------------------------------


def test_json_validates_with_null_bdfs_and_rdma_names():
    out = run("--nvidia-smi-topo", str(H100), "--format", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert doc["host"]["root"] is None
    assert doc["host"]["sources"] == [{"name": "nvidia-smi", "status": "ok", "detail": None}]
    devices = {d["id"]: d for d in doc["devices"]}
    assert all(d["bdf"] is None and d["parent"] is None for d in doc["devices"])
    assert devices["nic3"]["rdma_devices"] == ["mlx5_3"] and devices["nic3"]["kind"] == "nic"
    assert devices["gpu5"]["numa_node"] == 1 and devices["gpu5"]["numa_source"] == "nvidia-smi"
    assert devices["gpu5"]["local_cpus"] == "80-159" and devices["gpu5"]["class"] is None
    assert devices["nic0"]["numa_node"] is None
    assert doc["numa_nodes"][0]["cpus"] == "0-79" and doc["numa_nodes"][0]["cpu_less"] is False
    kinds = {(p["a"], p["b"]): p for p in doc["paths"]}
    assert kinds[("gpu0", "gpu7")]["kind"] == "NV18" and kinds[("gpu0", "gpu7")]["locality_known"] is False
    assert kinds[("gpu0", "nic1")]["kind"] == "SYS" and kinds[("gpu0", "nic1")]["same_socket"] is None
    assert doc["recommendations"]["gpus"][0]["bdf"] is None


def test_json_of_lspci_only_validates_with_unknown_node_cpus():
    out = run("--lspci-verbose", str(PLX_VVV), "--format", "json")
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert [(n["id"], n["cpus"], n["cpu_less"]) for n in doc["numa_nodes"]] == [(0, None, None), (1, None, None)]
    gpu0 = next(d for d in doc["devices"] if d["id"] == "gpu0")
    assert (gpu0["bdf"], gpu0["numa_source"], gpu0["parent"]) == ("0000:1a:00.0", "lspci", "0000:19:08.0")
    assert gpu0["link"] == {
        "current_gts": 8.0,
        "current_width": 16,
        "max_gts": 8.0,
        "max_width": 16,
        "cap_gts": 8.0,
        "cap_width": 16,
    }
    bridge = next(d for d in doc["devices"] if d["bdf"] == "0000:19:08.0")
    assert bridge["role"] == "switch_downstream" and "ReqRedir" in bridge["acs_control"]


# -- lspci --------------------------------------------------------------------------------


def test_lspci_acs_redirect_above_gpus():
    r = analyse(read_offline(lspci_tree=text(PLX_TREE), lspci_verbose=text(PLX_VVV)))
    acs = by_code(r, "ACS_REDIRECT")
    ports = [r.topology.by_id(f.subjects[0]).bdf for f in acs]
    assert ports == ["0000:19:08.0", "0000:19:10.0", "0000:19:14.0"]  # socket 1's switch is clean
    assert all(f.subjects[1:] == ("gpu0", "gpu1", "nic0") for f in acs)
    assert acs[0].evidence[0].path == "lspci 0000:19:08.0: ACSCtl"
    assert "ReqRedir+" in acs[0].evidence[0].value
    assert [f.subjects for f in by_code(r, "LINK_WIDTH_DEGRADED")] == [("gpu3",)]
    assert {f.code for f in r.findings} == {"ACS_REDIRECT", "LINK_WIDTH_DEGRADED"}
    topo = r.topology
    assert [g.bdf for g in topo.gpus] == ["0000:1a:00.0", "0000:1b:00.0", "0000:88:00.0", "0000:89:00.0"]
    assert [(n.bdf, n.rdma_capable) for n in topo.nics] == [("0000:1c:00.0", True), ("0000:8a:00.0", True)]
    assert topo.by_bdf("0000:02:00.0").kind.value == "other"  # the BMC's ASPEED VGA is no GPU
    assert topo.by_bdf("0000:18:00.0").role.value == "switch_upstream"
    paths = {(p.a, p.b): p for p in r.paths}
    assert paths[("gpu0", "gpu1")].token == "PIX" and paths[("gpu0", "nic0")].token == "PIX"
    cross = paths[("gpu0", "gpu2")]
    assert (cross.token, cross.locality_known, cross.same_socket) == ("SYS", True, None)
    assert r.snapshot.sources[0].status == "ok"


def test_lspci_verbose_alone_builds_the_same_tree_from_bus_numbers():
    both = analyse(read_offline(lspci_tree=text(PLX_TREE), lspci_verbose=text(PLX_VVV))).topology
    alone = analyse(read_offline(lspci_verbose=text(PLX_VVV))).topology
    shape = lambda t: [(d.bdf, d.id, d.parent, d.ancestors, d.root_bus, d.role) for d in t.devices]  # noqa: E731
    assert shape(alone) == shape(both)
    assert "parents from the bridges' bus numbers" in alone.snapshot.sources[0].detail


def test_lspci_verbose_with_missing_bridges_leaves_places_unknown():
    snap = snapshot_from_lspci(None, parse_lspci_verbose(text(LSPCI / "D_vvvnn_hgx_rootport_switch_vf.txt")))
    paths = {f.bdf: f.sysfs_path for f in snap.pci}
    assert paths["0000:15:01.0"] == "pci0000:15/0000:15:01.0"
    assert paths["0000:16:00.0"] == "pci0000:15/0000:15:01.0/0000:16:00.0"
    # 19:00.0 sits on bus 19, inside 16:00.0's range 17-1e, but the bridges of buses 17-18 are
    # not in the listing: no shortened chain, its place (and its GPU's) is unknown
    assert paths["0000:19:00.0"] is None and paths["0000:1a:00.0"] is None
    assert snap.sources[0].status == "partial" and "placed nowhere" in snap.sources[0].detail
    r = analyse(snap)
    assert not by_code(r, "GPU_NIC_VIA_HOST_BRIDGE")  # the pair's path is not in the output


def test_lspci_tree_only_infers_kinds_from_names():
    snap = snapshot_from_lspci(parse_lspci_tree(text(LSPCI / "tree_hgx_h100_tvnn.txt")), None)
    r = analyse(snap)
    topo = r.topology
    assert len(topo.gpus) == 8 and len(topo.nics) == 8
    assert all(n.rdma_capable for n in topo.nics)  # ConnectX-7
    assert topo.by_bdf("0000:c1:00.0").kind.value == "other"  # the switch's management endpoint
    assert snap.sources[0].status == "partial"
    assert "inferred from device names" in snap.sources[0].detail
    assert all(p.token == "PIX" for p in r.paths if {p.a, p.b} == {"gpu0", "nic0"})


def test_lspci_vfs_found_from_the_pf_sriov_capability():
    listing = (
        "0000:81:00.0 Infiniband controller [0207]: Mellanox Technologies MT2910 Family [ConnectX-7] [15b3:1021]\n"
        "\tCapabilities: [180 v1] Single Root I/O Virtualization (SR-IOV)\n"
        "\t\tInitial VFs: 16, Total VFs: 16, Number of VFs: 2, Function Dependency Link: 00\n"
        "\t\tVF offset: 2, stride: 1, Device ID: 101e\n"
        "\tKernel driver in use: mlx5_core\n\n"
        "0000:81:00.2 Infiniband controller [0207]: Mellanox Technologies ConnectX Family mlx5Gen Virtual Function "
        "[15b3:101e]\n"
        "\tKernel driver in use: mlx5_core\n\n"
        "0000:81:00.3 Infiniband controller [0207]: Mellanox Technologies ConnectX Family mlx5Gen Virtual Function "
        "[15b3:101e]\n"
    )
    topo = analyse(read_offline(lspci_verbose=listing)).topology
    pf = topo.by_bdf("0000:81:00.0")
    assert pf.virtfns == ("0000:81:00.2", "0000:81:00.3") and not pf.is_vf
    assert topo.by_bdf("0000:81:00.3").physfn == "0000:81:00.0"


# -- both ---------------------------------------------------------------------------------


def test_merge_names_lspci_functions_by_bus_order():
    snap = read_offline(text(PLX_TOPO), text(PLX_TREE), text(PLX_VVV))
    labelled = {f.label: f for f in snap.pci if f.label}
    assert {k: v.bdf for k, v in labelled.items()} == {
        "GPU0": "0000:1a:00.0",
        "GPU1": "0000:1b:00.0",
        "GPU2": "0000:88:00.0",
        "GPU3": "0000:89:00.0",
        "NIC0": "0000:1c:00.0",
        "NIC1": "0000:8a:00.0",
    }
    assert labelled["NIC1"].rdma_names == ("mlx5_1",) and str(labelled["GPU2"].local_cpus) == "20-39,60-79"
    assert all(f.bdf is not None for f in snap.pci)
    nvsmi = next(s for s in snap.sources if s.name == "nvidia-smi")
    assert MATCH_ASSUMPTION in nvsmi.detail and nvsmi.status == "ok"
    r = analyse(snap)
    assert [(n.id, n.cpulist) for n in r.topology.nodes] == [(0, "0-19,40-59"), (1, "20-39,60-79")]
    assert {f.code for f in r.findings} == {"ACS_REDIRECT", "LINK_WIDTH_DEGRADED"}
    assert [g.env["NCCL_IB_HCA"] for g in r.plan.gpus] == ["=mlx5_0,mlx5_1"] * len(r.plan.gpus)


def test_merge_reports_cells_the_tree_contradicts():
    matrix = text(PLX_TOPO).replace("GPU0\t X \tPIX\tSYS\tSYS\tPIX", "GPU0\t X \tPIX\tSYS\tSYS\tPXB", 1)
    matrix = matrix.replace("NIC0\tPIX", "NIC0\tPXB", 1)
    result = analyse(read_offline(matrix, text(PLX_TREE), text(PLX_VVV)))
    nvsmi = next(s for s in result.snapshot.sources if s.name == "nvidia-smi")
    assert nvsmi.status == "partial"
    assert "GPU0/NIC0 PXB in the matrix, PIX from lspci" in nvsmi.detail
    paths = {(p.a, p.b): p for p in result.paths}
    assert paths[("gpu0", "nic0")].token == "PXB"  # the matrix is what nvidia-smi measured


def test_counts_that_disagree_analyse_the_matrix_alone():
    """An lspci excerpt (or another host's listing) cannot be matched to the matrix: merge()
    refuses, and the scan goes on with the matrix, saying why lspci was set aside."""
    m = snapshot_from_topo_matrix(parse_topo_matrix(text(H100)))
    lsp = snapshot_from_lspci(None, parse_lspci_verbose(text(PLX_VVV)))
    with pytest.raises(OfflineInputError, match="8 GPU\\(s\\) but lspci shows 4"):
        merge(m, lsp)
    snap = read_offline(text(H100), None, text(PLX_VVV))
    assert {s.name: s.status for s in snap.sources}["lspci"] == "unavailable"
    assert "analysed from the matrix alone" in next(s.detail for s in snap.sources if s.name == "lspci")
    assert sum(1 for f in snap.pci if f.kind == "gpu") == 8 and all(f.bdf is None for f in snap.pci)
    out = run("--nvidia-smi-topo", str(H100), "--lspci-verbose", str(PLX_VVV), "--format", "json")
    assert out.returncode in (0, 1) and "Traceback" not in out.stderr
    assert len([d for d in json.loads(out.stdout)["devices"] if d["kind"] == "gpu"]) == 8


def test_merge_without_lspci_gpus_keeps_matrix_devices_after_bdf_devices():
    # lspci shows only a switch (a filtered listing): the matrix's devices stay BDF-less and
    # sort after the BDF-keyed ones, in matrix order
    snap = read_offline(text(H100), None, text(LSPCI / "vvv_plx_pex8725_acs.txt"))
    topo = analyse(snap).topology
    bdfs = [d.bdf for d in topo.devices]
    assert bdfs[:3] == ["0000:02:00.0", "0000:03:08.0", "0000:03:09.0"] and set(bdfs[3:]) == {None}
    assert [d.label for d in topo.devices[3:]] == [f"GPU{i}" for i in range(8)] + [f"NIC{i}" for i in range(9)]
    assert topo.by_bdf("0000:03:08.0").id == "bridge1"


def test_merge_is_pure_on_snapshots():
    m = snapshot_from_topo_matrix(parse_topo_matrix(text(PLX_TOPO)))
    lsp = snapshot_from_lspci(parse_lspci_tree(text(PLX_TREE)), parse_lspci_verbose(text(PLX_VVV)))
    merged = merge(m, lsp)
    assert merged.given_paths == m.given_paths and len(merged.pci) == len(lsp.pci)
    assert [s.name for s in merged.sources] == ["nvidia-smi", "lspci"]


def test_offline_snapshot_serialises():
    snap = read_offline(text(PLX_TOPO), text(PLX_TREE), text(PLX_VVV))
    again = from_dict(Snapshot, json.loads(json.dumps(to_dict(snap))))
    assert again == snap


# -- the command line ---------------------------------------------------------------------


def test_stdin_dash_works():
    out = run("--nvidia-smi-topo", "-", "--format", "json", stdin=text(H100))
    assert out.returncode == 0, out.stderr
    assert len(json.loads(out.stdout)["devices"]) == 17
    out = run("--lspci-tree", str(PLX_TREE), "--lspci-verbose", "-", stdin=text(PLX_VVV))
    assert out.returncode == 1 and "[ACS_REDIRECT]" in out.stdout


def test_root_is_ignored_with_offline_inputs(tmp_path):
    out = run("--root", str(tmp_path / "nowhere"), "--nvidia-smi-topo", str(H100))
    assert out.returncode == 0, out.stderr
    assert "offline: nvidia-smi" in out.stdout


@pytest.mark.parametrize(
    "option, content, message",
    [
        ("--nvidia-smi-topo", "hello world\nthis is not a matrix\n", "no nvidia-smi topo -m header"),
        ("--lspci-tree", "hello world\n", "no lspci tree found"),
        ("--lspci-verbose", "hello\nworld\n", "no lspci device line"),
        ("--lspci-verbose", "   \n", "empty"),
        ("--nvidia-smi-topo", b"\xff\xfe\x00garbage\x80", "not UTF-8 text"),
    ],
)
def test_garbage_exits_2_with_one_line(tmp_path, option, content, message):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(content if isinstance(content, bytes) else content.encode())
    out = run(option, str(bad))
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr.count("\n") == 1 and out.stderr.startswith(f"topoagent: {option} {bad}: ")
    assert message in out.stderr and "Traceback" not in out.stderr


def test_missing_file_and_two_stdins_exit_2(tmp_path):
    out = run("--lspci-tree", str(tmp_path / "absent.txt"))
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "No such file" in out.stderr
    out = run("--lspci-tree", "-", "--lspci-verbose", "-", stdin="")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "stdin" in out.stderr


def test_tree_output_for_a_matrix():
    out = run("--nvidia-smi-topo", str(H100))
    lines = out.stdout.splitlines()
    assert lines[0].endswith("offline: nvidia-smi output, not read from a host")
    assert lines[1].startswith("sockets unknown · 2 NUMA node(s) · 160 CPUs · 8 GPU(s) · 9 NIC(s)")
    assert any(
        line.endswith("GPU0 [GPU] gpu0 NVIDIA GPU (model not in the matrix)  · rail nic8 (PIX)") for line in lines
    )
    assert "Sources: nvidia-smi ok" in lines


def test_read_offline_needs_an_input():
    with pytest.raises(OfflineInputError):
        read_offline()


def test_snapshot_defaults_keep_sysfs_shape():
    # the fields added for offline sources default to the sysfs meaning
    from topoagent.core.snapshot import NumaNode, PciFunction

    assert Snapshot().from_host_tree and Snapshot().given_paths == ()
    f = PciFunction(bdf="0000:01:00.0")
    assert (f.label, f.kind, f.rdma_names, f.rdma, f.numa_source) == (None, None, (), None, None)
    assert str(NumaNode(id=0).cpus) == ""


def test_sriov_expansion_is_bounded(monkeypatch):
    """PFs that each claim 65535 VFs (stride 0 or 1) cost a bounded number of routing IDs."""
    from topoagent.core.paste import lspci as offline_lspci

    monkeypatch.setattr(offline_lspci, "MAX_VF_IDS", 1000)
    text = "".join(
        f"0000:{i:02x}:00.0 Ethernet controller: Mellanox Technologies MT2892 Family [ConnectX-6 Dx]\n"
        "\tCapabilities: [180 v1] Single Root I/O Virtualization (SR-IOV)\n"
        "\t\tInitial VFs: 8, Total VFs: 8, Number of VFs: 65535, Function Dependency Link: 00\n"
        f"\t\tVF offset: 1, stride: {i % 2}, Device ID: 101e\n"
        for i in range(4)
    )
    snap = offline_lspci.snapshot_from_lspci(None, parse_lspci_verbose(text))
    assert len(snap.pci) == 4
    assert "more than 1000 VFs" in (snap.sources[0].detail or "")


def _unknown_threads_plan(matrix: str, **options):
    from topoagent.core.advice.plan import PlanOptions, rank_env

    r = analyse(read_offline(nvidia_smi_topo=matrix))
    assert all(c.siblings is None for c in r.snapshot.cpus)  # pasted text names no thread siblings
    p = r.plan_with(PlanOptions(**options))
    return p, [rank_env(p, i) for i in range(len(p.gpus) * p.ranks_per_gpu)]


def test_pasted_matrix_never_splits_an_affinity_set_by_thread():
    """0-19 and 40-59 are usually hyperthreads of the same 20 cores: without thread siblings
    both GPUs of the set get all of it, ranks too, no OMP_NUM_THREADS, and a note says so."""
    p, ranks = _unknown_threads_plan(text(PLX_TOPO), ranks_per_gpu=2, reserve_cores=2)
    node0, node1 = "0-19,40-59", "20-39,60-79"
    assert [str(cpus) for _, cpus, _ in ranks] == [node0] * 4 + [node1] * 4
    assert all("OMP_NUM_THREADS" not in env and env["OMP_PLACES"] == "cores" for _, _, env in ranks)
    assert not p.reserved  # no cores to reserve when cores are unknown
    (note,) = [n for n in p.notes if n.code == "CORES_UNKNOWN"]
    assert note.subjects == ("gpu0", "gpu1", "gpu2", "gpu3") and note.severity.label == "warning"
    assert "no cores are reserved" in note.message
    assert not [n for n in p.notes if n.code == "RANKS_SHARE_CORES"]


def test_pasted_matrix_without_numa_affinity_groups_gpus_by_their_cpu_sets():
    """No NUMA Affinity column: GPUs are grouped by the CPU set the text gives each one, never
    all handed the first GPU's set."""
    lines = text(PLX_TOPO).splitlines()
    cut = ["\t".join(line.split("\t")[:8]) if line.startswith(("\tGPU0", "GPU")) else line for line in lines]
    p, ranks = _unknown_threads_plan("\n".join(cut) + "\n")
    assert [g.numa_node for g in p.gpus] == [None] * 4
    assert [str(cpus) for _, cpus, _ in ranks] == ["0-19,40-59"] * 2 + ["20-39,60-79"] * 2


def test_a_redirecting_port_with_no_gpu_shown_is_info():
    """Issue 29 item 6: a PEX 8725 downstream port with ``ACSCtl: ... ReqRedir+ CmpltRedir+`` and its
    link up (HeyMeco/Rockchip-pcie-devices#6, lspci -vvv) while the excerpt shows nothing below it.
    What is below is unknown, so the redirect is reported, as info (never critical); the sibling
    port whose link is down (Width x0) and whose ACS is off raises nothing."""
    r = analyse(read_offline(None, None, text(LSPCI / "vvv_plx_pex8725_acs.txt")))
    found = by_code(r, "ACS_REDIRECT")
    assert [(f.subjects, f.severity.label) for f in found] == [(("bridge1",), "info")]
    assert "0000:03:08.0" in found[0].message and "shows no GPU path" in found[0].message
    out = run("--lspci-verbose", str(LSPCI / "vvv_plx_pex8725_acs.txt"), "--fail-on", "critical")
    assert out.returncode == 0, out.stdout


def test_a_redirect_a_platform_may_require_is_not_claimed_from_a_paste():
    """The same record as a ConnectX-8's own switch port (15b3:197c, lspci -nn): NVIDIA's Data Direct
    platform requires CmpltRedir on the DMA function's port and ReqRedir on the GPU's (rdma-core
    kernel-boot/rdma_topo, compute_acs), so a paste that cannot show the complex claims nothing."""
    record = text(LSPCI / "vvv_plx_pex8725_acs.txt").split("\n\n")[1]
    cx8 = record.replace(
        "PCI bridge: PLX Technology, Inc. PEX 8725 24-Lane, 10-Port PCI Express Gen 3 (8.0 GT/s) Multi-Root "
        "Switch with DMA (rev ca)",
        "PCI bridge [0604]: Mellanox Technologies MT43244 Family [ConnectX-8 PCIe Switch] [15b3:197c]",
        1,
    )
    assert cx8 != record
    r = analyse(read_offline(None, None, cx8 + "\n"))
    assert not by_code(r, "ACS_REDIRECT")
