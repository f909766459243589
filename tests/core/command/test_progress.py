"""Progress lines (topoagent.core.command.common.Progress): shown on a terminal's stderr for work
that can take seconds (capture, draw --format png), never off a terminal or with --quiet."""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
import sys

import pytest

from plan_helpers import REPO


def run_with_stderr_on(args: list[str], tty: bool) -> tuple[int, str]:
    """Run ``python -m topoagent ARGS`` with stderr on a pseudo-terminal (or a pipe); exit status
    and everything written to stderr, raw (carriage returns and erase sequences included)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "topoagent", *args]
    if not tty:
        proc = subprocess.run(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, timeout=120, check=False
        )
        return proc.returncode, proc.stderr.decode()
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=slave, env=env)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return proc.wait(timeout=120), out.decode().replace("\r\n", "\n")  # the terminal's ONLCR undone


@pytest.fixture(scope="module")
def root(fixture_root):
    return str(fixture_root("cloud-vm"))


def test_capture_shows_progress_on_a_terminal_only(root, tmp_path):
    out = str(tmp_path / "c.tar.gz")
    code, err = run_with_stderr_on(["capture", "--root", root, "-o", out], tty=True)
    assert code == 0
    assert "\rtopoagent capture: reading /sys and /proc...\x1b[K" in err
    assert "topoagent capture: writing" in err
    # Erased before the command's own line, which stays readable.
    assert f"\r\x1b[Ktopoagent: wrote {out}" in err
    for args, tty in ((["--quiet"], True), ([], False)):
        code, err = run_with_stderr_on(["capture", "--root", root, "-o", out, *args], tty=tty)
        assert code == 0 and "topoagent capture:" not in err and "\r" not in err and "\x1b" not in err
        assert err.startswith(f"topoagent: wrote {out}")


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot is not installed")
def test_draw_png_shows_progress_on_a_terminal_only(root, tmp_path):
    out = str(tmp_path / "host.png")
    code, err = run_with_stderr_on(["draw", "--root", root, "--format", "png", "-o", out], tty=True)
    assert code == 0 and "topoagent draw: laying out with Graphviz dot..." in err
    assert err.endswith("\r\x1b[K")  # nothing left on the terminal
    code, err = run_with_stderr_on(["draw", "--root", root, "--format", "png", "-o", out, "-q"], tty=True)
    assert code == 0 and err == ""
    code, err = run_with_stderr_on(["draw", "--root", root, "--format", "png", "-o", out], tty=False)
    assert code == 0 and err == ""


def test_an_error_starts_on_a_line_of_its_own(monkeypatch, capsys):
    from topoagent.core.command import common

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    progress = common.Progress("fleet")
    progress.count(3, 10, "files")
    with pytest.raises(SystemExit):
        common.fail("something broke")
    err = capsys.readouterr().err
    assert err == "\rtopoagent fleet: 3/10 files\x1b[K\r\x1b[Ktopoagent: something broke\n"
