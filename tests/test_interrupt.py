"""Ctrl-C is one line at any moment: ``topoagent: interrupted`` on stderr, exit 130, no traceback.

Each case starts the console script as a process and sends SIGINT at one point: a fixed time
after the process began importing topoagent, or once it is seen at a given step (reading a
capture, importing the daemon's modules).  Before that the interpreter is still starting (its
``site`` module), where no program's code runs yet; the interpreter's ``-X importtime`` report,
which it writes on stderr as each module is imported, says when topoagent's imports begin.
Points that depend on the process being blocked use an input that never ends (stdin kept open),
so where the signal lands does not depend on this machine's speed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

INTERRUPTED = "topoagent: interrupted\n"
_IMPORT_TIME = "import time:"


class Child:
    """``python -X importtime -m topoagent ARGS``, its stderr collected line by line."""

    def __init__(self, args: list[str], stdin=subprocess.DEVNULL) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-X", "importtime", "-m", "topoagent", *args],
            stdin=stdin,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def imported(self, prefix: str) -> bool:
        """Whether a module whose name starts with ``prefix`` has been imported."""
        return any(
            line.startswith(_IMPORT_TIME) and line.split("|")[-1].strip().startswith(prefix) for line in self.lines
        )

    def wait_for(self, condition, what: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert self.proc.poll() is None, f"the process ended before {what}: {''.join(self.lines)[-2000:]}"
            assert time.monotonic() < deadline, f"never saw {what}"
            time.sleep(0.001)

    def interrupt(self) -> tuple[int, str]:
        """Send SIGINT; the exit code and stderr without the import-time report."""
        try:
            self.proc.send_signal(signal.SIGINT)
            code = self.proc.wait(timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=10)
        return code, "".join(line for line in self.lines if not line.startswith(_IMPORT_TIME))


def _holds_open(pid: int, path: Path) -> bool:
    """Whether the process has ``path``, or a file below it, open now."""
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return False
    for fd in fds:
        try:
            target = os.readlink(fd_dir / fd)
        except OSError:
            continue  # closed meanwhile
        if target == str(path) or target.startswith(f"{path}/"):
            return True
    return False


def _started(child: Child) -> None:
    """Wait until the interpreter has started and imports topoagent's own modules."""
    child.wait_for(lambda: child.imported("topoagent"), "topoagent's first import")


@pytest.fixture(scope="module")
def capture_file(module_tmp, fixture_root) -> Path:
    out = module_tmp / "dgx.tar.gz"
    subprocess.run(
        [sys.executable, "-m", "topoagent", "capture", "--root", str(fixture_root("dgx-h100")), "-o", str(out), "-q"],
        check=True,
    )
    return out


@pytest.mark.parametrize("seconds", [0.1, 0.5])
def test_ctrl_c_at_a_time_is_one_line(seconds):
    """At 0.1 s the CLI is still being imported on most machines; at 0.5 s a paste is being
    waited for (stdin stays open, so the command cannot end first)."""
    child = Child(["scan", "--paste", "-"], stdin=subprocess.PIPE)
    _started(child)
    time.sleep(seconds)
    assert child.interrupt() == (130, INTERRUPTED)


def test_ctrl_c_while_a_capture_is_read_is_one_line(capture_file):
    child = Child(["scan", "--root", str(capture_file)])
    child.wait_for(lambda: _holds_open(child.proc.pid, capture_file), "the capture open")
    assert child.interrupt() == (130, INTERRUPTED)


def test_ctrl_c_while_fleet_waits_for_its_inputs_is_one_line():
    child = Child(["fleet"], stdin=subprocess.PIPE)
    _started(child)
    time.sleep(0.5)
    assert child.interrupt() == (130, INTERRUPTED)


def test_ctrl_c_during_a_capture_is_one_line_and_leaves_no_file(tmp_path, fixture_root):
    """Interrupted while it collects: no capture (whole or partial) is left where it was asked."""
    root = fixture_root("dgx-h100")
    out = tmp_path / "host.tar.gz"
    child = Child(["capture", "--root", str(root), "-o", str(out), "--quiet"])
    child.wait_for(lambda: _holds_open(child.proc.pid, root), "a file of the tree open")
    assert child.interrupt() == (130, INTERRUPTED)
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_during_the_daemons_start_up_is_one_line(tmp_path, fixture_root):
    """While the daemon's own modules are being imported Ctrl-C ends it as any command; once
    it is up, SIGINT is its stop request (docs/daemon.md) and it exits 0."""
    from tests.daemon_helpers import free_port

    args = ["daemon", "--root", str(fixture_root("dgx-h100")), "--listen", f"127.0.0.1:{free_port()}"]
    child = Child([*args, "--state-dir", str(tmp_path / "state")])
    child.wait_for(lambda: child.imported("topoagent.features.daemon"), "the daemon's first module imported")
    code, err = child.interrupt()
    assert (code, err) == (130, INTERRUPTED)
