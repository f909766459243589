"""The fake-sysfs generator writes what Linux writes.

Every machine description in tests/fixtures/machines is generated once into a temporary
directory and checked against the invariants of a real sysfs tree.  The config-space decoder
here is deliberately independent of the generator's encoder.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

try:
    from tests.fakesysfs import (
        DescriptionError,
        build,
        fmt_cpulist,
        fmt_mask,
        generate,
        load_machine,
        machine_names,
        parse_cpulist,
        summary,
    )
except ImportError:  # run from somewhere that does not put the repository root on sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.fakesysfs import (
        DescriptionError,
        build,
        fmt_cpulist,
        fmt_mask,
        generate,
        load_machine,
        machine_names,
        parse_cpulist,
        summary,
    )

MACHINES = machine_names()
BDF_RE = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-1][0-9a-f]\.[0-7]$")
ROOTBUS_RE = re.compile(r"^pci([0-9a-f]{4,8}):([0-9a-f]{2})$")
SPEED_CODE = {"2.5": 1, "5": 2, "5.0": 2, "8": 3, "8.0": 3, "16": 4, "16.0": 4, "32": 5, "32.0": 5, "64": 6, "64.0": 6}


# ------------------------------------------------------------------------------------------
# an independent reader of the generated tree
# ------------------------------------------------------------------------------------------
def read(p: Path) -> str:
    return p.read_text().strip()


def decode_config(cfg: bytes) -> dict:
    """Decode the parts of PCI config space topoagent cares about (PCI spec layout)."""

    def r16(o: int) -> int:
        return int.from_bytes(cfg[o : o + 2], "little")

    def r32(o: int) -> int:
        return int.from_bytes(cfg[o : o + 4], "little")

    d: dict = {
        "vendor": r16(0x00),
        "device": r16(0x02),
        "class": (cfg[0x0B] << 16) | (cfg[0x0A] << 8) | cfg[0x09],
        "header": cfg[0x0E] & 0x7F,
        "multifunction": bool(cfg[0x0E] & 0x80),
        "caps_listed": bool(r16(0x06) & 0x10),
        "cap_ptr": cfg[0x34],
    }
    if d["header"] == 1:
        d["primary"], d["secondary"], d["subordinate"] = cfg[0x18], cfg[0x19], cfg[0x1A]
    else:
        d["subsystem"] = (r16(0x2C), r16(0x2E))
    caps: dict[int, int] = {}
    if d["caps_listed"] and len(cfg) > 0x40:
        ptr, seen = cfg[0x34] & 0xFC, set()
        while ptr and ptr not in seen and ptr + 2 <= len(cfg):
            seen.add(ptr)
            caps.setdefault(cfg[ptr], ptr)
            ptr = cfg[ptr + 1] & 0xFC
    d["caps"] = caps
    if 0x10 in caps:
        p = caps[0x10]
        d["port_type"] = (r16(p + 0x02) >> 4) & 0xF
        lnkcap, lnksta = r32(p + 0x0C), r16(p + 0x12)
        d["max_speed_code"], d["max_width"] = lnkcap & 0xF, (lnkcap >> 4) & 0x3F
        d["cur_speed_code"], d["cur_width"] = lnksta & 0xF, (lnksta >> 4) & 0x3F
    ext: dict[int, int] = {}
    if len(cfg) >= 4096:
        off, seen = 0x100, set()
        while off and off not in seen and off + 4 <= len(cfg):
            seen.add(off)
            hdr = r32(off)
            if hdr == 0:
                break
            ext.setdefault(hdr & 0xFFFF, off)
            off = (hdr >> 20) & 0xFFC
    d["ext"] = ext
    if 0x000D in ext:
        d["acs_cap"], d["acs_ctl"] = r16(ext[0x000D] + 4), r16(ext[0x000D] + 6)
    if 0x0010 in ext:
        d["sriov_total"], d["sriov_num"] = r16(ext[0x0010] + 0x0E), r16(ext[0x0010] + 0x10)
    return d


def speed_code(text: str) -> int:
    m = re.match(r"^([0-9.]+) GT/s( PCIe)?$", text)
    return SPEED_CODE[m.group(1)] if m else 0


def functions(root: Path) -> dict[str, Path]:
    """BDF -> resolved device directory, through sys/bus/pci/devices."""
    base = root / "sys/bus/pci/devices"
    return {name: (base / name).resolve() for name in sorted(os.listdir(base))}


def is_bridge(d: Path) -> bool:
    return (d / "class").is_file() and read(d / "class").startswith("0x0604")


@pytest.fixture(scope="session")
def trees(fixture_root):
    """Each machine's tree: the session's one copy (tests/conftest.py), read only here."""
    return fixture_root


@pytest.fixture(params=MACHINES)
def tree(request, trees) -> tuple[str, Path]:
    return request.param, trees(request.param)


# ------------------------------------------------------------------------------------------
# invariants every machine must keep
# ------------------------------------------------------------------------------------------
def test_machine_set_is_complete():
    want = {
        "dgx-h100",
        "dgx-a100-nps4",
        "wrong-socket-nic",
        "workstation",
        "cloud-vm",
        "grace-hopper",
        "p4d-efa",
        "sriov-nic",
        "no-gpu",
        "faulty-gpu-node",
        "unprivileged",
    }
    assert want <= set(MACHINES)


def test_bus_links_are_relative_and_land_on_bdf_dirs(tree):
    _, root = tree
    base = root / "sys/bus/pci/devices"
    names = sorted(os.listdir(base))
    assert names
    for name in names:
        link = base / name
        assert link.is_symlink()
        target = os.readlink(link)
        assert not os.path.isabs(target)
        assert target.startswith("../../../devices/pci"), target
        real = link.resolve()
        assert real.is_dir()
        assert real.name == name
        assert BDF_RE.match(name)
        assert str(real).startswith(str((root / "sys/devices").resolve()) + os.sep)


def test_device_directories_nest_like_linux(tree):
    _, root = tree
    funcs = functions(root)
    assert funcs
    for bdf, d in funcs.items():
        parent = d.parent
        m = ROOTBUS_RE.match(parent.name)
        if m:
            assert parent.parent == (root / "sys/devices").resolve()
            assert not (parent / "numa_node").exists(), "a root bus has no numa_node"
            dom, bus = bdf.split(":")[:2]
            assert (m.group(1), m.group(2)) == (dom, bus), f"{bdf} sits on the wrong root bus"
        else:
            assert BDF_RE.match(parent.name), f"{bdf}: parent {parent.name} is neither bridge nor root bus"
            assert is_bridge(parent), f"{bdf}: parent {parent.name} is not a bridge"
            # the child's bus is the bridge's secondary bus (named by its pci_bus directory)
            dom, bus = bdf.split(":")[:2]
            assert (parent / "pci_bus" / f"{dom}:{bus}").is_dir()
        for f in (
            "class",
            "vendor",
            "device",
            "subsystem_vendor",
            "subsystem_device",
            "numa_node",
            "local_cpulist",
            "local_cpus",
        ):
            assert (d / f).is_file(), f"{bdf} lacks {f}"
        # dgx-h100-faults writes a garbage class file on purpose (classfile=0x03zz00).
        assert re.fullmatch(r"0x[0-9a-f]{6}", read(d / "class")) or read(d / "class") == "0x03zz00"
        assert re.fullmatch(r"0x[0-9a-f]{4}", read(d / "vendor"))
        assert re.fullmatch(r"-?\d+", read(d / "numa_node"))


def test_config_space_decodes_back(tree):
    name, root = tree
    funcs = functions(root)
    decoded: dict[str, dict] = {}
    for bdf, d in funcs.items():
        data = (d / "config").read_bytes() if (d / "config").is_file() else None
        if data is not None and data == b"\xff" * len(data):  # offbus=true: a device gone from the bus
            assert not (d / "physfn").exists() and read(d / "vendor") != "0xffff"
        elif data is not None:
            decoded[bdf] = decode_config(data)
    if name == "unprivileged":
        assert decoded and all(len((d / "config").read_bytes()) == 64 for d in funcs.values())
    for bdf, c in decoded.items():
        d = funcs[bdf]
        size = len((d / "config").read_bytes())
        assert size in (64, 256, 4096)
        _check_header(bdf, d, c, funcs)
        if size == 64:
            assert c["caps"] == {} and "port_type" not in c  # the capability list lies beyond 64 bytes
            assert c["caps_listed"] and c["cap_ptr"] >= 0x40
            continue
        if c["header"] == 1:
            _check_bridge_buses(bdf, d, c, funcs)
        # PCIe capability: port type and link registers agree with topology and sysfs
        if "port_type" not in c:
            assert not (d / "current_link_width").exists(), f"{bdf}: link files without a PCIe capability"
            continue
        _check_pcie(bdf, d, c, decoded)
        _check_extended(bdf, d, c, size)


def _check_header(bdf, d, c, funcs):
    """Ids, class, header type, subsystem and the multi-function bit agree with sysfs."""
    if (d / "physfn").exists():  # an SR-IOV VF's id registers read 0xffff; sysfs has the real ids
        assert (c["vendor"], c["device"]) == (0xFFFF, 0xFFFF)
    else:
        assert c["vendor"] == int(read(d / "vendor"), 16)
        assert c["device"] == int(read(d / "device"), 16)
    if read(d / "class") != "0x03zz00":  # the garbage class of dgx-h100-faults
        assert c["class"] == int(read(d / "class"), 16)
    assert c["header"] == (1 if is_bridge(d) else 0)
    if c["header"] == 0:
        assert c["subsystem"] == (int(read(d / "subsystem_vendor"), 16), int(read(d / "subsystem_device"), 16))
    # multi-function bit: another (non-VF) function in the same slot
    slot = bdf[:-1]
    others = [b for b in funcs if b.startswith(slot) and b != bdf and not (funcs[b] / "physfn").exists()]
    if not (d / "physfn").exists():
        assert c["multifunction"] == bool(others), bdf


def _check_bridge_buses(bdf, d, c, funcs):
    """A bridge's secondary/subordinate buses agree with the tree below it."""
    dom = bdf.split(":")[0]
    assert c["primary"] == int(bdf.split(":")[1], 16)
    below = [b for b in funcs if funcs[b] != d and str(funcs[b]).startswith(str(d) + os.sep)]
    children = [b for b in below if funcs[b].parent == d]
    assert all(b.startswith(f"{dom}:{c['secondary']:02x}:") for b in children), (bdf, children)
    assert all(int(b.split(":")[1], 16) <= c["subordinate"] for b in below)
    assert all(int(b.split(":")[1], 16) >= c["secondary"] for b in below)
    assert (d / "pci_bus" / f"{dom}:{c['secondary']:02x}").is_dir()


def _check_pcie(bdf, d, c, decoded):
    """Port type from the topology; link registers as sysfs says; both ends of a link agree."""
    parent = d.parent
    if ROOTBUS_RE.match(parent.name):
        want = 4 if c["header"] == 1 else 9
    else:
        pc = decoded[parent.name]
        assert pc.get("port_type") in (4, 5, 6), f"{bdf}: parent {parent.name} port type {pc.get('port_type')}"
        want = (5 if c["header"] == 1 else 0) if pc["port_type"] in (4, 6) else 6
    assert c["port_type"] == want, f"{bdf}: port type {c['port_type']} != {want}"
    assert (d / "current_link_width").exists()
    cw, mw = int(read(d / "current_link_width")), int(read(d / "max_link_width"))
    assert c["cur_width"] == cw
    assert c["max_width"] == (0 if mw == 255 else mw)
    assert c["cur_speed_code"] == speed_code(read(d / "current_link_speed"))
    assert c["max_speed_code"] == speed_code(read(d / "max_link_speed"))
    # both ends of a link agree (port above an endpoint or an upstream port)
    if not ROOTBUS_RE.match(parent.name) and decoded[parent.name]["port_type"] in (4, 6) and c["cur_width"]:
        pc = decoded[parent.name]
        assert (pc["cur_speed_code"], pc["cur_width"]) == (c["cur_speed_code"], c["cur_width"]), bdf


def _check_extended(bdf, d, c, size):
    """Extended space: AER first, ACS on switch downstream ports, the SR-IOV counts."""
    if size == 4096:
        assert c["ext"].get(0x0001) == 0x100, f"{bdf}: AER should open the extended list"
        if c["port_type"] == 6:
            assert "acs_ctl" in c, f"{bdf}: switch downstream port without ACS"
        if (d / "sriov_totalvfs").exists():
            assert c["sriov_total"] == int(read(d / "sriov_totalvfs"))
            assert c["sriov_num"] == int(read(d / "sriov_numvfs"))
    else:
        assert c["ext"] == {}


def test_class_devices_point_at_pci_functions(tree):
    _, root = tree
    funcs = set(functions(root).values())
    for cls in ("net", "infiniband", "nvme"):
        base = root / "sys/class" / cls
        if not base.exists():
            continue
        for name in sorted(os.listdir(base)):
            link = base / name
            assert link.is_symlink() and not os.path.isabs(os.readlink(link))
            assert os.readlink(link).startswith("../../devices/")
            real = link.resolve()
            assert real.name == name and real.parent.name == cls
            if "virtual" in real.parts:
                assert not (real / "device").exists()
                continue
            dev = (real / "device").resolve()
            assert dev in funcs, f"{cls}/{name}/device -> {dev}"
            assert os.readlink(real / "device") == f"../../../{dev.name}"
            assert real.parent.parent == dev
    lo = root / "sys/class/net/lo"
    assert lo.resolve() == (root / "sys/devices/virtual/net/lo").resolve()
    for name in sorted(os.listdir(root / "sys/class/net")):
        nd = root / "sys/class/net" / name
        if name == "lo":
            continue
        state = read(nd / "operstate")
        assert state in ("up", "down")
        speed = int(read(nd / "speed"))
        assert speed == -1 if state == "down" else True
    ib = root / "sys/class/infiniband"
    if ib.exists():
        for name in sorted(os.listdir(ib)):
            port = ib / name / "ports/1"
            assert read(port / "state") in ("4: ACTIVE", "1: DOWN")
            assert read(port / "link_layer") in ("InfiniBand", "Ethernet", "Unspecified")
            assert re.match(r"^\d+ Gb/sec", read(port / "rate"))


def test_sriov_links_are_mutual(tree):
    _, root = tree
    funcs = functions(root)
    assert funcs
    for d in funcs.values():
        virtfns = sorted(p for p in os.listdir(d) if p.startswith("virtfn"))
        if (d / "sriov_numvfs").exists():
            assert int(read(d / "sriov_numvfs")) == len(virtfns)
            assert int(read(d / "sriov_numvfs")) <= int(read(d / "sriov_totalvfs"))
        for v in virtfns:
            assert os.readlink(d / v).startswith("../") and "/" not in os.readlink(d / v)[3:]
            vf = (d / v).resolve()
            assert vf.parent == d.parent, "a VF is a sibling of its PF"
            assert (vf / "physfn").resolve() == d
        if (d / "physfn").exists():
            pf = (d / "physfn").resolve()
            assert any((pf / v).resolve() == d for v in os.listdir(pf) if v.startswith("virtfn"))


def test_nodes_partition_the_online_cpus(tree):
    _, root = tree
    online = parse_cpulist(read(root / "sys/devices/system/cpu/online"))
    possible = parse_cpulist(read(root / "sys/devices/system/cpu/possible"))
    nbits = len(possible)
    assert set(online) <= set(possible)
    base = root / "sys/devices/system/node"
    nodes = parse_cpulist(read(base / "online"))
    seen: list[int] = []
    for n in nodes:
        nd = base / f"node{n}"
        cpus = parse_cpulist((nd / "cpulist").read_text())
        assert read(nd / "cpumap") == fmt_mask(cpus, nbits)
        seen += cpus
        dist = read(nd / "distance").split()
        assert len(dist) == len(nodes) and dist[nodes.index(n)] == "10"
        assert re.match(rf"^Node {n} MemTotal: +\d+ kB$", (nd / "meminfo").read_text().splitlines()[0])
    assert sorted(seen) == online and len(seen) == len(set(seen))
    for c in online:
        topo = root / f"sys/devices/system/cpu/cpu{c}/topology"
        for f in ("physical_package_id", "die_id", "core_id", "thread_siblings_list"):
            assert (topo / f).is_file()
        assert c in parse_cpulist(read(topo / "thread_siblings_list"))
    for bdf, d in functions(root).items():
        cpus = parse_cpulist(read(d / "local_cpulist"))
        assert read(d / "local_cpus") == fmt_mask(cpus, nbits), bdf
        assert set(cpus) <= set(online)
        assert int(read(d / "numa_node")) in nodes + [-1]
    status = (root / "proc/self/status").read_text()
    allowed = re.search(r"^Cpus_allowed_list:\t(.*)$", status, re.M).group(1)
    mask = re.search(r"^Cpus_allowed:\t(.*)$", status, re.M).group(1)
    assert fmt_mask(parse_cpulist(allowed), nbits) == mask
    assert set(parse_cpulist(allowed)) <= set(online)


def test_no_absolute_or_dangling_symlinks(tree):
    _, root = tree
    rroot = os.path.realpath(root)
    count = 0
    for dirpath, dirnames, filenames in os.walk(rroot):  # never enters linked dirs: dirpath is real
        for name in dirnames + filenames:
            link = os.path.join(dirpath, name)
            if not os.path.islink(link):
                continue
            count += 1
            target = os.readlink(link)
            assert not os.path.isabs(target), f"{link} -> {target}"
            real = os.path.normpath(os.path.join(dirpath, target))
            assert real.startswith(rroot + os.sep), f"{link} -> {target} leaves the root"
            assert os.path.exists(real), f"{link} -> {target} dangles"
    assert count > 0


def test_drivers_and_iommu_groups(tree):
    _, root = tree
    funcs = functions(root)
    assert funcs
    groups = root / "sys/kernel/iommu_groups"
    for bdf, d in funcs.items():
        if (d / "driver").is_symlink():
            drv = (d / "driver").resolve()
            assert drv.parent == (root / "sys/bus/pci/drivers").resolve()
            assert (drv / bdf).resolve() == d
        if (d / "iommu_group").is_symlink():
            g = (d / "iommu_group").resolve()
            assert g.parent == groups.resolve()
            assert read(g / "type") in ("identity", "DMA", "DMA-FQ")
            assert (g / "devices" / bdf).resolve() == d
    if groups.exists():
        for g in sorted(os.listdir(groups)):
            for bdf in os.listdir(groups / g / "devices"):
                assert (funcs[bdf] / "iommu_group").resolve() == (groups / g).resolve()
    else:
        assert not any((d / "iommu_group").exists() for d in funcs.values())


def test_proc_and_dmi(tree):
    _, root = tree
    assert read(root / "proc/sys/kernel/hostname")
    assert read(root / "proc/cmdline").startswith("BOOT_IMAGE=")
    assert (root / "sys/class/dmi/id").is_symlink()
    assert read(root / "sys/class/dmi/id/sys_vendor")
    assert (root / "proc/cpuinfo").read_text().startswith("processor\t: 0\n")


# ------------------------------------------------------------------------------------------
# what particular machines must show
# ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def rows():
    return {name: {r["bdf"]: r for r in summary(name)} for name in MACHINES}


def gpus(rs: dict) -> dict:
    return {b: r for b, r in rs.items() if r["class"] in ("0x030200", "0x030000") and r["driver"] == "nvidia"}


def test_dgx_h100_shape(rows, trees):
    rs = rows["dgx-h100"]
    g = gpus(rs)
    assert sorted(g) == [f"0000:{b}:00.0" for b in ("1b", "43", "52", "61", "9d", "c3", "d1", "df")]
    assert [g[b]["numa_node"] for b in sorted(g)] == [0, 0, 0, 0, 1, 1, 1, 1]
    rdma = {r["rdma"]: b for b, r in rs.items() if r["rdma"]}
    assert rdma["mlx5_0"] == "0000:18:00.0" and rdma["mlx5_11"] == "0000:dc:00.0"
    assert sum(1 for r in rs.values() if r["class"] == "0x068000") == 4
    root = trees("dgx-h100")
    gpu0 = (root / "sys/bus/pci/devices/0000:1b:00.0").resolve()
    chain = [p.name for p in gpu0.relative_to((root / "sys/devices").resolve()).parents][:-1]
    assert os.readlink(root / "sys/bus/pci/devices/0000:1b:00.0") == (
        "../../../devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.0/0000:1a:00.0/0000:1b:00.0"
    )
    assert chain  # nested, not flat
    assert read(gpu0 / "local_cpulist") == "0-55,112-167"
    cfg = decode_config((root / "sys/bus/pci/devices/0000:1a:00.0/config").read_bytes())
    assert cfg["port_type"] == 6 and cfg["acs_ctl"] == 0
    assert read(root / "sys/kernel/iommu_groups/0/type") == "identity"
    assert (root / "sys/module/nvidia_peermem/version").is_file()


def test_faults_are_where_the_description_says(rows, trees):
    rs = rows["faulty-gpu-node"]
    assert rs["0000:17:01.0"]["acs_ctl"] == 0x0C
    assert all(r["acs_ctl"] in (None, 0) for b, r in rs.items() if b != "0000:17:01.0")
    root = trees("faulty-gpu-node")
    dev = root / "sys/bus/pci/devices"
    assert decode_config((dev / "0000:17:01.0/config").read_bytes())["acs_ctl"] == 0x0C
    assert (read(dev / "0000:40:00.0/current_link_width"), read(dev / "0000:40:00.0/max_link_width")) == ("8", "16")
    assert read(dev / "0000:9d:00.0/current_link_speed") == "16.0 GT/s PCIe"
    assert read(dev / "0000:9d:00.0/max_link_speed") == "32.0 GT/s PCIe"
    assert read(dev / "0000:c0:00.0/numa_node") == "0"
    assert read(dev / "0000:c0:00.0/local_cpulist") == "48-95,144-191"
    assert read(root / "sys/kernel/iommu_groups/0/type") == "DMA-FQ"
    assert "iommu=pt" not in read(root / "proc/cmdline")
    assert not (root / "sys/module/nvidia_peermem").exists()
    assert not (root / "sys/kernel/mm/memory_peers").exists()


def test_cloud_vm_is_flat_and_unknown(trees):
    root = trees("cloud-vm")
    funcs = functions(root)
    assert all(d.parent.name == "pci0000:00" for d in funcs.values())
    assert all(read(d / "numa_node") == "-1" for d in funcs.values())
    gpu = funcs["0000:00:04.0"]
    assert read(gpu / "current_link_speed") == "Unknown" and read(gpu / "max_link_width") == "255"
    assert not (funcs["0000:00:02.0"] / "current_link_speed").exists()
    assert read(gpu / "local_cpulist") == "0-31"
    assert read(root / "sys/devices/system/cpu/possible") == "0-63"
    assert read(gpu / "local_cpus") == "00000000,ffffffff"
    assert " hypervisor " in (root / "proc/cpuinfo").read_text()
    assert read(root / "sys/class/dmi/id/sys_vendor") == "QEMU"
    assert len((gpu / "config").read_bytes()) == 256
    assert not (root / "sys/kernel/iommu_groups").exists()


def test_grace_hopper_nodes(trees):
    root = trees("grace-hopper")
    base = root / "sys/devices/system/node"
    assert read(base / "online") == "0-8" and read(base / "has_cpu") == "0"
    assert read(base / "has_memory") == "0-1"
    assert (base / "node1/cpulist").read_text() == "\n"
    assert read(base / "node1/cpumap") == "00,00000000,00000000"
    assert read(base / "node0/cpumap") == "ff,ffffffff,ffffffff"
    assert (
        os.readlink(root / "sys/bus/pci/devices/0009:01:00.0")
        == "../../../devices/pci0009:00/0009:00:00.0/0009:01:00.0"
    )
    assert read(root / "sys/kernel/mm/memory_peers/nv_mem/version")
    assert "Features" in (root / "proc/cpuinfo").read_text()


def test_sriov_nic(rows):
    rs = rows["sriov-nic"]
    vfs = sorted(b for b, r in rs.items() if r["physfn"])
    assert vfs == ["0000:39:00.2", "0000:39:00.3", "0000:39:00.4", "0000:39:00.5"]
    assert [rs[b]["netdevs"] for b in vfs] == [["enp57s0f0v0"], ["enp57s0f0v1"], ["enp57s0f0v2"], []]
    assert rs["0000:39:00.5"]["driver"] == "vfio-pci"


def test_old_kernel_link_format(trees):
    root = trees("wrong-socket-nic")
    d = root / "sys/bus/pci/devices/0000:17:00.0"
    assert read(d / "current_link_speed") == "16 GT/s"
    assert read(root / "sys/bus/pci/devices/0000:01:00.0/max_link_speed") == "5 GT/s"
    assert read(root / "sys/bus/pci/devices/0000:99:00.0/numa_node") == "1"


def test_generation_is_deterministic(trees, tmp_path):
    def snapshot(root: Path) -> list:
        out = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(dirnames + filenames):
                p = Path(dirpath) / name
                rel = str(p.relative_to(root))
                if p.is_symlink():
                    out.append((rel, "->", os.readlink(p)))
                elif p.is_file():
                    out.append((rel, p.read_bytes()))
                else:
                    out.append((rel, "/"))
        return out

    for name in ("sriov-nic", "grace-hopper"):
        assert snapshot(trees(name)) == snapshot(generate(name, tmp_path / name))


# ------------------------------------------------------------------------------------------
# the description format
# ------------------------------------------------------------------------------------------
def small(tree: str, **machine) -> dict:
    return {
        "machine": {"config": 4096, **machine},
        "cpu": {"sockets": 1, "cores": 4, "threads": 2},
        "rootbus": [{"id": "0000:10", "node": 0, "tree": tree}],
    }


def test_counts_blocks_and_dict_trees_agree():
    text = """
01.0 spr-rp
  pex890
    pex890 *3 > cx7-ib net=ib{n}
"""
    as_dicts = [
        {
            "part": "spr-rp",
            "slot": "01.0",
            "children": [
                {
                    "part": "pex890",
                    "children": [
                        {"part": "pex890", "count": 3, "children": [{"part": "cx7-ib", "net": "ib{n}"}]},
                    ],
                }
            ],
        }
    ]
    a = [(r["bdf"], r["netdevs"], r["rdma"]) for r in summary(small(text))]
    b = [(r["bdf"], r["netdevs"], r["rdma"]) for r in summary(small(as_dicts))]
    assert a == b
    nics = [x for x in a if x[1]]
    # depth-first bus numbering: rp 10:01.0 -> 11, upstream 11:00.0 -> 12, ports 12:0N.0 -> 13..15
    assert nics == [
        ("0000:13:00.0", ["ib0"], "mlx5_0"),
        ("0000:14:00.0", ["ib1"], "mlx5_1"),
        ("0000:15:00.0", ["ib2"], "mlx5_2"),
    ]
    desc = small("@b")
    desc["blocks"] = {"b": {"tree": text}}
    assert [(r["bdf"], r["netdevs"]) for r in summary(desc)] == [(x[0], x[1]) for x in a]


@pytest.mark.parametrize(
    "tree, message",
    [
        ("01.0 spr-rp\n  pex890\n    h100", "directly below a switch upstream"),
        ("01.0 spr-rp\n  01.0 h100", "only device 00"),
        ("01.0 h100\n01.0 h100", "defined twice"),
        ("01.0 nosuchpart", "unknown part"),
        ("01.0 spr-rp\n\tpex890", "tabs"),
        ("01.0 h100\n  h100", "not a bridge"),
        ("@missing", "no block"),
        ("01.0 spr-rp > pex890 *2", "first item of a chain"),
        ("01.0 h100 link=17x16", "not a PCIe speed"),
        ("01.0 spr-rp acs=Bogus", "unknown ACS bit"),
    ],
)
def test_bad_descriptions_are_refused(tree, message):
    with pytest.raises(DescriptionError, match=message):
        build(small(tree))


def test_refuses_to_overwrite(tmp_path):
    generate(small("01.0 spr-rp > h100"), tmp_path)
    with pytest.raises(FileExistsError):
        generate(small("01.0 spr-rp > h100"), tmp_path)


def test_kernel_mask_and_list_formats():
    assert fmt_cpulist([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert fmt_cpulist([]) == ""
    assert parse_cpulist("0-55,112-167") == list(range(56)) + list(range(112, 168))
    assert fmt_mask(range(72), 72) == "ff,ffffffff,ffffffff"
    assert fmt_mask([0], 224) == ",".join(["00000000"] * 6 + ["00000001"])
    assert fmt_mask(range(8), 8) == "ff"
    assert fmt_mask([4], 6) == "10"


def test_load_machine_and_names():
    desc = load_machine("dgx-h100")
    assert desc["machine"]["name"] == "dgx-h100"
    with pytest.raises(DescriptionError):
        load_machine("no-such-machine")
