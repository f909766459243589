"""A hostile root (a user's capture is untrusted input): nothing outside --root is ever opened,
links cannot escape it, FIFOs and devices cannot stall it, huge files cannot exhaust it, and
aliases cannot double a device.  Issue: symlinks out of the root used to be followed and their
contents printed under "Lost probes"."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.core.test_bad_input import BDF, minimal_tree
from tests.paths import REPO
from topoagent.core.api import scan
from topoagent.core.hostfs import HostFS

DEV = f"sys/devices/pci0000:16/0000:16:01.0/{BDF}"
SECRET = "TOPOAGENT_SECRET_CANARY"

#: Run a scan under an audit hook that records every file the process opens or lists once
#: the CLI is imported (libraries read what they read at import: prometheus_client's process
#: collector reads this host's /proc/stat; what is audited is the scan of the hostile root).
_AUDITED = r"""
import json, os, sys
from topoagent.cli import main
seen = []
def hook(event, args):
    if event in ("open", "os.listdir", "os.scandir") and args and isinstance(args[0], (str, bytes)):
        seen.append(os.fsdecode(args[0]))
sys.addaudithook(hook)
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
sys.stderr.write("\nAUDIT " + json.dumps(seen) + "\n")
sys.exit(code)
"""


def audited_scan(root: Path, *args: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    env = dict(os.environ, **{SECRET: "s3cr3t-value"})
    proc = subprocess.run(
        [sys.executable, "-c", _AUDITED, "scan", "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    head, _, audit = proc.stderr.rpartition("\nAUDIT ")
    proc.stderr = head
    return proc, json.loads(audit)


def outside(root: Path, paths: list[str]) -> list[str]:
    """Opened paths that are neither under the root nor Python's own files."""
    allowed = [str(root), sys.prefix, sys.base_prefix, str(REPO), "/dev/null"]
    allowed += [p for p in sys.path if p]
    return [
        p for p in paths if os.path.isabs(p) and not any(p == a or p.startswith(a.rstrip("/") + "/") for a in allowed)
    ]


def test_links_out_of_the_root_are_never_followed(tmp_path):
    root = minimal_tree(tmp_path / "host")
    dev = root / DEV
    (dev / "numa_node").unlink()
    os.symlink("/etc/passwd", dev / "numa_node")  # absolute: re-rooted
    (dev / "vendor").unlink()
    os.symlink("../../../../../../../proc/self/environ", dev / "vendor")  # relative, climbs out
    (dev / "max_link_width").unlink()
    os.symlink("/../../../../etc/hostname", dev / "max_link_width")  # .. clamped at the root
    proc, opened = audited_scan(root, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert SECRET not in proc.stdout and "root:" not in proc.stdout
    assert outside(root, opened) == []
    doc = json.loads(proc.stdout)
    gpu = next(d for d in doc["devices"] if d["bdf"] == BDF)
    assert gpu["numa_node"] == 0 and gpu["numa_source"] == "local_cpus"  # numa_node: absent in the root


def test_a_sys_directory_linked_to_the_real_sys_describes_nothing(tmp_path):
    root = tmp_path / "host"
    root.mkdir()
    os.symlink("/sys", root / "sys")
    proc, opened = audited_scan(root)
    assert proc.returncode == 2 and "not a sysfs tree" in proc.stderr
    assert outside(root, opened) == []


def test_fifo_and_devices_do_not_stall_or_exhaust(tmp_path):
    root = minimal_tree(tmp_path / "host")
    dev = root / DEV
    (dev / "numa_node").unlink()
    os.mkfifo(dev / "numa_node")
    (dev / "local_cpulist").unlink()
    os.symlink("/dev/zero", dev / "local_cpulist")  # re-rooted: absent in the root
    (root / "dev").mkdir()
    os.symlink("/dev/zero", root / "dev" / "zero-link")
    (dev / "current_link_width").unlink()
    os.symlink("/dev/zero-link", dev / "current_link_width")  # inside the root, to a link to /dev/zero
    r = scan(root, nvml="off")
    lost = {e.path: e.error for e in r.snapshot.probe_errors}
    assert lost[f"/{DEV}/numa_node"] == "not a regular file (a FIFO)"
    assert f"/{DEV}/local_cpulist" not in lost  # absent inside the root: unknown, not an error


def test_huge_attribute_is_refused(tmp_path):
    root = minimal_tree(tmp_path / "host")
    (root / DEV / "numa_node").write_bytes(b"0" * (1 << 20))
    r = scan(root, nvml="off")
    lost = {e.path: e.error for e in r.snapshot.probe_errors}
    assert lost[f"/{DEV}/numa_node"].startswith("larger than")


def test_symlink_loop_through_dotdot_is_bounded(tmp_path):
    root = minimal_tree(tmp_path / "host")
    (root / "sys/class/net/eth0").mkdir(parents=True)
    os.symlink("../eth0/device/../device", root / "sys/class/net/eth0/device")
    r = scan(root, nvml="off")
    assert any(e.error == "symlink loop" for e in r.snapshot.probe_errors)


def test_reader_resolves_every_component_inside_the_root(tmp_path):
    root = tmp_path / "host"
    (root / "a/b").mkdir(parents=True)
    (root / "a/b/f").write_text("inside\n")
    os.symlink("/a", root / "abs")
    os.symlink("../../../../a", root / "a/up")
    fs = HostFS(root)
    assert fs.text("abs/b/f") == "inside"
    assert fs.text("a/up/b/f") == "inside"
    assert fs.resolve("a/up/b/f") == "a/b/f"
    assert fs.text("../../../etc/passwd") is None
    assert fs.listdir("../..") == sorted(os.listdir(root))


def test_alias_entries_collapse_into_one_device(tmp_path):
    root = minimal_tree(tmp_path / "host")
    links = root / "sys/bus/pci/devices"
    target = os.readlink(links / BDF)
    os.symlink(target, links / ("00000:" + BDF.split(":", 1)[1]))  # other spellings of the domain
    os.symlink(target, links / ("000000:" + BDF.split(":", 1)[1]))
    r = scan(root, nvml="off")
    assert [d.bdf for d in r.topology.devices].count(BDF) == 1
    assert len(r.topology.gpus) == 1
    notes = [e for e in r.snapshot.probe_errors if "alias of" in e.error]
    assert len(notes) == 2


def test_class_links_are_read_as_text_never_followed_out(tmp_path):
    """A class device's owner comes from its link's text (one readlink): a link that climbs out
    of the root, or names a real host path, opens nothing there and owns no device."""
    root = minimal_tree(tmp_path / "host")
    net = root / "sys/class/net"
    net.mkdir(parents=True, exist_ok=True)
    os.symlink("/sys/devices/pci0000:00/0000:00:03.0/net/eth9", net / "eth9")  # the analyst's /sys
    os.symlink("../../../../../../../etc/net/eth8", net / "eth8")  # climbs out
    os.symlink(f"../../../{DEV}/net/eth7", net / "eth7")  # honest, dir absent
    proc, opened = audited_scan(root, "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    assert outside(root, opened) == []
    assert SECRET not in proc.stdout
    fs = HostFS(root)
    assert fs.link_target("sys/class/net/eth8") == "etc/net/eth8"  # ".." clamped at the root
    assert fs.link_target("sys/class/net/eth9") == "sys/devices/pci0000:00/0000:00:03.0/net/eth9"
    assert fs.link_target("sys/class/net") is None  # not a link
    from topoagent.core.read.net import netdevs
    from topoagent.core.read.pci import PciReader

    pci = PciReader(fs)
    list(pci.listed())
    found = {n.name: n.bdf for n in netdevs(fs, pci.owner)}
    assert found == {"eth7": BDF}, found


@pytest.mark.parametrize("machine", ["dgx-h100", "sriov-nic", "cloud-vm", "p4d-efa", "workstation"])
def test_owner_from_the_class_link_is_the_owner_resolution_gives(fixture_root, machine):
    """The one-readlink owner (PciReader.owner) agrees with resolving each ``device`` link inside
    the root, for every network and RDMA device of several machine shapes."""
    from topoagent.core.read.pci import PciReader

    reader = PciReader(HostFS(fixture_root(machine)))
    list(reader.listed())
    checked = 0
    for cls in ("sys/class/net", "sys/class/infiniband"):
        for name in reader.fs.listdir(cls):
            base = f"{cls}/{name}"
            assert reader.owner(base) == reader._device_owner(f"{base}/device"), base
            checked += 1
    assert checked > 0


def test_the_live_root_reads_only_regular_files_outside_sysfs_and_procfs(tmp_path):
    """/etc and the like are not kernel filesystems: a FIFO there is refused, not read as ''."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    fs = HostFS("/")
    assert fs.text(str(fifo).lstrip("/")) is None
    assert [e.error for e in fs.errors] == ["not a regular file (a FIFO)"]


@pytest.mark.parametrize("size", [10_000, 4 * 1024 * 1024, 4 * 1024 * 1024 + 1])
def test_a_short_read_never_truncates_an_undo_copy(tmp_path, monkeypatch, size):
    """read(2) may return fewer bytes than asked (NFS, FUSE, a signal): the copy a fix saves for
    its undo is read to the end (or refused past the limit), never cut at the first short read."""
    import topoagent.core.hostfs as hostfs
    from topoagent.core.read.kernel import MAX_SAVED_FILE, UnsavableFile, file_text

    conf = tmp_path / "etc/modules-load.d/x.conf"
    conf.parent.mkdir(parents=True)
    text = ("nvidia_peermem\n" * (size // 15 + 1))[:size]
    conf.write_text(text)
    real_read = os.read
    calls = []

    def short_read(fd, n):
        calls.append(n)
        return real_read(fd, min(n, 4096))  # a file system that hands out 4 KiB per read

    monkeypatch.setattr(hostfs.os, "read", short_read)
    fs = HostFS(str(tmp_path))
    if size > MAX_SAVED_FILE:
        with pytest.raises(UnsavableFile):
            file_text(fs, "etc/modules-load.d/x.conf")
    else:
        assert file_text(fs, "etc/modules-load.d/x.conf") == text
    assert len(calls) > 1
