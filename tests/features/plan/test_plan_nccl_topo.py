"""`plan --format nccl-topo`: the XML NCCL reads as NCCL_TOPO_FILE.

A second, independent reader (xml.etree, written from NCCL's rules rather than from our
topology code) rebuilds the tree from the XML alone and recomputes the path class of every
GPU-GPU and GPU-NIC pair the way NCCL does (src/graph/paths.cc): under different <cpu>
elements SYS; meeting at a <cpu> PHB (NCCL has no NODE); otherwise PIX through one PCIe
switch, PXB through more, counting a Broadcom PEX88xxx/PEX890xx presented as two levels as one
switch where NCCL flattens it (``getBcmGen``, repeated in tests/ncclxml.py).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from tests import ncclxml
from tests.paths import TESTS
from tests.plan_helpers import run_cli, topoagent
from topoagent.core.api import scan
from topoagent.core.pci import DeviceKind

FIXTURES = [
    "dgx-h100",
    "dgx-a100-nps4",
    "wrong-socket-nic",
    "workstation",
    "p4d-efa",
    "faulty-gpu-node",
    "epyc-nps2-mixed",
    "sriov-nic",
    "unprivileged",
]
#: Our classes as NCCL names them: NCCL's PHB covers our PHB and NODE (REFERENCE §4).
AS_NCCL = {"PIX": "PIX", "PXB": "PXB", "PHB": "PHB", "NODE": "PHB", "SYS": "SYS"}


class Reader:
    """The XML's tree: parents, the <cpu> above each <pci>, GPUs and NICs by busid."""

    def __init__(self, text: str) -> None:
        self.root = ET.fromstring(text)
        assert self.root.tag == "system" and self.root.get("version") == "1"
        self.parent: dict[ET.Element, ET.Element] = {}
        for el in self.root.iter():
            for child in el:
                self.parent[child] = el
        self.gpus = {p.get("busid"): p for p in self.root.iter("pci") if p.find("gpu") is not None}
        self.nics = {p.get("busid"): p for p in self.root.iter("pci") if p.find("nic") is not None}

    def chain(self, el: ET.Element) -> list[ET.Element]:
        """Ancestors of a <pci>, nearest first, up to and including its <cpu>."""
        out = []
        while el in self.parent:
            el = self.parent[el]
            out.append(el)
            if el.tag == "cpu":
                break
        return out

    def _chip(self, el: ET.Element) -> ET.Element:
        """The upper level of a Broadcom switch presented as two, where NCCL flattens them."""
        up = self.parent.get(el)
        if up is not None and up.tag == "pci":
            gen = ncclxml.bcm_gen(_ids(up), 0)
            if gen and ncclxml.bcm_gen(_ids(el), 1) == gen:
                return up
        return el

    def top(self, el: ET.Element) -> ET.Element:
        """The <pci> right below the <cpu> that holds ``el``."""
        chain = [el, *self.chain(el)]
        return chain[-2]

    def cls(self, a: str, b: str) -> str:
        ea = self.gpus.get(a) or self.nics[a]
        eb = self.gpus.get(b) or self.nics[b]
        ca, cb = self.chain(ea), self.chain(eb)
        if ca[-1] is not cb[-1]:
            return "SYS"
        common = next(x for x in ca if x in cb)
        if common.tag == "cpu":
            return "PHB"
        between = ca[: ca.index(common) + 1] + cb[: cb.index(common)]
        switches = {id(self._chip(x)) for x in between if x.tag == "pci"}
        return "PIX" if len(switches) <= 1 else "PXB"


def _ids(el: ET.Element) -> int:
    return sum(
        int(el.get(k) or "0", 16) << s
        for k, s in (("vendor", 48), ("device", 32), ("subsystem_vendor", 16), ("subsystem_device", 0))
    )


def _xml(root: str) -> str:
    out = run_cli("plan", "--root", root, "--no-nvml", "--format", "nccl-topo")
    assert out.returncode in (0, 1), out.stderr  # 1: a critical finding, as scan exits
    return out.stdout


@pytest.mark.parametrize("name", FIXTURES)
def test_the_xml_describes_the_same_tree(fixture_root, name):
    root = str(fixture_root(name))
    reader = Reader(_xml(root))
    result = scan(root, nvml="off")
    topo = result.topology
    gpus = [d for d in topo.gpus if d.bdf]
    nics = [d for d in topo.nics if d.bdf and not d.is_vf]
    assert set(reader.gpus) == {g.bdf for g in gpus}
    assert set(reader.nics) == {n.bdf for n in nics}

    # Where a device's own numa_node disagrees with the function at the top of its tree
    # (faulty-gpu-node's GPU6), NCCL -- and so the XML -- place it by the top function.
    def misplaced(d) -> bool:
        top = reader.top(reader.gpus.get(d.bdf) or reader.nics[d.bdf])
        return str(d.numa_node if d.numa_node is not None else -1) != reader.parent[top].get("numaid")

    checked, skipped = 0, set()
    for p in result.paths:
        a, b = topo.by_id(p.a), topo.by_id(p.b)
        if DeviceKind.GPU not in (a.kind, b.kind) or a.is_vf or b.is_vf:
            continue
        if misplaced(a) or misplaced(b):
            skipped.update(d.id for d in (a, b) if misplaced(d))
            continue
        assert reader.cls(a.bdf, b.bdf) == AS_NCCL[p.pcie.name], (name, a.id, b.id)
        checked += 1
    assert checked
    assert skipped == ({"gpu6"} if name == "faulty-gpu-node" else set())


def test_cpus_carry_numa_node_affinity_and_identity(fixture_root):
    reader = Reader(_xml(str(fixture_root("dgx-h100"))))
    cpus = {c.get("numaid"): c for c in reader.root.findall("cpu")}
    assert set(cpus) == {"0", "1"}
    mask = int(cpus["0"].get("affinity").replace(",", ""), 16)
    assert {i for i in range(mask.bit_length()) if mask >> i & 1} == set(range(56)) | set(range(112, 168))
    for c in cpus.values():  # every <cpu>, not only the first: NCCL fills only its own GPU's
        assert (c.get("arch"), c.get("vendor"), c.get("familyid"), c.get("modelid")) == (
            "x86_64",
            "GenuineIntel",
            "6",
            "143",
        )
    net = reader.nics["0000:18:00.0"].find("nic/net")
    assert net.get("name") == "mlx5_0" and net.get("speed") == "400000" and net.get("port") == "1"
    # dev (the net plugin's index) and gdr are NCCL's to set on the host
    assert net.get("dev") is None and net.get("gdr") is None
    gpu = reader.gpus["0000:1b:00.0"]
    assert (
        gpu.get("class") == "0x030200" and gpu.get("link_speed") == "32.0 GT/s PCIe" and gpu.get("link_width") == "16"
    )


def test_written_the_way_nccls_own_parser_reads(fixture_root):
    """NCCL's reader (xml.cc xmlGetNode) takes no XML declaration, only double-quoted values
    separated by single spaces, and element names it knows."""
    text = _xml(str(fixture_root("dgx-a100-nps4")))
    assert text.startswith('<system version="1">')
    tag = re.compile(r'^ *(</(system|cpu|pci|nic|gpu)>|<(system|cpu|pci|nic|gpu|net|nvlink)( [a-z_]+="[^"]*")*/?>)$')
    for line in text.splitlines():
        assert tag.match(line), line
    speeds = {p.get("link_speed") for p in Reader(text).root.iter("pci")}
    assert speeds <= {
        "",
        "2.5 GT/s PCIe",
        "5.0 GT/s PCIe",
        "8.0 GT/s PCIe",
        "16.0 GT/s PCIe",
        "32.0 GT/s PCIe",
        "64.0 GT/s PCIe",
    }  # NCCL's kvDictPciGen spellings


def test_pasted_matrix_without_bdfs_is_refused_in_one_line(tmp_path):
    matrix = tmp_path / "topo.txt"
    matrix.write_text("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tNV12\t0-31\t0\nGPU1\tNV12\t X \t0-31\t0\n")
    out = run_cli("plan", "--nvidia-smi-topo", str(matrix), "--format", "nccl-topo")
    assert out.returncode == 2 and "PCI addresses" in out.stderr and "Traceback" not in out.stderr


def test_unknown_identity_is_refused_where_ranks_would_fuse_it_wrong(scratch_root):
    """Without /proc/cpuinfo NCCL would fill each <cpu>'s identity only above its own GPU: with
    several <cpu> the ranks' files differ and fuse into duplicates, so the file is refused."""
    root = scratch_root("dgx-h100")
    (root / "proc" / "cpuinfo").unlink()
    out = topoagent("plan", "--root", str(root), "--no-nvml", "--format", "nccl-topo")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1 and "arch, vendor, familyid, modelid on every <cpu>" in out.stderr


def test_one_cpu_without_identity_is_left_for_nccl_to_fill(tmp_path):
    """With a single <cpu> every rank completes it alike: written without the identity, and NCCL
    (the independent reader) builds what it builds from sysfs."""
    from tests.fakesysfs import generate

    full = generate("sriov-nic", tmp_path / "full")
    bare = generate("sriov-nic", tmp_path / "bare")
    (bare / "proc" / "cpuinfo").unlink()
    text = _xml(str(bare))
    (cpu,) = Reader(text).root.findall("cpu")
    assert cpu.get("arch") is None and cpu.get("affinity")
    assert ncclxml.nccl(str(full), text) == ncclxml.nccl(str(full), None)


def test_pastes_without_pci_ids_are_refused(tmp_path):
    """`lspci -tv` names no subsystem ids: NCCL would add them on each rank's own path only."""
    sample = TESTS / "offline_samples" / "plx4_v100_tv.txt"
    out = topoagent("plan", "--lspci-tree", str(sample), "--format", "nccl-topo")
    assert out.returncode == 2 and "on every <pci>" in out.stderr and "lspci -vvvnn" in out.stderr


def test_a_capture_replayed_elsewhere_names_the_captured_cpu(tmp_path):
    """The CPU identity is a fact of the snapshot (read by the sysfs source, kept by capture):
    the file made from a capture names the captured CPU, whatever CPU replays it."""
    from click.testing import CliRunner

    from tests.fakesysfs import generate
    from tests.plan_helpers import tiny
    from topoagent.cli import cli
    from topoagent.core.snapshot import CpuIdentity
    from topoagent.features.plan.nccl_topo import render

    root = generate(tiny(gpus=1), tmp_path / "tiny")
    (root / "proc/cpuinfo").write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
        "model name\t: AMD EPYC 9654 96-Core Processor\nflags\t\t: fpu\n\n"
    )
    archive = tmp_path / "c.tar.gz"
    out = CliRunner().invoke(cli, ["capture", "-o", str(archive), "--root", str(root)])
    assert out.exit_code == 0, out.output
    result = scan(str(archive), nvml="off")
    want = CpuIdentity(arch="x86_64", vendor="AuthenticAMD", familyid="25", modelid="17")
    assert result.snapshot.cpu_identity == want
    for text in (render(result), run_cli("plan", "--root", str(archive), "--format", "nccl-topo").stdout):
        cpu = ET.fromstring(text).find("cpu")
        assert (cpu.get("arch"), cpu.get("vendor"), cpu.get("familyid"), cpu.get("modelid")) == (
            "x86_64",
            "AuthenticAMD",
            "25",
            "17",
        )


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n", ("x86_64", "GenuineIntel", "6", "143")),
        ("CPU implementer\t: 0x41\nCPU part\t: 0xd4f\n", ("arm64", None, None, None)),
        ("cpu\t\t: POWER9 (raw), altivec supported\n", ("ppc64", None, None, None)),
        ("vendor_id\t: GenuineIntel\ncpu family\t: six\nmodel\t\t: \n", ("x86_64", "GenuineIntel", None, None)),
        ("processor\t: 0\n\nvendor_id\t: GenuineIntel\n", (None, None, None, None)),  # first CPU only
        ("", (None, None, None, None)),
    ],
)
def test_parse_cpu_identity(text, want):
    from topoagent.core.parse.sysfs_values import parse_cpu_identity

    c = parse_cpu_identity(text)
    assert (c.arch, c.vendor, c.familyid, c.modelid) == want
