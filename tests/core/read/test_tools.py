"""run_tool against real programs on this box: true, false, sh, sleep, printf, lspci."""

from __future__ import annotations

import os
import re
import shutil
import stat
import time

import pytest

from topoagent.core.read.tools import (
    ToolResult,
    lspci_tree,
    lspci_verbose,
    nvidia_smi_topo,
    run_tool,
)


def test_success():
    r = run_tool(["true"])
    assert r == ToolResult(("true",), 0, "", "", None)
    assert r.ok


@pytest.mark.parametrize(
    ("argv", "returncode", "error"),
    [
        (["false"], 1, "exit status 1"),
        (["sh", "-c", "echo 'lspci: oops' >&2; echo second >&2; exit 255"], 255,
         "exit status 255: lspci: oops"),
        # nvidia-smi complains on stdout: used when stderr is empty
        (["sh", "-c", "echo; echo 'NVIDIA-SMI has failed because it couldn'\\''t "
          "communicate with the NVIDIA driver.'; exit 9"], 9,
         "exit status 9: NVIDIA-SMI has failed because it couldn't communicate with the "
         "NVIDIA driver."),
    ],
)  # fmt: skip
def test_failure_exit_status(argv, returncode, error):
    r = run_tool(argv)
    assert r.returncode == returncode
    assert r.error == error
    assert not r.ok


def test_killed_by_signal():
    r = run_tool(["sh", "-c", "kill -KILL $$"])
    assert r.returncode == -9
    assert r.error == "killed by signal 9 (SIGKILL)"


def test_not_installed():
    name = "topoagent-no-such-tool-7f3a"
    r = run_tool([name, "--version"])
    assert r == ToolResult((name, "--version"), None, "", "", "not installed")


def test_timeout():
    start = time.monotonic()
    r = run_tool(["sleep", "30"], timeout=0.3)
    assert time.monotonic() - start < 5
    assert r.returncode is None
    assert r.error == "timed out after 0.3 s"


def test_default_timeout_wording():
    assert run_tool(["sleep", "30"], timeout=1.0).error == "timed out after 1 s"


def test_timeout_kills_the_whole_group():
    # A grandchild keeps the pipes open; killing only the child would leave us waiting 30 s.
    start = time.monotonic()
    r = run_tool(["sh", "-c", "echo started; sleep 30 & sleep 30"], timeout=0.5)
    assert time.monotonic() - start < 5
    assert r.error == "timed out after 0.5 s"
    assert r.stdout == "started\n"  # what it printed before the timeout is kept


def test_arguments_are_not_shell_words():
    r = run_tool(["echo", "a; echo b", "$HOME", "*"])
    assert r.stdout == "a; echo b $HOME *\n"


def test_locale_is_c(monkeypatch):
    monkeypatch.setenv("LC_ALL", "de_DE.UTF-8")
    assert run_tool(["sh", "-c", 'echo "$LC_ALL"']).stdout == "C\n"
    env = {"PATH": os.environ["PATH"], "LC_ALL": "fr_FR.UTF-8"}
    assert run_tool(["sh", "-c", 'echo "$LC_ALL"'], env=env).stdout == "C\n"


def test_env_replaces_the_inherited_one(monkeypatch):
    monkeypatch.setenv("TOPOAGENT_TEST_INHERITED", "yes")
    assert run_tool(["sh", "-c", 'echo "$TOPOAGENT_TEST_INHERITED"']).stdout == "yes\n"
    env = {"PATH": os.environ["PATH"], "ONLY": "this"}
    r = run_tool(["sh", "-c", 'echo "${TOPOAGENT_TEST_INHERITED:-unset} $ONLY"'], env=env)
    assert r.stdout == "unset this\n"


def test_program_is_looked_up_on_the_given_path(tmp_path):
    assert run_tool(["true"], env={"PATH": str(tmp_path)}).error == "not installed"


def test_invalid_utf8_is_replaced():
    r = run_tool(["printf", "\\377abc\\n"])
    assert r.ok
    assert r.stdout == "\ufffdabc\n"


def test_unrunnable_file(tmp_path):
    bad = tmp_path / "not-a-program"
    bad.write_bytes(b"\x7fELF\x00garbage")
    bad.chmod(bad.stat().st_mode | stat.S_IXUSR)
    r = run_tool([str(bad)])
    assert r.returncode is None
    assert r.error is not None and r.error.startswith("could not run: ")


@pytest.mark.parametrize("argv", ["true", b"true", [], ()])
def test_argv_must_be_a_list(argv):
    with pytest.raises(ValueError):
        run_tool(argv)


def test_result_is_frozen():
    r = run_tool(["true"])
    with pytest.raises(AttributeError):
        r.stdout = "x"  # type: ignore[misc]


def test_nvidia_smi_topo_command():
    r = nvidia_smi_topo(timeout=30)
    assert r.argv == ("nvidia-smi", "topo", "-m")
    if shutil.which("nvidia-smi") is None:
        assert r.error == "not installed"


@pytest.mark.skipif(shutil.which("lspci") is None, reason="lspci not installed")
def test_lspci_tree_shows_domains():
    r = lspci_tree(timeout=30)
    assert r.argv == ("lspci", "-t", "-v", "-nn", "-D")
    assert r.ok, r.error
    assert re.search(r"\[[0-9a-f]{4}:[0-9a-f]{2}\]", r.stdout)  # -[0000:00]-+-00.0 ...
    assert re.search(r"\[[0-9a-f]{4}:[0-9a-f]{4}\]", r.stdout)  # numeric ids [8086:0d57]


@pytest.mark.skipif(shutil.which("lspci") is None, reason="lspci not installed")
def test_lspci_verbose_shows_domains():
    r = lspci_verbose(timeout=30)
    assert r.argv == ("lspci", "-D", "-vvv", "-nn")
    assert r.ok, r.error
    assert re.search(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7] ", r.stdout, re.M)


def test_a_tool_that_floods_its_output_is_stopped_at_the_limit():
    """Issue 31 item 5: output is bounded as time is (a flooding scontrol drove health to 15 GB)."""
    start = time.monotonic()
    r = run_tool(["yes", "a long line of output"], timeout=30, limit=1024 * 1024)
    assert r.returncode is None and r.error == "printed more than 1 MiB: stopped"
    assert len(r.stdout) <= 1024 * 1024 + (1 << 16)  # at most one read past the limit
    assert time.monotonic() - start < 10


def test_stderr_counts_toward_the_limit_and_stdout_is_kept_apart():
    r = run_tool(["sh", "-c", "echo out; yes err >&2"], timeout=30, limit=256 * 1024)
    assert r.error is not None and r.error.startswith("printed more than")
    assert r.stdout == "out\n" and r.stderr.startswith("err\n")
