"""`plan --format nccl-topo` judged by what NCCL makes of it, for every local rank.

`tests/ncclxml.py` repeats NCCL's own steps (load, complete per rank, trim, fuse, build, flatten
Broadcom switches, classify paths) from NCCL's source; with no file it is NCCL's own sysfs
detection.  The file must load and give the same CPUs, NETs, GPU->NET classes and local NETs.
Where NCCL 2.30.7 itself is at hand (the team's nccl-topo-check, outside the repo), it is run too.
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests import ncclxml
from tests.fakenvml import load_recording, make_fake
from tests.fakesysfs import generate, load_machine
from tests.plan_helpers import REPO, topoagent
from topoagent.core.analysis.ncclnet import DMA_SUFFIX, nccl_net_choice
from topoagent.core.analysis.paths import path_index
from topoagent.core.api import scan
from topoagent.core.pathclass import PathClass
from topoagent.features.plan import nccl_topo

#: The fixtures with NVIDIA GPUs and RDMA devices (what NCCL's net plugin lists).
GPU_FIXTURES = [
    "dgx-h100",
    "dgx-a100-nps4",
    "wrong-socket-nic",
    "p4d-efa",
    "faulty-gpu-node",
    "epyc-nps2-mixed",
    "sriov-nic",
    "unprivileged",
    "grace-hopper",
    "gb200-tray",
    "gb200-tray-faults",
    "gb300-tray",
    "gb300-tray-faults",
    "hgx-b300",
    "hgx-b300-baremetal",
    "hgx-b300-faults",
]
#: The fixtures with ConnectX-8 Data Direct DMA functions: judged with each NCCL_IB_DATA_DIRECT.
DATA_DIRECT = ["gb300-tray", "gb300-tray-faults"]
#: Every fixture with NCCL_IB_DATA_DIRECT=1 (NCCL's default); the Data Direct ones with 0 and 2 too.
MODES = [(name, 1) for name in GPU_FIXTURES] + [(name, mode) for name in DATA_DIRECT for mode in (0, 2)]
TOOL = REPO.parent / "shared" / "tools" / "nccl-topo-check"
HARNESS = TOOL / "harness"


def _plan(root: str) -> str:
    out = topoagent("plan", "--root", root, "--no-nvml", "--format", "nccl-topo")
    assert out.returncode in (0, 1), out.stderr  # 1: a critical finding, as scan exits
    return out.stdout


@pytest.mark.parametrize("name, data_direct", MODES)
def test_nccl_builds_from_the_file_what_it_builds_from_sysfs(fixture_root, name, data_direct):
    """The same system, in the same order (NCCL numbers its GPUs and NETs by it), with each
    NCCL_IB_DATA_DIRECT: the file holds a Data Direct NIC's own function and its DMA function,
    and NCCL keeps the one its IB plugin lists."""
    root = str(fixture_root(name))
    text = _plan(root)
    reference, got = ncclxml.nccl(root, None, data_direct), ncclxml.nccl(root, text, data_direct)
    assert (got.cpus, got.nets) == (reference.cpus, reference.nets)
    assert got.paths == reference.paths
    assert list(got.paths) == list(reference.paths)
    # the file itself places every NET of a physical function the IB plugin lists, where it
    # lists it (a VM's sysfs may not say; the file leaves SR-IOV VFs to NCCL)
    placed = {n.attrs["name"]: n.parent.parent.attrs["busid"] for n in ncclxml.parse(text).nodes if n.name == "net"}
    pf = Path(root, "sys/bus/pci/devices")
    listed = {n: b for n, b, _ in ncclxml.Host.of(root, data_direct).nets if not (pf / b / "physfn").exists()}
    assert listed and listed.items() <= placed.items()
    for gpu in reference.paths:
        assert list(got.paths[gpu]) == list(reference.paths[gpu]), gpu
        assert got.local(gpu) == reference.local(gpu), gpu
    # Stricter than any one NCCL release: the full identity on every x86 <cpu>.
    for cpu in (n for n in ncclxml.parse(text).nodes if n.name == "cpu"):
        if cpu.attrs["arch"] == "x86_64":
            assert {"vendor", "familyid", "modelid", "affinity"} <= set(cpu.attrs), cpu.attrs


def _dual_port_tray(tmp_path: Path) -> Path:
    """gb300-tray with the board-0 Prime ConnectX-8 as two PCI functions on one Data Direct DMA
    function, as NVIDIA/nccl#2097 shows a GB300 ("newer dual-port HCAs: each port a separate PCI
    function", mlx5_0_dma and mlx5_1_dma in one <nic> at 0009:03:00.0, one GUID)."""
    desc = load_machine("gb300-tray")
    bus = next(b for b in desc["rootbus"] if b["id"] == "0000:00")
    line = next(ln for ln in bus["tree"].splitlines() if "cx8-ib" in ln)
    nic = line.split("> ", 1)[1]
    bus["tree"] = bus["tree"].replace(line, f"    cx8-switch\n      00.0 {nic}\n      .1 {nic}")
    return generate(desc, tmp_path / "tray")


@pytest.mark.parametrize("data_direct", [0, 1, 2])
def test_two_nics_of_one_dma_function(tmp_path, data_direct):
    root = str(_dual_port_tray(tmp_path))
    text = nccl_topo.render(scan(root, nvml="off"))
    nics = [n for n in ncclxml.parse(text).nodes if n.name == "nic"]
    assert [[x.attrs["name"] for x in n.subs] for n in nics if n.parent.attrs["busid"] == "0009:03:00.0"] == [
        ["mlx5_0_dma", "mlx5_1_dma"]
    ]
    reference, got = ncclxml.nccl(root, None, data_direct), ncclxml.nccl(root, text, data_direct)
    assert got == reference
    assert [list(p) for p in got.paths.values()] == [list(p) for p in reference.paths.values()]
    if data_direct == 1 and not _runnable():  # and NCCL 2.30.7's own code, where it is at hand
        topo = tmp_path / "topo.xml"
        topo.write_text(_as_runner(text, _this_cpu()))
        code, out = _judge(Path(root), topo, tmp_path / "root")
        assert code == 0, out[-3000:]
        _model_agrees(Path(root), out)


def _without_family(text: str) -> str:
    return re.sub(r' familyid="\d+" modelid="\d+"', "", text)


def test_the_reader_sees_what_nccl_did_with_the_old_files(fixture_root):
    """The files before every <cpu> carried familyid/modelid: NCCL 2.30.7 refused the Intel ones
    and fused the AMD NPS4 one into 9 CPUs and 18 NETs (5 and 10 from sysfs)."""
    intel = str(fixture_root("dgx-h100"))
    with pytest.raises(ncclxml.Refused, match="Attribute familyid of node cpu not found"):
        ncclxml.nccl(intel, _without_family(_plan(intel)))
    amd = str(fixture_root("dgx-a100-nps4"))
    fused = ncclxml.nccl(amd, _without_family(_plan(amd)))
    assert (fused.cpus, fused.nets) == (9, 18)
    assert any(t == "SYS" for t in fused.paths["0000:45:00.0"].values() if t != "PIX")
    assert ncclxml.nccl(amd, None).cpus == 5


def test_fusion_matches_only_equal_elements():
    """xml.h xmlFindNode: same name, type and every attribute, or the subtree is added again."""
    a = ncclxml.parse('<system version="1"><cpu numaid="0" arch="x86_64"><pci busid="0000:01:00.0"/></cpu></system>')
    b = ncclxml.parse(
        '<system version="1"><cpu numaid="0" arch="x86_64" familyid="6"><pci busid="0000:02:00.0"/></cpu></system>'
    )
    c = ncclxml.parse('<system version="1"><cpu numaid="0" arch="x86_64"><pci busid="0000:03:00.0"/></cpu></system>')
    fused = ncclxml.fuse([a, b, c])
    assert [len(cpu.subs) for cpu in fused.subs] == [2, 1]


@pytest.mark.parametrize(
    "text, message",
    [
        ('<?xml version="1.0"?><system version="1"/>', "expecting '<'"),
        ('<system version="2"></system>', "wrong version 2"),
        ('<system version="1"><cpu numaid="0"></system>', "Mismatch"),
    ],
)
def test_the_parser_refuses_what_nccls_refuses(text, message):
    with pytest.raises(ncclxml.Refused, match=message):
        ncclxml.parse(text)


@pytest.mark.parametrize(
    "ids, level, gen",
    [
        ((0x1000, 0xC010, 0x1000, 0xA064), 0, 4),  # PEX88xxx, subsystem 1000:axxx: both levels
        ((0x1000, 0xC010, 0x1000, 0xA064), 1, 4),
        ((0x1000, 0xC010, 0x1000, 0x0064), 0, 0),  # Gen4 with another subsystem device
        ((0x1000, 0xC030, 0x1000, 0x0100), 0, 5),  # PEX890xx: 0x0xxx above ...
        ((0x1000, 0xC030, 0x1000, 0x1100), 1, 5),  # ... 0x1xxx below
        ((0x1000, 0xC030, 0x1000, 0x1100), 0, 0),
        ((0x1000, 0xC030, 0x1000, 0xA064), 0, 0),  # Gen5 with a Gen4-style subsystem: two switches
        ((0x1000, 0xC030, 0x15D9, 0x0100), 0, 0),  # an OEM subsystem vendor
    ],
)
def test_bcm_generation(ids, level, gen):
    v, d, sv, sd = ids
    assert ncclxml.bcm_gen(v << 48 | d << 32 | sv << 16 | sd, level) == gen


def _runnable() -> str | None:
    if not HARNESS.exists():
        return f"{HARNESS} is absent"
    if os.geteuid() != 0:
        return "nccl-topo-check needs root (a mount namespace)"
    return None


def _this_cpu() -> dict[str, str]:
    """The identity NCCL's CPUID gives on this runner (what the check's reference run uses)."""
    first = Path("/proc/cpuinfo").read_text().split("\n\n")[0]
    fields = {k.strip(): v.strip() for k, _, v in (ln.partition(":") for ln in first.splitlines())}
    return {
        "vendor": fields.get("vendor_id", ""),
        "familyid": fields.get("cpu family", ""),
        "modelid": fields.get("model", ""),
    }


def _judge(root: Path, topo: Path, work: Path, data_direct: int = 1) -> tuple[int, str]:
    """nccl-topo-check (its README) on ``root`` and ``topo``, its IB plugin's device list as
    ``NCCL_IB_DATA_DIRECT=data_direct`` makes it: the tool's ``check`` does what is done here --
    ``prep-fixture.py``, then ``harness`` twice in a private mount namespace, on the fixture's
    sysfs and on the file -- but lists each RDMA device at its own function (what ``=0`` gives);
    here a Data Direct device is ``<name>_dma`` at its DMA function where the mode says so
    (:meth:`tests.ncclxml.Host.of`), as src/transport/net_ib/init.cc lists it.  The output and
    the exit status are ``check``'s: 0 the same, 1 different, 2 it cannot run."""
    host = ncclxml.Host.of(str(root), data_direct)
    prep = subprocess.run(
        ["python3", str(TOOL / "prep-fixture.py"), str(root), str(work)], check=False, capture_output=True, text=True
    )
    if prep.returncode or not host.gpus or not host.nets:
        return 2, "nccl-topo-check: cannot prepare the fixture " + prep.stderr[-300:]
    nets = ",".join(f"{name}={host.pci_path(busid)}:{speed}" for name, busid, speed in host.nets)
    out, norm = [], []
    for given in ("-", str(topo)):
        gpus = ",".join(host.gpus)
        cmd = (
            f"mount --bind '{work}/sys' /sys && NCCL_IGNORE_DISABLED_P2P=2 '{TOOL}/harness' '{given}' '{gpus}' '{nets}'"
        )
        run = subprocess.run(
            ["unshare", "-m", "--propagation", "private", "bash", "-c", cmd],
            check=False,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if run.returncode and given == "-":
            return 2, f"nccl-topo-check: cannot run: {run.stderr[-300:]}"
        out.append(f"=== NCCL from {'sysfs' if given == '-' else 'file'} (exit {run.returncode})\n{run.stdout}")
        norm.append([ln for ln in run.stdout.splitlines() if ln.startswith("rank") or "local net" in ln])
    same = bool(norm[1]) and norm[0] == norm[1]
    verdict = "same paths and local NETs" if same else f"DIFFERENT: {norm[0]} / {norm[1]}"
    return (0 if same else 1), "".join(out) + f"nccl-topo-check: {verdict}\n"


def _as_runner(text: str, cpu: dict[str, str]) -> str:
    """The file with every <cpu>'s identity the runner's: the judge is NCCL built for x86_64, whose
    sysfs run takes its CPU identity from this runner's CPUID (the SYS bandwidth depends on it)
    and whose ncclTopoGetXmlFromCpu adds vendor/familyid/modelid to an arm64 <cpu> above each
    rank's own GPU -- which an aarch64 build never does -- so that the ranks' copies differ and
    fuse twice.  An arm64 tray is judged as the same tree on this runner's CPUs."""
    if not cpu["vendor"]:
        return text
    ident = f'arch="x86_64" vendor="{cpu["vendor"]}" familyid="{cpu["familyid"]}" modelid="{cpu["modelid"]}"'
    return re.sub(r'arch="x86_64" vendor="[^"]*" familyid="\d+" modelid="\d+"|arch="arm64"', ident, text)


@pytest.mark.parametrize("name, data_direct", MODES)
def test_nccls_own_code_agrees(fixture_root, tmp_path, name, data_direct):
    """NCCL 2.30.7's xml.cc/topo.cc/paths.cc, run by nccl-topo-check, given the file and given the
    fixture's sysfs, with each NCCL_IB_DATA_DIRECT (:func:`_judge`); and topoagent's NCCL model
    against what NCCL reading the sysfs chose (:func:`_model_agrees`)."""
    why = _runnable()
    if why:
        pytest.skip(why)
    root = fixture_root(name)
    topo = tmp_path / "topo.xml"
    topo.write_text(_as_runner(_plan(str(root)), _this_cpu()))
    code, out = _judge(root, topo, tmp_path / "root", data_direct)
    if code == 2:
        pytest.skip(out.strip().splitlines()[-1])
    assert code == 0, out[-3000:]
    if data_direct == 1:  # the model is NCCL's default
        _model_agrees(root, out)


def _model_agrees(root: Path, out: str) -> None:
    """topoagent's model (analysis.ncclnet, the rails) against what NCCL reading the sysfs chose:
    every rank's NET on every channel, and GPUDirect RDMA where ncclTopoCheckGdr turns it on (its
    distance test on NCCL's own path type: at most PXB, or P2C -- which the judge, without NVML,
    never sees: a C2C GPU's NIC on its own Grace is PHB to it, P2C to NCCL on the host and to the
    model)."""
    result = scan(root, nvml="off")
    names = [n for n, _, _ in ncclxml.Host.of(str(root)).nets]
    by_name = {x + suffix: n for n in result.topology.nics for x in n.rdma_devices for suffix in ("", DMA_SUFFIX)}
    nets = [by_name[x] for x in names]
    if any(n.is_vf for n in nets):
        return  # NCCL is given the VFs' RDMA devices too; the rails leave VFs out (sriov-nic)
    choice = nccl_net_choice(result.topology, nets, path_index(result.paths))
    types = _nccl_types(out)
    for bdf, devs in _nccl_channels(out).items():
        gpu = result.topology.by_bdf(bdf)
        assert gpu is not None
        used = choice.channels(gpu.id)
        assert [used[c % len(used)] for c in range(len(devs))] == [by_name[names[d]].id for d in devs], bdf
        rail = result.rails.rail(gpu.id)
        assert rail is not None and rail.nic == by_name[names[devs[0]]].id, bdf
        seen = types[bdf][devs[0]]
        if rail.nccl_class is PathClass.P2C:
            assert seen == "PHB", bdf
        else:
            assert (rail.nccl_class.name if rail.nccl_class else None, rail.gdr) == (seen, seen in ("PIX", "PXB")), bdf


def _nccl_types(out: str, given: str = "sysfs") -> dict[str, dict[int, str]]:
    """From the check's run: each rank's GPU (BDF) and its path type to each NET device (the
    first of a NET's fused copies)."""
    types: dict[str, dict[int, str]] = {}
    for bdf, line in re.findall(r"rank \d+ gpu (\S+): (.*)", _section(out, given)):
        for dev, kind in re.findall(r"\(dev(\d+)\)=(\w+)/", line):
            types.setdefault(bdf, {}).setdefault(int(dev), kind)
    return types


def _section(out: str, given: str) -> str:
    """The check's output of NCCL reading the fixture's sysfs (``given="sysfs"``) or the file."""
    sysfs, _, file = out.partition("=== NCCL from file")
    return sysfs if given == "sysfs" else file.partition("nccl-topo-check:")[0]


def _nccl_channels(out: str, given: str = "sysfs") -> dict[str, list[int]]:
    """From the check's run on sysfs (or ``given="file"``): each rank's GPU (BDF) and the NET
    device of each channel."""
    chans: dict[str, list[int]] = {}
    gpu = None
    for line in _section(out, given).splitlines():
        if m := re.match(r"rank \d+ gpu (\S+):", line):
            gpu = m.group(1)
        elif gpu is not None and line.strip().startswith("local net per channel:"):
            chans[gpu] = [int(d) for d in re.findall(r"\(dev(\d+)\)", line)]
    assert chans, out[-2000:]
    return chans


def test_nccls_own_code_routes_through_the_peer_the_model_names(tmp_path):
    """PXN and the spreading that follows it, judged by NCCL 2.30.7: gb200-tray with every NIC on
    Grace 0, NVLinks to the NVSwitches (NVML) and NVLink-C2C (the <c2c> NVML gives NCCL, added
    to the file).  NCCL routes gpu2 and gpu3 to Grace 0's NICs through their NVLinked peers
    (PATH_PXN) and spreads them over those NICs as over any; the model's channels, relays and
    paths are NCCL's on every channel."""
    why = _runnable()
    if why:
        pytest.skip(why)
    desc = load_machine("gb200-tray")
    for bus in desc["rootbus"]:
        if "gb200" not in bus["tree"]:
            bus["node"] = 0
    root = generate(desc, tmp_path / "tray")
    recording = copy.deepcopy(load_recording("gb200_nvl72_tray"))
    for gpu in recording["gpus"]:
        gpu["nvlinks"] = ["FFFFFFFF:FF:FF.0"] * 18  # to the NVSwitch trays, no function on this host
    result = scan(root, nvml=make_fake(recording))
    topo = tmp_path / "topo.xml"
    text = re.sub(r'(<gpu dev="\d+">)', r'\1<c2c bw="45000" count="10"/>', nccl_topo.render(result))
    topo.write_text(_as_runner(text, _this_cpu()))
    code, out = _judge(root, topo, tmp_path / "root")
    if code == 2:
        pytest.skip(out.strip().splitlines()[-1])
    names = [n for n, _, _ in ncclxml.Host.of(str(root)).nets]
    by_name = {x: n for n in result.topology.nics for x in n.rdma_devices}
    choice = nccl_net_choice(result.topology, [by_name[x] for x in names], path_index(result.paths))
    relays = []
    for bdf, first in _nccl_types(out, given="file").items():
        gpu = result.topology.by_bdf(bdf)
        assert gpu is not None
        devs = _nccl_channels(out, given="file")[bdf]
        used = choice.channels(gpu.id)
        assert [used[c % len(used)] for c in range(len(devs))] == [by_name[names[d]].id for d in devs], bdf
        rail = result.rails.rail(gpu.id)
        assert rail is not None and rail.nccl_class is not None
        assert (rail.nic, rail.nccl_class.name) == (by_name[names[devs[0]]].id, first[devs[0]]), bdf
        relays.append((rail.gpu, rail.nic, rail.pxn_via))
    assert [r for r in relays if r[2]] == [("gpu2", "nic0", "gpu0"), ("gpu3", "nic4", "gpu1")]
