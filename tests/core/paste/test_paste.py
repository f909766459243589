"""``topoagent scan --paste``: every tool output found in a bug report, read and merged into one host.

The texts are public pastes (tests/core/paste_samples/README.md names each source): one test per
kind the segmenter reads, pastes glued and wrapped as people post them, the findings each fact
proves at the severity its evidence carries, and the pasted family's catalogue examples.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO
from tests.plan_helpers import run_cli
from topoagent.core.api import analyse, scan
from topoagent.core.findings import CATALOGUE
from topoagent.core.findings.crosscheck import against_nvidia_smi
from topoagent.core.findings.doc import example_text
from topoagent.core.parse import segment as seg
from topoagent.core.parse.nvsmi_topo import parse_topo_matrix
from topoagent.core.paste import PasteInput, read_pastes
from topoagent.core.render.matrix import matrix_of, render_topo_matrix
from topoagent.core.result import ScanResult
from topoagent.core.snapshot import Snapshot

SAMPLES = REPO / "tests/core/paste_samples"
NVSMI = REPO / "tests/core/parse/samples/nvsmi"


def _text(name: str) -> str:
    return (SAMPLES / name).read_text()


def _snapshot(*names: str) -> Snapshot:
    return read_pastes([PasteInput(f"--paste {n}", _text(n)) for n in names])


def _scan(*names: str) -> ScanResult:
    return analyse(_snapshot(*names))


def _codes(r: ScanResult) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in r.findings:
        out.setdefault(f.code, []).append(f.severity.label)
    return out


def _found(name: str) -> tuple[str, ...]:
    return _found_text(_text(name))


def _found_text(text: str) -> tuple[str, ...]:
    return seg.find_outputs(text).kinds()


def _only(r: ScanResult, code: str) -> str:
    (f,) = [f for f in r.findings if f.code == code]
    return example_text(f)


# -- what the segmenter recognises in each paste --------------------------------------------


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        ("nvsmi_q_a10g_p0_x8.txt", (seg.QUERY,)),
        ("nvsmi_q_l4_idle_gen1.txt", (seg.QUERY,)),
        ("topo_m_p2p_details_2x5090.txt", (seg.TOPO_M, seg.P2P)),
        ("numactl_nps4_memoryless_nodes.txt", (seg.NUMACTL,)),
        ("ibdev2netdev_column_comments.txt", (seg.IBDEV2NETDEV,)),
        ("ibv_devinfo_mlx4_two_ports.txt", (seg.IBV_DEVINFO,)),
        ("rocm_smi_showtopo_4gpu_pcie.txt", (seg.ROCM_SMI,)),
        ("rocm_smi_toponuma_8gpu.txt", (seg.ROCM_SMI,)),
        ("amd_smi_topology_mi300x_8gpu.txt", (seg.AMD_SMI,)),
        ("nvlink_s_v100_inactive.txt", (seg.NVLINK,)),
        ("dmesg_aer_journal_root_port.txt", (seg.DMESG,)),
        ("dmesg_aer_and_lspci_tree_laptop.txt", (seg.DMESG, seg.LSPCI_TREE)),
        ("c_comment_topology_4gpu_4nic.txt", (seg.TOPO_M,)),
        ("lspci_tree_filtered_b200.txt", (seg.LSPCI_TREE,)),
        ("derived_h100_topo_and_p2p_n.txt", (seg.TOPO_M, seg.P2P)),
        ("derived_matrix_and_ibv_devinfo_port_down.txt", (seg.TOPO_M, seg.IBV_DEVINFO)),
        ("lstopo_v_p4d_efa_fixture.txt", (seg.LSTOPO,)),
    ],
)
def test_each_paste_is_recognised_as_the_tools_it_holds(name: str, kinds: tuple[str, ...]) -> None:
    assert _found(name) == kinds


def test_the_report_names_what_was_read_and_what_was_not() -> None:
    """The ``paste`` source says where each output was and which lines were prose."""
    snap = _snapshot("topo_m_p2p_details_2x5090.txt")
    (status,) = [s for s in snap.sources if s.name == "paste"]
    assert status.detail is not None
    assert "nvidia-smi topo -m" in status.detail and "nvidia-smi topo -p2p" in status.detail
    assert "lines 4-16: nvidia-smi topo -m" in status.detail


def test_a_text_with_no_tool_output_exits_2_with_one_line(tmp_path: Path) -> None:
    prose = tmp_path / "prose.txt"
    prose.write_text("Hi, NCCL hangs on our 8-GPU box, any idea?\n\nThanks!\n")
    out = run_cli("scan", "--paste", str(prose))
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "no tool output recognised" in out.stderr


def test_stdin_is_read_with_a_dash() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "topoagent", "scan", "--paste", "-", "--format", "json"],
        input=_text("nvsmi_q_l4_idle_gen1.txt"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert '"GPU_LINK_IDLE_DOWNCLOCKED"' in out.stdout


# -- nvidia-smi -q -----------------------------------------------------------------------------


def test_query_of_a_busy_gpu_below_its_link_maximum_is_a_warning() -> None:
    """NVIDIA/DCGM#232: an A10G at P0 (``Idle`` clock event reason not active, a process holding
    8.7 GB) with its link at Gen4 x8 of x16: a GPU at work runs at its maximum."""
    r = _scan("nvsmi_q_a10g_p0_x8.txt")
    assert _codes(r) == {"GPU_LINK_SLOW_UNDER_LOAD": ["warning"]}
    (gpu,) = r.topology.gpus
    assert gpu.bdf == "0000:00:1e.0" and gpu.name == "NVIDIA A10G"
    assert _only(r, "GPU_LINK_SLOW_UNDER_LOAD") == CATALOGUE["GPU_LINK_SLOW_UNDER_LOAD"].examples[0].text


def test_query_of_an_idle_gpu_at_gen1_is_info_by_design() -> None:
    """thamada/nvidia-smi's captured L4 at P8: Gen1 x8 of Gen4 x16 is the idle state
    (``nvidia-smi --help-query-gpu``: "may be reduced when the GPU is not in use")."""
    r = _scan("nvsmi_q_l4_idle_gen1.txt")
    assert _codes(r) == {"GPU_LINK_IDLE_DOWNCLOCKED": ["info"]}
    assert _only(r, "GPU_LINK_IDLE_DOWNCLOCKED") == CATALOGUE["GPU_LINK_IDLE_DOWNCLOCKED"].examples[0].text


def test_the_idle_clock_reason_outranks_p0() -> None:
    """A GPU can sit at P0 with nothing running (NVML's ``nvmlClocksEventReasonGpuIdle``): the
    A10G paste with its ``Idle`` reason turned active is judged idle, not busy."""
    text = _text("nvsmi_q_a10g_p0_x8.txt").replace(
        "        Idle                              : Not Active", "        Idle                              : Active"
    )
    r = analyse(read_pastes([PasteInput("--paste a10g", text)]))
    assert _codes(r) == {"GPU_LINK_IDLE_DOWNCLOCKED": ["info"]}


# -- nvidia-smi topo -m and -p2p ---------------------------------------------------------------


def test_p2p_in_details_beside_its_matrix_is_read_for_what_it_says() -> None:
    """noonghunna/club-3090#1229: two RTX 5090 PHB apart, ``-p2p`` GNS in a second
    ``<details>``.  PHB is beyond NCCL's default P2P level (PXB, ``ncclTopoCheckP2p``), so the
    driver's refusal changes nothing NCCL would do: no P2P finding; the status is kept."""
    snap = _snapshot("topo_m_p2p_details_2x5090.txt")
    assert {(p.a, p.b, p.status) for p in snap.given_p2p} >= {("GPU0", "GPU1", "GNS")}
    assert "P2P_NOT_SUPPORTED" not in _codes(analyse(snap))


def test_merging_p2p_changes_neither_matrix_nor_findings_where_they_overlap() -> None:
    """The matrix alone and the matrix with its -p2p give the same matrix and findings."""
    text = _text("topo_m_p2p_details_2x5090.txt")
    alone = analyse(read_pastes([PasteInput("a", text.split("<details><summary>GPU peer")[0])]))
    both = _scan("topo_m_p2p_details_2x5090.txt")
    assert matrix_of(alone) == matrix_of(both)
    assert _codes(alone) == _codes(both)


def test_p2p_refused_between_nvlinked_gpus_is_critical() -> None:
    """Derived (README): the H100 NV18 matrix of NVIDIA/nccl#1453 and ``-p2p n`` with GPU0-GPU1
    NS: NVLinked GPUs whose NVLink P2P the driver refuses."""
    r = _scan("derived_h100_topo_and_p2p_n.txt")
    assert _codes(r)["P2P_NOT_SUPPORTED"] == ["critical"]
    assert _only(r, "P2P_NOT_SUPPORTED") == CATALOGUE["P2P_NOT_SUPPORTED"].examples[0].text


def test_p2p_given_as_a_topology_matrix_is_refused_with_one_line(tmp_path: Path) -> None:
    """Issue 29 item 12: ``-p2p`` output to ``--nvidia-smi-topo`` invented NODE paths; now one
    line naming what it is (club-3090#1229's GNS block)."""
    text = _text("topo_m_p2p_details_2x5090.txt")
    p2p = tmp_path / "p2p.txt"
    p2p.write_text(text[text.index(" \tGPU0\tGPU1") : text.index("```\n\n</details>\n", text.index(" \tGPU0"))])
    out = run_cli("scan", "--nvidia-smi-topo", str(p2p))
    assert out.returncode == 2 and out.stderr.count("\n") == 1
    assert "nvidia-smi topo -p2p output" in out.stderr and "--paste" in out.stderr


def test_a_matrix_in_a_c_comment_without_a_space_after_the_star_is_read() -> None:
    """Issue 29 item 8: `` *Topology is below:`` before a `` * ``-prefixed matrix (a public
    cuda_mem_reg_mr.c): read whole, with its NIC legend."""
    for args in (["--nvidia-smi-topo"], ["--paste"]):
        out = run_cli("scan", *args, str(SAMPLES / "c_comment_topology_4gpu_4nic.txt"), "--format", "matrix")
        assert out.returncode == 0, out.stderr
        assert "GPU3\tSYS\tSYS\tNODE\t X \tSYS\tSYS\tSYS\tNODE" in out.stdout
        assert "NIC3: mlx5_3" in out.stdout


@pytest.mark.parametrize("name", ["ellipsis_a40_nv4.txt", "ellipsis_dgx_a100_nv12.txt"])
def test_matrices_shortened_with_ellipses_are_read_and_claim_no_absence(name: str) -> None:
    """Issue 29 item 9: every line ends in ``...`` (the author's "abbreviated"): the eight GPUs
    shown are read, what was cut is unknown, so no NIC's absence is claimed."""
    out = run_cli("scan", "--nvidia-smi-topo", str(SAMPLES / name))
    assert out.returncode == 0, out.stderr
    assert "8 GPU(s)" in out.stdout and "left columns out" in out.stdout
    assert "NO_RDMA_NIC" not in out.stdout


def test_a_filtered_lspci_tree_is_read() -> None:
    """Issue 29 item 10: ``lspci -tv -d 10de:2901`` on an HGX B200 host (Ubicloud): the root bus
    drawn as a branch is a root bus; the B200 sits three bridges down; nothing is claimed
    absent from a filtered listing."""
    for args in (["--lspci-tree"], ["--paste"]):
        out = run_cli("scan", *args, str(SAMPLES / "lspci_tree_filtered_b200.txt"))
        assert out.returncode == 0, out.stderr
        assert "0000:17:00.0 [GPU] gpu0 NVIDIA B200" in out.stdout
        assert "filtered tree" in out.stdout and "NO_RDMA_NIC" not in out.stdout


# -- numactl -H --------------------------------------------------------------------------------


def test_numactl_gives_nodes_their_cpus_memory_and_distances() -> None:
    """numactl/numactl#165: a Threadripper 3960X in NPS4, nodes 0 and 3 with CPUs and 0 MB."""
    nodes = {n.id: n for n in _snapshot("numactl_nps4_memoryless_nodes.txt").numa_nodes}
    assert sorted(nodes) == [0, 1, 2, 3]
    assert str(nodes[0].cpus) == "0-5,24-29" and nodes[0].memory_bytes == 0
    assert nodes[1].memory_bytes == 64307 * 1024 * 1024
    assert nodes[2].distances == (12, 12, 10, 12)


# -- ibdev2netdev and ibv_devinfo ------------------------------------------------------------


def test_ibdev2netdev_through_column_with_comments_is_read() -> None:
    """imbue-ai/cluster-health#4: ``ibdev2netdev | column -t`` with a ``#`` comment per line."""
    snap = _snapshot("ibdev2netdev_column_comments.txt")
    names = {n.name: n for n in snap.netdevs}
    assert len(names) == 12
    assert names["ibp26s0"].rdma == "mlx5_0" and names["ibp26s0"].up is False
    assert names["enp27s0f0np0"].up is True


def test_ibv_devinfo_with_device_ports_heading_is_read() -> None:
    """ConnectX-3 ``ibv_devinfo`` with the older ``Device ports:`` heading: each port's state."""
    snap = _snapshot("ibv_devinfo_mlx4_two_ports.txt")
    states = {(d.name, p.port): p.state for d in snap.rdma for p in d.ports}
    assert states == {("mlx4_1", 1): "ACTIVE", ("mlx4_1", 2): "DOWN", ("mlx4_0", 1): "ACTIVE", ("mlx4_0", 2): "DOWN"}


def test_a_rail_nic_whose_port_is_down_is_a_warning() -> None:
    """Derived (README): the C-comment matrix and ``ibv_devinfo`` with mlx5_1 PORT_DOWN: mlx5_1
    is GPU1's nearest NIC, and NCCL skips a port that is not ACTIVE (net_ib.cc)."""
    r = _scan("derived_matrix_and_ibv_devinfo_port_down.txt")
    assert _codes(r)["NIC_PORT_DOWN"] == ["warning"]
    assert _only(r, "NIC_PORT_DOWN") == CATALOGUE["NIC_PORT_DOWN"].examples[0].text


# -- nvidia-smi nvlink -s ----------------------------------------------------------------------


def test_inactive_links_of_a_lone_gpu_claim_nothing() -> None:
    """Azure/azhpc-diagnostics#73 shows one V100 with two ``<inactive>`` links and elides the
    others: with no GPU to compare, a bridge card with unused links is as likely; no finding."""
    snap = _snapshot("nvlink_s_v100_inactive.txt")
    (status,) = snap.nvlink_status
    assert status.label == "GPU3" and len(status.speeds) == 4 and status.inactive == (3, 5)
    assert "NVLINK_INACTIVE" not in _codes(analyse(snap))


def test_a_gpu_with_fewer_active_links_than_its_peer_is_a_warning() -> None:
    r = _scan("derived_nvlink_s_two_v100.txt")
    assert _codes(r) == {"NVLINK_INACTIVE": ["warning"]}
    assert _only(r, "NVLINK_INACTIVE") == CATALOGUE["NVLINK_INACTIVE"].examples[0].text


# -- dmesg AER ---------------------------------------------------------------------------------


def test_journal_aer_lines_of_a_root_port_are_corrected_errors() -> None:
    """pop-os/pop#3363: journal lines, Linux 6.x wording (``Correctable error message received
    from``), two corrected events on the root port 00:03.1: info, a rate the excerpt cannot show."""
    r = _scan("dmesg_aer_journal_root_port.txt")
    assert _codes(r) == {"PCIE_AER_LOGGED": ["info"]}
    assert _only(r, "PCIE_AER_LOGGED") == CATALOGUE["PCIE_AER_LOGGED"].examples[0].text


def test_aer_glued_to_a_tree_counts_each_report_once() -> None:
    """pop-os/pop#751: AER lines and ``lspci -tv`` glued.  The port's ``Multiple Corrected error
    received: 0000:03:00.0`` header and the NVMe's own ``PCIe Bus Error`` detail are one event."""
    r = _scan("dmesg_aer_and_lspci_tree_laptop.txt")
    aer = {f.message.split(" ")[1]: f.message for f in r.findings if f.code == "PCIE_AER_LOGGED"}
    assert set(aer) == {"(0000:00:1d.0)", "(0000:03:00.0)"}
    assert "logged 1 corrected" in aer["(0000:03:00.0)"] and "(RxErr)" in aer["(0000:03:00.0)"]
    assert any(d.name and "GTX 1060" in d.name for d in r.topology.gpus)


# -- AMD: rocm-smi and amd-smi -----------------------------------------------------------------


def test_rocm_smi_showtopo_pcie_pairs_three_hops_apart_are_sys() -> None:
    """ROCm/rocm_smi_lib#108: four GPUs, link type PCIE, 3 hops (the MI200 guide: "different
    CPU sockets"): the GPU pairs print SYS."""
    m = matrix_of(_scan("rocm_smi_showtopo_4gpu_pcie.txt"))
    assert [d.label for d in m.devices] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert {c for row in m.cells for c in row} == {"X", "SYS"}


def test_rocm_smi_toponuma_places_gpus_on_their_nodes() -> None:
    """ROCm/legacy-rocm-build#4740: eight GPUs, four on node 0 and four on node 1."""
    r = _scan("rocm_smi_toponuma_8gpu.txt")
    assert [g.numa_node for g in r.topology.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]


def test_amd_smi_topology_of_an_mi300x_gives_the_fixtures_gpu_matrix() -> None:
    """ROCm/amdsmi's CHANGELOG ``amd-smi topology`` of an 8x MI300X (the BDFs of the mi300x
    fixture): every pair XGMI, as the fixture's matrix prints it."""
    m = matrix_of(_scan("amd_smi_topology_mi300x_8gpu.txt"))
    gpus = [i for i, d in enumerate(m.devices) if d.kind == "gpu"]
    assert len(gpus) == 8
    assert {m.cells[i][j] for i in gpus for j in gpus if i != j} == {"XGMI"}
    golden = (REPO / "tests/golden/mi300x/matrix.txt").read_text().splitlines()
    for i, line in enumerate(golden[1:9]):
        assert line.split("\t")[1:9] == [" X " if j == i else "XGMI" for j in range(8)]


# -- lstopo, as the real program prints it ---------------------------------------------------


def _lstopo(root: Path, *args: str) -> str:
    lstopo = shutil.which("lstopo-no-graphics") or shutil.which("lstopo")
    if lstopo is None:
        pytest.skip("lstopo not installed (Debian package hwloc)")
    env = {**os.environ, "HWLOC_FSROOT": str(root), "HWLOC_THISSYSTEM": "1"}
    out = subprocess.run(
        [lstopo, "--of", "console", *args], capture_output=True, text=True, env=env, timeout=120, check=True
    )
    return out.stdout


def test_lstopo_verbose_of_a_host_gives_its_paths_as_nvidia_smi_names_them(fixture_root) -> None:
    """hwloc's own ``lstopo -v`` of the DGX H100 fixture (HWLOC_FSROOT): every bridge has its
    busid, so the tree is known; the paths agree with the sysfs scan of the same tree as
    nvidia-smi's would (the cross-check's rules: PXB across a Broadcom PEX890xx that the scan
    counts as one switch is no disagreement)."""
    root = fixture_root("dgx-h100")
    text = _lstopo(root, "-v")
    assert _found_text(text) == (seg.LSTOPO,)
    pasted = analyse(read_pastes([PasteInput("lstopo -v", text)]))
    live = scan(root, nvml="off")
    m = parse_topo_matrix(render_topo_matrix(matrix_of(pasted)))
    assert against_nvidia_smi(live.topology, live.paths, m) == []
    assert {(d.bdf, d.numa_node) for d in pasted.topology.gpus} == {(d.bdf, d.numa_node) for d in live.topology.gpus}
    nics = {d.bdf: d.rdma_devices for d in pasted.topology.nics}
    assert nics == {d.bdf: d.rdma_devices for d in live.topology.nics}


def test_lstopo_without_v_gives_nodes_cpus_and_placement_but_no_bridge_tree(fixture_root) -> None:
    """Plain ``lstopo``: a ``PCIBridge`` names no function, so the bridges are unknown (said so;
    tests/core/paste/test_paste_round3.py reads the paths the nesting shows); the NUMA nodes,
    their CPUs and each device's node are still lstopo's."""
    root = fixture_root("dgx-h100")
    snap = read_pastes([PasteInput("lstopo", _lstopo(root))])
    live = scan(root, nvml="off")
    assert [(n.id, str(n.cpus)) for n in snap.numa_nodes] == [
        (n.id, str(n.cpus)) for n in live.topology.snapshot.numa_nodes
    ]
    (status,) = [s for s in snap.sources if s.name == "lstopo"]
    assert status.detail is not None and "without a busid" in status.detail


# -- one host's outputs glued: the same where they overlap, more where they do not ------------


def _numactl_h(snap: Snapshot) -> str:
    """``numactl -H`` as numactl prints it (numactl.c ``hardware()``) for a snapshot's nodes."""
    nodes = snap.numa_nodes
    lines = [f"available: {len(nodes)} nodes (0-{len(nodes) - 1})"]
    for n in nodes:
        mb = (n.memory_bytes or 0) >> 20
        lines += [f"node {n.id} cpus: {' '.join(map(str, n.cpus or ()))}", f"node {n.id} size: {mb} MB"]
        lines.append(f"node {n.id} free: {mb // 2} MB")
    lines.append("node distances:")
    lines.append("node " + "".join(f"{n.id:>4}" for n in nodes))
    lines += [f"{n.id:>3}: " + "".join(f"{d:>4}" for d in n.distances) for n in nodes]
    return "\n".join(lines) + "\n"


def _ibdev2netdev(snap: Snapshot) -> str:
    """``ibdev2netdev`` as the MLNX_OFED script prints it: ``mlx5_0 port 1 ==> ib0 (Up)``."""
    netdev = {d.bdf: d.name for d in snap.netdevs}
    return "".join(
        f"{r.name} port {p.port} ==> {netdev.get(r.bdf, 'N/A')} ({'Up' if p.state == 'ACTIVE' else 'Down'})\n"
        for r in snap.rdma
        for p in r.ports
    )


def test_one_hosts_outputs_glued_agree_where_they_overlap_and_add_the_rest(fixture_root) -> None:
    """The DGX H100 fixture's matrix (as topoagent renders it, nvidia-smi's format), its
    ``numactl -H`` and ``ibdev2netdev`` glued into one report with prose and prompts: the same
    matrix and findings as the matrix alone, and the nodes' memory and distances and the NICs'
    netdevs the matrix cannot show."""
    live = scan(fixture_root("dgx-h100"), nvml="off")
    snap = live.topology.snapshot
    matrix = render_topo_matrix(matrix_of(live))
    report = (
        "Our 8-GPU node is slow across nodes, here is what I collected:\n\n```\n$ nvidia-smi topo -m\n"
        + matrix
        + "```\n\nand\n\n```\n$ numactl -H\n"
        + _numactl_h(snap)
        + "$ ibdev2netdev\n"
        + _ibdev2netdev(snap)
        + "```\nThanks!\n"
    )
    alone = analyse(read_pastes([PasteInput("matrix", matrix)]))
    glued = analyse(read_pastes([PasteInput("report", report)]))
    assert seg.find_outputs(report).kinds() == (seg.TOPO_M, seg.NUMACTL, seg.IBDEV2NETDEV)
    assert matrix_of(glued) == matrix_of(alone)
    assert _codes(glued) == _codes(alone)
    nodes = {n.id: n for n in glued.topology.snapshot.numa_nodes}
    assert nodes[0].distances == (10, 21) and nodes[1].memory_bytes == 1 << 40
    assert [n.memory_bytes for n in alone.topology.snapshot.numa_nodes] == [None, None]
    netdevs = {n.rdma: n.name for n in glued.topology.snapshot.netdevs if n.rdma}
    assert netdevs["mlx5_0"] == "ibp24s0"
