"""The sysfs reader reads each fact once, and reading less never changes an answer.

Three economies, each checked both ways (what is skipped, and that the answer is the one the
skipped files give):

* an SR-IOV VF's vendor and device ids come from its PF's SR-IOV capability (the kernel's own
  source for them), not from the VF's ``vendor``/``device`` files;
* where a function's directory was listed, links the listing does not show (``driver``,
  ``iommu_group``) are not asked for;
* a CPU list text is parsed once per scan, however many functions name it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.paths import TESTS
from topoagent.core.api import read_host
from topoagent.core.hostfs import HostFS


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every file (root-relative) and link the reader asks for, in order."""
    asked: list[str] = []
    read, link_name = HostFS._read, HostFS.link_name

    def _read(self: HostFS, rel: str, *args: object, **kwargs: object) -> bytes | None:
        asked.append(rel)
        return read(self, rel, *args, **kwargs)  # type: ignore[arg-type]

    def _link_name(self: HostFS, rel: str) -> str | None:
        asked.append(rel)
        return link_name(self, rel)

    monkeypatch.setattr(HostFS, "_read", _read)
    monkeypatch.setattr(HostFS, "link_name", _link_name)
    return asked


def _file_id(root: Path, sysfs_path: str, name: str) -> int:
    return int((root / "sys/devices" / sysfs_path / name).read_text().strip(), 16)


def test_vf_ids_and_pf_come_from_the_pf_config_and_equal_the_files(fixture_root, reads) -> None:
    """The PF's SR-IOV capability says each VF's ids and where it sits: the VF's ``vendor``,
    ``device`` and ``physfn`` say the same, and are not read."""
    import os

    root = fixture_root("sriov-nic")
    snap = read_host(root, nvml="off")
    vfs = [f for f in snap.pci if f.physfn is not None]
    assert len(vfs) == 4
    for vf in vfs:
        assert (
            (vf.vendor_id, vf.device_id)
            == (_file_id(root, vf.sysfs_path, "vendor"), _file_id(root, vf.sysfs_path, "device"))
            == (0x15B3, 0x101E)
        )
        assert vf.physfn == os.readlink(root / "sys/devices" / vf.sysfs_path / "physfn").rsplit("/", 1)[-1]
    assert not [r for r in reads if r.endswith(("/vendor", "/device", "/physfn"))]


def test_vf_ids_from_the_files_when_the_pf_config_shows_no_sriov(scratch_root, reads) -> None:
    """An unprivileged reader sees 64 bytes of the PF's config: the VF's files answer."""
    root = scratch_root("sriov-nic")
    pf = next(f for f in read_host(root, nvml="off").pci if f.sriov_numvfs)
    config = root / "sys/devices" / pf.sysfs_path / "config"
    config.write_bytes(config.read_bytes()[:64])
    reads.clear()
    vfs = [f for f in read_host(root, nvml="off").pci if f.physfn is not None]
    assert [(f.vendor_id, f.device_id, f.physfn) for f in vfs] == [(0x15B3, 0x101E, pf.bdf)] * 4
    assert sum(r.endswith("/device") for r in reads) == sum(r.endswith("/physfn") for r in reads) == 4


def test_links_a_listing_does_not_show_are_not_asked_for(scratch_root, reads) -> None:
    """64-byte configs (no capabilities seen) make the reader list each directory; a function
    without a driver then costs no readlink of ``driver``, and one with a driver still has it."""
    root = scratch_root("sriov-nic")
    for driver in list((root / "sys/devices").glob("pci*/*/driver"))[:2]:
        driver.unlink()  # two root ports left unbound
    before = {f.bdf: f for f in read_host(root, nvml="off").pci}
    for config in (root / "sys/devices").rglob("config"):
        config.write_bytes(config.read_bytes()[:64])
    reads.clear()
    after = {f.bdf: f for f in read_host(root, nvml="off").pci}
    assert {b: (f.driver, f.iommu_group) for b, f in after.items()} == {
        b: (f.driver, f.iommu_group) for b, f in before.items()
    }
    unbound = [f for f in after.values() if f.driver is None]
    assert len(unbound) == 2
    for f in unbound:
        assert not [r for r in reads if r.endswith(f"{f.bdf}/driver")]
    bound = [f for f in after.values() if f.driver is not None]
    assert bound and all(any(r.endswith(f"{f.bdf}/driver") for r in reads) for f in bound)


def test_bridges_seen_without_extended_config_are_not_asked_for_sriov_files(scratch_root, reads) -> None:
    """A 256-byte config view (a VM guest) hides SR-IOV, but not the PCIe port type: the kernel
    makes sriov_* files only for endpoints, so bridges cost no failed opens; the PF still has
    its counts."""
    root = scratch_root("sriov-nic")
    before = {f.bdf: f for f in read_host(root, nvml="off").pci}
    for config in (root / "sys/devices").rglob("config"):
        config.write_bytes(config.read_bytes()[:256])
    reads.clear()
    after = {f.bdf: f for f in read_host(root, nvml="off").pci}
    assert {b: (f.sriov_totalvfs, f.sriov_numvfs) for b, f in after.items()} == {
        b: (f.sriov_totalvfs, f.sriov_numvfs) for b, f in before.items()
    }
    assert any(f.sriov_totalvfs for f in after.values())
    bridges = [f.bdf for f in after.values() if f.config is not None and f.config.pcie_port_type in (4, 5, 6)]
    assert bridges
    asked = [r for r in reads if "/sriov_" in r]
    assert asked and not [r for r in asked if any(f"{b}/sriov_" in r for b in bridges)]


def test_one_cpu_list_text_is_one_set(fixture_root) -> None:
    snap = read_host(fixture_root("sriov-nic"), nvml="off")
    sets = [f.local_cpus for f in snap.pci if f.local_cpus is not None]
    assert len(sets) > 2 and len({id(s) for s in sets}) == len({str(s) for s in sets})


# -- the walk's short cuts give the kernel's answer --------------------------------------------

_DIRS = ["a", "a/b", "a/b/c", "a/d", "e", "e/f"]


@st.composite
def _link_trees(draw: st.DrawFn) -> list[tuple[str, str]]:
    """Symlinks (place, relative target) among a few directories: chains, climbs, loops."""
    places = list(_DIRS) + [""]
    links = []
    for i in range(draw(st.integers(1, 6))):
        where = draw(st.sampled_from(places))
        name = f"{where}/l{i}".lstrip("/")
        earlier = [f"l{j}" for j in range(i)] + [f"l{j}/c" for j in range(i)]  # through links too
        to = draw(st.sampled_from(_DIRS + earlier + ["missing", "a/b/c/.."]))
        up = "../" * where.count("/") + ("../" if where else "")
        target = up + to
        if draw(st.booleans()):
            target = target.replace("/", "//", 1)  # the walk's general path, not its short cut
        links.append((name, target))
    return links


@given(_link_trees(), st.randoms(use_true_random=False))
@settings(max_examples=150, deadline=None)
def test_resolve_agrees_with_the_kernel_inside_the_root(links, rnd) -> None:
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.realpath(tmp)
        for d in _DIRS:
            os.makedirs(f"{root}/{d}", exist_ok=True)
        for name, target in links:
            os.symlink(target, f"{root}/{name}")
        fs = HostFS(root)
        queries = _DIRS + [n for n, _ in links] + [f"{n}/x" for n, _ in links] + [f"{n}/c" for n, _ in links]
        rnd.shuffle(queries)
        for q in queries:
            try:
                want = os.path.realpath(f"{root}/{q}", strict=True)
            except OSError:
                want = None
            if want is not None and not (want + "/").startswith(root + "/"):
                continue  # left the root: the kernel and the walk rightly differ
            got = fs.resolve(q)
            assert (None if got is None else os.path.join(root, got).rstrip("/")) == want, (q, links)


def _normalised(link_dir: str, target: str) -> str:
    """A symlink target as a root-relative path: POSIX's normalisation of it as an absolute
    path (``..`` stops at ``/``, which stands for the root here), the specification."""
    import posixpath

    joined = target if target.startswith("/") else f"{link_dir}/{target}"
    return posixpath.normpath("/" + joined.lstrip("/")).lstrip("/")


@given(
    st.lists(
        st.sampled_from(["..", ".", "", "devices", "pci0000:30", "0000:31:01.2", "net", "a.b"]), min_size=1, max_size=8
    ).map("/".join),
    st.booleans(),
)
@settings(max_examples=300, deadline=None)
def test_link_target_normalises_as_component_by_component(target, absolute) -> None:
    import os
    import tempfile

    target = ("/" if absolute else "") + target
    if not target.strip("/"):
        return  # "" and "/" are no symlink targets one can make
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.realpath(tmp)
        os.makedirs(f"{root}/sys/class/net")
        os.symlink(target, f"{root}/sys/class/net/eth0")
        assert HostFS(root).link_target("sys/class/net/eth0") == _normalised("sys/class/net", target)


def test_texts_below_reads_as_text_does(tmp_path) -> None:
    """One listing for many sibling directories; links among them still resolve inside the root."""
    import os

    base = tmp_path / "sys/kernel/iommu_groups"
    for group, kind in (("0", "DMA"), ("1", "identity"), ("7", "DMA-FQ")):
        (base / group).mkdir(parents=True)
        (base / group / "type").write_text(kind + "\n")
    (base / "5").mkdir()  # no type file: absent
    os.symlink("7", base / "2")  # a link to a sibling
    os.symlink("/etc", base / "3")  # re-rooted: <root>/etc does not exist
    (base / "x").mkdir()
    (base / "x" / "type").write_text("never read\n")
    fs = HostFS(tmp_path)
    got = fs.texts_below("sys/kernel/iommu_groups", "type", lambda n: n.isdigit())
    assert got == {
        n: HostFS(tmp_path).text(f"sys/kernel/iommu_groups/{n}/type") for n in ("0", "1", "2", "3", "5", "7")
    }
    assert got == {"0": "DMA", "1": "identity", "2": "DMA-FQ", "3": None, "5": None, "7": "DMA-FQ"}
    assert fs.errors == []


def test_a_garbled_sriov_capability_leaves_the_vfs_to_their_links(scratch_root) -> None:
    """NumVFs 65535 at stride 0 in a hostile capture places no VF where the real ones are: they
    are still found, through their physfn links."""
    import struct

    root = scratch_root("sriov-nic")
    pf = next(f for f in read_host(root, nvml="off").pci if f.sriov_numvfs)
    config = root / "sys/devices" / pf.sysfs_path / "config"
    data = bytearray(config.read_bytes())
    off, ptr = 0, 0x100  # the SR-IOV capability's offset, found by walking the extended list
    while ptr:
        header = struct.unpack_from("<I", data, ptr)[0]
        if header & 0xFFFF == 0x0010:
            off = ptr
            break
        ptr = header >> 20 & 0xFFC
    assert off
    struct.pack_into("<H", data, off + 0x10, 0xFFFF)  # NumVFs
    struct.pack_into("<HH", data, off + 0x14, 1, 0)  # First VF Offset 1, VF Stride 0
    config.write_bytes(bytes(data))
    vfs = [f for f in read_host(root, nvml="off").pci if f.physfn is not None]
    assert [f.physfn for f in vfs] == [pf.bdf] * 4


# -- what the economies must not change (found in review) -------------------------------------


def _this_host(tmp_path: Path) -> Path:
    import tarfile

    root = tmp_path / "host"
    with tarfile.open(TESTS / "fixtures/captures/this-host.tar.gz") as tar:
        tar.extractall(root, filter="tar")
    return root


def test_a_vf_address_without_a_directory_is_not_made_a_vf(scratch_root) -> None:
    """The PF's capability names a VF only for a function whose header reads 0xffff: an entry
    at a VF's address whose directory is gone stays unidentified, its missing files reported."""
    root = scratch_root("sriov-nic")
    entry = root / "sys/bus/pci/devices/0000:39:00.4"
    shutil.rmtree(entry.resolve())
    snap = read_host(root, nvml="off")
    ghost = next(f for f in snap.pci if f.bdf == "0000:39:00.4")
    assert (ghost.vendor_id, ghost.device_id, ghost.physfn) == (None, None, None)
    missing = {e.path.rsplit("/", 1)[-1] for e in snap.probe_errors if "0000:39:00.4" in e.path}
    assert {"class", "vendor", "device"} <= missing


def test_probe_errors_come_in_reading_order(tmp_path) -> None:
    """Resolving an entry and reading its function alternate: errors are listed function by
    function, as a person reads the tree."""
    import os

    root = _this_host(tmp_path)
    devices = root / "sys/bus/pci/devices"
    (devices / "0000:00:01.0").resolve().joinpath("class").unlink()
    os.unlink(devices / "0000:00:05.0")
    os.symlink("0000:00:05.0", devices / "0000:00:05.0")  # a loop
    paths = [e.path for e in read_host(root, nvml="off").probe_errors]
    first_class = next(i for i, p in enumerate(paths) if p.endswith("0000:00:01.0/class"))
    first_loop = next(i for i, p in enumerate(paths) if p.endswith("devices/0000:00:05.0"))
    assert first_class < first_loop


def test_functions_directly_in_sys_devices_keep_their_own_root(tmp_path) -> None:
    """Siblings share one ancestry, but a function directly in ``sys/devices`` names its own."""
    import os

    from topoagent.core.api import scan

    root = _this_host(tmp_path)
    devices = root / "sys/bus/pci/devices"
    for bdf, name in (("0000:00:01.0", "0000:00:01.0"), ("0000:00:02.0", "pci0000:77")):
        (devices / bdf).resolve().rename(root / "sys/devices" / name)
        os.unlink(devices / bdf)
        os.symlink(f"../../../devices/{name}", devices / bdf)
    topo = scan(root, nvml="off").topology
    assert topo.by_bdf("0000:00:01.0").parent is None
    assert topo.by_bdf("0000:00:02.0").parent == "pci0000:77"


def test_expected_vfs_are_bounded_by_the_functions_listed(scratch_root) -> None:
    """A hostile PF capability claiming 65,535 VFs at stride 1 places no more VFs than the
    listing holds functions."""
    import struct

    from topoagent.core.read.pci import PciReader

    root = scratch_root("sriov-nic")
    pf = next(f for f in read_host(root, nvml="off").pci if f.sriov_numvfs)
    config = root / "sys/devices" / pf.sysfs_path / "config"
    data = bytearray(config.read_bytes())
    ptr = 0x100
    while struct.unpack_from("<I", data, ptr)[0] & 0xFFFF != 0x0010:
        ptr = struct.unpack_from("<I", data, ptr)[0] >> 20 & 0xFFC
        assert ptr
    struct.pack_into("<H", data, ptr + 0x10, 0xFFFF)  # NumVFs
    struct.pack_into("<HH", data, ptr + 0x14, 1, 1)  # First VF Offset 1, VF Stride 1
    config.write_bytes(bytes(data))
    reader = PciReader(HostFS(root))
    functions = reader.functions()
    assert 0 < len(reader._vf_parent) <= len(functions)
    assert [f.physfn for f in functions if f.physfn] == [pf.bdf] * 4  # the real VFs still found


def test_a_path_ending_in_dotdot_opens_nothing_outside_the_root(tmp_path, monkeypatch) -> None:
    import os

    root = tmp_path / "root"
    (root / "sys").mkdir(parents=True)
    opened: list[str] = []
    real_open = os.open

    def spy(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        opened.append(os.fsdecode(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    fs = HostFS(root)
    assert fs.text("..") is None and fs.text("sys/../..") is None
    # the root itself is a directory: refused from lstat, before anything is opened
    assert all(os.path.realpath(p).startswith(str(root.resolve())) for p in opened)
