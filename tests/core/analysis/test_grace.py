"""Grace: GPUs on NVLink-C2C (GH200, GB200) -- paths as nvidia-smi prints them and NCCL names
them, GPU_NIC_CROSS_SOCKET only across Graces, the GPUs' own memory nodes, the GPUDirect RDMA
verdict, plans and the cross-check, on the ``grace-hopper`` and ``gb200-tray`` fixtures."""

from __future__ import annotations

import json

import msgspec
import pytest
from click.testing import CliRunner

from tests.fakesysfs import MACHINES_DIR, generate, load_machine
from topoagent.cli import cli
from topoagent.core.analysis.c2c import is_c2c, own_cpu_nic
from topoagent.core.analysis.paths import gdr_by_default, nccl_path_type
from topoagent.core.analysis.peermem import peermem_need
from topoagent.core.api import Inputs, run, scan
from topoagent.core.parse.nvsmi_topo import parse_topo_matrix
from topoagent.core.pathclass import PathClass
from topoagent.core.pci import C2C_GPUS, NVIDIA, DeviceKind, kind_from_name, kind_of
from topoagent.core.render.json_report import report
from topoagent.core.render.matrix import matrix_of, render_topo_matrix
from topoagent.features.daemon.exports import nfd_features

# `nvidia-smi topo -m` of the gb200-tray fixture.  The header and the GPU rows are verbatim the
# GB200 tray pasted in sgl-project/sglang#11208 (NV18 between the GPUs, SYS from every GPU to
# every NIC, Grace NUMA Affinity lists, GPU NUMA IDs 2/10/18/26); the NIC rows and the NIC Legend
# are this fixture's NICs (two ConnectX-7 and a dual-port BlueField-3 on Grace 0, two ConnectX-7
# on Grace 1) in nvidia-smi's legend: NODE between root ports of one node, PIX between two
# functions of one device, SYS across the Graces.
GB200_NVSMI = (MACHINES_DIR / "gb200-tray.nvidia-smi.txt").read_text()


def _codes(result, code: str) -> list[tuple[str, ...]]:
    return [f.subjects for f in result.findings if f.code == code]


def _tray(tmp_path, *, nics_on_grace1: bool = True, peermem: bool = True, slow_dpu: bool = False):
    """The gb200-tray description, optionally without Grace 1's NICs or nvidia_peermem, or with
    a single-port 200G ConnectX-6 in the BlueField-3's place on Grace 0."""
    desc = load_machine("gb200-tray")
    if slow_dpu:
        for rb in desc["rootbus"]:
            if rb["id"] == "0006:00":
                rb["tree"] = "00.0 grace-rp > cx6-ib"
    if not nics_on_grace1:
        desc["rootbus"] = [rb for rb in desc["rootbus"] if rb["id"] != ["0010:00", "0012:00"]]
    if not peermem:
        desc["machine"]["modules"] = {k: v for k, v in desc["machine"]["modules"].items() if k != "nvidia_peermem"}
    return scan(generate(desc, tmp_path / "tray"), nvml="off")


@pytest.fixture(scope="module")
def tray(module_tmp):
    return scan(generate("gb200-tray", module_tmp / "gb200"), nvml="off")


# -- paths: SYS as nvidia-smi prints it, P2C as NCCL names it ----------------------------------


def test_every_gpu_nic_cell_is_sys_and_the_own_grace_nics_are_p2c(tray):
    topo = tray.topology
    assert all(is_c2c(topo, g) for g in topo.gpus)
    for g in topo.gpus:
        for n in topo.nics:
            p = tray.path(g.id, n.id)
            assert p.token == "SYS"
            own = own_cpu_nic(topo, g, n)
            assert own is (g.numa_node == n.numa_node)
            assert nccl_path_type(topo, g, n, p) is (PathClass.P2C if own else PathClass.SYS)
            assert gdr_by_default(topo, g, n, p) is own  # ncclTopoCheckGdr: P2C <= netGdrLevel (P2C)


def test_no_cross_socket_for_same_grace_nics(tray):
    assert _codes(tray, "GPU_NIC_CROSS_SOCKET") == []
    assert _codes(tray, "GPU_NIC_CROSS_NUMA") == []
    for r in tray.rails.rails:
        gpu, nic = tray.topology.by_id(r.gpu), tray.topology.by_id(r.nic)
        assert nic.numa_node == gpu.numa_node and nic.driver == "mlx5_core"
        assert (r.nccl_path, r.gdr) == (PathClass.P2C, True)
    # each GPU a CX-7 of its own Grace, none shared (the 400G NICs before the BlueField-3)
    assert [(r.gpu, r.nic) for r in tray.rails.rails] == [
        ("gpu0", "nic0"),
        ("gpu1", "nic1"),
        ("gpu2", "nic4"),
        ("gpu3", "nic5"),
    ]


def test_cross_socket_for_a_nic_on_the_other_grace(tmp_path):
    r = _tray(tmp_path, nics_on_grace1=False)
    # Across the CPU link (NCCL's ARM_BW, 6 GB/s) every NIC of Grace 0 is as fast as another, the
    # BlueField-3 ports too: NCCL spreads gpu2 and gpu3 by ncclTopoGetLocalNetType's rule (the NICs'
    # local GPUs are gpu0 and gpu1: dev % 2, mirrored over the 4 NICs: nic0, then nic2).
    assert sorted(_codes(r, "GPU_NIC_CROSS_SOCKET")) == [("gpu2", "nic0"), ("gpu3", "nic2")]
    far = [x for x in r.rails.rails if x.gpu in ("gpu2", "gpu3")]
    assert [(x.nccl_path, x.gdr) for x in far] == [(None, False), (None, False)]
    assert nfd_features(r, degraded_links=False)["topoagent.gdr.ready"] == "false"


def test_a_slower_nic_of_the_own_grace_is_phb_not_p2c(tmp_path):
    """NCCL gives P2C only to the GPU's local NICs, the fastest (ncclTopoGetLocal): a 200G NIC
    beside 400G ones on the same Grace keeps PHB, and GPUDirect RDMA is off to it.  The
    BlueField-3's two 200G ports count as one 400G NIC (NCCL merges a device's ports)."""
    slow = _tray(tmp_path, slow_dpu=True)
    topo = slow.topology
    g = topo.gpus[0]
    cx6 = next(n for n in topo.nics if n.bdf == "0006:01:00.0")
    cx7 = next(n for n in topo.nics if n.bdf == "0000:01:00.0")
    assert own_cpu_nic(topo, g, cx6) and own_cpu_nic(topo, g, cx7)
    p6, p7 = slow.path(g.id, cx6.id), slow.path(g.id, cx7.id)
    assert (nccl_path_type(topo, g, cx6, p6), gdr_by_default(topo, g, cx6, p6)) == (PathClass.PHB, False)
    assert (nccl_path_type(topo, g, cx7, p7), gdr_by_default(topo, g, cx7, p7)) == (PathClass.P2C, True)


def test_grace_hopper_nic_is_p2c_too(fixture_root):
    r = scan(fixture_root("grace-hopper"), nvml="off")
    (rail,) = r.rails.rails
    assert (rail.cls, rail.nccl_path, rail.gdr) == (PathClass.SYS, PathClass.P2C, True)
    assert _codes(r, "GPU_NIC_CROSS_SOCKET") == []


# -- the GPUs' own memory nodes ------------------------------------------------------------------


def test_gpu_memory_nodes_are_reported_as_such(tray):
    doc = msgspec.to_builtins(report(tray))
    nodes = {n["id"]: n for n in doc["numa_nodes"]}
    owned = {i: (n["gpu"], n["nearest_cpu_node"]) for i, n in nodes.items() if n["gpu"]}
    assert owned == {2: ("gpu0", 0), 10: ("gpu1", 0), 18: ("gpu2", 1), 26: ("gpu3", 1)}
    assert all(nodes[i]["cpu_less"] for i in owned)
    assert nodes[3]["gpu"] is None and nodes[3]["memory_bytes"] == 0
    cpu_less = [f for f in tray.findings if f.code == "CPU_LESS_NUMA_NODE"]
    assert [f.subjects for f in cpu_less] == [("node2", "node10"), ("node18", "node26")]  # no empty node
    assert "own memory of gpu0, gpu1" in cpu_less[0].message


def test_grace_hopper_memory_node(fixture_root):
    r = scan(fixture_root("grace-hopper"), nvml="off")
    assert [(n.id, n.gpu) for n in r.topology.nodes if n.gpu] == [(1, "gpu0")]


# -- plan, env, peer memory -----------------------------------------------------------------------


def test_plan_gives_each_gpu_its_own_grace(tray):
    p = tray.plan_with()
    got = {g.gpu: (str(g.cpus), [r.nic for r in g.rails], [r.remote for r in g.rails]) for g in p.gpus}
    assert got == {
        "gpu0": ("0-71", ["nic0"], [False]),
        "gpu1": ("0-71", ["nic1"], [False]),
        "gpu2": ("72-143", ["nic4"], [False]),
        "gpu3": ("72-143", ["nic5"], [False]),
    }
    assert all(r.nccl_path is PathClass.P2C and r.gdr for g in p.gpus for r in g.rails)


def test_plan_env_keeps_gdr_on_over_p2c(fixture_root):
    root = str(fixture_root("gb200-tray"))
    env = CliRunner().invoke(cli, ["plan", "--root", root, "--no-nvml", "--format", "env", "--gpu", "2"])
    assert env.exit_code in (0, 1), env.output
    # An NCCL_NET_GDR_LEVEL of PXB (or below) would replace NCCL's P2C default and turn GPUDirect
    # off (ncclTopoCheckGdr); the plan sets none, and no NIC is called remote.
    assert "NCCL_NET_GDR_LEVEL" not in env.output and "remote" not in env.output
    assert "export UCX_NET_DEVICES=mlx5_4:1\n" in env.output  # gpu2's own Grace's CX-7
    doc = json.loads(CliRunner().invoke(cli, ["plan", "--root", root, "--no-nvml", "--format", "json"]).output)
    nics = [n for g in doc["gpus"] for n in g["nics"]]
    assert {(n["kind"], n["nccl_path"], n["gdr"], n["remote"]) for n in nics} == {("SYS", "P2C", True, False)}
    text = CliRunner().invoke(cli, ["plan", "--root", root, "--no-nvml"]).output
    assert "nic0 mlx5_0 ibp1s0 SYS (NCCL P2C, GPUDirect RDMA on)" in text


def test_peer_memory_is_needed_for_gdr_over_p2c(tmp_path):
    r = _tray(tmp_path, peermem=False)
    need = peermem_need(r.topology, r.rails, dmabuf=False)
    assert need.needed, need.why
    assert nfd_features(r, degraded_links=False)["topoagent.gdr.ready"] == "false"  # NO_PEER_MEMORY


def test_nfd_gdr_ready_on_the_tray(tray):
    nfd = nfd_features(tray, degraded_links=False)
    # The worst rail is NCCL's P2C, not nvidia-smi's SYS: a selector that keeps pods off
    # cross-socket rails (worst-path != SYS) must not also keep them off every Grace node.
    assert (nfd["topoagent.gdr.ready"], nfd["topoagent.rail.worst-path"]) == ("true", "P2C")


def test_nfd_worst_path_is_sys_for_a_nic_on_the_other_grace(tmp_path):
    nfd = nfd_features(_tray(tmp_path, nics_on_grace1=False), degraded_links=False)
    assert (nfd["topoagent.gdr.ready"], nfd["topoagent.rail.worst-path"]) == ("false", "SYS")


# -- nvidia-smi's view: the matrix and --cross-check ---------------------------------------------


def test_matrix_equals_nvidia_smi_where_sysfs_knows(tray):
    ours, theirs = parse_topo_matrix(render_topo_matrix(matrix_of(tray))), parse_topo_matrix(GB200_NVSMI)
    assert [d.label for d in ours.devices] == [d.label for d in theirs.devices]
    for a in ours.devices:
        for b in ours.devices:
            if a.kind == b.kind == "gpu" and a.label != b.label:
                continue  # NV18 needs NVML; sysfs alone knows only the PCIe class
            assert ours.cell(a.label, b.label) == theirs.cell(a.label, b.label), (a.label, b.label)
    for a, b in zip(ours.devices, theirs.devices, strict=True):
        assert (a.cpu_affinity, a.gpu_numa_id, a.rdma_name) == (b.cpu_affinity, b.gpu_numa_id, b.rdma_name)


def _tool(argv, stdout="", error=None):
    from topoagent.core.read.tools import ToolResult

    return ToolResult(tuple(argv), None if error else 0, stdout, "", error)


def _cross_checked(root, nvsmi: str):
    """A scan of ``root`` cross-checked against ``nvsmi`` as nvidia-smi's output (no lspci)."""
    return run(
        Inputs(
            root=str(root),
            nvml="off",
            cross_check=True,
            runners={
                "nvidia-smi": lambda: _tool(["nvidia-smi", "topo", "-m"], nvsmi),
                "lspci": lambda: _tool(["lspci", "-D", "-vvv", "-nn"], error="not installed"),
            },
        )
    )


def test_cross_check_against_nvidia_smi_agrees(fixture_root):
    checked = _cross_checked(fixture_root("gb200-tray"), GB200_NVSMI)
    assert {s.name: s.status for s in checked.snapshot.sources}["nvidia-smi"] == "ok"
    assert _codes(checked, "SOURCES_DISAGREE") == []
    # and it does disagree where the tree does: a GPU-NIC cell nvidia-smi would print NODE
    bad = GB200_NVSMI.replace(
        "GPU0     X      NV18    NV18    NV18    SYS", "GPU0     X      NV18    NV18    NV18    NODE"
    )
    assert _codes(_cross_checked(fixture_root("gb200-tray"), bad), "SOURCES_DISAGREE") == [("gpu0", "nic0")]


# -- the C2C parts: GB300 and GB10 as pci.ids names them ---------------------------------------


@pytest.mark.parametrize(
    ("device", "lspci_name"),
    [
        (0x31C2, "NVIDIA Corporation GB110 [GB300]"),
        (0x31C3, "NVIDIA Corporation GB110 [GB300]"),
        (0x31A1, "NVIDIA Corporation GB110 [GB300 MaxQ]"),
        (0x2E12, "NVIDIA Corporation GB20B [GB10]"),
    ],
)
def test_gb300_and_gb10_are_c2c_gpus(device, lspci_name):
    # pci.ids (github.com/pciutils/pciids): 10de:31c2/31c3 "GB110 [GB300]", 31a1 "GB110 [GB300
    # MaxQ]", 2e12 "GB20B [GB10]" (DGX Spark); a 3D/VGA controller, so kind gpu by class
    assert (NVIDIA, device) in C2C_GPUS
    assert kind_of(0x030200, NVIDIA) is DeviceKind.GPU
    assert kind_from_name(lspci_name, NVIDIA, None) == "gpu"  # a name without ids (lspci -tv)
    assert kind_from_name(lspci_name, NVIDIA, device) == "gpu"
    assert kind_from_name("NVIDIA Corporation GB20B PCI bridge", NVIDIA, None) is None


def test_drawings_grade_a_p2c_rail_good_not_sys_red(tray):
    """A Grace GPU's rail to its own CPU's NIC reads SYS (nvidia-smi's cell) but is NCCL's P2C
    with GPUDirect RDMA on: the drawings paint it as a good rail, not a cross-socket one."""
    from topoagent.features.draw.layout import layout, rail_class, tie_grade

    for rail in tray.rails.rails:
        assert rail_class(rail, tray.path(rail.gpu, rail.nic)) is PathClass.P2C
    ties = layout(tray).ties
    assert ties and {(t.token, t.cls, tie_grade(t.cls)) for t in ties} == {("SYS", PathClass.P2C, "good")}
