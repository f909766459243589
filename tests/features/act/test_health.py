"""``topoagent health``: the drain decision (pure) and the command against a fake ``scontrol``."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.plan_helpers import this_boot, topoagent
from topoagent.core.findings import Finding, Severity
from topoagent.core.result import failing
from topoagent.features.act.drain import (
    MAX_REASON,
    Action,
    clean_reason,
    decide,
    drain_reason,
    parse_show_node,
    scontrol_argv,
    shell_line,
)

OURS = "topoagent: GPU_NIC_CROSS_SOCKET gpu0"
FOREIGN = "bad DIMM, ticket 4711"


@pytest.mark.parametrize(
    ("wanted", "current", "action"),
    [
        (None, None, Action.NONE),  # healthy, no reason
        (None, OURS, Action.RESUME),  # healthy, our drain: resume
        (None, FOREIGN, Action.NONE),  # healthy, someone's drain: leave
        (OURS, None, Action.DRAIN),  # critical, no reason: drain
        (OURS, OURS, Action.NONE),  # critical, drained for it already
        ("topoagent: ACS_REDIRECT bridge3", OURS, Action.DRAIN),  # critical, ours but stale: update
        (OURS, FOREIGN, Action.NONE),  # critical, someone's drain: leave
        (OURS, "topoagent-like but not ours", Action.NONE),  # the prefix includes the colon
    ],
)
def test_decide(wanted, current, action):
    d = decide(wanted, current)
    assert d.action is action
    assert (d.reason == wanted) if action is Action.DRAIN else d.reason is None


def test_scontrol_lines():
    drain = scontrol_argv("dgx-01", decide(OURS, None))
    assert drain == ("scontrol", "update", "NodeName=dgx-01", "State=DRAIN", f"Reason={OURS}")
    assert shell_line(drain) == f'scontrol update NodeName=dgx-01 State=DRAIN Reason="{OURS}"'
    assert scontrol_argv("dgx-01", decide(None, OURS)) == ("scontrol", "update", "NodeName=dgx-01", "State=RESUME")
    assert scontrol_argv("dgx-01", decide(None, None)) is None


# scontrol show node as Slurm prints it (src/api/node_info.c): the reason runs to the end of its
# line and is followed by " [user@time]".
SHOW_DRAINED = """NodeName=dgx-01 Arch=x86_64 CoresPerSocket=56
   CPUAlloc=0 CPUEfctv=224 CPUTot=224 CPULoad=0.52
   Gres=gpu:h100:8(S:0-1)
   State=IDLE+DRAIN ThreadsPerCore=2 TmpDisk=0 Weights=1 Owner=N/A MCS_label=N/A
   Partitions=batch
   Reason=topoagent: GPU_NIC_CROSS_SOCKET gpu0 (+3 more) [root@2026-11-24T10:01:02]

"""
SHOW_IDLE = """NodeName=dgx-02 Arch=x86_64 CoresPerSocket=56
   State=IDLE ThreadsPerCore=2 TmpDisk=0 Weights=1 Owner=N/A MCS_label=N/A
   Partitions=batch

"""
SHOW_ONE_LINE = "NodeName=n7 State=DOWN+DRAIN Partitions=debug Reason=Not responding [slurm@2026-11-20T08:00:00]\n"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (SHOW_DRAINED, "topoagent: GPU_NIC_CROSS_SOCKET gpu0 (+3 more)"),
        (SHOW_IDLE, None),
        (SHOW_ONE_LINE, "Not responding"),
        ("   Reason=hands off\n", "hands off"),  # set without a time: no [user@time]
    ],
)
def test_parse_show_node(text, reason):
    assert parse_show_node(text).reason == reason


def _finding(code: str, severity: Severity, *subjects: str) -> Finding:
    return Finding(code, severity, subjects, "m", (), "r")


def test_drain_reason():
    crit = _finding("GPU_NIC_CROSS_SOCKET", Severity.CRITICAL, "gpu0", "nic2")
    warn = _finding("LINK_WIDTH_DEGRADED", Severity.WARNING, "gpu3")
    # drain_reason is given what ScanResult.failing (the one rule of every verdict) selects
    assert drain_reason(failing((warn,), Severity.CRITICAL)) is None
    assert drain_reason(failing((crit, warn), Severity.CRITICAL)) == "topoagent: GPU_NIC_CROSS_SOCKET gpu0"
    assert drain_reason(failing((crit, warn), Severity.WARNING)) == "topoagent: GPU_NIC_CROSS_SOCKET gpu0 (+1 more)"
    assert drain_reason(failing((warn,), Severity.WARNING)) == "topoagent: LINK_WIDTH_DEGRADED gpu3"


@pytest.mark.parametrize(
    "text", ['a "quoted" $(rm -rf /) `x` \\ back', "two\nlines\r\tand\x00nul", "é" * 50, "x" * 500]
)
def test_clean_reason_is_one_safe_line(text):
    got = clean_reason(text)
    assert len(got) <= MAX_REASON
    assert not set(got) & set("\"$`\\'\n\r\t\x00")
    assert got.isascii() and got.isprintable()


# -- the command, with a fake scontrol on PATH -------------------------------------------------

FAKE_SCONTROL = """#!/bin/sh
# Log each call's arguments (one per line, then a separator); answer `show node` from a file.
for a in "$@"; do printf '%s\\n' "$a"; done >> "$FAKE_SCONTROL_LOG"
echo -- >> "$FAKE_SCONTROL_LOG"
if [ "$1" = show ]; then cat "$FAKE_SCONTROL_SHOW"; fi
"""


def run_health(tmp_path: Path, root: Path, show: str, *args: str) -> tuple[int, str, list[list[str]]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "scontrol"
    fake.write_text(FAKE_SCONTROL)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    log, show_file = tmp_path / "calls.log", tmp_path / "show.txt"
    log.write_text("")
    show_file.write_text(show)
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "FAKE_SCONTROL_LOG": str(log),
        "FAKE_SCONTROL_SHOW": str(show_file),
        "SLURMD_NODENAME": "dgx-01",
    }
    proc = topoagent("health", "--root", str(root), *args, env=env)
    calls = [c.strip("\n").split("\n") for c in log.read_text().split("--\n") if c.strip()]
    return proc.returncode, proc.stdout + proc.stderr, calls


def show_with(reason: str | None) -> str:
    return (
        SHOW_IDLE
        if reason is None
        else SHOW_IDLE.replace("   Partitions", f"   Reason={reason} [root@2026-11-24T10:01:02]\n   Partitions")
    )


def test_drains_on_a_critical_finding(tmp_path, scratch_root):
    code, out, calls = run_health(tmp_path, this_boot(scratch_root("wrong-socket-nic")), show_with(None), "--yes")
    assert code == 0, out
    assert calls == [
        ["show", "node", "dgx-01"],
        ["update", "NodeName=dgx-01", "State=DRAIN", "Reason=topoagent: GPU_NIC_CROSS_SOCKET gpu0 (+3 more)"],
    ]
    assert "drained dgx-01" in out


def test_dry_run_prints_the_line_and_changes_nothing(tmp_path, scratch_root):
    code, out, calls = run_health(
        tmp_path, this_boot(scratch_root("wrong-socket-nic")), show_with(None), "--node", "n9"
    )
    assert code == 0, out
    assert calls == [["show", "node", "n9"]]
    assert 'scontrol update NodeName=n9 State=DRAIN Reason="topoagent: GPU_NIC_CROSS_SOCKET gpu0 (+3 more)"' in out
    assert "dry run" in out


def test_resumes_its_own_drain_once_healthy(tmp_path, scratch_root):
    code, out, calls = run_health(tmp_path, this_boot(scratch_root("dgx-h100")), show_with(OURS), "--yes")
    assert code == 0, out
    assert calls[1:] == [["update", "NodeName=dgx-01", "State=RESUME"]]


@pytest.mark.parametrize("machine", ["dgx-h100", "wrong-socket-nic"])
def test_never_touches_a_node_drained_by_someone_else(tmp_path, scratch_root, machine):
    code, out, calls = run_health(tmp_path, this_boot(scratch_root(machine)), show_with(FOREIGN), "--yes")
    assert code == 0, out
    assert calls == [["show", "node", "dgx-01"]]
    assert "someone else" in out


def test_a_failed_show_changes_nothing(tmp_path, scratch_root):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "scontrol"
    fake.write_text("#!/bin/sh\necho 'Node dgx-01 not found' >&2\nexit 1\n")
    fake.chmod(0o755)
    proc = topoagent(
        "health",
        "--yes",
        "--root",
        str(this_boot(scratch_root("wrong-socket-nic"))),
        "--node",
        "dgx-01",
        env={"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"},
    )
    assert proc.returncode == 2
    assert "not found" in proc.stderr and "nothing changed" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["--node", "a b"], "not a node name"),
        (["--node", "gpu1\n"], "not a node name"),  # `$` matches before a final newline: a full match only
        (["--timeout", "0"], "--timeout"),
        (["--timeout", "soon"], "--timeout"),
    ],
)
def test_bad_options_are_one_line(fixture_root, args, complaint):
    proc = topoagent("health", "--root", str(fixture_root("dgx-h100")), *args)
    assert proc.returncode == 2
    assert complaint in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_scan_past_its_time_limit_changes_nothing(tmp_path, scratch_root):
    # No scan of a whole host tree finishes within a millisecond: the watchdog must end it.
    code, out, calls = run_health(
        tmp_path, this_boot(scratch_root("wrong-socket-nic")), show_with(None), "--yes", "--timeout", "0.001"
    )
    assert code == 2
    assert "the scan took longer than 0.001 s; nothing changed" in out
    assert calls == []


def test_a_node_name_with_a_trailing_newline_never_reaches_scontrol(tmp_path, scratch_root):
    root = this_boot(scratch_root("wrong-socket-nic"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "scontrol"
    fake.write_text(FAKE_SCONTROL)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    log, show_file = tmp_path / "calls.log", tmp_path / "show.txt"
    log.write_text("")
    show_file.write_text(SHOW_IDLE)
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "FAKE_SCONTROL_LOG": str(log),
        "FAKE_SCONTROL_SHOW": str(show_file),
        "SLURMD_NODENAME": "gpu1\n",
    }
    proc = topoagent("health", "--root", str(root), "--yes", env=env)
    assert proc.returncode == 2 and "not a node name" in proc.stderr
    assert log.read_text() == ""


def test_a_flooding_scontrol_is_stopped_and_nothing_changes(tmp_path, scratch_root):
    """Issue 31 item 5: `scontrol show node` that prints without end was buffered whole
    (11-15 GB in 42 s); now it is stopped at run_tool's output limit and health exits 2."""
    flood = tmp_path / "flood"
    flood.mkdir()
    fake = flood / "scontrol"
    fake.write_text('#!/bin/sh\nexec yes "NodeName=dgx-01 State=IDLE"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = {"PATH": f"{flood}{os.pathsep}{os.environ.get('PATH', '')}", "SLURMD_NODENAME": "dgx-01"}
    proc = topoagent("health", "--root", str(this_boot(scratch_root("wrong-socket-nic"))), "--yes", env=env)
    assert proc.returncode == 2 and "printed more than" in proc.stderr and "nothing changed" in proc.stderr


def test_another_hosts_data_is_a_dry_run_for_that_hosts_node(tmp_path, fixture_root):
    """Issue 40: ``health --root <fake>`` proposed draining this machine's node (its
    $SLURMD_NODENAME) from another tree's data.  Another host's tree is a dry run for the node it
    names (its host name), this machine's Slurm not asked; --yes is refused in one line, before
    any scan or scontrol call."""
    root = fixture_root("wrong-socket-nic")
    code, out, calls = run_health(tmp_path, root, show_with(None))
    assert code == 0, out
    assert calls == []
    assert "another host's data: a dry run" in out
    assert "NodeName=gpu-srv-114 State=DRAIN" in out and "dgx-01" not in out
    code, out, calls = run_health(tmp_path, root, show_with(None), "--yes")
    assert code == 2 and calls == []
    assert out.count("\n") == 1 and "health --yes acts on this machine" in out and "health without --yes" in out


def test_pasted_output_is_a_dry_run_only(tmp_path):
    """Issue 40: ``health --paste`` was accepted, and would drain this machine's node by another
    host's text.  A paste names no node here: --node names the one the dry run is for; --yes is
    refused in one line."""
    from tests.paths import REPO

    paste = REPO / "tests/core/paste_samples/ellipsis_dgx_a100_nv12.txt"
    out = topoagent("health", "--paste", str(paste), "--node", "far-07")
    assert out.returncode == 0 and "a dry run for node far-07" in out.stdout, out.stderr
    out = topoagent("health", "--paste", str(paste), "--yes")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "health --yes acts on this machine" in out.stderr
