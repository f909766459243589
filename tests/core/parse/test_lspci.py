"""Tests for topoagent.core.parse.lspci_tree and lspci_verbose: `lspci -t[v][nn]` trees and `lspci -vvv` listings.

Samples live in samples/lspci/ (provenance in samples/lspci/README.md).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.mangle import mangle
from topoagent.core.parse.lspci_common import LspciParseError
from topoagent.core.parse.lspci_tree import LspciTreeNode, parse_lspci_tree
from topoagent.core.parse.lspci_verbose import decode_acs, parse_lspci_verbose
from topoagent.core.pci import ACS_FLAGS
from topoagent.core.snapshot import AcsInfo

SAMPLES = Path(__file__).parent / "samples" / "lspci"


def load(name: str) -> str:
    with open(SAMPLES / name, encoding="utf-8", newline="") as f:
        return f.read()


def index(roots: tuple[LspciTreeNode, ...]) -> dict[str, LspciTreeNode]:
    return {n.bdf: n for root in roots for n in root.walk()}


def parent_of(roots, bdf):
    for root in roots:
        for n in root.walk():
            if any(c.bdf == bdf for c in n.children):
                return n.bdf
    return None


# --------------------------------------------------------------------------------------------
# lspci -t

# name, top-level functions, all functions, {bdf: (description, secondary, subordinate,
# number of children)}, {child: parent}
TREE_CASES = [
    (
        "tree_asus_esc8000a_tv.txt",
        104,
        198,
        {
            "0000:00:01.1": (None, 0x01, 0x01, 2),
            "0000:01:00.0": ("NVIDIA Corporation AD102GL [RTX 6000 Ada Generation]", None, None, 0),
            "0000:01:00.1": ("NVIDIA Corporation AD102 High Definition Audio Controller", None, None, 0),
            "0000:21:00.1": ("Mellanox Technologies MT2910 Family [ConnectX-7]", None, None, 0),
            "0000:60:01.1": (None, 0x61, 0x73, 1),
            "0000:61:00.0": (None, 0x62, 0x73, 4),
            "0000:62:1c.0": (None, 0x73, 0x73, 0),
            "0000:64:1c.0": (None, 0x68, 0x68, 1),
            "0000:68:00.0": ("Samsung Electronics Co Ltd NVMe SSD Controller S4LV008[Pascal]", None, None, 0),
            "0000:70:15.0": (None, 0x72, 0x72, 0),
            "0000:75:00.0": ("ASPEED Technology, Inc. ASPEED Graphics Family", None, None, 0),
            "0000:82:00.1": ("Intel Corporation Ethernet Controller X710 for 10GBASE-T", None, None, 0),
            "0000:c0:03.2": (None, 0xC2, 0xC2, 0),
            "0000:e3:00.4": ("Advanced Micro Devices, Inc. [AMD] Device 14c9", None, None, 0),
        },
        {
            "0000:68:00.0": "0000:64:1c.0",
            "0000:64:1c.0": "0000:63:00.0",
            "0000:e2:00.0": "0000:e0:05.2",
            "0000:e0:00.0": None,
            "0000:81:00.1": "0000:80:01.1",
        },
    ),
    (
        "tree_threadripper_t_no_names.txt",
        25,
        52,
        {
            "0000:00:01.2": (None, 0x02, 0x09, 1),
            "0000:02:00.0": (None, 0x03, 0x09, 6),
            "0000:03:08.0": (None, 0x07, 0x07, 3),
            "0000:07:00.3": (None, None, None, 0),
            "0000:0d:00.4": (None, None, None, 0),
            "0000:00:18.7": (None, None, None, 0),
        },
        {"0000:09:00.0": "0000:03:0a.0", "0000:03:0a.0": "0000:02:00.0"},
    ),
    (
        "tree_hgx_h100_tvnn.txt",
        12,
        65,
        {
            "0000:15:01.0": (None, 0x16, 0x1E, 1),
            "0000:18:00.0": (None, 0x19, 0x1E, 5),
            "0000:1a:00.0": ("NVIDIA Corporation GH100 [H100 SXM5 80GB]", None, None, 0),
            "0000:1b:00.0": ("Mellanox Technologies MT2910 Family [ConnectX-7]", None, None, 0),
            "0000:c1:00.0": ("Broadcom / LSI PCIe Switch management endpoint", None, None, 0),
        },
        {"0000:1a:00.0": "0000:19:00.0", "0000:19:00.0": "0000:18:00.0", "0000:b9:00.0": "0000:b8:00.0"},
    ),
    (
        "tree_v100_plx_cx5_vfs.txt",
        5,
        30,
        {
            "0000:57:04.0": (None, 0x58, 0x5B, 10),
            "0000:58:01.1": ("Mellanox Technologies MT27800 Family [ConnectX-5 Virtual Function]", None, None, 0),
            "0000:5c:00.0": ("NVIDIA Corporation GV100GL [Tesla V100 PCIe 32GB]", None, None, 0),
            "0000:6d:10.0": (None, 0x76, 0x7B, 0),
            "0000:53:05.0": ("Intel Corporation Sky Lake-E VT-d", None, None, 0),
        },
        {"0000:72:00.0": "0000:6d:0c.0", "0000:6d:0c.0": "0000:6c:00.0", "0000:6c:00.0": "0000:55:08.0"},
    ),
    (
        "tree_vmd_domain_10000.txt",
        4,
        6,
        {
            "10000:00:00.0": (None, 0x01, 0x01, 1),
            "10000:02:00.0": ("Intel Corporation NVMe Datacenter SSD [3DNAND, Beta Rock Controller]", None, None, 0),
            "0000:00:05.5": ("Intel Corporation Volume Management Device NVMe RAID Controller", None, None, 0),
        },
        {"10000:01:00.0": "10000:00:00.0"},
    ),
]


@pytest.mark.parametrize("name, n_roots, n_all, nodes, parents", TREE_CASES, ids=[c[0] for c in TREE_CASES])
def test_tree_sample(name, n_roots, n_all, nodes, parents):
    roots = parse_lspci_tree(load(name))
    by_bdf = index(roots)
    assert len(roots) == n_roots
    assert len(by_bdf) == n_all  # no BDF twice
    for bdf, (desc, sec, sub, kids) in nodes.items():
        n = by_bdf[bdf]
        assert (n.description, n.secondary_bus, n.subordinate_bus, len(n.children)) == (
            desc,
            sec,
            sub,
            kids,
        ), bdf
        assert n.is_bridge == (sec is not None)
    for child, parent in parents.items():
        assert parent_of(roots, child) == parent
    # Every child sits on its parent's secondary bus, within the domain.
    for n in by_bdf.values():
        for c in n.children:
            dom, bus, _ = c.bdf.rsplit(":", 2)
            assert dom == n.bdf.rsplit(":", 2)[0]
            assert int(bus, 16) == n.secondary_bus
            assert n.secondary_bus <= int(bus, 16) <= n.subordinate_bus


def test_tree_nn_ids():
    by_bdf = index(parse_lspci_tree(load("tree_hgx_h100_tvnn.txt")))
    gpu = by_bdf["0000:9c:00.0"]
    assert (gpu.vendor_id, gpu.device_id) == (0x10DE, 0x2330)
    assert (by_bdf["0000:9d:00.0"].vendor_id, by_bdf["0000:9d:00.0"].device_id) == (0x15B3, 0x1021)
    assert by_bdf["0000:00:14.0"].device_id == 0x1BCD
    assert by_bdf["0000:15:01.0"].vendor_id is None  # bridges are printed without a name
    gpus = [n.bdf for n in by_bdf.values() if n.device_id == 0x2330]
    assert gpus == [
        "0000:1a:00.0",
        "0000:1c:00.0",
        "0000:3c:00.0",
        "0000:3e:00.0",
        "0000:9c:00.0",
        "0000:9e:00.0",
        "0000:bc:00.0",
        "0000:be:00.0",
    ]


@pytest.mark.parametrize(
    "text, bdfs",
    [
        ("", []),
        ("   \n", []),
        ("-[0000:00]-+-00.0\n           \\-01.0\n", ["0000:00:00.0", "0000:00:01.0"]),
        # One root bus with one device, and an old lspci without domains.
        ("-[0000:00]---00.0  Host bridge\n", ["0000:00:00.0"]),
        ("-[00]-+-00.0\n      \\-1f.3\n", ["0000:00:00.0", "0000:00:1f.3"]),
        # A bridge with nothing behind it at the end of the tree, no final newline.
        ("-[0000:00]-+-00.0\n           \\-01.0-[01]--", ["0000:00:00.0", "0000:00:01.0"]),
        # CRLF.
        (
            "-[0000:00]-+-00.0\r\n           \\-02.0-[03]----00.0  GPU\r\n",
            ["0000:00:00.0", "0000:00:02.0", "0000:03:00.0"],
        ),
    ],
)
def test_tree_small(text, bdfs):
    assert [n.bdf for root in parse_lspci_tree(text) for n in root.walk()] == bdfs


@pytest.mark.parametrize(
    "text, message",
    [
        ("not a tree at all\n", "no lspci tree found"),
        ("-[0000:00]-+-00.0\n                 +-01.0\n", "no earlier line opened"),
        ("-[0000:00]-+-00.0\n           +-zz.0\n", "expected a device"),
        ("-[0000:00]-+-00.0\n           garbage\n", "expected '+-'"),
        ("-[0000:00]-+-01.0-[05-03]--\n", "runs backwards"),
        ("-[0000:00]-+-00.0junk\n", "unexpected text"),
    ],
)
def test_tree_garbage_raises(text, message):
    with pytest.raises(LspciParseError) as info:
        parse_lspci_tree(text)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


# A drawing of trees the way pciutils' ls-tree.c does it, to check the parser against
# arbitrary shapes: (devfn, name, (secondary, subordinate) or None, children).
def _draw(roots) -> str:
    out: list[str] = []
    line: list[str] = []

    def put(p: int, s: str) -> int:
        line.extend(" " * (p + len(s) - len(line)))
        line[p : p + len(s)] = s
        return p + len(s)

    def print_it(p: int) -> None:
        out.append("".join(line[:p]))
        line[:p] = ["|" if ch in "+|" else " " for ch in line[:p]]

    def dev(d, p):
        devfn, name, br, kids = d
        p = put(p, devfn)
        if br:
            p = put(p, f"-[{br[0]:02x}]-" if br[0] == br[1] else f"-[{br[0]:02x}-{br[1]:02x}]-")
            bus(kids, put(p, "-"))
        else:
            print_it(put(p, "  " + name) if name else p)

    def bus(kids, p):
        if not kids:
            print_it(p)
        elif len(kids) == 1:
            dev(kids[0], put(p, "--"))
        else:
            for i, k in enumerate(kids):
                put(p, "\\-" if i == len(kids) - 1 else "+-")
                dev(k, p + 2)

    p = put(0, "-")
    if len(roots) == 1:
        dom, b, kids = roots[0]
        bus(kids, put(p, f"[{dom:04x}:{b:02x}]-"))
    else:
        for i, (dom, b, kids) in enumerate(roots):
            mark = "\\-" if i == len(roots) - 1 else "+-"
            bus(kids, put(p, f"{mark}[{dom:04x}:{b:02x}]-"))
    return "\n".join(out) + "\n"


def _random_tree(rng: random.Random):
    next_bus = [1]

    def devices(depth):
        kids = []
        for slot in rng.sample(range(32), rng.randrange(1, 4)):
            for fn in range(rng.choice([1, 1, 1, 2, 4])):
                if depth < 4 and fn == 0 and rng.random() < 0.4:
                    sec = next_bus[0]
                    next_bus[0] += 1
                    sub_kids = devices(depth + 1) if rng.random() < 0.8 else []
                    kids.append((f"{slot:02x}.{fn}", None, (sec, next_bus[0] - 1), sub_kids))
                else:
                    name = rng.choice([None, "NVIDIA Corporation GH100 [H100] [10de:2330]", "X"])
                    kids.append((f"{slot:02x}.{fn}", name, None, []))
        return sorted(kids, key=lambda k: k[0])

    roots = []
    for _ in range(rng.randrange(1, 4)):
        start = next_bus[0]
        next_bus[0] += 1
        roots.append((rng.choice([0, 0, 1, 0x10000]), start, devices(0)))
    return roots


def _expected(roots):
    out = []

    def walk(dom, bus, kids):
        for devfn, name, br, sub in kids:
            out.append((f"{dom:04x}:{bus:02x}:{devfn}", name.replace(" [10de:2330]", "") if name else None))
            if br:
                walk(dom, br[0], sub)

    for dom, bus, kids in roots:
        walk(dom, bus, kids)
    return out


@pytest.mark.parametrize("seed", range(40))
def test_tree_random_shapes(seed):
    rng = random.Random(seed)
    roots = _random_tree(rng)
    parsed = parse_lspci_tree(_draw(roots))
    assert [(n.bdf, n.description) for r in parsed for n in r.walk()] == _expected(roots)


# --------------------------------------------------------------------------------------------
# lspci -vvv

ALL_OFF = AcsInfo(capability=0, control=0)

VERBOSE_CASES = [
    (
        "vvv_rtx6000ada_legacy_endpoint.txt",
        [
            {
                "bdf": "0000:01:00.0",
                "class_name": "VGA compatible controller",
                "description": "NVIDIA Corporation AD102GL [RTX 6000 Ada Generation]",
                "revision": 0xA1,
                "subsystem": "NVIDIA Corporation AD102GL [RTX 6000 Ada Generation]",
                "physical_slot": "3",
                "numa_node": 0,
                "driver": "nvidia",
                "kernel_modules": ("nvidiafb", "nouveau", "nvidia_drm", "nvidia"),
                "capabilities_readable": True,
                "port_type": "legacy_endpoint",
                "link_max_gts": 16.0,
                "link_max_width": 16,
                "link_port": 0,
                "link_gts": 2.5,
                "link_width": 16,
                "link_speed_downgraded": True,
                "link_width_downgraded": None,
                "acs": None,
                "sriov": None,
                "class_code": None,
                "vendor_id": None,
            }
        ],
    ),
    (
        "vvv_connectx7_sriov_and_highpoint.txt",
        [
            {
                "bdf": "0000:81:00.0",
                "class_name": "Ethernet controller",
                "description": "Mellanox Technologies MT2910 Family [ConnectX-7]",
                "numa_node": 1,
                "driver": "mlx5_core",
                "port_type": "endpoint",
                "link_max_gts": 32.0,
                "link_gts": 32.0,
                "link_width": 16,
                "link_speed_downgraded": None,
                "acs": ALL_OFF,
                "sriov_fields": (16, 16, 0, 2, 1, 0x101E),
            },
            {
                "bdf": "0000:71:00.0",
                "class_name": "RAID bus controller",
                "revision": 1,
                "port_type": "legacy_endpoint",
                "link_max_gts": 5.0,
                "link_max_width": 2,
                "link_gts": 5.0,
                "link_width": 1,
                "link_width_downgraded": True,
                "link_speed_downgraded": None,
                "driver": None,
                "acs": None,
                "sriov": None,
            },
        ],
    ),
    (
        "vvv_plx_pex8725_acs.txt",
        [
            {
                "bdf": "0000:02:00.0",
                "port_type": "switch_upstream",
                "link_max_width": 8,
                "link_width": 4,
                "link_width_downgraded": True,
                "link_speed_downgraded": False,
                "acs": None,
            },
            {
                "bdf": "0000:03:08.0",
                "port_type": "switch_downstream",
                "slot_implemented": True,
                "link_port": 8,
                "acs": AcsInfo(capability=0x7F, control=0b0011101),
                "acs_ctl": {
                    "SrcValid": True,
                    "TransBlk": False,
                    "ReqRedir": True,
                    "CmpltRedir": True,
                    "UpstreamFwd": True,
                    "EgressCtrl": False,
                    "DirectTrans": False,
                },
            },
            {
                "bdf": "0000:03:09.0",
                "slot_implemented": False,
                "link_gts": 2.5,
                "link_width": None,
                "link_speed_downgraded": True,
                "acs": AcsInfo(capability=0x7F, control=0),
            },
        ],
    ),
    (
        "vvv_h100_access_denied.txt",
        [
            {
                "bdf": "0000:b9:01.0",
                "class_name": "PCI bridge",
                "numa_node": 2,
                "capabilities_readable": False,
                "port_type": None,
                "acs": None,
                "link_gts": None,
            },
            {"bdf": "0000:b9:02.0", "capabilities_readable": False},
            {
                "bdf": "0000:bc:00.0",
                "class_name": "3D controller",
                "description": "NVIDIA Corporation GH100 [H100 SXM5 80GB]",
                "revision": 0xA1,
                "physical_slot": "6",
                "numa_node": 2,
                "iommu_group": 157,
                "driver": "nvidia",
                "capabilities_readable": False,
                "port_type": None,
                "link_max_gts": None,
                "acs": None,
            },
        ],
    ),
    (
        "vvvnn_a100_numa5.txt",
        [
            {
                "bdf": "0000:da:00.0",
                "class_name": "3D controller",
                "class_code": 0x0302,
                "vendor_id": 0x10DE,
                "device_id": 0x20B0,
                "revision": 0xA1,
                "description": "NVIDIA Corporation GA100 [A100 SXM4 40GB]",
                "subsystem": "NVIDIA Corporation Device",
                "subsystem_vendor_id": 0x10DE,
                "subsystem_device_id": 0x134F,
                "numa_node": 5,
                "port_type": "endpoint",
                "link_gts": 16.0,
                "link_width": 16,
                "link_speed_downgraded": False,
                "link_width_downgraded": False,
                "sriov_fields": (16, 16, 0, 4, 1, 0x20B0),
            }
        ],
    ),
    (
        "D_vvvnn_hgx_rootport_switch_vf.txt",
        [
            {
                "bdf": "0000:15:01.0",
                "class_code": 0x0604,
                "vendor_id": 0x8086,
                "device_id": 0x352A,
                "revision": 4,
                "port_type": "root_port",
                "slot_implemented": True,
                "link_port": 1,
                "numa_node": 0,
                "iommu_group": 3,
                "acs": AcsInfo(capability=0b0011111, control=0b0011101),
            },
            {
                "bdf": "0000:16:00.0",
                "vendor_id": 0x1000,
                "device_id": 0xC030,
                "subsystem_vendor_id": 0x1000,
                "subsystem_device_id": 0xA064,
                "port_type": "switch_upstream",
                "acs": None,
            },
            {
                "bdf": "0000:19:00.0",
                "port_type": "switch_downstream",
                "physical_slot": "1",
                "acs": AcsInfo(capability=0x7F, control=0),
            },
            {
                "bdf": "0000:1a:00.0",
                "class_name": "3D controller",
                "vendor_id": 0x10DE,
                "device_id": 0x2330,
                "subsystem_device_id": 0x16C1,
                "link_gts": 32.0,
                "link_width": 16,
            },
            {
                "bdf": "0000:1b:00.2",
                "class_name": "Infiniband controller",
                "class_code": 0x0207,
                "vendor_id": 0x15B3,
                "device_id": 0x101E,
                "port_type": "endpoint",
                "link_max_gts": None,
                "link_max_width": None,
                "link_gts": None,
                "link_width": None,
                "iommu_group": 212,
            },
        ],
    ),
    (
        "vvv_old_lspci_k80_plx.txt",
        [
            {
                "bdf": "0000:04:00.0",
                "port_type": "switch_upstream",
                "link_gts": 8.0,
                "link_width": 16,
                "link_speed_downgraded": None,
                "link_width_downgraded": None,
            },
            {
                "bdf": "0000:06:00.0",
                "port_type": "endpoint",
                "link_port": 8,
                "link_max_gts": 8.0,
                "link_gts": 2.5,
                "subsystem": "NVIDIA Corporation Device 106c",
            },
            {"bdf": "0000:07:00.0", "port_type": "endpoint", "link_gts": None, "link_width": 16},
        ],
    ),
]


def test_every_lspci_sample_has_a_case():
    names = {c[0] for c in VERBOSE_CASES} | {c[0] for c in TREE_CASES}
    # paste_*.txt are whole pastes, read leniently: tests/core/parse/test_pastes.py covers them;
    # verdict_*.txt are the findings' inputs: tests/core/findings/test_verdicts.py
    assert names == {p.name for p in SAMPLES.glob("*.txt") if not p.name.startswith(("paste_", "verdict_"))}


@pytest.mark.parametrize("name, functions", VERBOSE_CASES, ids=[c[0] for c in VERBOSE_CASES])
def test_verbose_sample(name, functions):
    parsed = parse_lspci_verbose(load(name))
    assert [f.bdf for f in parsed] == [f["bdf"] for f in functions]
    for fn, expected in zip(parsed, functions, strict=True):
        expected = dict(expected)
        sriov = expected.pop("sriov_fields", None)
        acs_ctl = expected.pop("acs_ctl", None)
        for key, value in expected.items():
            assert getattr(fn, key) == value, (fn.bdf, key)
        if sriov is not None:
            s = fn.sriov
            got = (s.initial_vfs, s.total_vfs, s.num_vfs, s.vf_offset, s.vf_stride, s.vf_device_id)
            assert got == sriov
        if acs_ctl is not None:
            assert fn.acs_ctl_flags == acs_ctl
            assert fn.acs.redirects_p2p


def test_acs_decode_bit_order():
    assert ACS_FLAGS[0] == "SrcValid" and ACS_FLAGS[6] == "DirectTrans"
    assert decode_acs(0b0001100) == {
        "SrcValid": False,
        "TransBlk": False,
        "ReqRedir": True,
        "CmpltRedir": True,
        "UpstreamFwd": False,
        "EgressCtrl": False,
        "DirectTrans": False,
    }
    assert decode_acs(0x7F) == dict.fromkeys(ACS_FLAGS, True)


def test_acs_with_a_missing_flag_is_not_guessed():
    text = (
        "00:01.0 PCI bridge: X\n\tCapabilities: [100 v1] Access Control Services\n"
        "\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl+\n"
        "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl-\n"
    )
    (fn,) = parse_lspci_verbose(text)
    assert fn.acs is None and fn.acs_ctl_flags is None
    assert fn.capabilities_readable is True


@pytest.mark.parametrize(
    "line, gts, width, sd, wd",
    [
        ("Speed 16GT/s (downgraded), Width x8 (downgraded)", 16.0, 8, True, True),
        ("Speed 8GT/s, Width x16", 8.0, 16, None, None),
        ("Speed 2.5GT/s, Width x1, TrErr- Train- SlotClk+ DLActive- BWMgmt- ABWMgmt-", 2.5, 1, None, None),
        ("Speed unknown, Width x0", None, None, None, None),
        ("Speed 64GT/s (ok), Width x16 (ok)", 64.0, 16, False, False),
    ],
)
def test_lnksta_forms(line, gts, width, sd, wd):
    text = (
        "0000:3b:00.0 3D controller: NVIDIA Corporation Device 2901\n"
        "\tCapabilities: [78] Express (v2) Endpoint, MSI 00\n"
        f"\t\tLnkSta:\t{line}\n"
    )
    (fn,) = parse_lspci_verbose(text)
    assert (fn.link_gts, fn.link_width, fn.link_speed_downgraded, fn.link_width_downgraded) == (
        gts,
        width,
        sd,
        wd,
    )


@pytest.mark.parametrize(
    "express, port_type, slot",
    [
        ("Express (v2) Root Port (Slot+), MSI 00", "root_port", True),
        ("Express (v2) Root Port (Slot-), MSI 00", "root_port", False),
        ("Express (v2) Upstream Port, MSI 00", "switch_upstream", None),
        ("Express (v2) Downstream Port (Slot+), MSI 00", "switch_downstream", True),
        ("Express (v2) Endpoint, MSI 00", "endpoint", None),
        ("Express (v1) Legacy Endpoint, MSI 00", "legacy_endpoint", None),
        ("Express (v2) Root Complex Integrated Endpoint, MSI 00", "rc_integrated_endpoint", None),
        ("Express (v2) Root Complex Event Collector, MSI 00", "rc_event_collector", None),
        ("Express (v2) PCI-Express to PCI/PCI-X Bridge, MSI 00", "pcie_to_pci_bridge", None),
        ("Express (v2) Unknown type 11, MSI 00", "unknown", None),
    ],
)
def test_port_types(express, port_type, slot):
    text = f"c0:01.1 PCI bridge: AMD Device 14ab\n\tCapabilities: [58] {express}\n"
    (fn,) = parse_lspci_verbose(text)
    assert (fn.port_type, fn.slot_implemented) == (port_type, slot)


@pytest.mark.parametrize(
    "line, expected",
    [
        ("Bus: primary=15, secondary=16, subordinate=1e, sec-latency=0", (0x15, 0x16, 0x1E)),
        ("Bus: primary=00, secondary=01, subordinate=01, sec-latency=0", (0x00, 0x01, 0x01)),
        # CardBus bridges and old lspci print the same fields; order is not relied on.
        ("Bus: primary=02, secondary=03, subordinate=06, sec-latency=176", (0x02, 0x03, 0x06)),
        ("Bus: secondary=a1, subordinate=a2, primary=a0", (0xA0, 0xA1, 0xA2)),
    ],
)
def test_bus_numbers(line, expected):
    text = f"00:01.0 PCI bridge: Intel Corporation Device 352a\n\t{line}\n"
    (fn,) = parse_lspci_verbose(text)
    assert (fn.primary_bus, fn.secondary_bus, fn.subordinate_bus) == expected


def test_bus_numbers_from_samples():
    by_bdf = {f.bdf: f for f in parse_lspci_verbose(load("D_vvvnn_hgx_rootport_switch_vf.txt"))}
    assert (by_bdf["0000:15:01.0"].secondary_bus, by_bdf["0000:15:01.0"].subordinate_bus) == (0x16, 0x1E)
    assert by_bdf["0000:1a:00.0"].secondary_bus is None  # an endpoint has no Bus: line
    (up, down8, down9) = parse_lspci_verbose(load("vvv_plx_pex8725_acs.txt"))
    assert (up.primary_bus, up.secondary_bus, up.subordinate_bus) == (0x02, 0x03, 0x82)
    assert (down9.primary_bus, down9.secondary_bus) == (0x03, 0x05)


@pytest.mark.parametrize(
    "line, message",
    [
        ("Bus: nothing here", "Bus line without"),
        ("Bus: primary=00, secondary=05, subordinate=03", "runs backwards"),
        ("Bus: primary=00, secondary=100, subordinate=101", "out of range"),
    ],
)
def test_bad_bus_line_raises(line, message):
    with pytest.raises(LspciParseError) as info:
        parse_lspci_verbose(f"00:01.0 PCI bridge: X\n\t{line}\n")
    assert message in str(info.value)


def test_verbose_without_caps_and_with_pcilib_noise():
    text = (
        "$ lspci -v\n"
        "00:00.0 Host bridge: Intel Corporation 440FX - 82441FX PMC [Natoma] (rev 02)\n"
        "\tSubsystem: Red Hat, Inc. Qemu virtual machine\n"
        "\tFlags: fast devsel\n"
        "pcilib: sysfs_read_vpd: read failed: Input/output error\n"
        "\n"
        "00:1e.0 3D controller: NVIDIA Corporation GH100 [H100 PCIe] (rev a1)\n"
        "\tPhysical Slot: 30\n"
    )
    a, b = parse_lspci_verbose(text)
    assert a.capabilities_readable is None and a.revision == 2
    assert a.description == "Intel Corporation 440FX - 82441FX PMC [Natoma]"
    assert b.physical_slot == "30" and b.numa_node is None


@pytest.mark.parametrize(
    "text, message",
    [
        ("hello\nworld\n", "no lspci device line"),
        ("00:01.0 PCI bridge: X\nthis line is not indented\n", "expected a device line"),
        ("00:01.0 PCI bridge: X\n\tNUMA node: many\n", "expected a number"),
        ("00:01.0 PCI bridge\n", "without 'class: name'"),
        ("00:01.0 PCI bridge: X\n\tCapabilities: [40] Express (v2) Endpoint\n\t\tLnkSta:\tgarbage\n", "link line"),
    ],
)
def test_verbose_garbage_raises(text, message):
    with pytest.raises(LspciParseError) as info:
        parse_lspci_verbose(text)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_blank_and_non_text():
    assert parse_lspci_verbose("") == ()
    assert parse_lspci_tree("") == ()
    with pytest.raises(LspciParseError):
        parse_lspci_verbose(None)  # type: ignore[arg-type]
    with pytest.raises(LspciParseError):
        parse_lspci_tree(b"-[0000:00]-")  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(6))
def test_fuzz_parses_or_raises_lspci_parse_error(seed):
    rng = random.Random(seed)
    texts = [load(p.name) for p in sorted(SAMPLES.glob("*.txt"))]
    for _ in range(300):
        text = mangle(rng, rng.choice(texts), "+-\\|[]:.0123456789abcdef \t\nxGT/s(),")
        for parser in (parse_lspci_tree, parse_lspci_verbose):
            try:
                parser(text)
            except LspciParseError as exc:
                assert "\n" not in str(exc)
