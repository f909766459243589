"""Verdicts an expert would sign (issue 29): each finding proven by its input, at the severity its
evidence carries, with the remedy that fits the host -- each case on a public input, named with
its source, and the reason for its label from NCCL's code or NVIDIA's documentation.

Samples: tests/core/parse/samples/{nvsmi,lspci}/ (provenance in the READMEs there).  The rule the
cases share: a finding is bounded by its weakest evidence line (the catalogue's PROOF_BOUND), and
what the input cannot show is not claimed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO
from topoagent.core.analysis.ncclnet import NetChoice, nccl_net_choice
from topoagent.core.analysis.paths import path_index
from topoagent.core.analysis.rails import compute_nics
from topoagent.core.api import analyse, read_offline, scan
from topoagent.core.errors import TopoagentError
from topoagent.core.findings import CATALOGUE, Severity
from topoagent.core.findings.catalogue import evidence_bound, proof_of
from topoagent.core.findings.doc import example_text
from topoagent.core.pathclass import PathClass

NVSMI = REPO / "tests/core/parse/samples/nvsmi"
LSPCI = REPO / "tests/core/parse/samples/lspci"


def text(path: Path) -> str:
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def matrix(name: str):
    return analyse(read_offline(nvidia_smi_topo=text(NVSMI / name)))


def lspci_tree(name: str):
    return analyse(read_offline(lspci_tree=text(LSPCI / name)))


def lspci_listing(name: str):
    return analyse(read_offline(lspci_verbose=text(LSPCI / name)))


def nccl(result) -> NetChoice:
    """The one NCCL model, asked as the rails ask it."""
    topo = result.topology
    return nccl_net_choice(topo, compute_nics(topo, result.rails.roles), path_index(result.paths))


def codes(result, code: str):
    return [f for f in result.findings if f.code == code]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "topoagent", "scan", *args], capture_output=True, text=True, cwd=REPO, timeout=60
    )


# -- 1. sockets are claimed only where the input proves sockets ---------------------------------------


def test_a_single_socket_epyc_in_nps4_is_cross_numa_not_cross_socket():
    """ALCF's Polaris (argonne-lcf/user-guides docs/polaris/index.md): one EPYC 7543P in NPS4,
    four NUMA nodes on one socket.  Today's legend defines SYS as crossing "the SMP interconnect
    between NUMA nodes", so GPU0 and GPU2 (SYS to both NICs) are cross-NUMA, socket unknown --
    a warning, and --fail-on critical passes (before: GPU_NIC_CROSS_SOCKET, critical, exit 1)."""
    r = matrix("verdict_polaris_a100_nps4_markdown.txt")
    assert codes(r, "GPU_NIC_CROSS_SOCKET") == []
    found = codes(r, "GPU_NIC_CROSS_NUMA")
    # both take nic0 (mlx5_0) on channel 0: equally local NICs go as NCCL spreads them (topo.cc
    # ncclTopoGetLocalNetType, analysis.ncclnet), in the order NCCL numbers its NETs -- GPU0's CPU
    # first, then the CPUs its net plugin's devices walk to, mlx5_0's before mlx5_1's.  NCCL 2.30.7
    # itself (nccl-topo-check on a sysfs tree of this node) gives ranks 0 and 2 mlx5_0 on channel 0.
    assert [(f.subjects, f.severity) for f in found] == [
        (("gpu0", "nic0"), Severity.WARNING),
        (("gpu2", "nic0"), Severity.WARNING),
    ]
    assert "on NUMA node 0, the GPU on node 3" in found[0].message
    assert "whether that is another socket is unknown from this input" in found[0].message
    assert "lscpu" in found[0].remedy  # the pasted-text remedy: find the sockets
    assert cli("--nvidia-smi-topo", str(NVSMI / "verdict_polaris_a100_nps4_markdown.txt")).returncode == 0


def test_an_old_soc_cell_proves_the_socket():
    """A K80 box of about 2017 (a public repository's notes on process pinning, quoting a matrix
    taken inside a 4-CPU job): the legend defines SOC as "the SMP link between CPU sockets", and
    mlx4_0 is SOC to GPU0/GPU1 and PHB to GPU2/GPU3 -- on the other socket than GPU0/GPU1, as the
    paste itself says: critical, proven by the pasted token alone; --fail-on critical exits 1."""
    r = matrix("verdict_k80_soc_mlx4_job_cpuset.txt")
    found = codes(r, "GPU_NIC_CROSS_SOCKET")
    assert [(f.subjects, f.severity) for f in found] == [
        (("gpu0", "nic0"), Severity.CRITICAL),
        (("gpu1", "nic0"), Severity.CRITICAL),
    ]
    assert [(e.path, e.value) for e in found[0].evidence] == [("nvidia-smi topo -m GPU0/mlx4_0", "SOC")]
    assert "the SMP link between CPU sockets" in found[0].message
    assert cli("--nvidia-smi-topo", str(NVSMI / "verdict_k80_soc_mlx4_job_cpuset.txt")).returncode == 1


def test_a_nic_soc_to_the_gpus_of_both_cpu_sets_is_on_no_proven_socket():
    """IBM's Minsky (POWER8 + 4 P100, a public repository's CUDA notes): mlx5_0/mlx5_1, one
    dual-port card, are SOC to the GPUs of both CPU sets; it cannot hang off "the other socket"
    from both, so the old legend's SOC proves no socket here: cross-NUMA, warning, naming why."""
    r = matrix("verdict_minsky_p100_soc_dual_port_nic.txt")
    assert codes(r, "GPU_NIC_CROSS_SOCKET") == []
    found = codes(r, "GPU_NIC_CROSS_NUMA")
    assert len(found) == 4 and {f.severity for f in found} == {Severity.WARNING}
    assert "is SOC to the GPUs of every CPU set (2), so it cannot be on another socket" in found[0].message


# -- 2. PXN: a GPU that reaches the NIC through an NVLinked peer, as NCCL decides -----------------------


def test_pxn_follows_ncclTopoComputePaths_on_a_v100_mesh_with_one_nic():
    """8x V100 SXM2 in a hybrid cube mesh with one mlx5_0, PIX to GPU2 and GPU3 (OneFlow-Inc
    OneFlow-Benchmark reports).  NCCL >= 2.12 routes a GPU whose own path crosses the CPU through
    the NIC's *local GPU* (ncclTopoGetLocalGpu: of GPU2 and GPU3, the first whose own NIC on a
    channel is mlx5_0 -- GPU2) when that GPU is NVLinked to it: GPU0 (NV1), GPU1 (NV2) and GPU6
    (NV1) -> info, GPUDirect on.  GPU7 is NVLinked to GPU3 only, which is PIX to the NIC but not
    its local GPU: no PXN, the cross-NUMA warning stays (as for GPU4 and GPU5)."""
    r = matrix("v100_nv1_nv2_one_mlx5.txt")
    assert nccl(r).local_gpu("nic0") == "gpu2"
    pxn = codes(r, "GPU_NIC_VIA_PXN")
    assert [(f.subjects, f.severity) for f in pxn] == [
        (("gpu0", "nic0", "gpu2"), Severity.INFO),
        (("gpu1", "nic0", "gpu2"), Severity.INFO),
        (("gpu6", "nic0", "gpu2"), Severity.INFO),
    ]
    assert codes(r, "GPU_NIC_VIA_HOST_BRIDGE") == []  # before: gpu0, gpu1 "staged through host memory"
    assert sorted(f.subjects[0] for f in codes(r, "GPU_NIC_CROSS_NUMA")) == ["gpu4", "gpu5", "gpu7"]
    rail = r.rails.rail("gpu0")
    assert (rail.nic, rail.cls, rail.nccl_path, rail.gdr, rail.pxn_via) == (
        "nic0",
        PathClass.NODE,
        PathClass.PXN,
        True,
        "gpu2",
    )
    # the catalogue's example is this finding
    assert CATALOGUE["GPU_NIC_VIA_PXN"].examples[0].text == example_text(pxn[0])


def test_no_pxn_where_the_peer_is_itself_behind_the_cpu():
    """Polaris again: GPU0 is NVLinked to GPU3, whose path to mlx5_0 is PHB: NCCL's PXN needs the
    peer within PXB (paths.cc: peerNode->paths[NET][n].type <= PATH_PXB, or P2C on Grace)."""
    r = matrix("verdict_polaris_a100_nps4_markdown.txt")
    assert codes(r, "GPU_NIC_VIA_PXN") == []
    choice = nccl(r)
    assert [n.id for n in choice.nets if choice.via("gpu0", n.id)] == []


# -- 3. guests: the flat tree is the hypervisor's, and so is the remedy --------------------------------


def test_the_kvm_h200_guest_of_nccl_tests_256_is_a_flat_guest_tree():
    """NVIDIA/nccl-tests#256 (bus bandwidth 476 -> 27 GB/s): QEMU's q35 (82G33 host bridge, ICH9
    LPC) with every GPU and NIC on a root port of one root complex.  The guest is proven by the
    emulated chipset; VM_FLAT_PCI_TREE is raised (before: missed) and each GPU's PHB warning
    points at the guest's remedies, not at a PCIe slot."""
    r = lspci_tree("paste_tvv_h200_vm_device_2335.txt")
    assert r.topology.virtualized is True
    (flat,) = codes(r, "VM_FLAT_PCI_TREE")
    assert "on a root port of one emulated root complex" in flat.message
    assert any("82G33" in (e.value or "") for e in flat.evidence)
    via = codes(r, "GPU_NIC_VIA_HOST_BRIDGE")
    assert len(via) == 8 and all("in this guest's PCI tree" in f.message for f in via)
    assert all("pxb-pcie" in f.remedy and "topoagent vms" in f.remedy and "NCCL_TOPO_FILE" in f.remedy for f in via)
    assert not any("Put GPU and NIC under one PCIe switch" in f.remedy for f in via)


@pytest.mark.parametrize(
    "sample",
    ["verdict_a100_sxm_guest_all_phb_numa_list.txt", "verdict_h100_sxm_guest_all_phb.txt"],
)
def test_sxm_gpus_with_every_nic_cell_phb_suggest_a_guest(sample):
    """An 8x A100-SXM4 cloud VM (a public repository's NCCL notes) and a 4x H100 SXM guest (a
    public repository's all-reduce benchmark): NVLinked GPUs whose every GPU-NIC and NIC-NIC cell
    is PHB, which no bare-metal HGX board wires.  The matrix can only suggest a guest: info, with
    an inference among its evidence, and the per-GPU warnings say "as in a guest"."""
    r = matrix(sample)
    (flat,) = codes(r, "VM_FLAT_PCI_TREE")
    assert flat.severity is Severity.INFO and "looks like a guest" in flat.message
    assert any(e.path.startswith("inferred: ") for e in flat.evidence)
    via = codes(r, "GPU_NIC_VIA_HOST_BRIDGE")
    assert via and all("as in a guest whose hypervisor flattened the tree" in f.message for f in via)
    assert all("pxb-pcie" in f.remedy for f in via)


def test_a_nitro_guest_is_proven_by_its_i440fx_chipset():
    """An AWS p4d's lspci (aws/aws-ofi-nccl#64): i440FX and PIIX3 (emulated), A100s and EFA on
    root buses 10 and 20: a flat guest, which is why aws-ofi-nccl hands NCCL a topology file."""
    r = lspci_listing("verdict_p4d_efa0_i440fx_excerpt.txt")
    assert r.topology.virtualized is True
    (flat,) = codes(r, "VM_FLAT_PCI_TREE")
    assert "on the root bus" in flat.message and "NCCL_TOPO_FILE" in flat.remedy


# -- 4. EFA is an RDMA NIC (NCCL's network through aws-ofi-nccl) --------------------------------------


def test_efa_in_a_p5en_tree_is_the_gpus_rail():
    """An AWS p5en's ``lspci -tv`` (ofiwg/libfabric fabtests/pytest/efa/efa_common.py): four EFA
    and two H200 below one switch.  EFA (vendor 1d0f, ``Elastic Fabric Adapter (EFA)``) is RDMA:
    the GPUs' rails, PIX; no NO_RDMA_NIC (before: raised, the GPUs with no rail)."""
    r = lspci_tree("verdict_tv_p5en_efa_h200_excerpt.txt")
    efa = [n for n in r.topology.nics if "Elastic Fabric Adapter" in n.name]
    assert len(efa) == 4 and all(n.rdma_capable for n in efa)
    assert codes(r, "NO_RDMA_NIC") == []
    assert {rail.nic for rail in r.rails.rails} <= {n.id for n in efa}
    assert {rail.cls for rail in r.rails.rails} == {PathClass.PIX}


def test_efa_by_device_id_in_a_plain_listing():
    """aws/aws-ofi-nccl#64 prints ``Amazon.com, Inc. Device efa0``: the id is EFA's."""
    r = lspci_listing("verdict_p4d_efa0_i440fx_excerpt.txt")
    efa = [n for n in r.topology.nics if n.device_id == 0xEFA0]
    assert len(efa) == 2 and all(n.rdma_capable for n in efa)
    assert codes(r, "NO_RDMA_NIC") == []


def test_a_matrix_alone_proves_no_absence_of_an_rdma_nic():
    """nvidia-smi lists the RDMA NICs it knows and never EFA (a p5 prints no NIC rows): a matrix
    without NIC rows proves nothing absent.  Project-HAMi/HAMi#99's Tesla P4 (before: NO_RDMA_NIC)."""
    r = matrix("tesla_p4_single_gpu.txt")
    assert codes(r, "NO_RDMA_NIC") == []
    assert r.topology.lists_every_nic is False


# -- 5. no absence from a partial input ----------------------------------------------------------------


@pytest.mark.parametrize(
    "sample, reader",
    [
        ("verdict_grep_nvidia_two_v100.txt", "verbose"),  # lspci | grep -i NVIDIA (a CUDA install guide)
        # lspci | grep -i nvidia on a GH200 system (JCAHPC Miyabi, a public repository's notes):
        # Grace's root ports are NVIDIA's, so it starts at 0000:00:00.0 and is still one vendor's
        ("verdict_grep_nvidia_grace_root_ports_miyabi.txt", "verbose"),
        ("paste_vvvv_device_2571_geerlingguy509.txt", "verbose"),  # one device's record, cut off
        ("vvv_rtx6000ada_legacy_endpoint.txt", "verbose"),  # sudo lspci -vvv -s 01:00.0 (stelline)
        ("paste_tv_below_root_derived.txt", "tree"),  # a tree excerpt below its root line
        ("verdict_tv_p5en_efa_h200_excerpt.txt", "tree"),  # a tree starting at a later root bus
        ("verdict_p4d_efa0_i440fx_excerpt.txt", "verbose"),  # a listing ending in "..."
    ],
)
def test_a_partial_listing_claims_no_absence(sample, reader):
    """Each of these was NO_RDMA_NIC before; none shows every function of its host."""
    r = lspci_listing(sample) if reader == "verbose" else lspci_tree(sample)
    assert r.topology.lists_every_nic is False
    assert codes(r, "NO_RDMA_NIC") == []


def test_a_capture_without_sys_class_claims_no_absence(real_tree_roots):
    """hwloc's ``nvidiagpunumanodes`` capture (POWER9 + 6 V100, open-mpi/hwloc tests) has no
    /sys/class: no RDMA or network device is listed, so none is claimed absent (before: NO_RDMA_NIC)."""
    root = real_tree_roots.get("nvidiagpunumanodes")
    if root is None:
        pytest.skip("../shared/real-sysfs/nvidiagpunumanodes.tar.bz2 is absent")
    r = scan(root, nvml="off")
    assert r.topology.gpus and r.topology.lists_every_nic is False
    assert codes(r, "NO_RDMA_NIC") == []


# -- 7. unknown NUMA is said -----------------------------------------------------------------------------


def test_a_list_valued_numa_affinity_is_unknown_numa():
    """The A100-SXM4 cloud VM prints NUMA Affinity ``0-3`` for every GPU: a list names four nodes
    and no one of them for a GPU that is not on Grace (nvidia-smi's GPU NUMA ID is N/A): the host
    has several nodes and the GPUs' is unknown -- NUMA_UNKNOWN, info, showing what was printed
    (before: numa_node null, nothing said)."""
    r = matrix("verdict_a100_sxm_guest_all_phb_numa_list.txt")
    (unknown,) = codes(r, "NUMA_UNKNOWN")
    assert unknown.severity is Severity.INFO
    assert ("nvidia-smi topo -m GPU0: NUMA Affinity", "0-3") in [(e.path, e.value) for e in unknown.evidence]
    assert {n.id for n in r.topology.nodes} >= {0, 1, 2, 3}


def test_no_numa_column_on_a_multi_node_host_is_said():
    """OneFlow's V100 mesh: a driver without NUMA Affinity, two disjoint CPU sets and SYS cells
    (between NUMA nodes): the nodes are unknown and the finding says they were not printed."""
    r = matrix("v100_nv1_nv2_one_mlx5.txt")
    (unknown,) = codes(r, "NUMA_UNKNOWN")
    assert ("nvidia-smi topo -m GPU0: NUMA Affinity", "not printed (no NUMA Affinity column)") in [
        (e.path, e.value) for e in unknown.evidence
    ]


def test_na_on_one_gpu_is_no_claim_and_grace_lists_are_known():
    """HAMi#99's single Tesla P4 prints N/A and shows one CPU set: nothing shows several nodes,
    so nothing is claimed.  A GB200 tray's lists (sgl-project/sglang#11208) name the GPU's Grace
    node first (its numeric GPU NUMA ID says Grace): its GPUs' nodes are known."""
    assert codes(matrix("tesla_p4_single_gpu.txt"), "NUMA_UNKNOWN") == []
    grace = codes(matrix("paste_gb200_all_sys_numa_lists_sglang11208.txt"), "NUMA_UNKNOWN")
    assert not any(s.startswith("gpu") for f in grace for s in f.subjects)  # (its NICs' nodes are not shown)


# -- 11. a display function that is no compute GPU ---------------------------------------------------


def test_hyper_v_vga_is_not_a_gpu():
    """Azure's accelerated-networking guide (MicrosoftDocs/azure-docs, create-vm-accelerated-
    networking-cli.md): a Hyper-V guest's ``Microsoft Corporation Hyper-V virtual VGA`` and a
    ConnectX-3 VF.  Before: gpu0 and a GPU_NIC_VIA_HOST_BRIDGE warning on a VGA; now no GPU, no
    finding, and the guest is known (Hyper-V's own device, its PIIX4 and 440BX chipset)."""
    r = lspci_listing("verdict_hyperv_vga_connectx3_vf.txt")
    assert r.topology.gpus == () and r.findings == ()
    assert r.topology.virtualized is True


def test_nitros_console_vga_is_not_a_gpu():
    """The p4d's ``Amazon.com, Inc. Device 1111`` VGA (aws/aws-ofi-nccl#64): Amazon makes no GPU."""
    r = lspci_listing("verdict_p4d_efa0_i440fx_excerpt.txt")
    assert [g.bdf for g in r.topology.gpus] == ["0000:10:1c.0", "0000:10:1d.0", "0000:20:1c.0", "0000:20:1d.0"]


# -- the rule: no critical finding a paste does not prove ------------------------------------------------

PASTES = sorted(p for p in (*NVSMI.glob("*.txt"), *LSPCI.glob("*.txt")) if p.name != "README.md")


@pytest.mark.parametrize("path", PASTES, ids=lambda p: p.name)
def test_every_critical_finding_on_a_paste_rests_on_stated_evidence(path):
    """Over every sample: a critical finding has no inference among its evidence, and the
    severity is never above its weakest line's bound."""
    kind = (
        "nvidia_smi_topo"
        if path.parent.name == "nvsmi"
        else ("lspci_tree" if "tree" in path.name or "_tv" in path.name else "lspci_verbose")
    )
    try:
        r = analyse(read_offline(**{kind: path.read_bytes().decode("utf-8", "replace")}))
    except TopoagentError:  # an input the readers refuse, with one line: another test's business
        pytest.skip("refused")
    for f in r.findings:
        assert f.severity <= evidence_bound(f.evidence), (f.code, f.severity)
        if f.severity is Severity.CRITICAL:
            assert all(proof_of(e).name != "INFERENCE" for e in f.evidence), f.code


# -- issue 32 item 11: one fact, one verdict -------------------------------------------------------------


def test_numa_unknown_says_what_the_same_scan_prints(fixture_root):
    """The cloud-vm fixture: five functions with numa_node -1, all on the guest's root bus.
    NUMA_UNKNOWN said "path classes are assumed SYS" while the same scan printed PHB between
    them; a path inside one root complex is the tree's (nvidia-smi's legend: PHB, "traversing
    PCIe as well as a PCIe Host Bridge"), so the finding now says so, and counts as taken at
    their worst only the paths between host bridges, which the scan marks unknown."""
    r = scan(fixture_root("cloud-vm"), nvml="off")
    (unknown,) = codes(r, "NUMA_UNKNOWN")
    ids = set(unknown.subjects)
    between = [p for p in r.paths if p.a in ids and p.b in ids and p.shown]
    assert between and {p.cls for p in between} == {PathClass.PHB}
    assert "their path classes come from the PCIe tree" in unknown.message and "SYS" not in unknown.message


def test_the_plan_says_what_the_pxn_finding_says():
    """The V100 mesh: GPU6 (SYS to mlx5_0) reaches it through GPU2 over NVLink (GPU_NIC_VIA_PXN).
    The plan marked the NIC "remote" with "GPUDirect RDMA is off"; the rail, the plan and the
    rails record now give NCCL's class, PXN, with GPUDirect RDMA on (one fact, one verdict)."""
    path = str(NVSMI / "v100_nv1_nv2_one_mlx5.txt")
    table = subprocess.run(
        [sys.executable, "-m", "topoagent", "plan", "--nvidia-smi-topo", path],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    ).stdout
    (gpu6,) = [line for line in table.splitlines() if line.startswith("gpu6 ")]
    assert "(NCCL PXN, GPUDirect RDMA on)" in gpu6 and "remote" not in gpu6
    (gpu7,) = [line for line in table.splitlines() if line.startswith("gpu7 ")]
    assert "remote" in gpu7  # NVLinked to GPU3 only, which is not the NIC's local GPU
    env = subprocess.run(
        [sys.executable, "-m", "topoagent", "plan", "--nvidia-smi-topo", path, "--format", "env", "--gpu", "6"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert "GPUDirect RDMA is off" not in env.stdout
