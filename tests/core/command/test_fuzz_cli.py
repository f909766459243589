"""Hostile-input suite, the command line: offline input files that are not files (FIFO,
/dev/zero, a directory), too large (a sparse GiB) or not text; closed stdin, a full or closed
stdout, a terminal that cannot show the tree's box drawing, usage errors.  Each ends in exit
0/1/2 within a timeout, with at most one clear line on stderr and never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import REPO

TOPO = REPO / "tests/offline_samples/plx4_v100_topo.txt"
PY = [sys.executable, "-m", "topoagent"]


def run(argv: list[str], timeout: int = 60, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=REPO, **kwargs)


def assert_no_crash(proc: subprocess.CompletedProcess, codes=(0, 1, 2)) -> None:
    assert proc.returncode in codes, (proc.returncode, proc.stderr[-1500:])
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr[-1500:]


def assert_one_line_error(proc: subprocess.CompletedProcess) -> None:
    assert_no_crash(proc, (2,))
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("topoagent: "), proc.stderr


@pytest.fixture()
def bad_inputs(tmp_path) -> dict[str, Path]:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    sparse = tmp_path / "sparse"
    with open(sparse, "wb") as f:
        f.truncate(1 << 30)
    garbage = tmp_path / "garbage"
    garbage.write_bytes(bytes(range(256)) * 64)
    zero_link = tmp_path / "zero-link"
    os.symlink("/dev/zero", zero_link)
    return {
        "fifo": fifo,
        "/dev/zero": Path("/dev/zero"),
        "directory": tmp_path,
        "sparse GiB": sparse,
        "link to /dev/zero": zero_link,
        "absent": tmp_path / "nope",
        "garbage bytes": garbage,
    }


@pytest.mark.parametrize("option", ["--nvidia-smi-topo", "--lspci-tree", "--lspci-verbose"])
@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "directory", "sparse GiB", "link to /dev/zero", "absent"])
def test_offline_input_that_is_not_a_tool_output(bad_inputs, option, kind):
    proc = run([*PY, "scan", option, str(bad_inputs[kind])], timeout=30)
    assert_one_line_error(proc)


@pytest.mark.parametrize("option", ["--nvidia-smi-topo", "--lspci-tree", "--lspci-verbose"])
def test_offline_input_of_garbage_bytes(bad_inputs, option):
    assert_no_crash(run([*PY, "scan", option, str(bad_inputs["garbage bytes"])], timeout=30))


def test_closed_stdin():
    proc = run(["sh", "-c", 'exec "$0" -m topoagent scan --lspci-verbose - <&-', sys.executable], timeout=30)
    assert_one_line_error(proc)


def test_stdin_that_is_a_sparse_gib(bad_inputs):
    with open(bad_inputs["sparse GiB"], "rb") as f:
        proc = run([*PY, "scan", "--nvidia-smi-topo", "-"], timeout=60, stdin=f)
    assert_one_line_error(proc)


def test_full_stdout(fixture_root):
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [*PY, "scan", "--root", str(fixture_root("dgx-h100")), "--all"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            cwd=REPO,
        )
    assert_one_line_error(proc)


def test_stdout_closed_early(fixture_root):
    """``topoagent scan --all | head -1``: the reader goes away; no traceback, no hang."""
    proc = subprocess.Popen(
        [*PY, "scan", "--root", str(fixture_root("dgx-h100")), "--all", "--format", "json", "--pretty"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    proc.stdout.read(10)
    proc.stdout.close()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode in (0, 1, 2, -13, 141), proc.returncode  # exit, or SIGPIPE as other tools
    assert b"Traceback" not in err and b"internal error" not in err, err[-1500:]


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_terminal_that_cannot_show_box_drawing(fixture_root, encoding):
    env = dict(os.environ, PYTHONIOENCODING=encoding, LC_ALL="C")
    proc = run([*PY, "scan", "--root", str(fixture_root("dgx-h100")), "--all"], env=env)
    assert_no_crash(proc, (0, 1))
    assert "0000:1b:00.0" in proc.stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["scan", "--format", "nope"],
        ["scan", "--root"],
        ["scan", "--fail-on", "sometimes"],
        ["nosuchcommand"],
        ["scan", "--root", "/nonexistent/\udcff"],
        ["scan", "--lspci-tree", ""],
        ["scan", "--root", "x" * 5000],
    ],
    ids=lambda a: " ".join(a)[:40],
)
def test_usage_errors(argv):
    env = dict(os.environ, LC_ALL="C.UTF-8")
    proc = subprocess.run([*PY, *argv], capture_output=True, timeout=30, cwd=REPO, env=env)
    assert proc.returncode == 2, proc
    err = proc.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err and "internal error" not in err, err[-1500:]


def test_the_offline_sample_itself_is_fine():
    """The control: the same options with a real paste succeed."""
    assert_no_crash(run([*PY, "scan", "--nvidia-smi-topo", str(TOPO)]), (0, 1))
