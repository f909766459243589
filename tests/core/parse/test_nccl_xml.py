"""The NCCL topology XML parser on real text: NCCL's dumps (OCI's GB300 and H100 files, an excerpt
of NVIDIA/nccl#2097), RCCL's models (ROCm/rccl tools/topo_expl/models), and what a paste does to
them.  Sources and licences: tests/core/parse/samples/nccl_xml/README.md."""

from __future__ import annotations

import pytest

from tests.paths import TESTS
from topoagent.core.cpuset import CpuSet
from topoagent.core.parse.nccl_xml import NcclLink, NcclNet, NcclXmlParseError, read_nccl_xml

SAMPLES = TESTS / "core/parse/samples/nccl_xml"

# NVIDIA/nccl#2097 (a GB300's dual-port CX-8: two Data Direct NETs in one <nic>), as posted,
# inside the <system> and <cpu> a dump has around it.
ISSUE_2097 = """<system version="1">
  <cpu numaid="0" affinity="0000,00000000,000000ff,ffffffff,ffffffff" arch="arm64">
<pci busid="0009:03:00.0">
  <nic>
    <net name="mlx5_0_dma" dev="0" port="1" guid="0x66a9020003f340cc"/>
    <net name="mlx5_1_dma" dev="1" port="1" guid="0x66a9020003f340cc"/>
  </nic>
</pci>
  </cpu>
</system>"""


def test_two_data_direct_nets_in_one_nic():
    t = read_nccl_xml(ISSUE_2097)
    (pci,) = t.pcis
    assert (pci.bdf, pci.parent, pci.cpu, pci.class_code) == ("0009:03:00.0", None, 0, None)
    assert pci.nets == (NcclNet("mlx5_0_dma", None, 1, None), NcclNet("mlx5_1_dma", None, 1, None))
    assert t.cpus[0].affinity == CpuSet(range(72)) and t.cpus[0].arch == "arm64"
    assert t.skipped == ()


def test_an_excerpt_without_its_system_is_refused():
    with pytest.raises(NcclXmlParseError, match="no <system> element"):
        read_nccl_xml(ISSUE_2097.split("\n", 2)[2].rsplit("</cpu>", 1)[0])


@pytest.mark.parametrize(
    "name, version, cpus, pcis, hosts",
    [
        ("oci_gb300mp.xml", 1, 4, 32, 2),  # two hosts' <cpu> elements (a multi-node NVLink dump)
        ("oci_h100_topology.xml", 1, 2, 40, 0),
        ("rccl_topo_8p_rome_n4.xml", 2, 7, 17, 0),  # its licence comment before <system>
        ("rccl_topo_16p1h_vm.xml", 2, 4, 24, 0),
    ],
)
def test_whole_files(name, version, cpus, pcis, hosts):
    t = read_nccl_xml((SAMPLES / name).read_text())
    assert (t.version, len(t.cpus), len(t.pcis), len(t.hosts), t.skipped) == (version, cpus, pcis, hosts, ())


def test_nesting_links_and_speeds_of_an_nccl_dump():
    t = read_nccl_xml((SAMPLES / "oci_gb300mp.xml").read_text())
    by = {p.bdf: p for p in t.pcis if t.cpus[p.cpu].host_hash == t.hosts[0]}
    dma, gpu = by["0008:03:00.0"], by["0008:06:00.0"]
    assert (dma.parent, dma.class_code, dma.vendor_id, dma.device_id) == ("0008:01:00.0", 0x080100, 0x15B3, 0x2100)
    assert [n.name for n in dma.nets] == ["rdma_vf_rail1_dma"] and dma.nets[0].speed_mbps == 800000
    assert gpu.parent == "0008:04:00.0" and gpu.gpu is not None
    assert gpu.gpu.links == (NcclLink("nvlink", "fffffff:ff:ff.0", 18, 0x068000), NcclLink("c2c", None, 5, None))
    assert (by["0008:01:00.0"].link_gts, by["0008:01:00.0"].link_width) == (16.0, 1)


def test_an_rccl_model():
    """``<system version="2">``, a GPU's ``gcn``, XGMI links, and RCCL's ``16 GT/s``."""
    t = read_nccl_xml((SAMPLES / "rccl_topo_8p_rome_n4.xml").read_text())
    gpu = next(p for p in t.pcis if p.bdf == "0000:43:00.0")
    assert gpu.gpu is not None and gpu.gpu.gcn == "906" and gpu.link_gts == 16.0
    assert [lk.target for lk in gpu.gpu.links] == ["0000:26:00.0", "0000:03:00.0"]
    assert {c.numaid for c in t.cpus} == {1, 2, 3, 4, 5, 6, 7}


@pytest.mark.parametrize(
    "text, why",
    [
        ('<system version="1"><cpu numaid="0"><pcie busid="0000:01:00.0"/></cpu></system>', "<pcie> is not an element"),
        ('<system version="1"><cpu numaid="0"><pci class="0x0302"/></cpu></system>', "<pci> without a bus id"),
        ('<system version="1"><cpu numaid="0" affinity="zz"/></system>', "affinity not read"),
        ('<system version="1"><cpu numaid="0"><pci busid="0000:01:00.0">', "never closed"),
        ('<system version="1"><cpu numaid="0"></pci></cpu></system>', "</pci> closes no open <pci>"),
        ('<system version="1"><cpu numaid="0"><nic><net dev="0"/></nic></cpu></system>', "<net> without a name"),
    ],
)
def test_what_it_cannot_read_is_skipped_with_its_line(text, why):
    t = read_nccl_xml(text)
    assert t.skipped and why in t.skipped[0].why
    assert t.skipped[0].first == 1


def test_a_short_bus_id_is_read_as_sysfs_names_it():
    t = read_nccl_xml('<system version="1"><cpu numaid="0"><pci busid="1B:00.0" class="0x030200"/></cpu></system>')
    assert t.pcis[0].bdf == "0000:1b:00.0"
