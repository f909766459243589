"""Pastes as people paste them, shape by shape: a prefix on every line (a C comment, ``//``,
``#``, a mail quote, a ``|`` gutter), quoted-printable from a mailing-list archive, device lines
indented or as a markdown list, a tree excerpt from a later root bus, a markdown matrix with moved
columns, grepped ACS lines.  Each shape of a clean sample must give the same devices and cells as
the clean text, and no output may show a cell the paste does not (a missing row's cells are
``?``); a tree excerpt shows the paths inside it (a converged GPU + DPU card), and on Grace a SYS
cell to a NIC of the GPU's own CPU is no cross-socket path."""

from __future__ import annotations

import json
import quopri
import re
from pathlib import Path

import pytest

from tests.paths import TESTS
from topoagent.core.api import analyse, read_offline
from topoagent.core.parse.lspci_tree import read_lspci_tree
from topoagent.core.parse.lspci_verbose import read_lspci_verbose
from topoagent.core.parse.nvsmi_topo import read_topo_matrix
from topoagent.core.parse.paste import clean_paste, decode_text
from topoagent.core.render import json_report
from topoagent.core.render.matrix import matrix_of, render_topo_matrix

SAMPLES = Path(__file__).parent / "samples"
REPO_SAMPLES = TESTS / "offline_samples"
CLEAN = {
    "nvidia_smi_topo": SAMPLES / "nvsmi" / "dgx_a100_nv12_12nic_spaces.txt",
    "lspci_tree": SAMPLES / "lspci" / "tree_hgx_h100_tvnn.txt",
    "lspci_verbose": SAMPLES / "lspci" / "vvvnn_a100_numa5.txt",
}


def prefixed(marker: str, opener: str | None = None, closer: str | None = None):
    def shape(text: str) -> str:
        lines = [f"{marker} {line}" if line.strip() else marker for line in text.split("\n")]
        return "\n".join(([opener] if opener else []) + lines + ([closer] if closer else []))

    return shape


def quoted_printable(text: str) -> str:
    return quopri.encodestring(text.encode("utf-8")).decode("ascii")


SHAPES = {
    "c_comment": prefixed(" *", "/*", " */"),
    "slashes": prefixed("//"),
    "hash": prefixed("#"),
    "mail_quote": prefixed(">"),
    "quoted_printable": quoted_printable,
}


def facts(snap):
    """What a paste says: every function and every stated cell (not where each line was)."""
    return snap.pci, snap.given_paths


@pytest.mark.parametrize("shape", SHAPES, ids=list(SHAPES))
@pytest.mark.parametrize("kind", CLEAN, ids=list(CLEAN))
def test_shape_reads_as_the_clean_text(kind, shape):
    text = decode_text(CLEAN[kind].read_bytes())
    shaped = SHAPES[shape](text)
    assert shaped != text
    clean = read_offline(**{kind: text})
    assert clean.pci, "the clean sample must show devices"
    assert facts(read_offline(**{kind: shaped})) == facts(clean)


def test_gutter_on_a_matrix_reads_as_the_clean_text():
    text = decode_text(CLEAN["nvidia_smi_topo"].read_bytes())
    shaped = prefixed("|")(text)
    assert facts(read_offline(nvidia_smi_topo=shaped)) == facts(read_offline(nvidia_smi_topo=text))


def test_quoted_printable_is_long_enough_to_have_soft_breaks():
    shaped = quoted_printable(decode_text(CLEAN["lspci_verbose"].read_bytes()))
    assert "=\n" in shaped


@pytest.mark.parametrize(
    "text, lines",
    [
        # a C comment around a matrix: the markers and the comment's ends go
        ("/*\n * GPU0\tX\n * GPU1\tNV4\n */", [(2, "GPU0\tX"), (3, "GPU1\tNV4")]),
        # a markdown table keeps its pipes: the matrix parser reads tables
        ("| GPU0 | X |\n| GPU1 | NV4 |", [(1, "| GPU0 | X |"), (2, "| GPU1 | NV4 |")]),
        # a piece of an lspci tree keeps its columns
        ("|           +-01.0\n|           \\-02.0", [(1, "|           +-01.0"), (2, "|           \\-02.0")]),
        # one prefixed line is no block (a root prompt, a comment)
        ("# GPU0\tX", [(1, "# GPU0\tX")]),
        # a block where one line lacks the prefix keeps every line as pasted
        ("> a b\nc d", [(1, "> a b"), (2, "c d")]),
        # each block is judged on its own
        ("> a b\n> c d\n\ne f\ng h", [(1, "a b"), (2, "c d"), (4, "e f"), (5, "g h")]),
        # quoted-printable: soft breaks joined (first line's number), escapes decoded
        ("00:01.0 Intel Cor=\nporation x=3Dy\nnext", [(1, "00:01.0 Intel Corporation x=y"), (3, "next")]),
        # an escape without any soft break is ordinary text
        ("NCCL_IB_HCA=3D", [(1, "NCCL_IB_HCA=3D")]),
    ],
)
def test_clean_paste_shapes(text, lines):
    assert [(ln.number, ln.text) for ln in clean_paste(text).lines] == lines


# -- device lines indented, or as a markdown list --------------------------------------------

_DEVICE_LINE = re.compile(r"^(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7] ")


def listed(marker: str):
    """A markdown list: each device line an item (``- 00:01.0 …``), its fields indented under it."""

    def shape(text: str) -> str:
        pad = " " * len(marker)
        return "\n".join(
            f"{marker}{line}" if _DEVICE_LINE.match(line) else f"{pad}{line}" if line else line
            for line in text.split("\n")
        )

    return shape


def indented(text: str) -> str:
    return "\n".join(f"    {line}" if line else line for line in text.split("\n"))


INDENTED_SHAPES = {
    "dash_list": listed("- "),
    "star_list": listed("* "),
    "numbered_list": listed("1. "),
    "indented": indented,
}
VERBOSE = ["vvvnn_a100_numa5.txt", "vvv_plx_pex8725_acs.txt", "vvv_connectx7_sriov_and_highpoint.txt"]


@pytest.mark.parametrize("shape", INDENTED_SHAPES, ids=list(INDENTED_SHAPES))
@pytest.mark.parametrize("name", VERBOSE, ids=VERBOSE)
def test_indented_device_lines_read_as_the_clean_text(name, shape):
    text = decode_text((SAMPLES / "lspci" / name).read_bytes())
    shaped = INDENTED_SHAPES[shape](text)
    assert shaped != text
    clean = read_offline(lspci_verbose=text)
    assert clean.pci
    assert facts(read_offline(lspci_verbose=shaped)) == facts(clean)


def test_indented_tree_reads_as_the_clean_text():
    text = decode_text(CLEAN["lspci_tree"].read_bytes())
    assert facts(read_offline(lspci_tree=indented(text))) == facts(read_offline(lspci_tree=text))


def test_plain_lspci_as_a_markdown_list_and_an_indented_block():
    listing = read_lspci_verbose(
        decode_text((SAMPLES / "lspci" / "paste_plain_markdown_list_constructed.txt").read_bytes())
    )
    assert [f.bdf for f in listing.functions] == [
        "0000:17:00.0",
        "0000:18:08.0",
        "0000:18:10.0",
        "0000:19:00.0",
        "0000:1a:00.0",
        "0000:3b:00.0",
        "0000:86:00.0",
        "0000:87:00.0",
    ]
    assert listing.functions[3].description == "NVIDIA Corporation GV100GL [Tesla V100 SXM2 32GB]"
    assert [s.first for s in listing.skipped] == [10]  # the author's sentence between the lists


def test_plain_lspci_places_nothing_it_does_not_show():
    # plain lspci prints no bus numbers: the bridges may be anyone's parents, so no function is
    # known to sit on a root bus and no class between two of them is known
    snap = read_offline(lspci_verbose=(SAMPLES / "lspci" / "paste_plain_markdown_list_constructed.txt").read_text())
    assert all(f.sysfs_path is None for f in snap.pci)
    assert not any(p.locality_known for p in analyse(snap).paths)


# -- a tree excerpt that starts at a later root bus ------------------------------------------


def test_tree_excerpt_from_a_later_root_bus_keeps_its_buses():
    tree = read_lspci_tree((SAMPLES / "lspci" / "paste_tv_later_root_bus_constructed.txt").read_text())
    assert [n.bdf for n in tree.roots] == [
        "0000:44:00.0",
        "0000:44:00.1",
        "0000:44:02.0",
        "0000:44:04.0",
        "0000:00:00.0",
        "0000:00:1f.0",
    ]
    assert tree.orphans == () and tree.skipped == ()
    assert "root buses before it are not shown" in tree.notes[0]
    result = analyse(
        read_offline(lspci_tree=(SAMPLES / "lspci" / "paste_tv_later_root_bus_constructed.txt").read_text())
    )
    tokens = {(p.a, p.b): (p.token, p.locality_known) for p in result.paths}
    # GPU 47:00.0 and the CX-6 Dx at 48:00.x sit under one switch (46:00.0 / 46:01.0): PIX;
    # GPU 49:00.0 is under another root port of the same root bus: PHB
    assert tokens[("gpu0", "nic0")] == ("PIX", True) and tokens[("gpu0", "gpu1")] == ("PHB", True)


@pytest.mark.parametrize(
    "text, roots",
    [
        # the paste's first line lost its leading space
        (
            "+-[0000:44]-+-00.0  Intel\n|           \\-02.0-[45]----00.0  NVIDIA Corporation Device 2330",
            ["0000:44:00.0", "0000:44:02.0"],
        ),
        # the last root bus of a multi-root tree alone
        (
            " \\-[0000:80]-+-00.0  Intel\n             \\-01.0-[81]----00.0  NVIDIA Corporation Device 2330",
            ["0000:80:00.0", "0000:80:01.0"],
        ),
    ],
)
def test_tree_excerpt_root_bus_as_a_branch(text, roots):
    tree = read_lspci_tree(text)
    assert [n.bdf for n in tree.roots] == roots and tree.skipped == ()


# -- a markdown table with its columns moved -------------------------------------------------

REORDERED = SAMPLES / "nvsmi" / "paste_markdown_reordered_columns_constructed.txt"


def _columns_moved(text: str, order: list[int]) -> str:
    """Every table line of ``text`` with its cells in ``order``."""
    out = []
    for line in text.split("\n"):
        if line.startswith("|"):
            cells = line.strip().strip("|").split("|")
            line = "|" + "|".join(cells[i] for i in order) + "|"
        out.append(line)
    return "\n".join(out)


def test_reordered_markdown_table_is_read_by_its_header_names():
    m = read_topo_matrix(REORDERED.read_text())
    assert m.labels == ("GPU0", "GPU1", "GPU2", "GPU3", "NIC0", "NIC1") and not m.warnings
    assert m.cell("GPU0", "GPU3") == "NV4" and m.cell("GPU2", "NIC1") == "PXB" and m.cell("NIC0", "NIC1") == "SYS"
    assert [(str(d.cpu_affinity), d.numa_affinity) for d in m.devices[:4]] == [
        ("0-31,64-95", "0"),
        ("0-31,64-95", "0"),
        ("32-63,96-127", "1"),
        ("32-63,96-127", "1"),
    ]
    assert m.device("mlx5_1").label == "NIC1"


@pytest.mark.parametrize(
    "order",
    [
        [2, 3, 4, 5, 6, 7, 8, 0, 1],  # nvidia-smi's own order: corner, labels, CPU, NUMA
        [2, 3, 4, 5, 6, 7, 8, 1, 0],  # NUMA Affinity before CPU Affinity
        [0, 2, 3, 4, 5, 6, 7, 8, 1],  # CPU Affinity first, NUMA Affinity last
        [2, 0, 1, 3, 4, 5, 6, 7, 8],  # the affinities between the corner and the labels
        [2, 8, 7, 6, 5, 4, 3, 0, 1],  # labels backwards
    ],
    ids=["nvidia_smi", "numa_first", "cpu_first", "after_corner", "labels_backwards"],
)
def test_any_column_order_gives_the_same_cells(order):
    text = REORDERED.read_text()
    expected = facts(read_offline(nvidia_smi_topo=text))
    moved = _columns_moved(text, order)
    assert moved != text
    assert unordered(facts(read_offline(nvidia_smi_topo=moved))) == unordered(expected)


def unordered(fact):
    """Facts without the order of the header (a matrix's labels name its devices)."""
    fns, given = fact
    return sorted(fns, key=lambda f: f.label), {(frozenset((p.a, p.b)), p.token) for p in given}


# -- a partial paste never invents a cell ----------------------------------------------------


def _without_rows(text: str, labels: tuple[str, ...]) -> str:
    """``text`` without the table rows of ``labels`` (the label is the row's third cell)."""
    return "\n".join(
        line for line in text.split("\n") if not (line.startswith("|") and line.split("|")[3].strip() in labels)
    )


def test_cells_of_missing_rows_are_unknown_in_every_output():
    # the GPU rows are not in the paste: the GPU-GPU cells (NV4 on the host) are shown nowhere
    text = _without_rows(REORDERED.read_text(), ("GPU0", "GPU1", "GPU2", "GPU3"))
    result = analyse(read_offline(nvidia_smi_topo=text))
    m = matrix_of(result)
    assert m.cell("GPU0", "GPU1") == "?" and m.cell("GPU2", "GPU3") == "?"
    assert m.cell("GPU0", "NIC0") == "PXB" and m.cell("GPU3", "NIC0") == "SYS"  # from the NIC rows
    paths = {(p["a"], p["b"]): p for p in json.loads(json_report.render(result))["paths"]}
    assert paths[("gpu0", "gpu1")]["locality_known"] is False
    assert paths[("gpu0", "nic0")]["locality_known"] is True
    assert paths[("gpu0", "gpu1")]["shown"] is False and paths[("gpu2", "gpu3")]["shown"] is False
    assert paths[("gpu0", "nic0")]["shown"] is True and paths[("nic0", "nic1")]["shown"] is True
    assert not any(p.shown for p in result.paths if p.a.startswith("gpu") and p.b.startswith("gpu"))
    # the matrix printed parses back with the same unknown cells
    again = read_topo_matrix(render_topo_matrix(m))
    assert again.cell("GPU0", "GPU1") == "?"


def _cut_after_gpu3() -> str:
    """The DGX A100 matrix pasted cut short: GPU0-GPU3's rows only (GPU4-7 and the NIC rows lost),
    the legend kept.  GPU4-7's cells to every NIC are shown nowhere (NV12/PXB on the host)."""
    lines = decode_text(CLEAN["nvidia_smi_topo"].read_bytes()).split("\n")
    legend = lines.index("Legend:")
    return "\n".join(lines[:6] + [""] + lines[legend:])


def test_a_rail_no_source_shows_has_no_class_anywhere():
    from prometheus_client.parser import text_string_to_metric_families

    from topoagent.core.analysis.rails import NicRole
    from topoagent.core.render import tree
    from topoagent.features.daemon.metrics import render_text
    from topoagent.features.daemon.status import Status
    from topoagent.features.plan import rails as plan_rails

    result = analyse(read_offline(nvidia_smi_topo=_cut_after_gpu3()))
    assert not any(p.shown for p in result.paths if p.a == "gpu4" and p.b.startswith("nic"))
    assert result.path("gpu0", "nic4").shown  # GPU0's row shows its SYS cell to nic4
    # the rail to an unshown NIC has no class (it was SYS, the placeholder), in the scan JSON too
    rail4 = result.rails.rail("gpu4")
    assert rail4 is not None and rail4.nic is not None and rail4.cls is None
    assert (rail4.gdr, rail4.nccl_path) == (None, None)  # no verdict on a placeholder either
    assert result.rails.rail("gpu0").cls is not None and result.rails.rail("gpu0").cls.name == "PXB"
    rails = {r["gpu"]: r for r in json.loads(json_report.render(result))["rails"]}
    assert rails["gpu4"]["kind"] is None and rails["gpu0"]["kind"] == "PXB"
    # no NIC is called storage for placeholder paths (GPU4-7 may well sit next to nic4-nic11)
    assert all(result.rails.roles[f"nic{i}"] is NicRole.COMPUTE for i in range(12))
    assert f"gpu4 NVIDIA GPU (model not in the matrix)  · NUMA unknown · rail {rail4.nic}" in tree.render(result)
    assert "(SYS)" not in tree.render(result)
    # the metrics, the rails record and the slot facts carry no placeholder class either
    fams = {f.name: f for f in text_string_to_metric_families(render_text(Status(0.0, result)).decode())}
    by_gpu = {s.labels["gpu"]: s.labels["path_class"] for s in fams["topoagent_rail_info"].samples}
    assert by_gpu["gpu4"] == "unknown" and by_gpu["gpu0"] == "PXB"
    record = plan_rails.record(result)
    gpu4 = next(g for g in record.gpus.values() if g.pci_address == "nvidia-smi:GPU4")
    gpu0 = next(g for g in record.gpus.values() if g.pci_address == "nvidia-smi:GPU0")
    assert {r[0].path for r in gpu4.rails.values()} == {"?"} and gpu0.rails["rail0"][0].path == "PXB"
    facts = {s.slot: s for s in result.baseline.slots}
    gpu_facts = [s for s in facts.values() if s.nic_paths is not None]
    assert sorted(len(s.nic_paths) for s in gpu_facts) == [0, 0, 0, 0, 12, 12, 12, 12]


def test_a_pasted_tree_shows_the_cell_the_matrix_lacks():
    # with the lspci tree, GPU 47:00.0 and the NIC under one switch are shown: PIX
    result = analyse(
        read_offline(lspci_tree=(SAMPLES / "lspci" / "paste_tv_later_root_bus_constructed.txt").read_text())
    )
    assert all(p.shown for p in result.paths)
    assert matrix_of(result).cell("GPU0", "NIC0") == "PIX"


# -- ACS control lines as people paste them --------------------------------------------------

_PLX_PORT = (
    "19:08.0 PCI bridge: PLX Technology, Inc. PEX 8796 96-Lane, 24-Port PCI Express Gen 3 (8.0 GT/s) Switch (rev ca)"
)
_ACS_CAP = "SrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl+ DirectTrans+"


def _full_record(ctl: str) -> str:
    return (
        f"{_PLX_PORT}\n\tCapabilities: [68] Express (v2) Downstream Port (Slot+), MSI 00\n"
        f"\tCapabilities: [148 v1] Access Control Services\n\t\tACSCap:\t{_ACS_CAP}\n\t\tACSCtl:\t{ctl}\n"
        "\tKernel driver in use: pcieport\n"
    )


ACS_SHAPES = {
    "full_record": _full_record,
    # lspci -vvv | grep -E '^[0-9a-f]|ACSCtl': the capability's header line is gone
    "grep_device_and_acsctl": lambda ctl: f"{_PLX_PORT}\n                ACSCtl: {ctl}\n",
    # lspci -vvv | grep -E 'PLX|ACS'
    "grep_acscap_and_acsctl": lambda ctl: f"{_PLX_PORT}\n\t\tACSCap:\t{_ACS_CAP}\n\t\tACSCtl:\t{ctl}\n",
}
ACS_LINES = [
    # ACSCtl as lspci prints it, and whether P2P is redirected up to the root complex (the kernel's
    # pci_bridge_has_acs_redir in drivers/pci/p2pdma.c: PCI_ACS_RR | PCI_ACS_CR | PCI_ACS_EC)
    ("SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-", True),
    ("SrcValid+ TransBlk- ReqRedir- CmpltRedir- UpstreamFwd+ EgressCtrl- DirectTrans-", False),
    ("SrcValid- TransBlk- ReqRedir- CmpltRedir+ UpstreamFwd- EgressCtrl- DirectTrans-", True),
    ("SrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl+ DirectTrans-", True),
    ("SrcValid+ TransBlk+ ReqRedir- CmpltRedir- UpstreamFwd+ EgressCtrl- DirectTrans+", False),
    ("SrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-", False),
]


@pytest.mark.parametrize("shape", ACS_SHAPES, ids=list(ACS_SHAPES))
@pytest.mark.parametrize("ctl, redirects", ACS_LINES)
def test_acs_control_line_gives_the_redirect_verdict(ctl, redirects, shape):
    (port,) = read_lspci_verbose(ACS_SHAPES[shape](ctl)).functions
    assert port.acs is not None and port.acs.redirects_p2p is redirects
    assert port.acs_ctl_flags == {name: flag == "+" for name, flag in re.findall(r"(\w+)([+-])", ctl)}


def test_grepped_acs_lines_raise_the_redirect_of_the_full_listing():
    full = (REPO_SAMPLES / "plx4_v100_vvvnn.txt").read_text()
    tree = (REPO_SAMPLES / "plx4_v100_tv.txt").read_text()
    grepped = "\n".join(line for line in full.split("\n") if re.match(r"[0-9a-f]|\s*ACSCtl", line))

    def redirects(verbose: str) -> list[tuple[str, ...]]:
        result = analyse(read_offline(lspci_tree=tree, lspci_verbose=verbose))
        return [f.subjects for f in result.findings if f.code == "ACS_REDIRECT"]

    assert len(redirects(full)) == 3 and redirects(grepped) == redirects(full)


# -- a converged card (A100X + BlueField-2): GPU and DPU functions behind one switch ---------

CONVERGED = SAMPLES / "lspci" / "paste_tv_converged_a100x_bluefield2_constructed.txt"
_ROOT_LINE = "-+-[0000:c0]-+-00.0  Advanced Micro Devices, Inc. [AMD] Starship/Matisse Root Complex"
# the GPU straight under a downstream port of the DPU's switch (one switch between them)
_ONE_SWITCH = (
    " |           +-01.1-[c1-c4]----00.0-[c2-c4]--+-00.0-[c3]--+-00.0  Mellanox Technologies MT42822 "
    "BlueField-2 integrated ConnectX-6 Dx network controller\n"
    " |           |                               |            \\-00.1  Mellanox Technologies MT42822 "
    "BlueField-2 integrated ConnectX-6 Dx network controller\n"
    " |           |                               \\-01.0-[c4]----00.0  NVIDIA Corporation GA100 [A100X]\n"
)


def _tree_lines(text: str) -> str:
    return "\n".join(line for line in text.split("\n") if line.startswith(" |"))


@pytest.mark.parametrize(
    "text, expected",
    [
        (CONVERGED.read_text(), "PXB"),  # the excerpt below the root bus
        (_ROOT_LINE + "\n" + _tree_lines(CONVERGED.read_text()), "PXB"),  # with its root-bus line
        (_ONE_SWITCH, "PIX"),
        (_ROOT_LINE + "\n" + _ONE_SWITCH, "PIX"),
    ],
    ids=["excerpt_two_levels", "rooted_two_levels", "excerpt_one_switch", "rooted_one_switch"],
)
def test_converged_card_gpu_and_dpu_share_the_cards_switch(text, expected):
    result = analyse(read_offline(lspci_tree=text))
    (gpu,) = result.topology.gpus
    cx = [n for n in result.topology.nics if "ConnectX-6 Dx" in (n.name or "") or "BlueField-2" in (n.name or "")]
    assert cx
    for nic in cx:
        p = result.path(gpu.id, nic.id)
        assert (p.token, p.locality_known, p.shown) == (expected, True, True)
    assert matrix_of(result).cell("GPU0", "NIC0") == expected


# -- Grace: a GB200 tray whose every GPU-NIC cell is SYS -------------------------------------

GB200 = SAMPLES / "nvsmi" / "paste_gb200_all_sys_numa_lists_sglang11208.txt"
_NIC_BDFS = ("0000:03:00.0", "0002:03:00.0", "0006:03:00.0", "0010:03:00.0", "0012:03:00.0", "0016:03:00.0")


def _nics_lspci(nodes: tuple[int, ...]) -> str:
    """``lspci -D -vvvnn`` records of the tray's six ConnectX-7 functions, with these NUMA nodes."""
    return "".join(
        f"{bdf} Infiniband controller [0207]: Mellanox Technologies MT2910 Family [ConnectX-7] [15b3:1021]\n"
        f"\tSubsystem: Mellanox Technologies Device [15b3:0041]\n\tNUMA node: {node}\n"
        "\tKernel driver in use: mlx5_core\n\tKernel modules: mlx5_core\n\n"
        for bdf, node in zip(_NIC_BDFS, nodes, strict=True)
    )


def _cross(result) -> list[tuple[str, ...]]:
    return [f.subjects for f in result.findings if f.code == "GPU_NIC_CROSS_SOCKET"]


def test_grace_numa_affinity_list_gives_the_gpus_cpu_node():
    snap = read_offline(nvidia_smi_topo=GB200.read_text())
    gpus = [f for f in snap.pci if f.kind == "gpu"]
    assert [(f.label, f.numa_node) for f in gpus] == [("GPU0", 0), ("GPU1", 0), ("GPU2", 1), ("GPU3", 1)]
    assert [(m.label, m.node) for m in snap.gpu_memory_nodes] == [("GPU0", 2), ("GPU1", 10), ("GPU2", 18), ("GPU3", 26)]


@pytest.mark.parametrize(
    "nodes, cross",
    [
        (None, []),  # the matrix alone: SYS says nothing of a C2C GPU's NIC
        ((0, 0, 0, 1, 1, 1), []),  # every GPU has NICs of its own Grace: P2C, no alarm
        # Grace 1 has no NIC: its GPUs reach Grace 0's NICs through their NVLinked GPUs (NCCL's PXN,
        # NCCL_PXN_C2C=1 by default: a peer's P2C path qualifies), GPUDirect RDMA on -- no alarm
        ((0, 0, 0, 0, 0, 0), []),
    ],
    ids=["matrix_only", "nics_on_both_graces", "nics_on_grace0_only"],
)
def test_gb200_cross_socket_only_for_a_nic_of_the_other_grace(nodes, cross):
    verbose = _nics_lspci(nodes) if nodes is not None else None
    result = analyse(read_offline(nvidia_smi_topo=GB200.read_text(), lspci_verbose=verbose))
    assert [s[:1] for s in _cross(result)] == cross
    pxn = [f for f in result.findings if f.code == "GPU_NIC_VIA_PXN"]
    if nodes == (0, 0, 0, 0, 0, 0):
        # PXN makes nic0..nic3 (whose local GPUs are gpu0, gpu1, gpu1, gpu1) gpu2's and gpu3's local
        # NETs, spread as any: gpu2 takes nic0 through gpu0, gpu3 nic2 through gpu1 (analysis.ncclnet;
        # NCCL 2.30.7 itself, nccl-topo-check on such a tray with NVLinks and C2C, says the same)
        assert [(f.subjects[:3]) for f in pxn] == [("gpu2", "nic0", "gpu0"), ("gpu3", "nic2", "gpu1")]
        assert all("is P2C to it" in f.message and f.severity.label == "info" for f in pxn)
    else:
        assert pxn == []


def test_no_idle_nic_finding_rests_on_a_cell_the_paste_does_not_show():
    # only NIC0's row is pasted: GPU0/GPU1 share NIC0 (NODE, shown); their cells to NIC1 are
    # shown nowhere, so NIC1 being "as close" would rest on a placeholder class
    header = "        GPU0    GPU1    NIC0    NIC1    CPU Affinity    NUMA Affinity   GPU NUMA ID"
    legend = "\n\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n"
    row0 = "NIC0    NODE    NODE     X      NODE"
    result = analyse(read_offline(nvidia_smi_topo=f"{header}\n{row0}{legend}"))
    assert [r.nic for r in result.rails.rails] == ["nic0", "nic0"]
    assert not result.path("gpu0", "nic1").shown
    assert "NIC_SHARED_WHILE_IDLE" not in {f.code for f in result.findings}
    # with NIC1's row pasted too, NIC1 is shown as close and the rails spread over both NICs
    # (the finding on a shown idle NIC: the epyc-nps2-mixed golden)
    row1 = "NIC1    NODE    NODE    NODE     X"
    full = analyse(read_offline(nvidia_smi_topo=f"{header}\n{row0}\n{row1}{legend}"))
    assert sorted(r.nic for r in full.rails.rails) == ["nic0", "nic1"]
