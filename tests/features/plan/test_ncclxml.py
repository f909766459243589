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
from topoagent.core.analysis.ncclnet import nccl_net_choice
from topoagent.core.analysis.paths import path_index
from topoagent.core.api import scan
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
    "hgx-b300",
    "hgx-b300-baremetal",
]
# gb200-tray and gb300-tray are not here yet: NCCL given the file puts the second Grace's GPUs SYS
# from every NET (and lists the NETs twice) where NCCL reading the trays' sysfs gives them PHB to
# their own CPU's NICs -- the file's layout for a multi-domain Grace tray is still to be settled.
CHECK = REPO.parent / "shared" / "tools" / "nccl-topo-check" / "check"


def _plan(root: str) -> str:
    out = topoagent("plan", "--root", root, "--no-nvml", "--format", "nccl-topo")
    assert out.returncode in (0, 1), out.stderr  # 1: a critical finding, as scan exits
    return out.stdout


@pytest.mark.parametrize("name", GPU_FIXTURES)
def test_nccl_builds_from_the_file_what_it_builds_from_sysfs(fixture_root, name):
    root = str(fixture_root(name))
    text = _plan(root)
    reference, got = ncclxml.nccl(root, None), ncclxml.nccl(root, text)
    assert (got.cpus, got.nets) == (reference.cpus, reference.nets)
    assert got.paths == reference.paths
    for gpu in reference.paths:
        assert got.local(gpu) == reference.local(gpu), gpu
    # Stricter than any one NCCL release: the full identity on every x86 <cpu>.
    for cpu in (n for n in ncclxml.parse(text).nodes if n.name == "cpu"):
        if cpu.attrs["arch"] == "x86_64":
            assert {"vendor", "familyid", "modelid", "affinity"} <= set(cpu.attrs), cpu.attrs


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
    if not CHECK.exists():
        return f"{CHECK} is absent"
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


@pytest.mark.parametrize("name", GPU_FIXTURES)
def test_nccls_own_code_agrees(fixture_root, tmp_path, name):
    """NCCL 2.30.7's xml.cc/topo.cc/paths.cc, run by nccl-topo-check, given the file and given the
    fixture's sysfs; and topoagent's NCCL model against what NCCL reading the sysfs chose.  Its
    sysfs run takes the CPU identity from this runner's CPUID, so the file's
    <cpu> identity is swapped for the runner's (the SYS bandwidth depends on it; nothing else)."""
    why = _runnable()
    if why:
        pytest.skip(why)
    root = fixture_root(name)
    cpu = _this_cpu()
    text = _plan(str(root))
    if cpu["vendor"]:
        text = re.sub(
            r'vendor="[^"]*" familyid="\d+" modelid="\d+"',
            f'vendor="{cpu["vendor"]}" familyid="{cpu["familyid"]}" modelid="{cpu["modelid"]}"',
            text,
        )
    topo = tmp_path / "topo.xml"
    topo.write_text(text)
    run = subprocess.run(
        ["bash", str(CHECK), str(root), str(topo)], check=False, capture_output=True, text=True, timeout=300
    )
    if run.returncode == 2:
        pytest.skip("nccl-topo-check cannot run here: " + run.stdout.strip().splitlines()[-1])
    assert run.returncode == 0, run.stdout[-3000:]
    assert "same paths and local NETs" in run.stdout
    # and topoagent's one model of ncclTopoGetLocalNet (analysis.ncclnet: the rails, PXN) gives
    # every rank the NET NCCL gives it on every channel the check prints
    result = scan(root, nvml="off")
    names = _ibv_order(root)
    by_name = {x: n for n in result.topology.nics for x in n.rdma_devices}
    nets = [by_name[x] for x in names]
    if any(n.is_vf for n in nets):
        return  # NCCL is given the VFs' RDMA devices too; the rails leave VFs out (sriov-nic)
    choice = nccl_net_choice(result.topology, nets, path_index(result.paths))
    for bdf, devs in _nccl_channels(run.stdout).items():
        gpu = result.topology.by_bdf(bdf)
        assert gpu is not None
        used = choice.channels(gpu.id)
        assert [used[c % len(used)] for c in range(len(devs))] == [by_name[names[d]].id for d in devs], bdf


def _ibv_order(root: Path) -> list[str]:
    """The RDMA devices in the order the check's emulated IB plugin lists them (its device index):
    by name, ``mlx5_10`` after ``mlx5_9`` (its prep-fixture.py)."""

    def key(name: str) -> tuple[str, int]:
        m = re.match(r"^(.*?)(\d+)$", name)
        return (m.group(1), int(m.group(2))) if m else (name, 0)

    return sorted((p.name for p in (root / "sys/class/infiniband").iterdir()), key=key)


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
    paths are NCCL's on every channel.  (The file's arm64 <cpu> fuses twice: the copies' NETs
    are unreachable, DIS, and change no choice.)"""
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
    topo.write_text(re.sub(r'(<gpu dev="\d+">)', r'\1<c2c bw="45000" count="10"/>', nccl_topo.render(result)))
    run = subprocess.run(["bash", str(CHECK), str(root), str(topo)], check=False, capture_output=True, text=True)
    if run.returncode == 2:
        pytest.skip("nccl-topo-check cannot run here: " + run.stdout.strip().splitlines()[-1])
    names = _ibv_order(root)
    by_name = {x: n for n in result.topology.nics for x in n.rdma_devices}
    choice = nccl_net_choice(result.topology, [by_name[x] for x in names], path_index(result.paths))
    given = _section(run.stdout, "file")
    relays = []
    for bdf, line in re.findall(r"rank \d+ gpu (\S+): (.*)", given):
        first: dict[int, str] = {}  # a NET's path type (its fused copies after it are DIS)
        for dev, kind in re.findall(r"\(dev(\d+)\)=(\w+)/", line):
            first.setdefault(int(dev), kind)
        gpu = result.topology.by_bdf(bdf)
        assert gpu is not None
        devs = _nccl_channels(run.stdout, given="file")[bdf]
        used = choice.channels(gpu.id)
        assert [used[c % len(used)] for c in range(len(devs))] == [by_name[names[d]].id for d in devs], bdf
        rail = result.rails.rail(gpu.id)
        assert rail is not None and rail.nccl_class is not None
        assert (rail.nic, rail.nccl_class.name) == (by_name[names[devs[0]]].id, first[devs[0]]), bdf
        relays.append((rail.gpu, rail.nic, rail.pxn_via))
    assert [r for r in relays if r[2]] == [("gpu2", "nic0", "gpu0"), ("gpu3", "nic4", "gpu1")]
