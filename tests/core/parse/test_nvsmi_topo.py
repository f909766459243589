"""Tests for topoagent.core.parse.nvsmi_topo: real `nvidia-smi topo -m` shapes, glue, errors.

Samples live in samples/nvsmi/ (provenance in samples/nvsmi/README.md).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.mangle import mangle
from topoagent.core.parse.nvsmi_topo import TopoMatrix, TopoParseError, parse_topo_matrix

SAMPLES = Path(__file__).parent / "samples" / "nvsmi"


def cpus_text(cpus):
    """A parsed CPU affinity as the kernel list text (None stays None)."""
    return None if cpus is None else str(cpus)


def load(name: str) -> str:
    # newline="" keeps the bytes as captured (tabs, no final newline, ANSI codes).
    with open(SAMPLES / name, encoding="utf-8", newline="") as f:
        return f.read()


def parse(name: str) -> TopoMatrix:
    return parse_topo_matrix(load(name))


# name, devices, gpus, cells {(a, b): token}, affinities {gpu: (cpu, numa, gpu_numa)},
# rdma {label: name}, legacy_soc, number of warnings
CASES = [
    (
        "h100_nv18_9nic_tabs.txt",
        17,
        8,
        {
            ("GPU0", "GPU7"): "NV18",
            ("GPU0", "NIC8"): "PIX",
            ("GPU0", "NIC0"): "SYS",
            ("GPU4", "NIC4"): "PIX",
            ("NIC1", "NIC2"): "NODE",
            ("NIC8", "GPU0"): "PIX",
        },
        {"GPU0": ("0-79", "0", None), "GPU7": ("80-159", "1", None)},
        {"NIC0": "mlx5_0", "NIC8": "mlx5_8"},
        False,
        0,
    ),
    (
        "dgx_a100_nv12_12nic_spaces.txt",
        20,
        8,
        {
            ("GPU0", "GPU1"): "NV12",
            ("GPU0", "NIC0"): "PXB",
            ("GPU2", "NIC3"): "PXB",
            ("GPU2", "NIC0"): "SYS",
            ("NIC8", "NIC9"): "PIX",
        },
        {
            "GPU0": ("48-63,176-191", "3", None),
            "GPU2": ("16-31,144-159", "1", None),
            "GPU4": ("112-127,240-255", "7", None),
            "GPU7": ("80-95,208-223", "5", None),
        },
        {"NIC11": "mlx5_11"},
        False,
        0,
    ),
    (
        "dgx1_v100_raw_mlx5.txt",
        12,
        8,
        {
            ("GPU0", "GPU1"): "NV1",
            ("GPU0", "GPU3"): "NV2",
            ("GPU0", "GPU5"): "SYS",
            ("GPU0", "mlx5_0"): "PIX",
            ("GPU0", "mlx5_1"): "PHB",
            ("mlx5_2", "GPU4"): "PIX",
            ("mlx5_3", "mlx5_2"): "PHB",
        },
        {"GPU0": ("0-19,40-59", None, None), "GPU7": ("0-19,40-59", None, None)},
        {"mlx5_2": "mlx5_2", "mlx5_1": "mlx5_1"},
        False,
        0,
    ),
    (
        "v100_nv1_nv2_one_mlx5.txt",
        9,
        8,
        {("GPU0", "mlx5_0"): "NODE", ("GPU2", "mlx5_0"): "PIX", ("GPU4", "GPU7"): "NV2"},
        {"GPU0": ("0-11,24-35", None, None), "GPU5": ("12-23,36-47", None, None)},
        {"mlx5_0": "mlx5_0"},
        False,
        0,
    ),
    (
        "dgx2_16gpu_nv6_raw_mlx5.txt",
        26,
        16,
        {
            ("GPU0", "GPU15"): "NV6",
            ("GPU0", "mlx5_0"): "PIX",
            ("GPU0", "mlx5_1"): "PXB",
            ("GPU2", "mlx5_1"): "PIX",
            ("GPU0", "mlx5_2"): "NODE",
            ("GPU0", "mlx5_9"): "SYS",
            ("GPU15", "mlx5_7"): "PIX",
        },
        {"GPU0": ("0-23,48-71", None, None), "GPU15": ("24-47,72-95", None, None)},
        {"mlx5_9": "mlx5_9"},
        False,
        0,
    ),
    (
        "k8s_2017_mlx4_trailing_spaces.txt",
        9,
        8,
        {("GPU0", "GPU1"): "PIX", ("GPU0", "mlx4_0"): "PHB", ("GPU4", "mlx4_0"): "SYS", ("GPU7", "GPU6"): "PIX"},
        {"GPU0": ("0-9,20-29", None, None), "GPU7": ("10-19,30-39", None, None)},
        {"mlx4_0": "mlx4_0"},
        False,
        0,
    ),
    (
        "p100_2017_soc_comment.txt",
        2,
        2,
        {("GPU0", "GPU1"): "SYS"},
        {"GPU0": ("0-5", None, None), "GPU1": ("6-11", None, None)},
        {},
        True,
        0,
    ),
    (
        "k80_2017_soc_legend.txt",
        4,
        4,
        {("GPU0", "GPU1"): "PIX", ("GPU0", "GPU2"): "SYS"},
        {"GPU3": ("12-23,36-47", None, None)},
        {},
        True,
        0,
    ),
    (
        "tesla_p4_single_gpu.txt",
        1,
        1,
        {("GPU0", "GPU0"): "X"},
        {"GPU0": ("0-7", None, None)},
        {},
        False,
        0,
    ),
    (
        "rtx6000ada_4gpu_4nic.txt",
        8,
        4,
        {("GPU0", "GPU1"): "NODE", ("GPU0", "GPU2"): "SYS", ("NIC0", "NIC1"): "PIX", ("GPU3", "NIC3"): "NODE"},
        {"GPU0": ("0-31", "0", None), "GPU3": ("32-63", "1", None)},
        {"NIC3": "mlx5_3"},
        False,
        0,
    ),
    (
        "h100pcie_kvm_one_nic.txt",
        2,
        1,
        {("GPU0", "NIC0"): "PHB", ("NIC0", "NIC0"): "X"},
        {"GPU0": ("0-251", "0", None)},
        {"NIC0": "mlx5_0"},
        False,
        0,
    ),
    (
        "gh200_gpu_numa_id.txt",
        3,
        1,
        {("GPU0", "NIC0"): "NODE", ("NIC0", "NIC1"): "PIX"},
        {"GPU0": ("0-71", "0", 1)},
        {"NIC1": "mlx5_1"},
        False,
        0,
    ),
    (
        "gb200_tray_gpu_numa_ids.txt",
        8,
        4,
        {("GPU0", "GPU3"): "NV18", ("GPU0", "NIC1"): "NODE", ("GPU0", "NIC2"): "SYS"},
        {"GPU0": ("0-71", "0", 2), "GPU1": ("0-71", "0", 10), "GPU2": ("72-143", "1", 18), "GPU3": ("72-143", "1", 26)},
        {"NIC0": "mlx5_0"},
        False,
        0,
    ),
    (
        "rtx4090_ansi_header_no_legend.txt",
        10,
        8,
        {("GPU6", "NIC0"): "PHB", ("NIC0", "NIC1"): "PIX", ("GPU0", "NIC1"): "SYS"},
        {"GPU0": ("0-55,112-167", "0", None), "GPU7": ("56-111,168-223", "1", None)},
        {"NIC0": None, "NIC1": None},
        False,
        0,
    ),
    (
        "hash_prefixed_5090.txt",
        2,
        2,
        {("GPU0", "GPU1"): "PHB"},
        {"GPU0": ("0-63", "0", None), "GPU1": ("0-63", "0", None)},
        {},
        False,
        0,
    ),
    (
        "markdown_indented_wrapped.txt",
        2,
        2,
        {("GPU1", "GPU0"): "NODE"},
        {"GPU1": ("0-15", "0", None)},
        {},
        False,
        0,
    ),
    (
        "a100_nv3_raw_mlx5_tabs.txt",
        8,
        4,
        {("GPU0", "GPU1"): "NV3", ("GPU0", "GPU2"): "SYS", ("mlx5_0", "mlx5_1"): "PIX", ("mlx5_3", "GPU3"): "NODE"},
        {"GPU0": ("0-63", None, None), "GPU3": ("64-127", None, None)},
        {"mlx5_3": "mlx5_3"},
        False,
        0,
    ),
    (
        "h20_40dev_glued_header.txt",
        40,
        8,
        {
            ("GPU0", "NIC0"): "PIX",
            ("GPU0", "NIC4"): "NODE",
            ("GPU0", "NIC16"): "SYS",
            ("GPU7", "NIC28"): "PIX",
            ("GPU7", "NIC29"): "PIX",
            ("NIC28", "NIC29"): "PIX",
            ("NIC9", "NIC10"): "PIX",
            ("NIC11", "NIC12"): "NODE",
            ("NIC31", "NIC0"): "SYS",
        },
        {"GPU0": ("0-47,96-143", "0", None), "GPU7": ("48-95,144-191", "1", None)},
        {"NIC29": "mlx5_29", "NIC30": "mlx5_bond_0", "NIC31": "mlx5_stor_0"},
        False,
        0,
    ),
    (
        "slurm_cpuset_affinities.txt",
        6,
        4,
        {("GPU0", "NIC0"): "PXB", ("GPU2", "NIC1"): "PXB"},
        # "12" a single CPU, "1-1" normalised to "1", "" an empty CPU set.
        {
            "GPU0": ("12", "3", None),
            "GPU1": ("1", "3", None),
            "GPU2": ("", "1", None),
            "GPU3": ("16-18,144", "1", None),
        },
        {"NIC1": "mlx5_1"},
        False,
        0,
    ),
    (
        "numa_list_affinity.txt",
        2,
        2,
        {("GPU0", "GPU1"): "SYS"},
        {"GPU0": ("0-127", "0-3", None), "GPU1": ("0-7,24-127", "0,3-9", None)},
        {},
        False,
        0,
    ),
    (
        "five_gpu_glued_cells.txt",
        5,
        5,
        {
            ("GPU0", "GPU1"): "SYS",
            ("GPU0", "GPU4"): "SYS",
            ("GPU1", "GPU2"): "PHB",
            ("GPU1", "GPU4"): "NODE",
            ("GPU3", "GPU1"): "NODE",
            ("GPU3", "GPU4"): "PHB",
        },
        {"GPU0": ("8-15,24-31", "1", None), "GPU3": ("0-7,16-23", "0", None), "GPU4": ("0-7,16-23", "0", None)},
        {},
        False,
        1,
    ),
    (
        "pix_phb_glued_numa.txt",
        8,
        8,
        {("GPU3", "GPU2"): "PIX", ("GPU7", "GPU0"): "SYS"},
        {"GPU3": ("0-13,28-41", "0", None), "GPU7": ("14-27,42-55", "1", None)},
        {},
        False,
        2,
    ),
    (
        "v100_glued_nvlink_affinity.txt",
        8,
        8,
        {("GPU3", "GPU7"): "NV1", ("GPU4", "GPU7"): "NV2", ("GPU5", "GPU7"): "NV1", ("GPU7", "GPU5"): "NV1"},
        {"GPU3": ("0-19,40-59", "0", None), "GPU4": ("20-39,60-79", "1", None), "GPU5": ("20-39,60-79", "1", None)},
        {},
        False,
        3,
    ),
    (
        "fully_glued_html_table.txt",
        3,
        3,
        {("GPU0", "GPU1"): "NODE", ("GPU2", "GPU2"): "X", ("GPU2", "GPU1"): "NODE"},
        # "0-310N/A": CPUs 0-31 + node 0, or CPUs 0-3 + node 10: nothing decides.
        {"GPU0": (None, None, None), "GPU2": (None, None, None)},
        {},
        False,
        3,
    ),
]


def test_every_sample_has_a_case():
    covered = {case[0] for case in CASES}
    # paste_*.txt are whole pastes, read leniently: tests/core/parse/test_pastes.py covers them;
    # verdict_*.txt are the findings' inputs: tests/core/findings/test_verdicts.py
    assert covered == {p.name for p in SAMPLES.glob("*.txt") if not p.name.startswith(("paste_", "verdict_"))}
    assert len(covered) >= 15


@pytest.mark.parametrize(
    "name, n, gpus, cells, affinities, rdma, legacy, n_warnings",
    CASES,
    ids=[case[0] for case in CASES],
)
def test_sample(name, n, gpus, cells, affinities, rdma, legacy, n_warnings):
    m = parse(name)
    assert len(m.devices) == n
    assert len(m.cells) == n and all(len(row) == n for row in m.cells)
    assert sum(d.kind == "gpu" for d in m.devices) == gpus
    assert all(d.kind == ("gpu" if d.label.startswith("GPU") else "nic") for d in m.devices)
    for (a, b), token in cells.items():
        assert m.cell(a, b) == token, (a, b)
    for gpu, (cpu, numa, gpu_numa) in affinities.items():
        d = m.device(gpu)
        assert (cpus_text(d.cpu_affinity), d.numa_affinity, d.gpu_numa_id) == (cpu, numa, gpu_numa), gpu
    for label, name_ in rdma.items():
        assert m.device(label).rdma_name == name_
    assert m.legacy_soc is legacy
    assert len(m.warnings) == n_warnings, m.warnings
    # Every sample but the mangled ones is a clean square: X on the diagonal, symmetric.
    for i in range(n):
        assert m.cells[i][i] == "X"
        for j in range(n):
            assert m.cells[i][j] == m.cells[j][i]
    # No "?" survives in any sample: every cell was read.
    assert all("?" not in row for row in m.cells)


def test_nic_rows_have_no_affinity():
    m = parse("h100_nv18_9nic_tabs.txt")
    nics = [d for d in m.devices if d.kind == "nic"]
    assert len(nics) == 9
    for d in nics:
        assert (d.cpu_affinity, d.numa_affinity, d.gpu_numa_id) == (None, None, None)


def test_lookup_by_rdma_name():
    m = parse("h100_nv18_9nic_tabs.txt")
    assert m.cell("GPU3", "mlx5_5") == "PIX"
    assert m.index("mlx5_5") == m.index("NIC5") == 13
    assert m.labels[:2] == ("GPU0", "GPU1")
    with pytest.raises(KeyError):
        m.cell("GPU0", "mlx5_99")


def test_unresolved_affinity_is_recorded_and_warned():
    m = parse("fully_glued_html_table.txt")
    d = m.device("GPU0")
    assert d.unresolved_affinity == "0-310N/A"
    assert "could be read as" in m.warnings[0] and "left unknown" in m.warnings[0]
    assert "CPU Affinity '0-31', NUMA Affinity '0'" in m.warnings[0]
    assert "CPU Affinity '0-3', NUMA Affinity '10'" in m.warnings[0]


def test_glue_resolution_names_its_evidence():
    m = parse("pix_phb_glued_numa.txt")
    assert m.warnings[0].startswith("GPU3: glued text '0-13,28-410")
    assert "decided by the same affinities on another row" in m.warnings[0]
    m = parse("v100_glued_nvlink_affinity.txt")
    assert any("GPU5" in w and "decided by the symmetric cell" in w for w in m.warnings)
    assert any("GPU3" in w and "only reading that fits" in w for w in m.warnings)


# Small inline cases: one quirk each.
HDR = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"


@pytest.mark.parametrize(
    "text, cpu0, numa0, cell01",
    [
        # Plain modern layout, no final newline.
        (HDR + "GPU0\t X \tNV4\t0-47\t0\t\tN/A\nGPU1\tNV4\t X \t0-47\t0\t\tN/A", "0-47", "0", "NV4"),
        # CRLF line ends and trailing spaces.
        (
            HDR.replace("\n", "  \r\n") + "GPU0\t X \tPIX\t0-3\t0\t\tN/A  \r\nGPU1\tPIX\t X \t0-3\t0\t\tN/A\r\n",
            "0-3",
            "0",
            "PIX",
        ),
        # Affinity glued to the last cell.
        (HDR + "GPU0\t X \tSYS0-47,96-143\t0\t\tN/A\nGPU1\tSYS\t X \t48-95\t1\t\tN/A\n", "0-47,96-143", "0", "SYS"),
        # Glued cells and glued header.
        (
            "GPU0GPU1CPU AffinityNUMA AffinityGPU NUMA ID\nGPU0 XNODE 0-7 0 N/A\nGPU1 NODEX 0-7 0 N/A\n",
            "0-7",
            "0",
            "NODE",
        ),
        # Label glued to X and the diagonal cell.
        ("   GPU0   GPU1   CPU Affinity\nGPU0X   NV2   4-7\nGPU1NV2X   4-7\n", "4-7", None, "NV2"),
        # ANSI codes (underline, reset, sgr0 charset).
        (
            "\x1b[4m"
            + HDR.rstrip("\n")
            + "\x1b[0m\n\x1b(B\x1b[mGPU0\t X \tNV18\t0-1\t0\t\tN/A\nGPU1\tNV18\t X \t0-1\t0\t\tN/A\n",
            "0-1",
            "0",
            "NV18",
        ),
        # Single CPU, written as a degenerate range.
        (HDR + "GPU0\t X \tPHB\t5-5\t0\t\tN/A\nGPU1\tPHB\t X \t6\t0\t\tN/A\n", "5", "0", "PHB"),
        # Empty CPU affinity (the caller's cpuset holds none of the local CPUs).
        (HDR + "GPU0\t X \tPHB\t\t0\t\tN/A\nGPU1\tPHB\t X \t6\t0\t\tN/A\n", "", "0", "PHB"),
        # "N/A" glued to the NUMA value.
        (HDR + "GPU0\t X \tSYS\t0-7\t0N/A\nGPU1\tSYS\t X \t8-15\t1\t\tN/A\n", "0-7", "0", "SYS"),
        # Old driver: no NUMA columns, SOC.
        ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tSOC\t0-5\nGPU1\tSOC\t X \t6-11\n", "0-5", None, "SYS"),
    ],
)
def test_quirks(text, cpu0, numa0, cell01):
    m = parse_topo_matrix(text)
    assert m.labels == ("GPU0", "GPU1")
    assert cpus_text(m.device("GPU0").cpu_affinity) == cpu0
    assert m.device("GPU0").numa_affinity == numa0
    assert m.cell("GPU0", "GPU1") == cell01 == m.cell("GPU1", "GPU0")


@pytest.mark.parametrize("links", range(1, 19))
def test_nvlink_counts_1_to_18(links):
    text = f"\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV{links}\t0-7\nGPU1\tNV{links}\t X \t0-7\n"
    assert parse_topo_matrix(text).cell("GPU0", "GPU1") == f"NV{links}"


def test_ambiguous_glue_without_evidence_is_left_unknown():
    text = HDR + "GPU0\t X \tSYS\t0-45,92-1370\t\tN/A\nGPU1\tSYS\t X \t0-45,92-1370\t\tN/A\n"
    m = parse_topo_matrix(text)
    # 0-45,92-137 + node 0, or 0-45,92-13 ... (invalid), or an empty CPU set + nodes
    # 0-45,92-1370 (invalid: node ids stop at 1023): only one reading is valid per row.
    assert cpus_text(m.device("GPU0").cpu_affinity) == "0-45,92-137"
    assert m.device("GPU0").numa_affinity == "0"

    text = HDR + "GPU0\t X \tSYS\t0-630\t\tN/A\nGPU1\tSYS\t X \t0-630\t\tN/A\n"
    m = parse_topo_matrix(text)
    # "0-63" + node 0, or "0-6" + node 30: both valid, nothing else to go by.
    for gpu in ("GPU0", "GPU1"):
        d = m.device(gpu)
        assert (cpus_text(d.cpu_affinity), d.numa_affinity) == (None, None)
        assert d.unresolved_affinity == "0-630 N/A"
    assert all("left unknown" in w for w in m.warnings)


def test_ambiguous_glue_resolved_by_cpu_count_and_other_rows():
    # The other socket's row is clean: 64 CPUs on node 1.  "0-630" as 0-63 + node 0 has
    # the same CPU count; 0-6 + node 30 has not.
    text = HDR + "GPU0\t X \tSYS\t0-630\t\tN/A\nGPU1\tSYS\t X \t64-127\t1\t\tN/A\n"
    m = parse_topo_matrix(text)
    assert cpus_text(m.device("GPU0").cpu_affinity) == "0-63"
    assert m.device("GPU0").numa_affinity == "0"
    assert "the CPU count of another row" in m.warnings[0]


def _three_gpus(row2_first_cell: str, cpu1: str) -> str:
    # GPU0's last cell (to GPU2) is glued to its CPU list: "NV110-17" is NV11 + "0-17" or
    # NV1 + "10-17"; both fit the CPU Affinity column.
    return (
        "\tGPU0\tGPU1\tGPU2\tCPU Affinity\n"
        "GPU0\t X \tNV2\tNV110-17\n"
        f"GPU1\tNV2\t X \tNV2\t{cpu1}\n"
        f"GPU2\t{row2_first_cell}\tNV2\t X \t40-59\n"
    )


def test_nvlink_glue_resolved_by_the_symmetric_cell():
    m = parse_topo_matrix(_three_gpus("NV11", "20-39"))
    assert m.cell("GPU0", "GPU2") == "NV11"
    assert cpus_text(m.device("GPU0").cpu_affinity) == "0-17"
    assert "decided by the symmetric cell" in m.warnings[0]


def test_nvlink_glue_left_unknown_without_evidence():
    # The symmetric cell is unreadable and no other row shares a CPU list or CPU count.
    m = parse_topo_matrix(_three_gpus("C2C", "20-39"))
    assert m.cell("GPU0", "GPU2") == "?"
    assert m.device("GPU0").cpu_affinity is None
    assert m.device("GPU0").unresolved_affinity == "NV110-17"
    assert any(w == "GPU0/GPU2: cell could be NV1 or NV11; left unknown" for w in m.warnings)


def test_nvlink_glue_resolved_by_cpu_count():
    # GPU1 has 8 CPUs, like "10-17": NV1 + "10-17".
    m = parse_topo_matrix(_three_gpus("C2C", "20-27"))
    assert m.cell("GPU0", "GPU2") == "NV1"
    assert cpus_text(m.device("GPU0").cpu_affinity) == "10-17"


def test_unknown_cell_token_becomes_question_mark():
    text = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tC2C\t0-7\nGPU1\tC2C\t X \t0-7\n"
    m = parse_topo_matrix(text)
    assert m.cell("GPU0", "GPU1") == "?"
    assert cpus_text(m.device("GPU0").cpu_affinity) == "0-7"
    assert any("unreadable cell 'C2C'" in w for w in m.warnings)


def test_asymmetry_and_missing_legend_entry_are_warned():
    text = (
        "\tGPU0\tNIC0\tCPU Affinity\nGPU0\t X \tPIX\t0-7\nNIC0\tPXB\t X \n\n"
        "NIC Legend:\n\n  NIC0: mlx5_0\n  NIC7: mlx5_7\n"
    )
    m = parse_topo_matrix(text)
    assert m.device("NIC0").rdma_name == "mlx5_0"
    assert any("GPU0/NIC0 is PIX but NIC0/GPU0 is PXB" in w for w in m.warnings)
    assert any("NIC7" in w for w in m.warnings)


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "no nvidia-smi topo -m header"),
        ("hello world\nthis is not a matrix\n", "no nvidia-smi topo -m header"),
        ("\tGPU0\tGPU0\tCPU Affinity\nGPU0\t X \tNV1\t0\n", "appears twice"),
        ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV1\t0-3\n", "have no row (first: GPU1)"),
        ("\tNIC0\tGPU0\tCPU Affinity\nNIC0\t X \tPIX\nGPU0\tPIX\t X \t0\n", "no nvidia-smi"),
    ],
)
def test_garbage_raises_one_clear_error(text, message):
    with pytest.raises(TopoParseError) as info:
        parse_topo_matrix(text)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_non_text_raises():
    with pytest.raises(TopoParseError):
        parse_topo_matrix(b"GPU0")  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(8))
def test_fuzz_parses_or_raises_topo_parse_error(seed):
    rng = random.Random(seed)
    texts = [load(p.name) for p in sorted(SAMPLES.glob("*.txt"))]
    for _ in range(400):
        text = mangle(
            rng, rng.choice(texts), "0123456789-, \tNVXSYODEPIHB/A#\n\x1b[m_", ("\t", "    ", " ", "\n", "\t\t")
        )
        try:
            m = parse_topo_matrix(text)
        except TopoParseError as exc:
            assert "\n" not in str(exc)
            continue
        n = len(m.devices)
        assert len(m.cells) == n and all(len(row) == n for row in m.cells)
