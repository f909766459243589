"""Cross-checks against nvidia-smi and lspci views of the same host."""

import msgspec

from topoagent.core.api import scan
from topoagent.core.findings import CATALOGUE
from topoagent.core.findings.crosscheck import against_lspci, against_nvidia_smi
from topoagent.core.findings.doc import example_text
from topoagent.core.parse.lspci_verbose import LspciFunction
from topoagent.core.parse.nvsmi_topo import parse_topo_matrix
from topoagent.core.render.matrix import matrix_of, render_topo_matrix


def test_agreeing_matrix_raises_nothing(fixture_root):
    r = scan(fixture_root("dgx-h100"))
    m = parse_topo_matrix(render_topo_matrix(matrix_of(r)))
    assert against_nvidia_smi(r.topology, r.paths, m) == []


def test_nvidia_smis_pxb_across_a_flattened_broadcom_chip_is_expected(fixture_root):
    """nvidia-smi counts both levels of a Broadcom chip that NCCL (and the scan) count as one: PXB
    for our PIX there is no disagreement; PXB for a PIX elsewhere still is."""
    r = scan(fixture_root("dgx-a100-nps4"))
    m = parse_topo_matrix(render_topo_matrix(matrix_of(r)))
    cells = [list(row) for row in m.cells]
    i, j = m.index("GPU0"), m.index("NIC0")
    assert cells[i][j] == "PIX"
    cells[i][j] = cells[j][i] = "PXB"
    assert against_nvidia_smi(r.topology, r.paths, msgspec.structs.replace(m, cells=tuple(map(tuple, cells)))) == []
    r = scan(fixture_root("faulty-gpu-node"))  # PEX890 with one level: PXB is a real disagreement
    m = parse_topo_matrix(render_topo_matrix(matrix_of(r)))
    cells = [list(row) for row in m.cells]
    i, j = (
        m.index("GPU0"),
        next(
            k
            for k, row in enumerate(m.cells)
            if m.cells[m.index("GPU0")][k] == "PIX" and m.devices[k].label.startswith("NIC")
        ),
    )
    cells[i][j] = cells[j][i] = "PXB"
    found = against_nvidia_smi(r.topology, r.paths, msgspec.structs.replace(m, cells=tuple(map(tuple, cells))))
    assert [f.code for f in found] == ["SOURCES_DISAGREE"]


def test_a_differing_cell_and_numa_node_name_both_sources(fixture_root):
    r = scan(fixture_root("dgx-h100"))
    text = render_topo_matrix(matrix_of(r))
    m = parse_topo_matrix(text)
    i, j = m.index("GPU0"), m.index("NIC2")  # NIC2 is mlx5_2... whichever: flip its cell to SYS
    cells = [list(row) for row in m.cells]
    cells[i][j] = cells[j][i] = "SYS" if cells[i][j] != "SYS" else "PIX"
    devices = list(m.devices)
    devices[i] = msgspec.structs.replace(devices[i], numa_affinity="1")
    m = msgspec.structs.replace(m, cells=tuple(map(tuple, cells)), devices=tuple(devices))
    found = against_nvidia_smi(r.topology, r.paths, m)
    assert {f.code for f in found} == {"SOURCES_DISAGREE"}
    assert len(found) == 2
    cell = next(f for f in found if "NUMA" not in f.message)
    assert [e.path.split(":")[0] for e in cell.evidence] == ["nvidia-smi topo -m", "sysfs"]
    assert example_text(cell) == CATALOGUE["SOURCES_DISAGREE"].examples[0].text  # docs/findings.md's
    numa = next(f for f in found if "NUMA" in f.message)
    assert numa.subjects == ("gpu0",) and numa.evidence[1].path.endswith("0000:1b:00.0/numa_node")


def test_extra_device_in_nvidia_smi(fixture_root):
    r = scan(fixture_root("workstation"))
    m = parse_topo_matrix(
        "\tGPU0\tGPU1\tGPU2\tCPU Affinity\n"
        "GPU0\t X \tPHB\tPHB\t0-15\nGPU1\tPHB\t X \tPHB\t0-15\nGPU2\tPHB\tPHB\t X \t0-15\n"
    )
    found = against_nvidia_smi(r.topology, r.paths, m)
    assert any(f.subjects == ("GPU2",) for f in found)


def test_lspci_width_and_numa(fixture_root):
    r = scan(fixture_root("dgx-h100"))
    gpu = r.topology.gpus[0]
    agree = LspciFunction(
        bdf=gpu.bdf,
        class_name="3D controller",
        description="H100",
        numa_node=gpu.numa_node,
        link_width=gpu.link.current_width,
    )
    assert against_lspci(r.topology, (agree,)) == []
    differ = msgspec.structs.replace(agree, numa_node=1, link_width=8)
    found = against_lspci(r.topology, (differ,))
    assert len(found) == 2 and all(f.subjects == (gpu.id,) for f in found)
    assert any("x8" in f.message and "x16" in f.message for f in found)


def _tool(argv, stdout="", error=None):
    from topoagent.core.read.tools import ToolResult

    return ToolResult(tuple(argv), None if error else 0, stdout, "", error)


def test_cross_check_runs_tools_and_records_sources(fixture_root):
    from topoagent.core.api import Inputs, run

    r = scan(fixture_root("dgx-h100"))
    text = render_topo_matrix(matrix_of(r))
    bad = text.replace("\t0\t\tN/A", "\t1\t\tN/A", 1)  # GPU0's NUMA affinity: 0 -> 1
    checked = run(
        Inputs(
            root=str(fixture_root("dgx-h100")),
            cross_check=True,
            runners={
                "nvidia-smi": lambda: _tool(["nvidia-smi", "topo", "-m"], bad),
                "lspci": lambda: _tool(["lspci", "-D", "-vvv", "-nn"], error="not installed"),
            },
        )
    )
    sources = {s.name: s.status for s in checked.snapshot.sources}
    assert sources["nvidia-smi"] == "ok" and sources["lspci"] == "unavailable"
    (f,) = [f for f in checked.findings if f.code == "SOURCES_DISAGREE"]
    assert f.subjects == ("gpu0",)
    assert len(checked.findings) == len(r.findings) + 1


def test_cross_check_on_this_host_with_real_lspci():
    import shutil

    import pytest

    from topoagent.core.api import Inputs, run

    if not shutil.which("lspci"):
        pytest.skip("lspci (pciutils) not installed")
    checked = run(Inputs(root="/", nvml="off", cross_check=True))
    lspci = next(s for s in checked.snapshot.sources if s.name == "lspci")
    assert lspci.status == "ok", lspci
    # lspci reads the same sysfs: on this host they must agree.
    assert not [f for f in checked.findings if f.code == "SOURCES_DISAGREE"]


def test_cross_check_refuses_a_fake_root(fixture_root):
    from click.testing import CliRunner

    from topoagent.cli import cli

    res = CliRunner().invoke(cli, ["scan", "--root", str(fixture_root("workstation")), "--cross-check"])
    assert res.exit_code == 2 and "needs a live scan" in res.output
