"""Pastes as people really paste them: the lenient readers, the pre-cleaning, device names from
ids, and the parsers' bounds on hostile input.

Samples are the ``paste_*`` files in samples/lspci/ and samples/nvsmi/ (provenance in the
READMEs there).  For every shape, a copy with one bad line inserted in the middle must give the
same answer as the clean paste, plus a note naming that line.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from topoagent.core.api import analyse, read_offline
from topoagent.core.parse import nvsmi_topo
from topoagent.core.parse.lspci_common import LspciParseError
from topoagent.core.parse.lspci_tree import parse_lspci_tree, read_lspci_tree
from topoagent.core.parse.lspci_verbose import parse_lspci_verbose, read_lspci_verbose
from topoagent.core.parse.nvsmi_topo import TopoParseError, parse_topo_matrix, read_topo_matrix
from topoagent.core.parse.paste import Skipped, clean_paste, decode_text, is_prompt
from topoagent.core.parse.pciids import parse_pci_ids
from topoagent.core.paste import snapshot_from_lspci
from topoagent.core.paste.lspci import MAX_VFS, _walk_tree
from topoagent.core.paste.matrix import _single_node

HERE = Path(__file__).parent
LSPCI = HERE / "samples" / "lspci"
NVSMI = HERE / "samples" / "nvsmi"
REPO = HERE.parents[1]
BAD = "this line is not tool output ###"


def load(path: Path) -> str:
    return decode_text(path.read_bytes())


def with_bad_line(text: str, at: int) -> tuple[str, int]:
    """``text`` with :data:`BAD` inserted before line ``at`` (1-based); the bad line's number."""
    lines = text.split("\n")
    lines.insert(at - 1, BAD)
    return "\n".join(lines), at


def middle_of(text: str, marker: str) -> int:
    """The number of the first line containing ``marker`` (where the bad line goes)."""
    return next(i for i, line in enumerate(text.split("\n"), 1) if marker in line)


def tree_shape(tree) -> list[tuple[str, str | None, int]]:
    return [(n.bdf, n.description, len(n.children)) for n in tree.walk()]


# -- lspci -tv ------------------------------------------------------------------------------

TREES = [
    # name, functions, GPUs, NICs (after analysis), marker line for the bad-line copy
    ("paste_tvv_h200_vm_device_2335.txt", 48, 8, 8, "+-02.0-[09]"),
    ("paste_tv_excerpt_mt28841_l2fwd.txt", 7, 1, 2, "\\-10.0-[b6]"),
    ("paste_t_heading_two_commands_club3090.txt", 52, 0, 0, "+-03.0"),
    ("paste_tv_below_root_derived.txt", 8, 8, 0, "+-01.6"),
    ("paste_tvv_hand_edited_column_derived.txt", 48, 8, 8, "+-02.2"),
]


@pytest.mark.parametrize("name, n_functions, n_gpus, n_nics, marker", TREES, ids=[t[0] for t in TREES])
def test_tree_paste_devices_and_classes(name, n_functions, n_gpus, n_nics, marker):
    text = load(LSPCI / name)
    tree = read_lspci_tree(text)
    assert len(list(tree.walk())) == n_functions
    topo = analyse(read_offline(lspci_tree=text)).topology
    assert (len(topo.gpus), len(topo.nics)) == (n_gpus, n_nics)


@pytest.mark.parametrize("name, n_functions, n_gpus, n_nics, marker", TREES, ids=[t[0] for t in TREES])
def test_tree_paste_with_a_bad_line_reads_the_same(name, n_functions, n_gpus, n_nics, marker):
    text = load(LSPCI / name)
    bad, at = with_bad_line(text, middle_of(text, marker))
    clean, dirty = read_lspci_tree(text), read_lspci_tree(bad)
    assert tree_shape(dirty) == tree_shape(clean)
    assert [s for s in dirty.skipped if s.first == at] and not [s for s in clean.skipped if BAD in s.why]
    snap = read_offline(lspci_tree=bad)
    assert any(e.path == f"lspci -tv line {at}" and BAD in e.error for e in snap.probe_errors)


def test_h200_vm_tree_reads_eight_gpus_and_eight_nics():
    # nccl-tests#256: lspci's pci.ids predates the H200, so it prints "Device 2335"
    result = analyse(read_offline(lspci_tree=load(LSPCI / "paste_tvv_h200_vm_device_2335.txt")))
    gpus = result.topology.gpus
    assert [g.bdf for g in gpus] == [f"0000:{b:02x}:00.0" for b in range(5, 13)]
    assert {g.name for g in gpus} == {"NVIDIA H200 SXM 141GB"} and {g.device_id for g in gpus} == {0x2335}
    assert {n.name for n in result.topology.nics} == {"Mellanox ConnectX-7"}
    assert all(n.rdma_capable for n in result.topology.nics)
    detail = result.snapshot.sources[0].detail
    assert "ids of 16 function(s) read from their names" in detail


def test_mellanox_part_number_names_a_connectx6dx():
    topo = analyse(read_offline(lspci_tree=load(LSPCI / "paste_tv_excerpt_mt28841_l2fwd.txt"))).topology
    nics = {n.bdf: n for n in topo.nics}
    assert set(nics) == {"0000:b5:00.0", "0000:b5:00.1"}
    assert nics["0000:b5:00.0"].device_id == 0x101D and nics["0000:b5:00.0"].name == "Mellanox ConnectX-6 Dx"
    # the excerpt starts at root bus b2 with "-+-": the GPU and NICs share one switch: PIX
    assert {
        p.token
        for p in analyse(read_offline(lspci_tree=load(LSPCI / "paste_tv_excerpt_mt28841_l2fwd.txt"))).paths
        if "gpu0" in (p.a, p.b)
    } == {"PIX"}


def test_excerpt_below_the_root_bus_keeps_subtrees_with_place_unknown():
    tree = read_lspci_tree(load(LSPCI / "paste_tv_below_root_derived.txt"))
    assert tree.roots == () and [o.bdf for o in tree.orphans] == [f"0000:{b:02x}:00.0" for b in range(5, 13)]
    assert "starts below its root-bus line" in tree.notes[0]
    snap = read_offline(lspci_tree=load(LSPCI / "paste_tv_below_root_derived.txt"))
    assert all(f.sysfs_path is None for f in snap.pci)
    with pytest.raises(LspciParseError):  # strict parsing wants the root bus
        parse_lspci_tree(load(LSPCI / "paste_tv_below_root_derived.txt"))


def test_hand_edited_branch_is_read_with_a_note():
    text = load(LSPCI / "paste_tvv_hand_edited_column_derived.txt")
    tree = read_lspci_tree(text)
    assert tree_shape(tree) == tree_shape(read_lspci_tree(load(LSPCI / "paste_tvv_h200_vm_device_2335.txt")))
    assert tree.notes == ("line 10: branch drawn at column 13, one column off the open branch at column 12",)
    with pytest.raises(LspciParseError, match="no earlier line opened"):
        parse_lspci_tree(text)


def test_concatenated_trees_are_both_read():
    one = "-[0000:00]-+-00.0  Intel\n           \\-01.0-[01]----00.0  NVIDIA Corporation Device 2335\n"
    two = (
        "$ lspci -tv   # the other socket\n-[0000:80]-+-00.0  Intel\n"
        "           \\-01.0-[81]----00.0  Mellanox Technologies MT2910 Family [ConnectX-7]\n"
    )
    tree = read_lspci_tree(one + two)
    assert [n.bdf for n in tree.walk()] == [
        "0000:00:00.0",
        "0000:00:01.0",
        "0000:01:00.0",
        "0000:80:00.0",
        "0000:80:01.0",
        "0000:81:00.0",
    ]


def test_tree_with_nothing_recognisable_still_raises():
    with pytest.raises(LspciParseError, match="no lspci tree found"):
        read_lspci_tree("hello\nworld\n")


# -- lspci -v / -vvv ------------------------------------------------------------------------

LISTINGS = [
    # name, BDFs, GPUs after analysis, marker line for the bad-line copy
    (
        "paste_vnn_egrep_then_full_nvidiux10.txt",
        ["0000:01:00.0", "0000:00:00.0", "0000:00:01.0", "0000:00:01.1"],
        1,
        "Kernel driver in use: hsw_uncore",
    ),
    (
        "paste_vnnk_unindented_fields_vanities6.txt",
        ["0000:01:00.0", "0000:01:00.1", "0000:3e:00.0", "0000:3e:00.1"],
        2,
        "01:00.1 Audio",
    ),
    ("paste_vvvv_device_2571_geerlingguy509.txt", ["0000:01:00.0"], 1, "Region 3"),
    ("paste_vvnnx_hexdump_class0502_pciutils150.txt", ["0000:70:00.0"], 0, "10: 00 00 a0 b4"),
]


@pytest.mark.parametrize("name, bdfs, n_gpus, marker", LISTINGS, ids=[c[0] for c in LISTINGS])
def test_listing_paste_devices_and_classes(name, bdfs, n_gpus, marker):
    listing = read_lspci_verbose(load(LSPCI / name))
    assert [f.bdf for f in listing.functions] == bdfs
    assert len(analyse(read_offline(lspci_verbose=load(LSPCI / name))).topology.gpus) == n_gpus


@pytest.mark.parametrize("name, bdfs, n_gpus, marker", LISTINGS, ids=[c[0] for c in LISTINGS])
def test_listing_paste_with_a_bad_line_reads_the_same(name, bdfs, n_gpus, marker):
    text = load(LSPCI / name)
    bad, at = with_bad_line(text, middle_of(text, marker))
    clean, dirty = read_lspci_verbose(text), read_lspci_verbose(bad)
    assert dirty.functions == clean.functions
    assert [s for s in dirty.skipped if s.first == at and BAD in s.why]
    snap = read_offline(lspci_verbose=bad)
    assert any(e.path == f"lspci -vvv line {at}" for e in snap.probe_errors)


def test_unindented_fields_are_read_as_fields():
    fns = {f.bdf: f for f in read_lspci_verbose(load(LSPCI / "paste_vnnk_unindented_fields_vanities6.txt")).functions}
    assert fns["0000:3e:00.0"].driver == "nvidia" and fns["0000:3e:00.1"].kernel_modules == ("snd_hda_intel",)
    assert fns["0000:3e:00.0"].subsystem_vendor_id == 0x1458


def test_hex_dump_lines_are_lspci_output_not_errors():
    text = load(LSPCI / "paste_vvnnx_hexdump_class0502_pciutils150.txt")
    (fn,) = parse_lspci_verbose(text)  # strict parsing accepts them too
    assert (fn.class_code, fn.vendor_id, fn.device_id, fn.port_type) == (
        0x0502,
        0x8086,
        0x0DDB,
        "rc_integrated_endpoint",
    )
    assert read_lspci_verbose(text).skipped == ()


def test_egrep_line_then_full_listing_merges_the_repeated_function():
    text = load(LSPCI / "paste_vnn_egrep_then_full_nvidiux10.txt") + (
        "\n01:00.0 VGA compatible controller [0300]: NVIDIA Corporation GF114 [GeForce GTX 560 Ti] [10de:1200]"
        "(rev a1) (prog-if 00 [VGA controller])\n    Kernel driver in use: nvidia\n"
    )
    listing = read_lspci_verbose(text)
    fn = next(f for f in listing.functions if f.bdf == "0000:01:00.0")
    assert fn.driver == "nvidia" and fn.revision == 0xA1
    assert "listed more than once" in listing.notes[0]


def test_grep_acsctl_places_nothing_and_exits_0():
    path = LSPCI / "paste_vvv_grep_acsctl_nccl606.txt"
    listing = read_lspci_verbose(load(path))
    assert listing.functions == () and "9 ACSCtl line(s)" in listing.notes[0]
    out = subprocess.run(
        [sys.executable, "-m", "topoagent", "scan", "--lspci-verbose", str(path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "cannot be placed on any function" in out.stdout


def test_grep_acsctl_counts_redirect_bits():
    text = (
        "  ACSCtl: SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n"
        "  ACSCtl: SrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-\n"
    )
    assert "(1 of them with P2P redirect bits set" in read_lspci_verbose(text).notes[0]


def test_listing_with_nothing_recognisable_still_raises():
    with pytest.raises(LspciParseError, match="no lspci device line"):
        read_lspci_verbose("hello\nworld\n")


# -- nvidia-smi topo -m ---------------------------------------------------------------------

MATRICES = [
    # name, labels, the cell GPU0/GPU1, marker line for the bad-line copy
    (
        "paste_markdown_table_gb300_dranet.txt",
        ["GPU0", "GPU1", "GPU2", "GPU3", "NIC0", "NIC1", "NIC2", "NIC3"],
        "NV18",
        "| GPU2 | NV18",
    ),
    ("paste_markdown_corner_label_6gpu.txt", [f"GPU{i}" for i in range(6)], "PIX", "| GPU3 | NODE"),
    (
        "paste_truncated_root_prompt_deepep60.txt",
        [f"GPU{i}" for i in range(8)] + [f"NIC{i}" for i in range(14)],
        "NODE",
        "GPU2    NODE",
    ),
    (
        "paste_utf16_crlf_h100_derived.utf16",
        [f"GPU{i}" for i in range(8)] + [f"NIC{i}" for i in range(9)],
        "NV18",
        "GPU5\tNV18",
    ),
]


@pytest.mark.parametrize("name, labels, cell01, marker", MATRICES, ids=[m[0] for m in MATRICES])
def test_matrix_paste_devices_and_cells(name, labels, cell01, marker):
    m = read_topo_matrix(load(NVSMI / name))
    assert list(m.labels) == labels and m.cell("GPU0", "GPU1") == cell01
    assert m.cell("GPU0", "GPU0") == "X"


@pytest.mark.parametrize("name, labels, cell01, marker", MATRICES, ids=[m[0] for m in MATRICES])
def test_matrix_paste_with_a_bad_line_reads_the_same(name, labels, cell01, marker):
    text = load(NVSMI / name)
    bad, at = with_bad_line(text, middle_of(text, marker))
    clean, dirty = read_topo_matrix(text), read_topo_matrix(bad)
    assert (dirty.devices, dirty.cells, dirty.warnings) == (clean.devices, clean.cells, clean.warnings)
    assert [s for s in dirty.skipped if s.first == at and BAD in s.why]
    snap = read_offline(nvidia_smi_topo=bad)
    assert any(e.path == f"nvidia-smi topo -m line {at}" for e in snap.probe_errors)


def test_truncated_matrix_keeps_complete_rows_and_never_exits_2():
    path = NVSMI / "paste_truncated_root_prompt_deepep60.txt"
    m = read_topo_matrix(load(path))
    gpu = {d.label: d for d in m.devices}
    assert str(gpu["GPU3"].cpu_affinity) == "0-47,96-143" and gpu["GPU3"].numa_affinity == "0"
    assert m.cell("GPU3", "NIC7") == "PIX" and m.cell("GPU4", "GPU5") == "NODE"  # GPU4's row is cut in its cells
    assert m.cell("GPU6", "GPU7") == "?" and gpu["GPU6"].cpu_affinity is None  # no row: unknown
    assert any("have no row" in w for w in m.warnings)
    with pytest.raises(TopoParseError, match="have no row"):
        parse_topo_matrix(load(path))  # strict parsing still refuses
    out = subprocess.run(
        [sys.executable, "-m", "topoagent", "scan", "--nvidia-smi-topo", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert out.returncode in (0, 1), out.stderr


def test_utf16_file_is_read_on_the_command_line():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "topoagent",
            "scan",
            "--nvidia-smi-topo",
            str(NVSMI / "paste_utf16_crlf_h100_derived.utf16"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "8 GPU(s) · 9 NIC(s)" in out.stdout


# -- pre-cleaning -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "$ lspci -tv",
        "root@host:~# lspci -tvv",
        "[root@node01 ~]# nvidia-smi topo -m",
        "# lspci -vvv -s 04:00",
        "➜  ~ lspci -t",
        "(base) user@gpu-box:/tmp$ sudo lspci -vvv",
        "% nvidia-smi topo -m",
        "$",
    ],
)
def test_prompts_are_recognised(line):
    assert is_prompt(line)


@pytest.mark.parametrize(
    "line",
    [
        "# \tGPU0\tGPU1\tCPU Affinity",
        "#   mlx5_0  PIX  X",
        "# Legend:",
        "GPU0\t X \tNV18",
        "-[0000:00]-+-00.0",
        " |           +-01.0",
    ],
)
def test_output_lines_are_not_prompts(line):
    assert not is_prompt(line)


def test_clean_paste_drops_and_reports():
    text = (
        "```\r\n$ lspci -tv\r\n\x1b[1m-[0000:00]-+-00.0\x1b[0m\r\n           +-...\r\n"
        "pcilib: sysfs_read_vpd: read failed: Input/output error\r\n(omitted)\r\n           \\-01.0\r\n```\r\n"
    )
    cleaned = clean_paste(text)
    assert [(ln.number, ln.text) for ln in cleaned.lines] == [(3, "-[0000:00]-+-00.0"), (7, "           \\-01.0")]
    assert [(s.first, s.last) for s in cleaned.skipped] == [(4, 4), (5, 5), (6, 6)]
    assert "elided" in cleaned.skipped[0].why and "pcilib" in cleaned.skipped[1].why
    assert Skipped(4, 6, "x").where == "lines 4-6" and Skipped(4, 4, "x").where == "line 4"


@pytest.mark.parametrize(
    "data",
    [
        "GPU0\tX\n".encode("utf-16"),
        "GPU0\tX\n".encode("utf-16-le"),
        "GPU0\tX\n".encode("utf-16-be"),
        b"\xef\xbb\xbfGPU0\tX\n",
        "GPU0\tX\n".encode("utf-32"),
    ],
)
def test_decode_text_utf8_and_utf16(data):
    assert decode_text(data) == "GPU0\tX\n"


def test_decode_text_refuses_garbage_as_utf8():
    from topoagent.core.errors import InputError

    with pytest.raises(InputError, match="not UTF-8 text"):
        decode_text(b"\xff\xfe\x00garbage\x80")


# -- pci.ids ----------------------------------------------------------------------------------

PCI_IDS = """# sample
10de  NVIDIA Corporation
\t2324  GH100 [H800]
\t\t10de 17a6  H800 80GB
15b3  Mellanox Technologies
\t1021  MT2910 Family [ConnectX-7]
C 03  Display controller
\t02  3D controller
"""


def test_pci_ids_parser():
    ids = parse_pci_ids(PCI_IDS)
    assert ids.name(0x10DE, 0x2324) == "NVIDIA Corporation GH100 [H800]"
    assert ids.name(0x10DE, 0x17A6) is None and (0x03, 0x02) not in ids.devices
    assert parse_pci_ids(PCI_IDS, vendors=frozenset({0x15B3})).vendors == {0x15B3: "Mellanox Technologies"}


def test_device_unknown_to_the_table_is_named_by_the_analysing_machines_pci_ids(tmp_path):
    from topoagent.core.read import pciids_db

    (tmp_path / "usr/share/hwdata").mkdir(parents=True)
    (tmp_path / "usr/share/hwdata/pci.ids").write_text(PCI_IDS.replace("2324", "2399"))
    tree = read_lspci_tree(
        "-[0000:00]-+-00.0  Intel\n           \\-01.0-[01]----00.0  NVIDIA Corporation Device 2399\n"
    )
    snap = snapshot_from_lspci(tree, None, names=lambda v, d: pciids_db.lookup(v, d, str(tmp_path)))
    fn = next(f for f in snap.pci if f.bdf == "0000:01:00.0")
    assert (fn.device_id, fn.name, fn.kind) == (0x2399, "NVIDIA Corporation GH100 [H800]", "gpu")
    assert "this machine's pci.ids" in snap.sources[0].detail
    assert pciids_db.database(str(tmp_path))[1] == "/usr/share/hwdata/pci.ids"
    assert pciids_db.lookup(0x10DE, 0x2399, str(tmp_path / "nowhere")) is None


def test_vendor_only_kind_is_marked_inferred():
    tree = read_lspci_tree(
        "-[0000:00]-+-00.0  Intel\n           +-01.0-[01]--+-00.0  NVIDIA Corporation Device 2bff\n"
        "           |            \\-00.1  NVIDIA Corporation Device 22ff\n"
        "           \\-02.0-[02]----00.0  Mellanox Tech Device 10ff\n"
    )
    snap = snapshot_from_lspci(tree, None, names=lambda v, d: None)
    kinds = {f.bdf: f.kind for f in snap.pci}
    assert kinds["0000:01:00.0"] == "gpu" and kinds["0000:01:00.1"] is None  # function 1: audio, not a GPU
    assert kinds["0000:02:00.0"] == "nic"
    assert "INFERRED from the vendor alone" in snap.sources[0].detail


# -- hardening --------------------------------------------------------------------------------


def test_tree_500_bridges_deep_needs_no_recursion():
    depth = 500
    line = (
        "-[0000:00]-"
        + "".join(f"--00.0-[{(i + 1) % 256:02x}]-" for i in range(depth))
        + "---00.0  NVIDIA Corporation Device 2335"
    )
    for parse in (parse_lspci_tree, lambda t: read_lspci_tree(t).roots):
        roots = parse(line + "\n")
        nodes = list(roots[0].walk())
        assert len(nodes) == depth + 1
    walked = list(_walk_tree(roots))
    assert walked[-1][1].count("/") == depth + 1
    assert len(snapshot_from_lspci(roots, None).pci) > 0


def test_vf_count_past_the_sriov_maximum_is_clamped_with_a_note():
    listing = (
        "81:00.0 Infiniband controller [0207]: Mellanox Technologies MT2910 Family [ConnectX-7] [15b3:1021]\n"
        "\tCapabilities: [180 v1] Single Root I/O Virtualization (SR-IOV)\n"
        "\t\tInitial VFs: 16, Total VFs: 16, Number of VFs: 1000000000, Function Dependency Link: 00\n"
        "\t\tVF offset: 2, stride: 1, Device ID: 101e\n"
    )
    snap = snapshot_from_lspci(None, read_lspci_verbose(listing))
    assert snap.pci[0].sriov_numvfs == MAX_VFS == 65535
    assert "Number of VFs 1000000000 is more than the SR-IOV maximum; read as 65535" in snap.sources[0].detail


@pytest.mark.parametrize("digit", ["١", "²", "٣"])
def test_numbers_are_ascii_digits_only(digit):
    listing = f"00:01.0 PCI bridge: X\n\tNUMA node: {digit}\n\tKernel driver in use: pcieport\n"
    with pytest.raises(LspciParseError, match="expected a number"):
        parse_lspci_verbose(listing)
    lenient = read_lspci_verbose(listing)
    assert lenient.functions[0].numa_node is None and lenient.functions[0].driver == "pcieport"
    assert lenient.skipped[0].first == 2
    assert _single_node(digit) is None and _single_node("3") == 3
    m = read_topo_matrix(f"\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-3\t{digit}\n")
    assert m.devices[0].numa_affinity is None


def test_glued_affinity_of_3000_cpus_is_split_with_bounded_work():
    cpus = ",".join(str(c) for c in range(0, 6000, 2))  # 3,000 CPUs, ~15 kB of digits
    text = (
        f"\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
        f"GPU0\t X \tNV18\t{cpus}0N/A\nGPU1\tNV18\t X \t{cpus}0N/A\n"
    )
    nvsmi_topo._read_value.cache_clear()
    m = parse_topo_matrix(text)
    assert len(m.devices[0].cpu_affinity) == 3000 and m.devices[0].numa_affinity == "0"
    # each candidate split is evaluated once, and only splits leaving a short tail are tried
    assert nvsmi_topo._read_value.cache_info().misses < 4 * nvsmi_topo.MAX_GLUED_TAIL


def test_matrix_header_with_too_many_devices_is_refused():
    header = "\t" + "\t".join(f"GPU{i}" for i in range(nvsmi_topo.MAX_DEVICES + 1)) + "\n"
    with pytest.raises(TopoParseError, match="more than 1024"):
        read_topo_matrix(header + "GPU0\t X\n")
