"""Real NCCL and RCCL topology files read as pastes and judged (tests/core/parse/samples/nccl_xml,
sources and licences in its README).

The expected facts and findings below were written by hand from each file's text (its
``<cpu>``, ``<pci>`` nesting, ``<net>`` and link elements) before the reader was run on it:
NUMA nodes, GPUs, NICs, each GPU's rail class (NCCL's nesting drops root and downstream ports:
devices under one ``<cpu>`` and PCI domain meet at its host bridge, PHB; another domain is NODE;
another ``<cpu>`` SYS; a switch counts once where NCCL flattens a Broadcom Gen5 pair), GPUDirect
RDMA by distance, the GPU links the file states, and the warning or critical codes.  Where the
reader disagreed, the file was read again by hand: the expectation was wrong twice (a GPU whose
rail is PHB has GPUDirect RDMA off as one whose rail is SYS, so those hosts are "off", not
mixed; the 16-GCD VM links 28 pairs, counted from its <xgmi> targets, not 32) and the reader
once (NCCL's nesting puts a Broadcom Gen5 chip's lower level right below its upper one, with no
downstream port between: NCCL flattens the pair there too, PIX on the OCI H100, which the
reader now does).
"""

from __future__ import annotations

import json

import msgspec
import pytest

from tests.paths import REPO
from tests.plan_helpers import run_cli
from topoagent.core.api import analyse
from topoagent.core.findings.finding import Severity
from topoagent.core.parse import segment as seg
from topoagent.core.paste import PasteInput, read_pastes
from topoagent.core.result import ScanResult

SAMPLES = REPO / "tests/core/parse/samples/nccl_xml"


class Expected(msgspec.Struct, frozen=True):
    nodes: tuple[int, ...]
    gpus: int
    nics: int
    rails: frozenset[str]  # each GPU's rail class, NCCL's where it has its own (nccl_class)
    gdr: bool  # every rail's GPUDirect RDMA verdict by distance
    links: int  # GPU pairs the file links (NVLink or XGMI)
    warnings: frozenset[str] = frozenset()  # codes at warning or critical
    hosts: int = 1


def _e(nodes, gpus, nics, rails, gdr, links, warnings=(), hosts=1) -> Expected:
    return Expected(tuple(nodes), gpus, nics, frozenset(rails), gdr, links, frozenset(warnings), hosts)


VIA_HB = "GPU_NIC_VIA_HOST_BRIDGE"
CROSS = "GPU_NIC_CROSS_NUMA"
EXPECTED = {
    # OCI GB300 multiplanar: two hosts (host_hash); per host 2 Grace CPUs, 4 GB300 on NVLink
    # (18 links to the NVSwitch trays), each beside its CX-8 Data Direct DMA function, which is
    # NCCL's NET (rdma_vf_railN_dma): PXB under the CX-8 switch, GDR on.
    "oci_gb300mp.xml": _e([0, 1], 4, 4, ["PXB"], True, 6, hosts=2),
    # OCI B300 multiplanar: 8 B300, each with its CX-8 NIC (rail VF) below the CX-8's switch,
    # under two Broadcom levels: PXB, GDR on; NV18 through NVSwitches.
    "oci_b300mp.xml": _e([0, 1], 8, 8, ["PXB"], True, 28),
    # OCI H100 (BM.GPU.H100.8): GPU and dual-port CX-7 below one Broadcom Gen5 chip whose two
    # levels NCCL flattens (subsystem 0x0072 above, 0x1003 below): PIX; NVSwitch links NV18.
    "oci_h100_topology.xml": _e([0, 1], 8, 8, ["PIX"], True, 28),
    "oci_h100_topology_kubernetes.xml": _e([0, 1], 8, 8, ["PIX"], True, 28),
    # RCCL MI300X: each GPU two levels below a CX-7's switch that also holds its NIC: PXB; XGMI
    # between every pair.
    "rccl_topo_8p_940.xml": _e([0, 1], 8, 8, ["PXB"], True, 28),
    # RCCL MI300X VM: every GPU and NIC alone in its own PCI domain: NODE on its node.
    "rccl_topo_8p_940vm.xml": _e([0, 1], 8, 8, ["NODE"], False, 28, [VIA_HB]),
    # RCCL MI300A (4 APUs, Slingshot cxi NICs), one per node, GPU and NIC under one <cpu>: PHB.
    "rccl_topo_4p_940.xml": _e([0, 1, 2, 3], 4, 4, ["PHB"], False, 6, [VIA_HB]),
    # RCCL MI355X: each GPU below an AMD bridge under a Broadcom switch (OEM subsystem, not
    # flattened) with a Thor2 (bnxt_re): PXB; XGMI between every pair.
    "rccl_topo_8p_950.xml": _e([0, 1], 8, 8, ["PXB"], True, 28),
    # RCCL Rome NPS1 (MI50, XGMI rings of 2 links): the one NIC on node 1: PHB there, SYS from node 0.
    "rccl_topo_8p_rome.xml": _e([0, 1], 8, 1, ["PHB", "SYS"], False, 8, [VIA_HB, CROSS]),
    # Rome NPS2: four nodes, the NIC on node 2 with two GPUs (PHB); six GPUs SYS.
    "rccl_topo_8p_rome_n2.xml": _e([0, 1, 2, 3], 8, 1, ["PHB", "SYS"], False, 8, [VIA_HB, CROSS]),
    # Rome NPS4: seven nodes, the NIC alone on node 4: every GPU SYS.
    "rccl_topo_8p_rome_n4.xml": _e([1, 2, 3, 4, 5, 6, 7], 8, 1, ["SYS"], False, 8, [CROSS]),
    # MI100 hive of 8 (XGMI to 6 peers each) with 1..6 NICs on the CPUs' own buses.
    "rccl_topo_8p6l_1nic.xml": _e([0, 1], 8, 1, ["PHB", "SYS"], False, 24, [VIA_HB, CROSS]),
    "rccl_topo_8p6l_2nic.xml": _e([0, 1], 8, 2, ["PHB"], False, 24, [VIA_HB]),
    "rccl_topo_8p6l_3nic.xml": _e([0, 1], 8, 3, ["PHB"], False, 24, [VIA_HB]),
    "rccl_topo_8p6l_4nic.xml": _e([0, 1], 8, 4, ["PHB"], False, 24, [VIA_HB]),
    "rccl_topo_8p6l_5nic.xml": _e([0, 1], 8, 5, ["PHB"], False, 24, [VIA_HB]),
    "rccl_topo_8p6l_6nic.xml": _e([0, 1], 8, 6, ["PHB"], False, 24, [VIA_HB]),
    # RCCL 16 x MI250X GCDs in a VM: every device in its own domain, two NICs per node: NODE.
    "rccl_topo_16p1h_vm.xml": _e([0, 1, 2, 3], 16, 8, ["NODE"], False, 28, [VIA_HB]),
}


def _read(name: str) -> ScanResult:
    return analyse(read_pastes([PasteInput(f"--paste {name}", (SAMPLES / name).read_text())]))


def test_every_sample_is_expected_and_every_expectation_has_its_sample():
    assert sorted(p.name for p in SAMPLES.glob("*.xml")) == sorted(EXPECTED)
    assert len([n for n in EXPECTED if n.startswith("rccl_")]) >= 10


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_topology_file_is_recognised_read_and_judged(name: str) -> None:
    want = EXPECTED[name]
    text = (SAMPLES / name).read_text()
    assert seg.find_outputs(text).kinds() == (seg.NCCL_XML,)
    r = _read(name)
    topo = r.topology
    assert tuple(n.id for n in topo.nodes) == want.nodes
    assert (len(topo.gpus), len(topo.nics)) == (want.gpus, want.nics)
    rails = [r.rails.rail(g.id) for g in topo.gpus]
    assert all(x is not None and x.nic is not None for x in rails)
    assert {x.nccl_class.name for x in rails if x and x.nccl_class} == want.rails
    assert {x.gdr for x in rails if x} == {want.gdr}
    linked = {(p.a, p.b) for p in r.paths if p.nvlinks or p.xgmi}
    assert len(linked) == want.links
    serious = {f.code for f in r.findings if f.severity >= Severity.WARNING}
    assert serious == want.warnings
    hosts = next(s for s in r.snapshot.sources if s.name == seg.NCCL_XML.evidence)
    assert (hosts.detail or "").startswith(f"the file holds {want.hosts} hosts") is (want.hosts > 1)


def test_every_finding_cites_the_file_or_an_inference():
    """Evidence of a pasted NCCL topology is the file's (pasted proof) or inferred from it."""
    lines = [
        e.path
        for name in ("oci_gb300mp.xml", "rccl_topo_8p_rome_n4.xml")
        for f in _read(name).findings
        for e in f.evidence
    ]
    assert lines
    assert all(not ln.startswith(("lspci", "/sys", "nvidia-smi")) for ln in lines), lines


def test_the_cli_reads_a_topology_file_given_with_paste() -> None:
    out = run_cli("plan", "--paste", str(SAMPLES / "oci_gb300mp.xml"), "--format", "rails")
    assert out.returncode == 0, out.stderr
    rails = json.loads(out.stdout)
    assert rails["nics"] == {f"{d}:03:00.0": [f"rail{i}"] for i, d in enumerate(("0008", "0009", "0018", "0019"))}
    assert {
        r[0]["path"]
        for g in rails["gpus"].values()
        for r in g["rails"].values()
        if r[0]["nic"][:4] == g["pciAddress"][:4]
    } == {"PXB"}


def test_a_dump_in_a_bug_report_is_found_with_its_command():
    """As people post one: prose, a prompt with the command, the file, prose again."""
    dump = (SAMPLES / "rccl_topo_8p_rome_n4.xml").read_text()
    text = f"NCCL picks the wrong NIC here.\n\n$ cat /tmp/topo.xml\n{dump}\nAny idea why?\n"
    found = seg.find_outputs(text)
    (segment,) = found.segments
    assert (segment.kind, segment.command) == (seg.NCCL_XML, "cat /tmp/topo.xml")
    r = analyse(read_pastes([PasteInput("report", text)]))
    assert len(r.topology.gpus) == 8 and [s.where for s in found.unrecognised] == [
        "line 1",
        f"line {text.count(chr(10))}",
    ]
