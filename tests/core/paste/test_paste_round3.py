"""``scan --paste``, third round (issue 42): RDMA tools alone, ``-q`` fragments, quoted mail, ``nvlink
-R``, Grace lists, ``lstopo`` without ``-v``, guests, roles, and two hosts glued in one report.

Each test reads a public paste (tests/core/paste_samples/README.md names each source); the facts
and findings it expects were written by hand from the paste before the code read it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.paths import REPO
from tests.plan_helpers import run_cli
from topoagent.core.api import analyse
from topoagent.core.paste import PasteInput, read_pastes
from topoagent.core.pathclass import PathClass
from topoagent.core.result import ScanResult
from topoagent.core.snapshot import Snapshot

SAMPLES = REPO / "tests/core/paste_samples"


def _text(name: str) -> str:
    return (SAMPLES / name).read_text()


def _snapshot(*texts: str) -> Snapshot:
    return read_pastes([PasteInput(f"--paste #{i + 1}", t) for i, t in enumerate(texts)])


def _scan(*names: str) -> ScanResult:
    return analyse(_snapshot(*(_text(n) for n in names)))


def _codes(r: ScanResult) -> list[tuple[str, str, tuple[str, ...]]]:
    return sorted((f.code, f.severity.label, f.subjects) for f in r.findings)


# -- 1. the RDMA tools alone describe the NICs ---------------------------------------------------


def test_ibdev2netdev_v_alone_gives_each_hca_and_its_down_ports() -> None:
    """A public ``ibdev2netdev`` and ``ibdev2netdev -v`` (README): eight RDMA devices, each a NIC at
    the address ``-v`` prints, named from its part (MT4117 is device 0x1015, a ConnectX-4 Lx;
    MT4119 0x1017; MT4123 0x101b; MT4120 0x1018, a ConnectX-5 VF: 4b:00.1 and 4b:00.2 are the VFs
    of the ConnectX-5 at 4b:00.0 beside them), placement unknown.  mlx5_0, mlx5_1 and mlx5_4 are
    physical functions whose only port is DOWN: NCCL skips them (NIC_PORT_DOWN).  No GPU is
    shown, so none is any GPU's rail: info.  The VFs' ports are down as unused VFs' are: no
    finding."""
    r = _scan("ibdev2netdev_v_cx4lx_ports_down.txt")
    nics = {n.bdf: n for n in r.topology.nics}
    assert sorted(nics) == [
        "0000:31:00.0",
        "0000:31:00.1",
        "0000:4b:00.0",
        "0000:4b:00.1",
        "0000:4b:00.2",
        "0000:98:00.0",
        "0000:98:00.1",
        "0000:b1:00.0",
    ]
    assert {b: (n.device_id, n.rdma_devices, n.netdevs) for b, n in nics.items()} == {
        "0000:31:00.0": (0x1015, ("mlx5_0",), ("ens4f0",)),
        "0000:31:00.1": (0x1015, ("mlx5_1",), ("ens4f1",)),
        "0000:4b:00.0": (0x1017, ("mlx5_2",), ("ens6",)),
        "0000:4b:00.1": (0x1018, ("mlx5_6",), ("ens6f1",)),
        "0000:4b:00.2": (0x1018, ("mlx5_7",), ("ens6f2",)),
        "0000:98:00.0": (0x1015, ("mlx5_3",), ("ens14f0",)),
        "0000:98:00.1": (0x1015, ("mlx5_4",), ("ens14f1",)),
        "0000:b1:00.0": (0x101B, ("mlx5_5",), ("ib0",)),
    }
    assert nics["0000:31:00.0"].name == "Mellanox ConnectX-4 Lx"
    assert [b for b, n in nics.items() if n.is_vf] == ["0000:4b:00.1", "0000:4b:00.2"]
    assert all(n.numa_node is None for n in nics.values())
    states = {d: p.state for n in nics.values() for d, ports in n.rdma_ports.items() for p in ports}
    assert states == {
        "mlx5_0": "DOWN",
        "mlx5_1": "DOWN",
        "mlx5_2": "ACTIVE",
        "mlx5_3": "ACTIVE",
        "mlx5_4": "DOWN",
        "mlx5_5": "ACTIVE",
        "mlx5_6": "DOWN",
        "mlx5_7": "DOWN",
    }
    down = [(f.severity.label, nics_of(r, f)) for f in r.findings if f.code == "NIC_PORT_DOWN"]
    assert down == [("info", "0000:31:00.0"), ("info", "0000:31:00.1"), ("info", "0000:98:00.1")]
    assert [f.code for f in r.findings if f.code != "NIC_PORT_DOWN"] == []


def nics_of(r: ScanResult, f) -> str:
    (subject,) = f.subjects
    return r.topology.by_id(subject).bdf or ""


def test_ibdev2netdev_without_v_gives_nics_known_by_their_rdma_names() -> None:
    """imbue-ai/cluster-health#4 (``ibdev2netdev | column -t``): twelve RDMA devices and no
    address, so twelve NICs known by RDMA name and netdev, placed nowhere; ``(Down)`` here is
    the IPoIB/Ethernet interface's state, not the port's, so each is info, and its key names
    the RDMA device (a stable key, not the position)."""
    r = _scan("ibdev2netdev_column_comments.txt")
    nics = {n.rdma_devices: n for n in r.topology.nics}
    assert len(nics) == 12 and all(n.bdf is None for n in nics.values())
    assert nics[("mlx5_0",)].netdevs == ("ibp26s0",) and nics[("mlx5_0",)].key == "rdma:mlx5_0"
    down = sorted(r.topology.by_id(f.subjects[0]).rdma_devices[0] for f in r.findings if f.code == "NIC_PORT_DOWN")
    assert down == sorted(f"mlx5_{i}" for i in (0, 2, 3, 4, 5, 6, 8, 9, 10, 11))
    assert {f.severity.label for f in r.findings if f.code == "NIC_PORT_DOWN"} == {"info"}


def test_ibv_devinfo_alone_gives_each_hca_its_ports_link_layer_and_rate() -> None:
    """The same host's ``ibv_devinfo`` and ``ibv_devinfo -v`` (README): eight HCAs by name, their
    ids from ``vendor_part_id`` (4117 = 0x1015), link layer Ethernet but mlx5_5 (InfiniBand);
    ``-v`` adds mlx5_0's width and speed (4X of 10.0 Gbps: 40 Gb/s)."""
    r = _scan("ibv_devinfo_cx4lx_alone.txt")
    nics = {n.rdma_devices[0]: n for n in r.topology.nics}
    assert sorted(nics) == [f"mlx5_{i}" for i in range(8)]
    assert nics["mlx5_0"].device_id == 0x1015 and nics["mlx5_5"].device_id == 0x101B
    ports = {d: p for n in nics.values() for d, ps in n.rdma_ports.items() for p in ps}
    assert {d: p.link_layer for d, p in ports.items()} == {
        **{f"mlx5_{i}": "Ethernet" for i in range(8)},
        "mlx5_5": "InfiniBand",
    }
    assert ports["mlx5_0"].rate_gbps == 40.0 and ports["mlx5_0"].state == "DOWN"
    # 4120 is a ConnectX-5 VF's id, but with no address its physical function is unknown (in a
    # guest a VF is the rail): every HCA whose only port is DOWN is reported
    down = sorted(r.topology.by_id(f.subjects[0]).rdma_devices[0] for f in r.findings if f.code == "NIC_PORT_DOWN")
    assert down == ["mlx5_0", "mlx5_1", "mlx5_4", "mlx5_6", "mlx5_7"]


def test_an_ibdev2netdev_line_with_a_trailing_comment_is_read() -> None:
    """A reader's note after a line (``← this one``) is no part of the output but keeps the line
    (issue 42 item 3)."""
    text = _text("ibdev2netdev_v_cx4lx_ports_down.txt").replace(
        "==> ens14f1 (Down)\n", "==> ens14f1 (Down)   ← this one\n", 1
    )
    snap = _snapshot(text)
    assert {n.name: n.up for n in snap.netdevs}["ens14f1"] is False
    (status,) = [s for s in snap.sources if s.name == "paste"]
    assert "not recognised" not in (status.detail or "")  # ubuntu:/home/ubuntu:~$ is a prompt too


def test_the_port_down_paste_through_the_command_line() -> None:
    out = run_cli("scan", "--paste", str(SAMPLES / "ibdev2netdev_v_cx4lx_ports_down.txt"))
    assert out.returncode == 0, out.stderr
    assert "NIC_PORT_DOWN" in out.stdout and "8 NIC(s)" in out.stdout


@pytest.fixture
def tmp_text(tmp_path: Path):
    def write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


# -- 3. decorated text ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["mail_quoted_aer_gl975x_lkml.txt", "mail_nested_quotes_aer_gl975x_lkml.txt"])
def test_aer_lines_quoted_in_a_mail_give_the_aer_finding(name: str) -> None:
    """LKML, "mmc: sdhci-pci-gli: GL975[05]: Mask the replay timer timeout of AER" (README): the
    kernel log is quoted (``> `` once, then eight levels deep), quoted-printable (``=3D``, soft
    breaks), and wrapped by the mail client after ``received:``, ``Bus Error:`` and ``error``.
    One corrected Data Link Layer error (Timeout) on the root port 0000:00:1c.0 [8086:7ab9]:
    PCIE_AER_LOGGED, info (corrected: the link repaired it)."""
    r = _scan(name)
    (f,) = [f for f in r.findings if f.code == "PCIE_AER_LOGGED"]
    port = r.topology.by_id(f.subjects[0])
    assert (port.bdf, port.vendor_id, port.device_id) == ("0000:00:1c.0", 0x8086, 0x7AB9)
    assert f.severity.label == "info" and "logged 1 corrected" in f.message and "(Timeout)" in f.message
    assert [e.value for e in f.evidence] == [
        "[ 1100.326991] pcieport 0000:00:1c.0: PCIe Bus Error: severity=Corrected, type=Data Link Layer, "
        "(Transmitter ID)"
    ]
    assert _codes(r) == [("PCIE_AER_LOGGED", "info", f.subjects)]


def test_a_quoted_mail_through_the_command_line_exits_0() -> None:
    out = run_cli("scan", "--paste", str(SAMPLES / "mail_quoted_aer_gl975x_lkml.txt"))
    assert out.returncode == 0, out.stderr
    assert "PCIE_AER_LOGGED" in out.stdout


def test_a_cpu_list_wrapped_by_a_mail_client_keeps_its_cpus() -> None:
    """numactl/numactl#165's ``numactl -H`` with node 2's CPU list wrapped after ``37`` (derived:
    what a 72-column mail client does to it): node 2 still has 12-17 and 36-41, not 12-17,36-37."""
    text = _text("numactl_nps4_memoryless_nodes.txt").replace(
        "node 2 cpus: 12 13 14 15 16 17 36 37 38 39 40 41", "node 2 cpus: 12 13 14 15 16 17 36 37\n38 39 40 41"
    )
    nodes = {n.id: n for n in _snapshot(text).numa_nodes}
    assert str(nodes[2].cpus) == "12-17,36-41" and str(nodes[3].cpus) == "18-23,42-47"


def test_a_matrix_coloured_with_font_tags_in_a_markdown_quote_is_read() -> None:
    """The C-comment matrix of a public cuda_mem_reg_mr.c (README) as a markdown quote whose
    author coloured a row (derived): ``> <font color=red>GPU1 …</font>`` reads as the row."""
    text = _text("c_comment_topology_4gpu_4nic.txt")
    plain = analyse(_snapshot(text))
    lines = [ln[3:] if ln.startswith(" * ") else ln.lstrip("/* ").rstrip("*/") for ln in text.splitlines()]
    quoted = "\n".join(
        "> " + (f'<font color="red">{ln}</font>' if ln.startswith("GPU1") else ln) for ln in lines if ln.strip()
    )
    read = analyse(_snapshot(quoted))
    assert [(p.a, p.b, p.token) for p in read.paths] == [(p.a, p.b, p.token) for p in plain.paths]
    assert len(read.topology.gpus) == 4


# -- 2. nvidia-smi -q fragments, and two hosts glued -------------------------------------------


def test_a_pci_section_of_nvidia_smi_q_gives_its_gpus_link_at_its_bus_id() -> None:
    """The ``PCI`` section of a public ``nvidia-smi -q`` (README), pasted without its ``GPU
    00000000:01:00.0`` header: the GPU at 0000:01:00.0, 10de:1f91 (subsystem 1043:109f), its
    link Gen1 x8 of Gen3 x16.  Whether it was busy is not in the fragment, so what a one-shot
    reading proves is said: x8 of x16 (LINK_WIDTH_DEGRADED, warning) and Gen1 of Gen3
    (LINK_SPEED_BELOW_MAX_GPU, info: GPUs slow their link at idle)."""
    r = _scan("nvsmi_q_pci_section_gtx1650_laptop.txt")
    (gpu,) = r.topology.gpus
    assert (gpu.bdf, gpu.vendor_id, gpu.device_id) == ("0000:01:00.0", 0x10DE, 0x1F91)
    assert (gpu.subsystem_vendor_id, gpu.subsystem_device_id) == (0x1043, 0x109F)
    lk = gpu.link
    assert (lk.current_gts, lk.current_width, lk.max_gts, lk.max_width) == (2.5, 8, 8.0, 16)
    assert _codes(r) == [
        ("LINK_SPEED_BELOW_MAX_GPU", "info", (gpu.id,)),
        ("LINK_WIDTH_DEGRADED", "warning", (gpu.id,)),
    ]


def test_a_query_of_one_gpu_of_eight_is_not_the_matrixs_gpu0_by_position() -> None:
    """NVIDIA/nvidia-docker#868's ``nvidia-smi -q`` shows ``Attached GPUs : 8`` and one block,
    0000:06:00.0 (a Tesla V100-SXM2-16GB), glued to a DGX-1V's matrix (pytorch's DDP benchmark
    README, the same model of host): the block is the first in the paste, not GPU0, and the
    matrix names no bus id.  So it is its own GPU, said so, and no matrix GPU takes its name."""
    text = (
        _text("nvsmi_q_one_of_eight_dgx1.txt")
        + "\n"
        + (REPO / "tests/core/parse/samples/nvsmi/dgx1_v100_raw_mlx5.txt").read_text()
    )
    r = analyse(_snapshot(text))
    named = [(g.label, g.bdf, g.name) for g in r.topology.gpus if g.bdf is not None]
    assert named == [(None, "0000:06:00.0", "Tesla V100-SXM2-16GB")]
    assert {g.name for g in r.topology.gpus if g.bdf is None} == {"NVIDIA GPU (model not in the matrix)"}
    (status,) = [s for s in r.topology.sources if s.name == "paste"]
    assert "not joined by position" in (status.detail or "")


@pytest.mark.parametrize(
    ("first", "second", "why"),
    [
        # two hosts' nvidia-smi -q glued: an A10G at 00:1e.0 (driver 535) and an L4 at 01:00.0 (550)
        ("nvsmi_q_a10g_p0_x8.txt", "nvsmi_q_l4_idle_gen1.txt", "driver version"),
        # a 4-GPU matrix and a -q whose host has one GPU
        ("topo_m_4xh100_nv6_nccl1617.txt", "nvsmi_q_a10g_p0_x8.txt", "GPU count"),
        # the same bus id, 01:00.0, an L4 (10de:27b8) in one output and 10de:1f91 in the other
        ("nvsmi_q_l4_idle_gen1.txt", "nvsmi_q_pci_section_gtx1650_laptop.txt", "0000:01:00.0"),
    ],
)
def test_two_hosts_outputs_glued_are_refused_with_one_line(first: str, second: str, why: str, tmp_path: Path) -> None:
    """Issue 44's "Also": outputs of two hosts in one report were merged into one host.  Where
    they disagree on what one host has one of (its GPU count, a bus id's device, the driver),
    the paste is refused with one line naming the disagreement, in one text or in two."""
    glued = tmp_path / "glued.txt"
    glued.write_text(_text(first) + "\n\nand the other node:\n\n" + _text(second))
    out = run_cli("scan", "--paste", str(glued))
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "two hosts" in out.stderr and why in out.stderr
    out = run_cli("scan", "--paste", str(SAMPLES / first), "--paste", str(SAMPLES / second))
    assert out.returncode == 2 and "two hosts" in out.stderr and why in out.stderr


def test_two_matrices_of_one_paste_are_two_outputs_not_one() -> None:
    """A report with a second ``topo -m`` (another host: 8 GPUs, then 4): the second was read as
    nothing and the first analysed as if alone; now the GPU counts disagree: refused."""
    text = (REPO / "tests/core/parse/samples/nvsmi/dgx1_v100_raw_mlx5.txt").read_text()
    with pytest.raises(Exception, match="two hosts.*GPU count"):
        _snapshot(text + "\nother node:\n\n" + _text("topo_m_4xh100_nv6_nccl1617.txt"))


# -- 4. nvidia-smi nvlink -R ------------------------------------------------------------------


def test_nvlink_r_lists_active_links_to_their_remote_devices() -> None:
    """NVIDIA/nccl#1182's ``nvidia-smi nvlink -R`` (cut inside GPU 1 as the excerpt is): GPU 0's
    18 links each reach an NVSwitch (05:00.0-08:00.0); ``Remote Device`` lines are active links,
    not inactive ones.  GPU 1 shows two links and none inactive: nothing is missing, no
    NVLINK_INACTIVE (the paste was cut, not the links)."""
    snap = _snapshot(_text("nvlink_r_h100_nvswitch_nccl1182.txt"))
    status = {s.label: s for s in snap.nvlink_status}
    assert status["GPU0"].active == 18 and status["GPU0"].inactive == ()
    assert sorted(set(status["GPU0"].remote)) == [f"0000:0{b}:00.0" for b in (5, 6, 7, 8)]
    assert status["GPU1"].active == 2
    assert status["GPU0"].source.startswith("nvidia-smi nvlink -R GPU 0")
    assert "NVLINK_INACTIVE" not in {f.code for f in analyse(snap).findings}


def test_nvlink_s_and_r_of_one_host_agree() -> None:
    """Azure/azhpc-diagnostics#73's ``nvlink -s`` GPU 3 (four active, links 3 and 5 inactive) and
    the same GPU's links as ``nvlink -R`` would list them (derived: four Remote Device lines and
    two ``<inactive>``): four active either way; with a second GPU of six active links
    (README's derived two-V100 paste), GPU 3 is NVLINK_INACTIVE once, not twice."""
    s = _text("derived_nvlink_s_two_v100.txt")
    r_lines = "\n".join(
        f"         Link {i}: <inactive>"
        if i in (3, 5)
        else f"         Link {i}: Remote Device 00000000:1{i}:00.0: Link 0"
        for i in range(6)
    )
    r_text = "$ nvidia-smi nvlink -R\nGPU 3: Tesla V100-SXM2-32GB (UUID: ...)\n" + r_lines + "\n"
    r = analyse(_snapshot(s + "\n" + r_text))
    found = [f for f in r.findings if f.code == "NVLINK_INACTIVE"]
    assert len(found) == 1 and "4 active" in found[0].evidence[0].value


# -- 8. a role no paste proves -----------------------------------------------------------------


def test_a_nic_sys_to_every_gpu_in_a_matrix_is_no_storage_nic() -> None:
    """NVIDIA/nccl#1453's H100 matrix (tests/core/parse/samples/nvsmi): mlx5_0 is SYS to all
    eight GPUs while mlx5_1-8 are each a GPU's PIX.  What mlx5_0 is for the matrix does not say:
    it is no "storage NIC" and stays in NCCL_IB_HCA; the tree says no GPU is near it."""
    text = (REPO / "tests/core/parse/samples/nvsmi/h100_nv18_9nic_tabs.txt").read_text()
    r = analyse(_snapshot(text))
    nic0 = next(n for n in r.topology.nics if n.rdma_devices == ("mlx5_0",))
    assert r.rails.roles[nic0.id].value == "compute"
    assert {g.env["NCCL_IB_HCA"] for g in r.plan.gpus} == {"=" + ",".join(f"mlx5_{i}" for i in range(9))}
    out = run_cli("scan", "--nvidia-smi-topo", str(REPO / "tests/core/parse/samples/nvsmi/h100_nv18_9nic_tabs.txt"))
    assert "mlx5_0 · NUMA unknown · no GPU is near it" in out.stdout and "storage NIC" not in out.stdout


# -- 6. lstopo without -v, 7. a console VGA is no GPU -------------------------------------------


def _lstopo_of(root: Path) -> str:
    import os
    import shutil
    import subprocess

    lstopo = shutil.which("lstopo-no-graphics") or shutil.which("lstopo")
    if lstopo is None:
        pytest.skip("lstopo not installed (Debian package hwloc)")
    env = {**os.environ, "HWLOC_FSROOT": str(root), "HWLOC_THISSYSTEM": "1"}
    return subprocess.run(
        [lstopo, "--of", "console"], capture_output=True, text=True, env=env, timeout=120, check=True
    ).stdout


def test_lstopo_without_v_shows_the_paths_below_one_switch(fixture_root) -> None:
    """hwloc's plain ``lstopo`` of the p4d-efa fixture (four PCIe switches, each with an EFA and
    two A100s): no bridge prints its busid, but the indentation puts each EFA and its two GPUs
    below one switch: those three pairs per switch are PIX (12 in all), as the sysfs scan of the
    same tree says; pairs across host bridges stay unknown."""
    from topoagent.core.api import scan

    root = fixture_root("p4d-efa")
    pasted = analyse(read_pastes([PasteInput("lstopo", _lstopo_of(root))]))
    live = scan(root, nvml="off")
    bdf = {d.id: d.bdf for d in pasted.topology.devices}
    live_bdf = {d.id: d.bdf for d in live.topology.devices}
    live_cls = {frozenset((live_bdf[p.a], live_bdf[p.b])): p.token for p in live.paths}
    shown = {frozenset((bdf[p.a], bdf[p.b])): p.token for p in pasted.paths if p.shown}
    assert len(shown) == 12 and set(shown.values()) == {"PIX"}
    assert all(live_cls[k] == token for k, token in shown.items())
    rails = {r.gpu: r.cls for r in pasted.rails.rails}
    assert set(rails.values()) == {PathClass.PIX}


def test_a_console_vga_in_plain_lstopo_is_no_gpu(fixture_root) -> None:
    """The cloud-vm fixture's QEMU VGA as plain ``lstopo`` prints it, ``PCI 00:01.0 (VGA)`` with no
    vendor and no compute device below it: a BMC's or hypervisor's console as likely as a GPU, so
    no GPU is claimed (the sysfs scan of the same tree, which reads the vendor, counts none)."""
    r = analyse(read_pastes([PasteInput("lstopo", _lstopo_of(fixture_root("cloud-vm")))]))
    assert r.topology.gpus == ()
    vga = r.topology.by_bdf("0000:00:01.0")
    assert vga is not None and "no GPU" in vga.name


# -- 9. a redirecting switch port above a lone GPU ------------------------------------------------


def test_a_redirecting_pex8749_port_above_a_gpu_whose_peers_are_not_shown_is_reported() -> None:
    """HeyMeco/Rockchip-pcie-devices#6's PLX downstream port 03:08.0 (``ACSCtl: … ReqRedir+
    CmpltRedir+``, link up) as a PEX 8749, with a GPU below it: luigifcruz/stelline's RTX 6000
    Ada record (tests/core/parse/samples/lspci) moved to bus 04 (derived).  With nothing below it
    the port was reported (info: the excerpt shows no GPU path through it); with its GPU shown
    and no peer of the GPU, it was not -- now it is, the same way."""
    lspci = REPO / "tests/core/parse/samples/lspci"
    port = (
        (lspci / "vvv_plx_pex8725_acs.txt")
        .read_text()
        .split("\n\n")[1]
        .replace(
            "PEX 8725 24-Lane, 10-Port PCI Express Gen 3 (8.0 GT/s) Multi-Root Switch with DMA",
            "PEX 8749 48-Lane, 18-Port PCI Express Gen 3 (8.0 GT/s) Switch",
        )
    )
    gpu = (
        (lspci / "vvv_rtx6000ada_legacy_endpoint.txt")
        .read_text()
        .split("\n", 1)[1]
        .replace("01:00.0 VGA", "04:00.0 VGA", 1)
    )
    assert "PEX 8749" in port and "04:00.0 VGA" in gpu
    r = analyse(_snapshot(port + "\n\n" + gpu))
    (f,) = [f for f in r.findings if f.code == "ACS_REDIRECT"]
    assert f.severity.label == "info" and "0000:03:08.0" in f.message and "no GPU path" in f.message
    assert r.topology.by_bdf("0000:04:00.0").parent == "0000:03:08.0"


def test_a_guests_gpus_on_the_emulated_host_bridge_are_a_flat_tree() -> None:
    """elasticluster/elasticluster#504: ``lspci -v`` of a Google Cloud guest, an i440FX host
    bridge ("Qemu virtual machine") and two Tesla K80 functions straight on bus 00: the emulated
    chipset proves a guest and no switch is above the GPUs: VM_FLAT_PCI_TREE (info); the
    hypervisor's devices are no GPUs."""
    r = _scan("lspci_v_gce_k80_guest_i440fx.txt")
    assert [g.bdf for g in r.topology.gpus] == ["0000:00:04.0", "0000:00:05.0"]
    assert r.topology.virtualized is True
    assert ("VM_FLAT_PCI_TREE", "info") in {(f.code, f.severity.label) for f in r.findings}


# -- 5. Grace in a pasted matrix -----------------------------------------------------------------


def test_a_gb200_matrix_places_each_gpu_on_its_grace_and_claims_no_cross_numa_nic() -> None:
    """sgl-project/sglang#11208's GB200 matrix (tests/core/parse/samples/nvsmi): NUMA Affinity
    lists ``0,3-9,11-17`` and ``1,19-25,27-33`` with GPU NUMA IDs 2, 10, 18, 26: each GPU's CPU
    node is its list's lowest (0, 0, 1, 1) and its memory node its GPU NUMA ID; every NIC is SYS
    as nvidia-smi prints it on Grace, and NCCL reaches its own Grace's NICs by P2C with
    GPUDirect on: no GPU_NIC_CROSS_NUMA."""
    text = (REPO / "tests/core/parse/samples/nvsmi/paste_gb200_all_sys_numa_lists_sglang11208.txt").read_text()
    r = analyse(_snapshot(text))
    assert [(g.numa_node, g.memory_node) for g in r.topology.gpus] == [(0, 2), (0, 10), (1, 18), (1, 26)]
    assert "GPU_NIC_CROSS_NUMA" not in {f.code for f in r.findings}
