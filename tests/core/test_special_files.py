"""Nothing that is not a regular file is ever opened (issue 31, item 3): a character device
named ``x.json`` given to ``fleet`` or ``--expect``, or a device node or FIFO inside a fake
root, is refused from ``stat`` before any ``open`` -- opening ``/dev/watchdog`` arms a
hardware watchdog (the kernel's Documentation/watchdog/watchdog-api.rst)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from topoagent.core.errors import InputError
from topoagent.core.hostfs import HostFS
from topoagent.core.read.textinput import open_regular, read_text_input

#: /dev/null's numbers: harmless if the test ever fails and the node is opened after all.
NULL = os.makedev(1, 3)


def _device(path: Path) -> Path:
    try:
        os.mknod(path, stat.S_IFCHR | 0o600, NULL)
    except PermissionError:
        pytest.skip("making a device node needs root")
    return path


@pytest.fixture
def opened(monkeypatch):
    seen: list[str] = []
    real_open = os.open

    def spy(path, *args, **kwargs):
        seen.append(os.fsdecode(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    return seen


@pytest.mark.parametrize("make", ["device", "fifo", "directory"])
def test_an_input_file_that_is_not_regular_is_refused_unopened(tmp_path, opened, make):
    path = tmp_path / "x.json"
    if make == "device":
        _device(path)
    elif make == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    with pytest.raises(InputError, match="not a regular file"):
        open_regular(str(path))
    with pytest.raises(InputError, match="not a regular file"):
        read_text_input(str(path))
    assert str(path) not in opened


@pytest.mark.parametrize("make", ["device", "fifo"])
def test_a_special_file_inside_a_root_is_refused_unopened_and_recorded(tmp_path, opened, make):
    node = tmp_path / "sys/class/net/eth0/speed"
    node.parent.mkdir(parents=True)
    _device(node) if make == "device" else os.mkfifo(node)
    link = tmp_path / "sys/class/net/eth0/duplex"
    os.symlink("speed", link)  # a link to it, resolved inside the root, is refused the same way
    fs = HostFS(tmp_path)
    assert fs.text("sys/class/net/eth0/speed") is None and fs.text("sys/class/net/eth0/duplex") is None
    assert not [p for p in opened if p.endswith(("/speed", "/duplex"))]
    assert [e.error for e in fs.errors] == [
        f"not a regular file (a {'character device' if make == 'device' else 'FIFO'})"
    ] * 2


def test_fleet_and_expect_name_a_device_in_one_line_and_never_open_it(tmp_path, fixture_root):
    dev = _device(tmp_path / "x.json")
    code = (
        "import os, sys\n"
        "seen = []\n"
        "def hook(event, args):\n"
        "    if event == 'open' and isinstance(args[0], (str, bytes)):\n"
        "        seen.append(os.fsdecode(args[0]))\n"
        "sys.addaudithook(hook)\n"
        "from topoagent.cli import main\n"
        "try: main(sys.argv[1:])\n"
        "except SystemExit as exc: code = exc.code\n"
        "sys.stderr.write('OPENED ' + str(sys.argv[-1] in seen) + '\\n')\n"
        "sys.exit(code)\n"
    )
    for argv in (["fleet", str(dev)], ["scan", "--root", str(fixture_root("no-gpu")), "--expect", str(dev)]):
        proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.splitlines()
        assert lines[-1] == "OPENED False" and len(lines) == 2, proc.stderr
