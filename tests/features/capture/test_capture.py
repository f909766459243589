"""``topoagent capture``: what it records, what it scrubs, how a capture replays, and how an
untrusted capture tarball is unpacked.

Goldens of the committed capture of the development machine (tests/fixtures/captures/
this-host.tar.gz) live in tests/golden/capture-this-host/; regenerate after an intended change
with ``python -m pytest tests/features/capture/test_capture.py --update-golden`` and review the diff.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner

from tests.fakesysfs import machine_names
from tests.paths import REPO
from topoagent.cli import cli
from topoagent.core.api import scan
from topoagent.core.hostfs import HostFS
from topoagent.core.read import archive as capture_archive
from topoagent.core.read.archive import CaptureError, load_capture, resolve_root, unpack_capture
from topoagent.core.render.json_report import render
from topoagent.core.tree import MemoryTree
from topoagent.features.capture.collect import collect_capture
from topoagent.features.capture.pack import entries_to_tar
from topoagent.features.capture.scrub import Scrubber, scrub_config

THIS_HOST = REPO / "tests/fixtures/captures/this-host.tar.gz"
GOLDEN = REPO / "tests/golden/capture-this-host"
FORMATS = {"tree": "tree.txt", "json": "scan.json", "matrix": "matrix.txt"}


def report(result):
    """The scan contract as plain data, as a consumer parses it."""
    return json.loads(render(result))


def normalised(doc: dict) -> str:
    """The JSON of a scan without what a capture changes on purpose or cannot hold still: the
    root, the host name (scrubbed), UUIDs on the command line (scrubbed), init's arguments
    after ``--`` (dropped), and node memory (a VM's balloon moves MemTotal between reads)."""
    doc = json.loads(json.dumps(doc))
    doc["host"]["root"] = doc["host"]["hostname"] = None
    for node in doc.get("numa_nodes", []):
        node["memory_bytes"] = None
    text = json.dumps(doc, sort_keys=True)
    text = re.sub(r"UUID=[0-9a-fA-F-]+", "UUID=0", text)
    return re.sub(r" -- [^\"]*", "", text)


def tarball(entries, path: Path) -> Path:
    buf = io.BytesIO()
    entries_to_tar(entries, buf)
    path.write_bytes(buf.getvalue())
    return path


# -- replay ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("machine", machine_names())
def test_capture_of_a_fixture_machine_replays_to_the_same_json(machine, fixture_root, tmp_path):
    root = fixture_root(machine)
    cap = collect_capture(str(root), tools=False)
    replay = unpack_capture(str(tarball(cap.ordered(), tmp_path / "c.tar.gz")), str(tmp_path / "x"))
    assert normalised(report(scan(replay, nvml="off"))) == normalised(report(scan(root, nvml="off")))
    assert report(scan(replay, nvml="off"))["host"]["hostname"] == "captured-host"


@pytest.mark.skipif(not os.path.isdir("/sys/bus/pci/devices"), reason="no sysfs on this machine")
def test_capture_of_this_host_replays_to_the_live_scan(tmp_path):
    out = tmp_path / "this.tar.gz"
    run = subprocess.run(
        [sys.executable, "-m", "topoagent", "capture", "-o", str(out), "--no-tools"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert f"wrote {out}" in run.stderr
    live = report(scan("/", nvml="off"))
    replay = report(scan(str(out), nvml="off"))
    assert normalised(replay) == normalised(live)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_committed_capture_goldens(fmt, golden):
    root = os.path.realpath(THIS_HOST)  # what the reports call the root: the archive
    extra = ["--pretty"] if fmt == "json" else []
    result = CliRunner().invoke(cli, ["scan", "--root", str(THIS_HOST), "--format", fmt, *extra])
    # The captured VM has no GPU: its matrix is the one-line refusal, exit 2.
    assert result.exit_code in ((2,) if fmt == "matrix" else (0, 1)), result.output
    text = result.output.replace(root, "<ROOT>")
    text = text if fmt == "json" else f"{text}# exit {result.exit_code}\n"
    path = GOLDEN / FORMATS[fmt]
    golden(path, text)


def test_committed_capture_is_scrubbed_and_small():
    assert THIS_HOST.stat().st_size < 64 * 1024
    with tarfile.open(THIS_HOST) as tar:
        names = tar.getnames()
        read = lambda n: tar.extractfile(n).read().decode()  # noqa: E731
        manifest = json.loads(read("topoagent-capture.json"))
        assert manifest["format"] == "topoagent-capture/1"
        assert read("proc/sys/kernel/hostname") == "captured-host\n"
        addresses = [n for n in names if n.startswith("sys/class/net/") and n.endswith("/address")]
        assert addresses
        for name in addresses:
            assert re.fullmatch(r"00:00:00:00:[0-9a-f]{2}:[0-9a-f]{2}\n", read(name)), name
        assert " -- " not in read("proc/cmdline")
        assert not [n for n in names if n.startswith("sys/class/dmi/") and "serial" in n]
        # only the allow-listed proc lines
        assert read("proc/self/status").startswith("Cpus_allowed_list:") and read("proc/self/status").count("\n") == 1
        assert read("proc/cpuinfo").count("\n") <= 1


def test_cli_capture_of_a_fixture_root(fixture_root, tmp_path):
    out = tmp_path / "dgx.tar.gz"
    result = CliRunner().invoke(cli, ["capture", "-o", str(out), "--root", str(fixture_root("dgx-h100"))])
    assert result.exit_code == 0, result.output
    with tarfile.open(out) as tar:
        manifest = json.loads(tar.extractfile("topoagent-capture.json").read())
    assert manifest["tools"] == {}  # tools run only when capturing this host (/)
    assert manifest["scrubbed"]["MAC address"] >= 1 and manifest["scrubbed"]["GUID"] >= 1


def test_cli_capture_of_nothing_fails_with_one_line(tmp_path):
    result = CliRunner().invoke(cli, ["capture", "-o", str(tmp_path / "x.tar.gz"), "--root", str(tmp_path)])
    assert result.exit_code == 2 and "not a sysfs tree" in result.output
    assert not (tmp_path / "x.tar.gz").exists()


# -- scrubbing ------------------------------------------------------------------------------------


def test_macs_map_to_stable_stand_ins():
    s = Scrubber()
    assert s.mac("02:fc:00:00:00:01") == "00:00:00:00:00:01"
    assert s.mac("B8:CE:F6:12:34:56") == "00:00:00:00:00:02"
    assert s.mac("02:FC:00:00:00:01") == "00:00:00:00:00:01"  # the same interface, the same stand-in
    assert s.mac("00:00:00:00:00:00") == "00:00:00:00:00:00"


def test_tool_output_scrubbing():
    s = Scrubber()
    text = (
        "\tCapabilities: [1c0 v1] Device Serial Number b8-ce-f6-03-00-12-34-56\n"
        "\t\t\t[SN] Serial number: MT2312X01234\n"
        "\tLink: b8:ce:f6:12:34:56 and again b8:ce:f6:12:34:56\n"
        '"uuid": "GPU-6e1a0d2c-3f4b-4c5d-8e9f-0a1b2c3d4e5f"\n'
    )
    out = s.text(text)
    assert "Device Serial Number 00-00-00-00-00-00-00-00" in out and "MT2312X01234" not in out
    assert out.count("00:00:00:00:00:01") == 2
    assert "GPU-00000000-0000-0000-0000-000000000000" in out and "6e1a0d2c" not in out
    assert s.guid("b8ce:f603:0012:3456\n") == "0000:0000:0000:0000\n"
    assert (
        s.cmdline("ro root=UUID=7f3e2f7a-5a0c-4c5e-9d1a-2f1d3c4b5a69 iommu=pt -- --token=secret\n")
        == "ro root=UUID=00000000-0000-0000-0000-000000000000 iommu=pt\n"
    )


def test_config_space_device_serial_number_is_zeroed():
    config = bytearray(4096)
    config[0:4] = bytes.fromhex("b3151d10")
    # AER at 0x100 -> DSN (id 3) at 0x150 -> end
    config[0x100:0x104] = (0x0001 | 1 << 16 | 0x150 << 20).to_bytes(4, "little")
    config[0x150:0x154] = (0x0003 | 1 << 16 | 0x000 << 20).to_bytes(4, "little")
    config[0x154:0x15C] = bytes.fromhex("5634120003f6ceb8")
    out = scrub_config(bytes(config))
    assert out[0x154:0x15C] == bytes(8) and out[:0x154] == bytes(config[:0x154])
    loop = bytearray(config)
    loop[0x150:0x154] = (0x0001 | 1 << 16 | 0x100 << 20).to_bytes(4, "little")  # a loop: stops
    assert scrub_config(bytes(loop)) == bytes(loop)
    assert scrub_config(b"\x00" * 64) == b"\x00" * 64


# -- unpacking untrusted tarballs ------------------------------------------------------------------


def evil(tmp_path: Path, *members: tarfile.TarInfo, data: bytes = b"x") -> str:
    path = tmp_path / "evil.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for m in members:
            if m.isreg():
                m.size = len(data)
                tar.addfile(m, io.BytesIO(data))
            else:
                tar.addfile(m)
    return str(path)


def member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


@pytest.mark.parametrize(
    "members, message",
    [
        # refused by tarfile's data filter (PEP 706)
        ([member("sys/../../x")], "outside the destination"),
        ([member("dev/zero", tarfile.CHRTYPE)], "is a special file"),
        ([member("fifo", tarfile.FIFOTYPE)], "is a special file"),
        ([member("sys/x", tarfile.SYMTYPE, "/etc")], "link to an absolute path"),
        ([member("sys/x", tarfile.SYMTYPE, "../../etc")], "outside the destination"),
        ([member("r", tarfile.SYMTYPE, "."), member("e", tarfile.SYMTYPE, "r/..")], "outside the destination"),
        # refused by the unpacker's own checks, which the filter does not make
        ([member("sys/a"), member("sys/b", tarfile.LNKTYPE, "sys/a")], "a hard link"),
        ([member("sys/d", tarfile.SYMTYPE, "../tmp"), member("sys/d/file")], "lies under the link"),
        ([member("sys/d/file"), member("sys/d", tarfile.SYMTYPE, "e")], "lies under the link"),
        ([member("sys/d", tarfile.SYMTYPE, "e"), member("sys/d/../x")], "lies under the link"),
        ([member("sys/d", tarfile.SYMTYPE, "e"), member("sys/d")], "listed twice"),
        ([member("", tarfile.SYMTYPE, "."), member("/x", tarfile.SYMTYPE, ".."), member("x/a")], "outside|under"),
    ],
)
def test_unsafe_tarballs_are_refused(tmp_path, members, message):
    with pytest.raises(CaptureError, match=message):
        unpack_capture(evil(tmp_path, *members))
    assert not (tmp_path / "x").exists() and not (tmp_path.parent / "x").exists()


def test_an_absolute_name_is_unpacked_inside(tmp_path):
    """The data filter strips a leading '/' (as GNU tar does) rather than refusing the member."""
    root = unpack_capture(evil(tmp_path, member("./", tarfile.DIRTYPE), member("/sys/a")), str(tmp_path / "out"))
    assert (Path(root) / "sys/a").read_bytes() == b"x"


def test_a_python_without_the_data_filter_refuses_in_one_line(tmp_path, monkeypatch):
    monkeypatch.delattr(tarfile, "data_filter")
    with pytest.raises(CaptureError, match=r"needs tarfile's data filter \(PEP 706: Python 3.10.12, 3.11.4"):
        unpack_capture(evil(tmp_path, member("sys/a")))


def test_size_caps(tmp_path, monkeypatch):
    monkeypatch.setattr(capture_archive, "MAX_TOTAL_BYTES", 10)
    with pytest.raises(CaptureError, match="more than 10 bytes"):
        unpack_capture(evil(tmp_path, member("sys/a"), member("sys/b"), data=b"123456"))
    monkeypatch.setattr(capture_archive, "MAX_MEMBERS", 1)
    with pytest.raises(CaptureError, match="more than 1 members"):
        unpack_capture(evil(tmp_path, member("sys/a"), member("sys/b")))


def _raw_tarball(path: Path, blocks: bytes) -> str:
    import gzip

    with gzip.open(path, "wb") as g:
        g.write(blocks + tarfile.TarInfo("sys/a").tobuf(format=tarfile.USTAR_FORMAT) + bytes(1024))
    return str(path)


def test_header_bombs_are_refused(tmp_path):
    # tarfile reads a PAX header whole, at its declared size, before yielding any member; and
    # follows a chain of them by recursion.
    bomb = tarfile.TarInfo("././@PaxHeader")
    bomb.type, bomb.size = tarfile.XHDTYPE, 1 << 30
    with pytest.raises(CaptureError, match="larger than"):
        unpack_capture(_raw_tarball(tmp_path / "bomb.tar.gz", bomb.tobuf(format=tarfile.USTAR_FORMAT)))
    record = b"20 comment=xxxxxxxx\n"
    link = tarfile.TarInfo("././@PaxHeader")
    link.type, link.size = tarfile.XHDTYPE, len(record)
    chain = (link.tobuf(format=tarfile.USTAR_FORMAT) + record.ljust(512, b"\0")) * 5000
    with pytest.raises(CaptureError, match="not a capture tarball"):
        unpack_capture(_raw_tarball(tmp_path / "chain.tar.gz", chain))


def test_refused_tarball_leaves_nothing_behind(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    with pytest.raises(CaptureError):
        unpack_capture(evil(tmp_path, member("sys/ok"), member("sys/x", tarfile.SYMTYPE, "../../etc")))
    assert list((tmp_path / "tmp").iterdir()) == []


def test_not_a_tarball(tmp_path):
    bad = tmp_path / "x.tar.gz"
    bad.write_text("hello")
    with pytest.raises(CaptureError, match="not a capture tarball"):
        resolve_root(str(bad))


def test_resolve_root_forms(tmp_path, fixture_root):
    root = fixture_root("cloud-vm")
    assert resolve_root(str(root)) == str(root)
    assert resolve_root(str(tmp_path / "missing")) == str(tmp_path / "missing")
    cap = collect_capture(str(root), tools=False)
    tb = tarball(cap.ordered(), tmp_path / "c.tar.gz")
    first = resolve_root(str(tb))
    # read into memory, a tree named by the archive's own path: nothing is unpacked
    assert isinstance(first, MemoryTree) and first.root == os.path.realpath(tb)
    assert HostFS(first).isdir("sys/devices") and HostFS(first).root == os.path.realpath(tb)
    assert resolve_root(str(tb)) is not first  # each call reads it: no registry keeps one
    outer = tmp_path / "outer"
    unpack_capture(str(tb), str(outer / "inner"))
    assert resolve_root(str(outer)) == str(outer / "inner")  # a hand-unpacked directory one level down


@pytest.mark.parametrize(
    "members, message",
    [
        ([member("sys/../../x")], "climbs out"),
        ([member("dev/zero", tarfile.CHRTYPE)], "not a regular file"),
        ([member("fifo", tarfile.FIFOTYPE)], "not a regular file"),
        ([member("sys/a"), member("sys/b", tarfile.LNKTYPE, "sys/a")], "a hard link"),
        ([member("sys/d", tarfile.SYMTYPE, "../tmp"), member("sys/d/file")], "lies under the link"),
        ([member("sys/d", tarfile.SYMTYPE, "e"), member("sys/d")], "listed twice"),
    ],
)
def test_unsafe_tarballs_are_refused_in_memory_too(tmp_path, members, message):
    """``--root capture.tar.gz`` reads the members into memory (load_capture): the same checks."""
    with pytest.raises(CaptureError, match=message):
        load_capture(evil(tmp_path, *members))


def test_links_of_a_capture_read_in_memory_never_leave_it(tmp_path):
    """A link to an absolute path or up past the root is resolved inside the capture, as for a
    directory: the host's own /etc is never read (nothing is unpacked either)."""
    path = evil(
        tmp_path,
        member("sys/devices", tarfile.DIRTYPE),
        member("sys/abs", tarfile.SYMTYPE, "/etc"),
        member("sys/up", tarfile.SYMTYPE, "../../../../etc"),
        member("etc/hostname"),
    )
    fs = HostFS(load_capture(path))
    assert fs.text("sys/abs/passwd") is None and fs.text("sys/up/passwd") is None
    assert fs.text("sys/abs/hostname") == "x" and fs.text("sys/up/hostname") == "x"  # the capture's own
    assert fs.listdir("sys") == ["abs", "devices", "up"] and fs.resolve("sys/up") == "etc"


def test_a_capture_replays_from_memory_as_from_its_directory(tmp_path, fixture_root, monkeypatch):
    """Issue 32 item 10: a DGX capture replayed 10x slower than its directory (unpacked in full
    every time); read into memory, the scan is the directory's, and nothing is written (to a
    temporary directory of its own: the machine's is shared with whatever else runs)."""
    import tempfile

    cap = collect_capture(str(fixture_root("dgx-h100")), tools=False)
    tb = tarball(cap.ordered(), tmp_path / "dgx.tar.gz")
    unpacked = unpack_capture(str(tb), str(tmp_path / "dir"))
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setenv("TMPDIR", str(private))
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    from_memory = report(scan(str(tb), nvml="off"))
    assert list(private.iterdir()) == []
    assert normalised(from_memory) == normalised(report(scan(unpacked, nvml="off")))


def test_ipoib_address_guid_is_scrubbed():
    """The 20-byte IPoIB address ends in the port GUID that node_guid scrubbing zeroes: before,
    it was kept whole (the MAC rule wants exactly six pairs)."""
    s = Scrubber()
    ipoib = "00:00:10:87:fe:80:00:00:00:00:00:00:b8:ce:f6:03:00:12:34:56\n"
    assert s.hw_address(ipoib) == "00:00:10:87:fe:80:00:00:00:00:00:00:00:00:00:00:00:00:00:00\n"
    assert s.hw_address("b8:ce:f6:12:34:56\n") == "00:00:00:00:00:01\n"  # Ethernet: the MAC stand-in
    assert s.hw_address("b8:ce:f6:03:00:12:34:56\n") == "00:00:00:00:00:00:00:00\n"  # an EUI-64: zeroed whole
    assert s.counts["GUID"] == 2 and s.counts["MAC address"] == 1


def test_capture_scrubs_the_ipoib_address_file(scratch_root, tmp_path):
    from tests.plan_helpers import topoagent

    root = scratch_root("dgx-h100")
    net = root / "sys/class/net"
    name = sorted(os.listdir(net))[0]
    (net / name / "address").write_text("00:00:10:87:fe:80:00:00:00:00:00:00:b8:ce:f6:03:00:12:34:56\n")
    out = tmp_path / "cap.tar.gz"
    assert topoagent("capture", "--root", str(root), "-o", str(out)).returncode == 0
    with tarfile.open(out) as tar:
        data = b"".join(
            tar.extractfile(m).read()
            for m in tar.getmembers()
            if m.isfile() and m.name.endswith(f"sys/class/net/{name}/address")
        )
    assert data and b"b8:ce:f6" not in data and data.endswith(b"00:00:00:00:00:00:00:00\n")


def test_a_replayed_capture_is_named_by_its_archive(tmp_path, fixture_root):
    """scan, plan, vms, the API and the daemon read a capture archive and call the root by the
    archive's path, never by the temporary directory it was unpacked into."""
    from topoagent.features.daemon.config import Config
    from topoagent.features.daemon.loop import default_sample, default_scan

    cap = collect_capture(str(fixture_root("dgx-h100")), tools=False)
    tb = tarball(cap.ordered(), tmp_path / "dgx.tar.gz")
    path = os.path.realpath(tb)
    tree = CliRunner().invoke(cli, ["scan", "--root", str(tb)])
    assert f"· root {path}\n" in tree.output.splitlines(keepends=True)[0]
    doc = json.loads(CliRunner().invoke(cli, ["scan", "--root", str(tb), "--format", "json"]).output)
    assert doc["host"]["root"] == path
    plan = json.loads(CliRunner().invoke(cli, ["plan", "--root", str(tb), "--format", "json"]).output)
    assert plan["host"]["root"] == path
    vms = CliRunner().invoke(cli, ["vms", "--root", str(tb)]).output
    assert f"({path}/etc/libvirt/qemu; host: scan of {path})" in vms and "topoagent-capture-" not in vms
    assert scan(str(tb)).snapshot.root == path  # the API too
    config = Config(root=str(tb), nvml=False, state_dir=str(tmp_path / "st"))
    assert default_scan(config).snapshot.root == path and len(default_sample(config)) > 10


# -- a capture is a value: no registry shared by scans, threads or fleet -----------------------------


def _pause_after_sysfs(monkeypatch, pause):
    """Every scan calls ``pause()`` between its sysfs source and the sources after it, each of
    which opens its own reader of the root: the point where two scans can meet."""
    from topoagent.core import api

    monkeypatch.setattr(
        api, "SOURCES", (api.SOURCES[0], api.Source("pause", lambda c: pause(), lambda i: True), *api.SOURCES[1:])
    )


def test_scan_fleet_scan_of_one_capture(tmp_path, fixture_root):
    """Issue 39: ``scan(tarball)``, then ``fleet``'s read of the same tarball, then ``scan`` again
    raised NotAHostTree: fleet unmounted the tree the first scan had left registered."""
    from topoagent.features.fleet.command import tally

    tb = tarball(collect_capture(str(fixture_root("dgx-h100")), tools=False).ordered(), tmp_path / "dgx.tar.gz")
    first = scan(str(tb), nvml="off").snapshot
    counted, bad = tally([str(tb)], None)
    assert bad == [] and counted.count == 1 and counted.files == {"dgx": [str(tb)]}
    assert scan(str(tb), nvml="off").snapshot == first
    assert first.root == os.path.realpath(tb) and first.l3_domains  # every source read the capture


def test_two_captures_on_two_threads(tmp_path, fixture_root, monkeypatch):
    """Two threads scan two captures at once (both stopped mid-scan until the other gets there):
    each gets its own capture's result, the one a scan of its directory gives."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    machines = ("dgx-h100", "epyc-genoa-ccd")
    paths = {
        m: str(tarball(collect_capture(str(fixture_root(m)), tools=False).ordered(), tmp_path / f"{m}.tar.gz"))
        for m in machines
    }

    def facts(root):
        result = scan(root, nvml="off")
        return normalised(report(result)), result.snapshot.l3_domains

    want = {m: facts(unpack_capture(paths[m], str(tmp_path / m))) for m in machines}
    meet = threading.Barrier(2, timeout=60)
    _pause_after_sysfs(monkeypatch, meet.wait)
    with ThreadPoolExecutor(2) as pool:
        got = dict(zip(machines, pool.map(lambda m: facts(paths[m]), machines), strict=True))
    assert got == want and got[machines[0]] != got[machines[1]]


def test_fleet_on_one_thread_never_takes_a_capture_another_is_scanning(tmp_path, fixture_root, monkeypatch):
    """One thread scans a capture; halfway, another thread's ``fleet`` reads the same tarball
    whole; the first scan ends with its own capture, and the next scan of it reads it too."""
    import threading

    from topoagent.features.fleet.command import tally

    tb = str(tarball(collect_capture(str(fixture_root("dgx-h100")), tools=False).ordered(), tmp_path / "dgx.tar.gz"))
    want = scan(tb, nvml="off").snapshot
    halfway, fleet_done = threading.Event(), threading.Event()
    scanner: list[threading.Thread] = []

    def pause():
        if threading.current_thread() in scanner:
            halfway.set()
            assert fleet_done.wait(60)

    _pause_after_sysfs(monkeypatch, pause)
    got = []
    scanner.append(threading.Thread(target=lambda: got.append(scan(tb, nvml="off").snapshot)))
    scanner[0].start()
    assert halfway.wait(60)
    try:
        assert tally([tb], None)[1] == []
    finally:
        fleet_done.set()
        scanner[0].join(60)
    assert got == [want] and want.l3_domains  # every source of the scan read its capture
    assert scan(tb, nvml="off").snapshot == want


def test_a_capture_no_file_system_could_hold_says_so(tmp_path, fixture_root):
    """Issue 44: a capture holding one path twice, or one path both as a file and a directory,
    was read without a word; each is now a lost probe, and the Sources line says sysfs partial."""
    cap = tarball(collect_capture(str(fixture_root("cloud-vm")), tools=False).ordered(), tmp_path / "c.tar.gz")
    unpacked = unpack_capture(str(cap), str(tmp_path / "x"))
    odd = tmp_path / "odd.tar"
    with tarfile.open(odd, "w") as tar:
        tar.add(unpacked, arcname=".")
        for name, data in (("proc/cmdline", b"second copy\n"), ("proc/cmdline/below", b"x\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    result = scan(str(odd), nvml="off")
    lost = {(e.path, e.error) for e in result.snapshot.probe_errors}
    assert ("/proc/cmdline", "in the capture twice: the last copy is read") in lost
    assert ("/proc/cmdline", "both a file and a directory in the capture") in lost
    assert result.snapshot.kernel_cmdline == "second copy"
    tree = CliRunner().invoke(cli, ["scan", "--root", str(odd)]).output
    assert "Sources: sysfs partial (" in tree and "  /proc/cmdline: in the capture twice: the last copy is read" in tree
    clean = scan(str(cap), nvml="off").snapshot.probe_errors
    assert not [e for e in clean if "in the capture" in e.error]


@pytest.mark.parametrize("compress", ["", "gz", "bz2", "xz"])
def test_a_tarball_is_opened_once(tmp_path, monkeypatch, compress):
    """The magic is peeked from the one open file the decompressor reads; it is closed after."""
    import builtins

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo("sys/hypervisor/type")
        info.size = 4
        tar.addfile(info, io.BytesIO(b"kvm\n"))
    path = tmp_path / "c.tar"
    if compress:
        import bz2
        import gzip
        import lzma

        pack = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}[compress]
        path.write_bytes(pack(raw.getvalue()))
    else:
        path.write_bytes(raw.getvalue())
    opened = []
    real_open = builtins.open

    def counting_open(file, *args, **kwargs):
        fh = real_open(file, *args, **kwargs)
        if isinstance(file, (str, os.PathLike)) and os.fspath(file) == str(path):
            opened.append(fh)
        return fh

    monkeypatch.setattr(builtins, "open", counting_open)
    out = unpack_capture(str(path), str(tmp_path / "out"))
    monkeypatch.undo()
    assert (Path(out) / "sys/hypervisor/type").read_text() == "kvm\n"
    assert len(opened) == 1 and opened[0].closed


def test_vpd_is_scrubbed_but_still_pairs():
    """A ConnectX-8 and its Data Direct DMA function carry one V3 (rdma-core kernel-boot/rdma_topo
    pairs them by it): the capture replaces it by one stand-in in both, zeros the serial number
    and keeps the product name and part number."""
    from topoagent.core.parse.vpd import parse_vpd
    from topoagent.features.capture.scrub import Scrubber

    def vpd(v3: bytes) -> bytes:
        body = b"PN\x0a900-9X81Q-" + b"SN\x0cMT2439X00001" + b"V3\x20" + v3 + b"RV\x01\x00"
        name = b"NVIDIA ConnectX-8"
        return (
            b"\x82" + len(name).to_bytes(2, "little") + name + b"\x90" + len(body).to_bytes(2, "little") + body + b"x"
        )

    s = Scrubber()
    nic, dma, other = (
        s.vpd(vpd(v)) for v in (b"3f2b6c1e9d4a4e8b8c7d5a1e2f3b4c5d",) * 2 + (b"1a9e7d5c3b2f4a6e8d0c2b4a6f8e1d3c",)
    )
    assert nic == dma and len(nic) == len(vpd(b"0" * 32))
    a, b = parse_vpd(nic), parse_vpd(other)
    assert a is not None and b is not None
    assert a.name == "NVIDIA ConnectX-8" and a.part == "900-9X81Q-"
    assert a.v3 != b.v3 and "3f2b6c1e" not in (a.v3 or "")
    assert b"MT2439" not in nic and a.serial == "000000000000"


def test_a_capture_s_name_of_5000_digits_is_no_number(tmp_path, fixture_root):
    """Issue 44: a capture holds names no file system could (a component of 5,000 digits); an
    RDMA device named so made every command that scans an internal error (a NIC's sort key read
    the name's trailing digits as a number)."""
    big = "mlx5_" + "9" * 5000
    entries = [
        msgspec.structs.replace(e, path=e.path.replace("mlx5_0", big), target=e.target.replace("mlx5_0", big))
        for e in collect_capture(str(fixture_root("faulty-gpu-node")), tools=False).ordered()
    ]
    cap = str(tarball(entries, tmp_path / "c.tar.gz"))
    result = scan(cap, nvml="off")
    assert [n.rdma_devices for n in result.topology.nics if big in n.rdma_devices] == [(big,)]
    for args in (["scan"], ["plan", "--format", "nccl-topo"], ["plan", "--format", "rails"], ["audit", "--no-nvml"]):
        out = CliRunner().invoke(cli, [*args, "--root", cap])
        assert out.exit_code in (0, 1) and isinstance(out.exception, (SystemExit, type(None))), (args, out.output)


@pytest.mark.parametrize("location", ["9" * 5000, "abc"])
def test_capture_of_a_kfd_node_with_a_location_no_kernel_writes(scratch_root, tmp_path, location):
    """Issue 44: capture read a KFD node's ``location_id`` with int() of its own (an internal
    error for 5,000 digits or a word); it reads the properties as the scan does, and a node the
    scan cannot read has no GPU files to copy."""
    root = scratch_root("mi300x")
    props = next(
        p
        for p in sorted(root.glob("sys/devices/virtual/kfd/kfd/topology/nodes/*/properties"))
        if re.search(r"^location_id [1-9]", p.read_text(), re.M)
    )
    props.write_text(re.sub(r"^location_id [0-9]+", f"location_id {location}", props.read_text(), flags=re.M))
    out = CliRunner().invoke(cli, ["capture", "--root", str(root), "-o", str(tmp_path / "c.tar.gz"), "-q"])
    assert out.exit_code == 0, out.output
    assert scan(str(tmp_path / "c.tar.gz"), nvml="off").topology.gpus
