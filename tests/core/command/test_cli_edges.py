"""Errors at the edges of the CLI are one clear line: usage errors, a closed stdin, a reader
that goes away, a full disk, a terminal that cannot show the tree's characters."""

import os
import shutil
import subprocess
import sys

import pytest

from tests.core.test_bad_input import minimal_tree


def run(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "topoagent", *args], capture_output=True, text=True, timeout=60, **kw)


def one_line(proc: subprocess.CompletedProcess, code: int = 2) -> str:
    assert proc.returncode == code, proc
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("topoagent: "), proc.stderr
    return lines[0]


@pytest.mark.parametrize(
    "args, says",
    [
        (["scan", "--format", "bogus"], "Invalid value for '--format'"),
        (["bogus"], "No such command 'bogus'"),
        (["scan", "--no-such-flag"], "No such option"),
        (["plan", "--gpu"], "requires an argument"),
    ],
)
def test_usage_errors_are_one_line(args, says):
    line = one_line(run(*args))
    assert says in line and "--help" in line


def test_bare_topoagent_prints_the_help_and_exits_2():
    # As click >= 8.2 and git do: the ordinary multi-line help (what --help prints), on stderr,
    # exit 2 -- not the help squashed into one "topoagent: Usage: ..." line.
    proc = run()
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == run("--help").stdout
    assert proc.stderr.startswith("Usage: topoagent") and "\nCommands:\n" in proc.stderr


def test_closed_stdin(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "topoagent", "scan", "--nvidia-smi-topo", "-"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    one_line(proc)  # empty stdin: nothing to analyse
    closed = subprocess.run(
        f"{sys.executable} -m topoagent scan --nvidia-smi-topo - <&-",
        shell=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "stdin is closed" in one_line(closed)


def test_reader_that_goes_away(tmp_path):
    root = minimal_tree(tmp_path)
    proc = subprocess.run(
        f"{sys.executable} -m topoagent scan --root {root} --all | head -c 10",
        shell=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.stdout == "topoagent "[:10]
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_full_disk_on_stdout(tmp_path):
    root = minimal_tree(tmp_path)
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "topoagent", "scan", "--root", str(root)],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    proc.stdout = ""
    assert "no space left on device" in one_line(proc)


def test_terminal_that_cannot_show_the_tree(tmp_path):
    root = minimal_tree(tmp_path)
    proc = run("scan", "--root", str(root), env=dict(os.environ, PYTHONIOENCODING="ascii"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.isascii() and "`- NUMA node" in proc.stdout


#: Runs the console script's entry with an object whose finaliser says whether the interpreter
#: tore down: every command ends with an ordinary exit, its exit handlers run.
_ENTRY = r"""
import sys
class Witness:
    def __del__(self):
        sys.stderr.write("torn down\n")
witness = Witness()
if sys.argv[1] == "atexit":
    import atexit
    atexit.register(lambda: sys.stderr.write("exit handler ran\n"))
    del sys.argv[1]
sys.argv[0] = "topoagent"
from topoagent.__main__ import entry
entry()
"""


@pytest.mark.parametrize(
    "args, code",
    [
        (["scan", "--root", "ROOT", "--format", "json"], 0),
        (["scan", "--root", "ROOT", "--format", "json", "--fail-on", "info"], 1),  # the verdict kept
        (["atexit", "scan", "--root", "ROOT", "--format", "json"], 0),  # exit handlers run
        (["scan", "--root", "ROOT", "--format", "jsn"], 2),  # a usage error
    ],
)
def test_every_exit_is_ordinary_and_loses_nothing(tmp_path, args, code):
    root = minimal_tree(tmp_path / "host")
    argv = [str(root) if a == "ROOT" else a for a in args]
    proc = subprocess.run([sys.executable, "-c", _ENTRY, *argv], capture_output=True, text=True, timeout=60)
    assert proc.returncode == code, proc.stderr
    assert "torn down" in proc.stderr
    assert ("exit handler ran" in proc.stderr) is (args[0] == "atexit")
    if code in (0, 1):
        import json

        assert json.loads(proc.stdout)["devices"]  # the whole report, flushed


def test_version_reads_as_click_writes_it():
    from click.testing import CliRunner

    from topoagent.cli import cli

    assert run("--version").stdout == CliRunner().invoke(cli, ["--version"]).output


@pytest.fixture(scope="module")
def dgx_tree(module_tmp):
    from tests.fakesysfs import generate

    return str(generate("dgx-h100", module_tmp / "dgx"))


WRITERS = [
    ["draw", "--format", "svg"],
    ["draw", "--format", "png"],
    ["capture", "-o", "-"],
    ["scan"],
    ["plan"],
    ["apply", "--irqs"],
    ["fix", "acs"],
]


@pytest.mark.parametrize("args", WRITERS, ids=" ".join)
def test_closed_stdout_and_dev_full_are_one_line_exit_2_in_every_command(dgx_tree, args):
    """Before: 'internal error' for draw png and capture -o -, and draw svg exited 0 having
    written nothing."""
    if args == ["draw", "--format", "png"] and not shutil.which("dot"):
        pytest.skip("dot is not installed")
    cmd = [sys.executable, "-m", "topoagent", *args, "--root", dgx_tree]
    closed = subprocess.run(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=120, preexec_fn=lambda: os.close(1)
    )
    assert "internal error" not in one_line(closed)
    with open("/dev/full", "w") as full:
        proc = subprocess.run(cmd, stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert "internal error" not in one_line(proc)


def test_sigpipe_is_quiet_in_apply_as_in_scan(dgx_tree):
    for args in (["scan"], ["apply", "--irqs"]):
        proc = subprocess.run(
            f"{sys.executable} -m topoagent {' '.join(args)} --root {dgx_tree} | head -1",
            shell=True,
            capture_output=True,
            text=True,
            timeout=120,
            executable="/bin/bash",
        )
        assert proc.stderr == "" and proc.stdout.count("\n") == 1
        status = subprocess.run(
            f"set -o pipefail; {sys.executable} -m topoagent {' '.join(args)} --root {dgx_tree}"
            " | head -c 10 >/dev/null",
            shell=True,
            executable="/bin/bash",
            timeout=120,
        )
        assert status.returncode == 0, args


@pytest.mark.parametrize(
    "args, output",
    [
        (["plan", "--format", "slurm"], "a gres.conf"),
        (["plan", "--format", "nccl-topo"], "an NCCL topology"),
        (["scan", "--format", "matrix"], "the GPU matrix"),
    ],
)
def test_gpu_outputs_on_a_host_without_gpus_fail_in_one_line(fixture_root, args, output):
    # An empty gres.conf or matrix exiting 0 would be installed or read without a word; exit 2
    # fails a configuration-management step.  The sysfs tree *was* read: the line says no GPUs.
    root = fixture_root("no-gpu")
    proc = run(*args, "--root", str(root))
    line = one_line(proc)
    assert line == f"topoagent: no GPUs on this host (root {os.path.realpath(root)}): {output} would be empty"
    assert proc.stdout == ""
