"""Bad input: one clear line and exit 2 when nothing can be scanned; otherwise the scan
finishes and lists what it lost.  Never a traceback."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from topoagent.core.api import read_host
from topoagent.core.hostfs import HostFS, NotAHostTree

BDF = "0000:17:00.0"


def minimal_tree(root: Path) -> Path:
    """One GPU on a root port, two NUMA nodes: just enough sysfs to scan."""
    dev = root / "sys/devices/pci0000:16/0000:16:01.0" / BDF
    dev.mkdir(parents=True)
    for name, value in {
        "class": "0x030200",
        "vendor": "0x10de",
        "device": "0x2330",
        "numa_node": "0",
        "local_cpulist": "0-3",
        "current_link_speed": "32.0 GT/s PCIe",
        "max_link_speed": "32.0 GT/s PCIe",
        "current_link_width": "16",
        "max_link_width": "16",
    }.items():
        (dev / name).write_text(value + "\n")
    port = dev.parent
    (port / "class").write_text("0x060400\n")
    (port / "vendor").write_text("0x8086\n")
    (port / "device").write_text("0x352a\n")
    links = root / "sys/bus/pci/devices"
    links.mkdir(parents=True)
    for d in (port, dev):
        os.symlink(os.path.relpath(d, links), links / d.name)
    for n, cpus in ((0, "0-3"), (1, "4-7")):
        node = root / f"sys/devices/system/node/node{n}"
        node.mkdir(parents=True)
        (node / "cpulist").write_text(cpus + "\n")
    (root / "sys/class/net").mkdir(parents=True)  # the host lists its NICs: it has none
    return root


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "topoagent", *args], capture_output=True, text=True, timeout=60)


def assert_one_line_error(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 2, proc
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("topoagent: "), proc.stderr


def test_missing_root(tmp_path):
    proc = run("scan", "--root", str(tmp_path / "nope"))
    assert_one_line_error(proc)
    assert "no such directory" in proc.stderr


def test_root_that_is_not_sysfs(tmp_path):
    (tmp_path / "etc").mkdir()
    proc = run("scan", "--root", str(tmp_path), "--format", "json")
    assert_one_line_error(proc)
    assert "not a sysfs tree" in proc.stderr
    assert proc.stdout == ""


def test_root_that_is_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    assert_one_line_error(run("scan", "--root", str(f)))


def test_api_raises_not_a_host_tree(tmp_path):
    with pytest.raises(NotAHostTree):
        read_host(tmp_path)


def test_garbage_bytes_are_lost_probes_not_crashes(tmp_path):
    root = minimal_tree(tmp_path)
    dev = root / "sys/devices/pci0000:16/0000:16:01.0" / BDF
    (dev / "numa_node").write_bytes(b"\xff\xfe\x00garbage")
    (dev / "current_link_speed").write_text("warp 9\n")
    (dev / "class").write_text("not-hex\n")
    proc = run("scan", "--root", str(root), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    lost = {e["path"]: e["error"] for e in doc["probe_errors"]}
    base = f"/sys/devices/pci0000:16/0000:16:01.0/{BDF}"
    assert lost[f"{base}/numa_node"] == "not text (garbage bytes)"
    assert lost[f"{base}/current_link_speed"].startswith("unparsable")
    assert lost[f"{base}/class"].startswith("unparsable")
    dev_json = next(d for d in doc["devices"] if d["bdf"] == BDF)
    # Unknown class: still reported, NUMA falls back to local CPUs.
    assert dev_json["numa_node"] == 0 and dev_json["numa_source"] == "local_cpus"
    assert dev_json["link"]["current_gts"] is None and dev_json["link"]["max_gts"] == 32.0
    tree = run("scan", "--root", str(root))
    assert tree.returncode == 0 and "Lost probes (3):" in tree.stdout


def test_truncated_config_space(tmp_path):
    root = minimal_tree(tmp_path)
    (root / "sys/devices/pci0000:16/0000:16:01.0" / BDF / "config").write_bytes(b"\xde\x10\x30\x23" * 4)
    proc = run("scan", "--root", str(root), "--format", "json")
    assert proc.returncode == 0
    errors = json.loads(proc.stdout)["probe_errors"]
    assert any(e["path"].endswith(f"{BDF}/config") and "truncated" in e["error"] for e in errors)


def test_symlink_loop(tmp_path):
    root = minimal_tree(tmp_path)
    links = root / "sys/bus/pci/devices"
    os.symlink("0000:99:00.0", links / "0000:98:00.0")
    os.symlink("0000:98:00.0", links / "0000:99:00.0")
    net = root / "sys/class/net/eth9"
    net.mkdir(parents=True)
    os.symlink("device", net / "device")  # points at itself
    proc = run("scan", "--root", str(root), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert any(e["error"] == "symlink loop" for e in doc["probe_errors"])
    assert any(d["bdf"] == BDF for d in doc["devices"])


def test_absolute_symlinks_stay_inside_the_root(tmp_path):
    root = minimal_tree(tmp_path)
    link = root / "sys/bus/pci/devices" / BDF
    link.unlink()
    os.symlink(f"/sys/devices/pci0000:16/0000:16:01.0/{BDF}", link)  # absolute, as some captures have
    fs = HostFS(root)
    assert fs.resolve(f"sys/bus/pci/devices/{BDF}") == f"sys/devices/pci0000:16/0000:16:01.0/{BDF}"


def _scan_as_nobody(root: Path, conn) -> None:  # runs in a forked child
    try:
        os.setgid(65534)
        os.setuid(65534)
        snap = read_host(root)
        conn.send([(e.path, e.error) for e in snap.probe_errors])
    except BaseException as exc:  # noqa: BLE001 - report, do not hang the parent
        conn.send(repr(exc))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop privileges to nobody")
def test_permission_denied():
    import multiprocessing
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="topoagent-perm-"))
    try:
        base.chmod(0o755)
        root = minimal_tree(base)
        dev = root / "sys/devices/pci0000:16/0000:16:01.0" / BDF
        (dev / "numa_node").chmod(0o000)
        ctx = multiprocessing.get_context("fork")
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_scan_as_nobody, args=(root, child))
        proc.start()
        result = parent.recv()
        proc.join(30)
        assert (f"/sys/devices/pci0000:16/0000:16:01.0/{BDF}/numa_node", "permission denied") in result
    finally:
        shutil.rmtree(base)


def test_unreadable_directory_is_a_lost_probe(tmp_path):
    root = minimal_tree(tmp_path)
    fs = HostFS(root)
    (root / "sys/class/net").rmdir()
    (root / "sys/class/net").write_text("not a directory")
    assert fs.listdir("sys/class/net") == []
    assert fs.errors == []  # NotADirectory is absence, not a failure
