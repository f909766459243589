"""NVIDIA's GPU platforms (topoagent.core.platform): the three complex kinds of NVIDIA's
``rdma_topo`` (linux-rdma/rdma-core ``kernel-boot/rdma_topo``), their pairing, required ACS,
IOMMU groups and ATS, ``fix acs`` and its grub drop-in, and NVML's fabric registration.

Where ``rdma_topo`` is present it judges every platform fixture too: ``check`` fails exactly on
the BDFs topoagent's platform findings name, ``topology -j`` pairs as topoagent does,
``setpci-acs -n`` proposes the values ``fix acs`` would write and ``write-grub-acs -n`` the same
``config_acs`` line.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.fakenvml import load_recording, make_fake
from tests.fakesysfs import generate, load_machine
from tests.paths import REPO
from topoagent.cli import cli
from topoagent.core.api import scan
from topoagent.core.findings import CATALOGUE
from topoagent.core.findings.doc import example_text
from topoagent.core.parse.vpd import parse_vpd
from topoagent.core.platform import ComplexKind, mask_applied, mask_holds, platform_role
from topoagent.features.act.changes import grub_acs_text

RDMA_TOPO = REPO.parent / "shared" / "tools" / "rdma-topo" / "rdma_topo"
#: Every fixture of a platform kind, and the kind it is.
PLATFORMS = {
    "gb200-tray": ComplexKind.NUMA,
    "gb200-tray-faults": ComplexKind.NUMA,
    "grace-hopper": ComplexKind.NUMA,
    "gb300-tray": ComplexKind.DATA_DIRECT,
    "gb300-tray-faults": ComplexKind.DATA_DIRECT,
    "hgx-b300": ComplexKind.INLINE,
    "hgx-b300-baremetal": ComplexKind.INLINE,
    "hgx-b300-faults": ComplexKind.INLINE,
}
PLATFORM_CODES = ("ACS_PLATFORM_MISMATCH", "IOMMU_GROUP_PLATFORM", "ATS_PLATFORM")
_BDF = re.compile(r"\b[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]\b")


# -- the pure parts ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mask", "control", "applied"),
    [
        ("xx111x1", 0x0011, 0x001D),  # pci=disable_acs_redir cleared both redirects: set them again
        ("xx110x1", 0x001D, 0x0019),  # the DMA port: Request Redirect off, Completion Redirect kept on
        ("xx101x1", 0x001D, 0x0015),  # the GPU port: Completion Redirect off
        ("xx111x0", 0x001D, 0x001C),  # the root port: Source Validation off
        ("xx000x0", 0x001D, 0x0000),  # Inline bare metal: all off
        ("1x111x1", 0x001D, 0x005D),  # Inline virtualized: Direct Translated P2P on
        ("xx111x1", 0x005D, 0x005D),  # an x bit (DirectTrans) is left as it is
    ],
)
def test_masks_as_rdma_topo_combines_them(mask, control, applied):
    assert mask_applied(mask, control) == applied
    assert mask_holds(mask, applied)
    assert mask_holds(mask, control) == (control == applied)


def test_roles_by_id():
    assert platform_role(0x15B3, 0x2100).value == "cx_dma"  # the ConnectX-8 Data Direct DMA function
    assert platform_role(0x15B3, 0x1023).value == "cx_nic"  # ConnectX-8
    assert platform_role(0x15B3, 0x197C).value == "cx_switch"
    assert platform_role(0x10DE, 0x22B1).value == "grace_rp"
    assert platform_role(0x10DE, 0x2330) is None  # a GPU is none of them


def _vpd(*fields: tuple[bytes, bytes], name: bytes = b"NVIDIA ConnectX-8") -> bytes:
    """A VPD image as PCI 3.0 section 6.4 lays it out: the identifier string (0x82), VPD-R (0x90)
    with three-byte keyword headers, the checksum keyword RV, and the end tag (0x78)."""
    body = b"".join(k + bytes([len(v)]) + v for k, v in fields) + b"RV\x01\x00"
    return b"\x82" + len(name).to_bytes(2, "little") + name + b"\x90" + len(body).to_bytes(2, "little") + body + b"x"


def test_vpd_gives_the_name_and_v3():
    info = parse_vpd(_vpd((b"PN", b"900-9X81Q-00CN-ST0"), (b"V3", b"2f3c4b5a6978"), (b"SN", b"MT2439X00001")))
    assert info is not None
    assert info.name == "NVIDIA ConnectX-8"
    assert info.v3 == "2f3c4b5a6978"


@pytest.mark.parametrize("data", [b"", b"\x00" * 8, b"\x82\xff\xff", b"\x90\x05\x00V3"])
def test_vpd_that_is_not_vpd_gives_nothing_or_no_v3(data):
    info = parse_vpd(data)
    assert info is None or info.v3 is None


# -- the fixtures --------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "kind"), sorted(PLATFORMS.items()))
def test_each_fixture_is_its_kind(fixture_root, name, kind):
    topo = scan(fixture_root(name), nvml="off").topology
    assert topo.platform.kind is kind, topo.platform.problem
    assert topo.platform.problem is None


def test_data_direct_rails_pair_by_v3_not_bus_order(fixture_root):
    """NVIDIA's tray pairs across domains: NIC 0000:03:00.0 with the DMA function 0009:03:00.0 and
    the GPU 0009:06:00.0.  The rail, the path NCCL sees (PXB at the DMA function with
    NCCL_IB_DATA_DIRECT's default) and the plan's UCX device follow the complex."""
    result = scan(fixture_root("gb300-tray"), nvml="off")
    topo = result.topology
    bdf = {d.id: d.bdf for d in topo.devices}
    pairs = {bdf[r.gpu]: bdf[r.nic] for r in result.rails.rails if r.nic}
    assert pairs == {
        "0008:06:00.0": "0002:03:00.0",
        "0009:06:00.0": "0000:03:00.0",
        "0018:06:00.0": "0012:03:00.0",
        "0019:06:00.0": "0010:03:00.0",
    }
    assert {r.nccl_path.token if r.nccl_path else None for r in result.rails.rails} == {"PXB"}
    out = CliRunner().invoke(cli, ["plan", "--root", str(fixture_root("gb300-tray")), "--format", "env", "--gpu", "1"])
    assert "export UCX_NET_DEVICES=mlx5_0:1" in out.output.splitlines()  # the NIC 0000:03:00.0
    assert "remote" not in out.output  # NCCL sees it PXB, GPUDirect on


def test_a_correct_platform_raises_no_platform_finding(fixture_root):
    for name in ("gb200-tray", "gb300-tray", "hgx-b300", "hgx-b300-baremetal", "grace-hopper"):
        result = scan(fixture_root(name), nvml="off")
        codes = {f.code for f in result.findings}
        assert not codes & {*PLATFORM_CODES, "ACS_REDIRECT", "PLATFORM_UNRECOGNISED"}, (name, codes)
        assert not [f for f in result.findings if f.severity.label == "critical"], name


def test_a_dma_function_without_vpd_is_not_guessed(tmp_path):
    """A DMA function whose VPD cannot be read (a scan without root) cannot be paired: the host is
    not taken for a Data Direct platform, and the finding says why (rdma_topo refuses it too)."""
    root = generate("gb300-tray", tmp_path / "t")
    (root / "sys/bus/pci/devices/0009:03:00.0/vpd").unlink()
    result = scan(root, nvml="off")
    assert result.topology.platform.kind is None
    assert result.topology.platform.near is ComplexKind.DATA_DIRECT
    found = [f for f in result.findings if f.code == "PLATFORM_UNRECOGNISED"]
    assert len(found) == 1 and found[0].severity.label == "info"
    assert example_text(found[0]) == CATALOGUE["PLATFORM_UNRECOGNISED"].examples[0].text  # docs/findings.md's
    if RDMA_TOPO.is_file():
        run = _rdma_topo(root, "check")
        assert run.returncode != 0 and "Unexpected topology structure" in run.stdout
        assert "0009:03:00.0) does not have a VPD V3" in run.stdout


# -- agreement with rdma_topo ------------------------------------------------------------------------


def _rdma_topo(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RDMA_TOPO_DEVDIR": f"{root}/sys/bus/pci/devices/"}
    return subprocess.run(
        [sys.executable, str(RDMA_TOPO), *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


needs_rdma_topo = pytest.mark.skipif(
    not RDMA_TOPO.is_file(), reason=f"rdma_topo (rdma-core kernel-boot) is absent: no {RDMA_TOPO}"
)


def _stock_kernel(desc: dict) -> dict:
    """hgx-b300-baremetal booted without its ``config_acs`` (a stock kernel command line): every
    port holds the kernel's default where bare metal needs ACS off (xx000x0), and the kernel
    isolates every function in its own IOMMU group."""
    m = desc["machine"]
    m["cmdline"] = m["cmdline"].split(" pci=config_acs=")[0]
    m["acs"] = "SrcValid,ReqRedir,CmpltRedir,UpstreamFwd"
    for bus in desc["rootbus"]:
        bus["tree"] = bus["tree"].replace(" group=seg", "")
    for block in desc.get("blocks", {}).values():
        block["tree"] = block["tree"].replace(" group=seg", "")
    return desc


#: Variants built in the test from a fixture: (fixture, change).
VARIANTS = {"hgx-b300-baremetal-stock": ("hgx-b300-baremetal", _stock_kernel)}
AGREEMENT = sorted(PLATFORMS) + sorted(VARIANTS)


@pytest.fixture(scope="module")
def variant_roots(module_tmp):
    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            base, change = VARIANTS[name]
            made[name] = generate(change(load_machine(base)), module_tmp / name)
        return made[name]

    return get


@pytest.fixture
def platform_root(fixture_root, variant_roots):
    return lambda name: variant_roots(name) if name in VARIANTS else fixture_root(name)


def _kind(text: str) -> str:
    """What a check line or a finding code is about: ``acs``, ``iommu`` or ``ats``."""
    return "acs" if "ACS" in text else "iommu" if "IOMMU" in text.upper() else "ats"


def _named_bdfs(result) -> set[tuple[str, str]]:
    """(kind, BDF) of what topoagent's platform findings name: an ACS finding its port, the
    others their subjects."""
    topo = result.topology
    out: set[tuple[str, str]] = set()
    for f in result.findings:
        if f.code not in PLATFORM_CODES:
            continue
        ids = f.subjects[:1] if f.code == "ACS_PLATFORM_MISMATCH" else f.subjects
        out |= {(_kind(f.code), d.bdf) for i in ids if (d := topo.by_id(i)) is not None and d.bdf}
    return out


@needs_rdma_topo
@pytest.mark.parametrize("name", AGREEMENT)
def test_rdma_topo_check_fails_exactly_where_topoagent_says(platform_root, name):
    root = platform_root(name)
    run = _rdma_topo(root, "check")
    assert "OK" in run.stdout, run.stdout + run.stderr
    failed = {
        (_kind(line), b) for line in run.stdout.splitlines() if line.startswith("FAIL") for b in _BDF.findall(line)
    }
    assert _named_bdfs(scan(root, nvml="off")) == failed


@needs_rdma_topo
@pytest.mark.parametrize("name", AGREEMENT)
def test_rdma_topo_pairs_as_topoagent_does(platform_root, name):
    root = platform_root(name)
    run = _rdma_topo(root, "topology", "-j")
    assert run.returncode == 0, run.stderr
    theirs = set()
    for cx in json.loads(run.stdout):
        if "gpu_bdf" in cx:  # Data Direct, Inline: one NIC PF (and DMA function) per GPU
            theirs.add((cx["rdma_nic_pf_bdf"], cx.get("rdma_dma_bdf"), (cx["gpu_bdf"],)))
            continue
        # NUMA: per node, its NIC PFs (by board; a node with one NIC names it alone) and GPUs
        boards = cx.get("rdma_nic_boards", [])
        pfs = [p for board in boards for n in board["nics"] for p in n["pf_bdfs"]] or [cx["rdma_nic_pf_bdf"]]
        theirs.add((tuple(sorted(pfs)), None, tuple(sorted(cx["gpu_bdfs"]))))
    platform = scan(root, nvml="off").topology.platform
    ours = {
        (c.nics[0] if c.kind is not ComplexKind.NUMA else tuple(sorted(c.nics)), c.dma, tuple(sorted(c.gpus)))
        for c in platform.complexes
    }
    assert ours == theirs


@needs_rdma_topo
@pytest.mark.parametrize("name", AGREEMENT)
def test_fix_acs_proposes_rdma_topos_values(platform_root, name):
    """The run-time values equal ``setpci-acs -n``'s, the drop-in's line ``write-grub-acs -n``'s."""
    root = platform_root(name)
    theirs = {
        m.group(1): int(m.group(2), 16)
        for m in re.finditer(
            r"setpci -r -s (\S+) ECAP_ACS\+0x6\.w=([0-9a-f]{4})", _rdma_topo(root, "setpci-acs", "-n").stdout
        )
    }
    out = CliRunner().invoke(cli, ["fix", "acs", "--root", str(root)]).output
    ours = {
        m.group(1): int(m.group(2), 16) for m in re.finditer(r"ACS control of .*? (\S+) \(.*-> 0x([0-9a-f]{4})", out)
    }
    assert ours == theirs, out
    grub = _rdma_topo(root, "write-grub-acs", "-n").stdout
    line = next((ln for ln in grub.splitlines() if ln.startswith("GRUB_CMDLINE_LINUX")), None)
    if "config-acs.cfg" in out:
        assert line is not None and f"      | {line}" in out.splitlines()
    else:  # nothing to persist (rdma_topo writes an empty value then), or booted with just that
        value = re.search(r'config_acs=\\"([^\\]*)\\"', line or "")
        assert value is None or not value.group(1) or f'pci=config_acs="{value.group(1)}"' in _cmdline(root)


def _cmdline(root: Path) -> str:
    return (root / "proc/cmdline").read_text()


def test_the_drop_in_escapes_its_quotes_for_grub():
    text = grub_acs_text("xx110x1@0009:02:00.0;xx111x0@0009:00:00.0")
    assert 'pci=config_acs=\\"xx110x1@0009:02:00.0;xx111x0@0009:00:00.0\\""' in text
    if shutil.which("bash"):  # /etc/default/grub is sourced by a shell: the line must survive it
        got = subprocess.run(
            ["bash", "-c", f'GRUB_CMDLINE_LINUX="ro"\n{text}\nprintf %s "$GRUB_CMDLINE_LINUX"'],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert got == 'ro pci=config_acs="xx110x1@0009:02:00.0;xx111x0@0009:00:00.0"'


def test_fix_acs_never_clears_a_required_bit(fixture_root):
    """The Inline virtualized host is correctly set: today's generic rule would have cleared
    ReqRedir/CmpltRedir on 24 ports; the platform's rule changes nothing."""
    out = CliRunner().invoke(cli, ["fix", "acs", "--root", str(fixture_root("hgx-b300"))]).output
    assert "Nothing to change" in out
    assert "clear" not in out


# -- NVML fabric -----------------------------------------------------------------------------------


def test_fabric_in_progress_is_a_warning(fixture_root):
    rec = copy.deepcopy(load_recording("gb200_nvl72_tray"))
    rec["gpus"][1]["fabric"] = {"state": "IN_PROGRESS", "clique_id": 0, "health_mask": 0}
    result = scan(fixture_root("gb200-tray"), nvml=make_fake(rec))
    found = [f for f in result.findings if f.code == "NVLINK_FABRIC_NOT_READY"]
    assert [f.subjects for f in found] == [("gpu1",)]
    assert found[0].severity.label == "warning"
    assert example_text(found[0]) == CATALOGUE["NVLINK_FABRIC_NOT_READY"].examples[0].text  # docs/findings.md's


def test_fabric_completed_with_an_error_is_critical(fixture_root):
    rec = copy.deepcopy(load_recording("gb200_nvl72_tray"))
    rec["gpus"][2]["fabric"]["status"] = "NVML_ERROR_INSUFFICIENT_RESOURCES"
    result = scan(fixture_root("gb200-tray"), nvml=make_fake(rec))
    found = [f for f in result.findings if f.code == "NVLINK_FABRIC_NOT_READY"]
    assert [(f.subjects, f.severity.label) for f in found] == [(("gpu2",), "critical")]


def test_fabric_completed_everywhere_is_quiet_and_gives_the_clique(fixture_root):
    result = scan(fixture_root("gb200-tray"), nvml=make_fake("gb200_nvl72_tray"))
    assert not [f for f in result.findings if f.code == "NVLINK_FABRIC_NOT_READY"]
    assert {g.nvml.fabric.clique_id for g in result.topology.gpus if g.nvml and g.nvml.fabric} == {32766}


# -- rails on ties (issue 31 item 12) ---------------------------------------------------------------


def test_a_slower_nic_left_idle_is_reported(tmp_path):
    """epyc-nps2-mixed without its second NUMA node: gpu0 and gpu1 both take the faster ConnectX-7
    (NCCL ranks NETs by path bandwidth first, topo.cc ncclTopoGetLocal), the ConnectX-6 under the
    same switch serves none."""
    desc = load_machine("epyc-nps2-mixed")
    desc["rootbus"] = desc["rootbus"][:1]
    result = scan(generate(desc, tmp_path / "m"), nvml="off")
    found = [f for f in result.findings if f.code == "NIC_SHARED_WHILE_IDLE"]
    assert len(found) == 1
    assert example_text(found[0]) == CATALOGUE["NIC_SHARED_WHILE_IDLE"].examples[0].text  # docs/findings.md's


def test_a_tie_goes_where_nccl_puts_it(fixture_root):
    """Both NICs are SYS from gpu2 and gpu3 (equal bandwidth over the CPU link); NCCL 2.30.7 on this
    sysfs gives rank 3 mlx5_1 (ncclTopoGetLocalNetType spreads the GPUs over equally local NETs)."""
    result = scan(fixture_root("epyc-nps2-mixed"), nvml="off")
    topo = result.topology
    names = {n.id: n.rdma_devices[0] for n in topo.nics}
    assert {r.gpu: names[r.nic] for r in result.rails.rails if r.nic} == {
        "gpu0": "mlx5_0",
        "gpu1": "mlx5_0",
        "gpu2": "mlx5_0",
        "gpu3": "mlx5_1",
    }


def test_an_unrecognised_platform_is_neither_judged_nor_fixed_on_its_connectx_ports(tmp_path):
    """hgx-b300 with one ConnectX-8 whose ATS is off: virtualized or bare metal cannot be told, and
    rdma_topo refuses the host ("CX NICs have different ATS settings").  The generic rule would
    call every redirect on the ConnectX switch ports critical and `fix acs` would clear them, where
    a virtualized host requires them: neither happens, and PLATFORM_UNRECOGNISED says why."""
    desc = load_machine("hgx-b300")
    first, *rest = desc["rootbus"][1]["id"]
    desc["rootbus"][1]["id"] = [first]
    desc["rootbus"][1]["tree"] = desc["blocks"]["cx8"]["tree"].replace(" ats=true", "")
    desc["rootbus"].insert(2, {"id": rest, "node": 0, "tree": "@cx8"})
    root = generate(desc, tmp_path / "t")
    result = scan(root, nvml="off")
    codes = [f.code for f in result.findings]
    assert "PLATFORM_UNRECOGNISED" in codes and "ACS_REDIRECT" not in codes
    out = CliRunner().invoke(cli, ["fix", "acs", "--root", str(root)]).output
    assert "Nothing to change" in out and "PLATFORM_UNRECOGNISED" in out
    if RDMA_TOPO.is_file():
        assert "different ATS settings" in _rdma_topo(root, "check").stdout
