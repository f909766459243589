"""Tests for topoagent.core.render.matrix: nvidia-smi's layout, and parse(render(m)) == m."""

from __future__ import annotations

import msgspec
import pytest

from tests.paths import TESTS
from topoagent.core.parse.nvsmi_topo import TopoDevice, TopoMatrix, parse_topo_matrix
from topoagent.core.render.matrix import LEGEND, render_topo_matrix

SAMPLES = TESTS / "core" / "parse" / "samples" / "nvsmi"
# paste_*: test_pastes.py; verdict_* (the findings' inputs, some with cells glued as posted): test_verdicts.py
NAMES = sorted(p.name for p in SAMPLES.glob("*.txt") if not p.name.startswith(("paste_", "verdict_")))


def _load(name: str) -> str:
    with open(SAMPLES / name, encoding="utf-8", newline="") as f:
        return f.read()


def _facts(m: TopoMatrix):
    """What a round trip must keep: devices (minus the unresolved raw text) and cells."""
    devices = tuple(msgspec.structs.replace(d, unresolved_affinity=None) for d in m.devices)
    return devices, m.cells


@pytest.mark.parametrize("name", NAMES)
def test_round_trip_every_sample(name):
    first = parse_topo_matrix(_load(name))
    text = render_topo_matrix(first)
    again = parse_topo_matrix(text)
    assert _facts(again) == _facts(first)
    assert again.warnings == () or all("glued" in w for w in again.warnings)
    # Rendering is a fixed point after one pass.
    assert render_topo_matrix(again) == text


def test_exact_layout_modern_with_nics():
    m = TopoMatrix(
        devices=(
            TopoDevice("GPU0", "gpu", None, "0-47,96-143", "0", None),
            TopoDevice("GPU1", "gpu", None, "48-95,144-191", "1", None),
            TopoDevice("NIC0", "nic", "mlx5_0"),
        ),
        cells=(("X", "NV18", "PIX"), ("NV18", "X", "SYS"), ("PIX", "SYS", "X")),
    )
    assert render_topo_matrix(m) == (
        "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
        "GPU0\t X \tNV18\tPIX\t0-47,96-143\t0\t\tN/A\n"
        "GPU1\tNV18\t X \tSYS\t48-95,144-191\t1\t\tN/A\n"
        "NIC0\tPIX\tSYS\t X \n"
        "\n"
        "Legend:\n"
        "\n"
        "  X    = Self\n"
        "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n"
        "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node\n"
        "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
        "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n"
        "  PIX  = Connection traversing at most a single PCIe bridge\n"
        "  NV#  = Connection traversing a bonded set of # NVLinks\n"
        "\n"
        "NIC Legend:\n"
        "\n"
        "  NIC0: mlx5_0\n"
    )


def test_legend_matches_what_drivers_print():
    # The legend block of a real capture (samples/nvsmi/rtx6000ada_4gpu_4nic.txt).
    assert LEGEND in _load("rtx6000ada_4gpu_4nic.txt")


def test_old_matrix_renders_without_numa_columns():
    m = parse_topo_matrix(_load("dgx1_v100_raw_mlx5.txt"))
    text = render_topo_matrix(m)
    header = text.splitlines()[0]
    assert header.endswith("\tmlx5_1\tCPU Affinity")
    assert "NUMA" not in header
    assert "NIC Legend" not in text  # raw RDMA names need no legend
    assert text.splitlines()[1] == ("GPU0\t X \tNV1\tNV1\tNV2\tNV2\tSYS\tSYS\tSYS\tSYS\tPIX\tSYS\tPHB\t0-19,40-59")


def test_grace_gpu_numa_id_and_unknowns():
    m = TopoMatrix(
        devices=(
            TopoDevice("GPU0", "gpu", None, "0-71", "0", 1),
            TopoDevice("GPU1", "gpu", None, None, None, None),
        ),
        cells=(("X", "NV18"), ("NV18", "X")),
    )
    lines = render_topo_matrix(m).splitlines()
    assert lines[1] == "GPU0\t X \tNV18\t0-71\t0\t\t1"
    assert lines[2] == "GPU1\tNV18\t X \tN/A\tN/A\t\tN/A"


def test_empty_cpu_affinity_round_trips():
    m = parse_topo_matrix(_load("slurm_cpuset_affinities.txt"))
    text = render_topo_matrix(m)
    assert "GPU2\tNV12\tNV12\t X \tNV12\tSYS\tPXB\t\t1\t\tN/A\n" in text
    assert str(parse_topo_matrix(text).device("GPU2").cpu_affinity) == ""


def test_soc_renders_as_sys():
    m = parse_topo_matrix(_load("p100_2017_soc_comment.txt"))
    assert m.legacy_soc
    text = render_topo_matrix(m)
    assert "SOC" not in text
    assert "GPU0\t X \tSYS\t0-5\n" in text
    assert not parse_topo_matrix(text).legacy_soc


def test_nic_without_legend_entry_is_left_out_of_the_legend():
    m = parse_topo_matrix(_load("rtx4090_ansi_header_no_legend.txt"))
    assert "NIC Legend" not in render_topo_matrix(m)
