"""`topoagent apply`: dry run first, journal before each change, undo newest first.

``--pid`` acts on a real process the test starts (CPUs 0-1 exist on any runner that gets
this far); ``--irqs`` on a copy of a fake host whose /proc/irq is plain files.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time

import pytest

from tests.plan_helpers import needs_two_cpus, this_boot, tiny, topoagent
from topoagent.core.api import scan
from topoagent.core.findings import Severity
from topoagent.core.frozen import FrozenMap
from topoagent.features.act.changes import IRQ, HostChange
from topoagent.features.act.execute import APPLIED, REFUSED, apply_changes
from topoagent.features.act.journal import Journal, JournalError
from topoagent.features.act.writer import HostWriter, WriteError

THREADS = (
    "import threading, time\n"
    "for _ in range(3): threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
    "time.sleep(60)\n"
)


@pytest.fixture
def tiny_root(tmp_path):
    from tests.fakesysfs import generate

    return str(this_boot(generate(tiny(gpus=1), tmp_path / "tiny")))  # its plan binds a real process here


@pytest.fixture
def sleeper():
    """A process with four threads, all bound to CPU 0."""
    needs_two_cpus()
    proc = subprocess.Popen([sys.executable, "-c", THREADS], preexec_fn=lambda: os.sched_setaffinity(0, {0}))
    deadline = time.time() + 10
    while len(os.listdir(f"/proc/{proc.pid}/task")) < 4 and time.time() < deadline:
        time.sleep(0.05)
    yield proc
    proc.kill()
    proc.wait()


def affinities(pid: int) -> set[frozenset[int]]:
    return {frozenset(os.sched_getaffinity(int(t))) for t in os.listdir(f"/proc/{pid}/task")}


def test_pid_round_trip(tiny_root, sleeper, tmp_path):
    state = str(tmp_path / "state")
    shown = topoagent("apply", "--root", tiny_root, "--pid", str(sleeper.pid), "--gpu", "0", "--state-dir", state)
    assert shown.returncode == 0 and "Would change (4)" in shown.stdout and "Dry run" in shown.stdout
    assert affinities(sleeper.pid) == {frozenset({0})} and not os.path.exists(state)

    done = topoagent(
        "apply", "--root", tiny_root, "--pid", str(sleeper.pid), "--gpu", "0", "--state-dir", state, "--yes"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert affinities(sleeper.pid) == {frozenset({0, 1})}  # every thread, read back
    assert done.stdout.count("applied:") == 4
    with open(os.path.join(state, "journal.jsonl")) as journal:
        records = [json.loads(line) for line in journal]
    assert [r["event"] for r in records].count("pending") == 4 and all(
        r["before"] == "0" for r in records if r["event"] == "pending"
    )

    undone = topoagent("apply", "--undo", "--yes", "--root", tiny_root, "--state-dir", state)
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert affinities(sleeper.pid) == {frozenset({0})}
    again = topoagent("apply", "--undo", "--yes", "--root", tiny_root, "--state-dir", state)
    assert "Nothing to undo" in again.stdout


def test_pid_needs_a_target_and_refuses_missing_processes(tiny_root, tmp_path):
    out = topoagent("apply", "--root", tiny_root, "--pid", "999999999", "--gpu", "0")
    assert out.returncode == 2 and "no process 999999999" in out.stderr
    out = topoagent("apply", "--root", tiny_root, "--pid", str(os.getpid()))
    assert out.returncode == 2 and "--gpu GPU or --numa-node N" in out.stderr
    out = topoagent("apply", "--root", tiny_root)
    assert out.returncode == 2 and "exactly one of --pid, --irqs, --undo" in out.stderr


@pytest.fixture
def dgx_copy(scratch_root):
    return scratch_root("dgx-h100")


def irq_lists(root, irqs):
    return {i: (root / f"proc/irq/{i}/smp_affinity_list").read_text().strip() for i in irqs}


def test_irqs_round_trip_on_a_fake_proc_irq(dgx_copy, tmp_path):
    state = str(tmp_path / "state")
    nic0 = sorted(int(n) for n in os.listdir(dgx_copy / "sys/bus/pci/devices/0000:18:00.0/msi_irqs"))  # mlx5_0, node 0
    nic8 = sorted(int(n) for n in os.listdir(dgx_copy / "sys/bus/pci/devices/0000:9a:00.0/msi_irqs"))  # mlx5_6, node 1
    before = irq_lists(dgx_copy, nic0 + nic8)
    assert set(before.values()) == {"0-223"}

    shown = topoagent("apply", "--root", str(dgx_copy), "--irqs", "--state-dir", state)
    assert shown.returncode == 0 and "Would change (32)" in shown.stdout
    assert irq_lists(dgx_copy, nic0 + nic8) == before

    done = topoagent("apply", "--root", str(dgx_copy), "--irqs", "--yes", "--state-dir", state)
    assert done.returncode == 0, done.stdout + done.stderr
    # a runnable hint, with no --root to repeat: the journal knows where each change was made
    assert f"undo: topoagent apply --undo --yes --state-dir {state})" in done.stdout
    after = irq_lists(dgx_copy, nic0 + nic8)
    assert {after[i] for i in nic0} == {"0-55,112-167"} and {after[i] for i in nic8} == {"56-111,168-223"}
    storage = dgx_copy / "sys/bus/pci/devices/0000:29:00.0/msi_irqs"  # storage NIC: not a rail, untouched
    assert os.listdir(storage)
    for i in os.listdir(storage):
        assert (dgx_copy / f"proc/irq/{i}/smp_affinity_list").read_text().strip() == "0-223"

    shown = topoagent("apply", "--undo", "--state-dir", state)
    assert shown.stdout.count(f"(under --root {dgx_copy})") == 32 and irq_lists(dgx_copy, nic0 + nic8) == after
    undone = topoagent("apply", "--undo", "--yes", "--state-dir", state)  # issue 40: no --root repeated
    assert undone.returncode == 0 and undone.stdout.count("applied:") == 32
    assert irq_lists(dgx_copy, nic0 + nic8) == before


def test_a_nic_whose_node_its_switch_contradicts_pages_and_keeps_its_irqs(dgx_copy, tmp_path):
    """Issue 31 item 13: mlx5_0 (0000:18:00.0) given node 1, as a changed ACPI _PXM does (numa_node
    and local_cpulist both follow it), while its GPU and the switch's ports below the same root
    port still say node 0.  The kernel gives every function below one root port its host
    bridge's node (pcibus_to_node, drivers/acpi/pci_root.c), so one of the two is wrong:
    NUMA_SWITCH_MISMATCH, critical (it pages: TopoagentNumaSwitchMismatch), and apply --irqs
    leaves the NIC's IRQs where they are and exits 1 (before: no finding, IRQs moved to node 1)."""
    nic = dgx_copy / "sys/bus/pci/devices/0000:18:00.0"
    (nic / "numa_node").write_text("1\n")
    (nic / "local_cpulist").write_text("56-111,168-223\n")
    r = scan(dgx_copy, nvml="off")
    nid = r.topology.by_bdf("0000:18:00.0").id
    found = [f for f in r.findings if f.code == "NUMA_SWITCH_MISMATCH"]
    assert [(f.subjects[0], f.severity) for f in found] == [(nid, Severity.CRITICAL)]
    assert f"{nid} says NUMA node 1, but every other function below its PCIe switch" in found[0].message
    irqs = sorted(int(n) for n in os.listdir(nic / "msi_irqs"))
    before = irq_lists(dgx_copy, irqs)
    out = topoagent("apply", "--root", str(dgx_copy), "--irqs", "--yes", "--state-dir", str(tmp_path / "state"))
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"left alone: {nid}" in out.stdout and "NUMA_SWITCH_MISMATCH" in out.stdout
    assert irq_lists(dgx_copy, irqs) == before  # the other NICs' IRQs moved; this one's did not


def test_irqbalance_is_named_with_how_to_ban(dgx_copy):
    (dgx_copy / "proc/4242").mkdir()
    (dgx_copy / "proc/4242/comm").write_text("irqbalance\n")
    out = topoagent("apply", "--root", str(dgx_copy), "--irqs")
    assert "irqbalance is running (pid 4242)" in out.stdout
    assert "--banirq=" in out.stdout and "IRQBALANCE_BANNED_CPULIST" in out.stdout


def test_unwritable_journal_changes_nothing(dgx_copy):
    before = (dgx_copy / "proc/irq/104/smp_affinity_list").read_text()
    out = topoagent("apply", "--root", str(dgx_copy), "--irqs", "--yes", "--state-dir", "/dev/null/state")
    assert out.returncode == 2 and "cannot write the undo journal" in out.stderr and "nothing changed" in out.stderr
    assert (dgx_copy / "proc/irq/104/smp_affinity_list").read_text() == before


class _Refusing(HostWriter):
    """A writer whose IRQ 105 is kernel-managed (EIO), and which checks the journal first."""

    def __init__(self, root, journal):
        super().__init__(root)
        self.journal = journal

    def write_text(self, rel, text):
        pending = [e for e in self.journal.entries() if e.state == "pending"]
        assert pending, "a change was made before its undo record"
        if rel == "proc/irq/105/smp_affinity_list":
            raise WriteError("managed", errno.EIO)
        super().write_text(rel, text)


def test_managed_irq_is_reported_not_fatal_and_journal_comes_first(dgx_copy, tmp_path):
    journal = Journal(tmp_path / "state")
    changes = [
        HostChange(IRQ, FrozenMap({"irq": i}), "0-223", "0-3", "0000:18:00.0", f"IRQ {i}") for i in (104, 105, 106)
    ]
    outcomes = apply_changes(changes, _Refusing(dgx_copy, journal), journal)
    assert [o.status for o in outcomes] == [APPLIED, REFUSED, APPLIED]
    assert "managed" in outcomes[1].detail
    assert (dgx_copy / "proc/irq/106/smp_affinity_list").read_text() == "0-3"
    assert [e.state for e in journal.entries()] == ["done", "refused", "done"]
    assert [e.target["irq"] for e in journal.to_undo()] == [106, 104]  # newest first, refused left out


def test_writer_refuses_symlinks_out_of_its_root(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "proc/irq").mkdir(parents=True)
    outside.mkdir()
    (outside / "smp_affinity_list").write_text("0-3\n")
    os.symlink(str(outside), root / "proc/irq/7")
    with pytest.raises(WriteError, match="outside the root"):
        HostWriter(root).write_text("proc/irq/7/smp_affinity_list", "0")
    assert (outside / "smp_affinity_list").read_text() == "0-3\n"
    assert "outside the root" in (HostWriter(root).why_not("proc/irq/7/smp_affinity_list") or "")


def test_a_journal_that_is_a_fifo_or_too_large_is_refused_not_read(tmp_path, monkeypatch):
    """The journal is read like any input: regular files only (a FIFO cannot stall undo) and
    bounded (a runaway file is refused, not read whole)."""
    from topoagent.features.act import journal as journal_mod

    state = tmp_path / "state"
    state.mkdir()
    journal = Journal(state)
    os.mkfifo(journal.path)
    with pytest.raises(JournalError, match="not a regular file"):
        journal.entries()
    os.unlink(journal.path)
    with open(journal.path, "w") as fh:
        fh.write("{}\n" * 50)
    monkeypatch.setattr(journal_mod, "MAX_JOURNAL_BYTES", 100)
    with pytest.raises(JournalError, match="larger than"):
        journal.entries()


def test_a_domain_backup_that_is_not_a_regular_file_is_refused(tmp_path):
    from topoagent.features.vms.backup import BackupError, backup_path, load_backup

    path = backup_path(str(tmp_path), "vm1")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.mkfifo(path)
    with pytest.raises(BackupError, match="not a regular file"):
        load_backup(str(tmp_path), "vm1")


@pytest.mark.parametrize(
    "line",
    [
        "[1, 2]",
        '{"id": "a"}',
        '{"id": 7, "event": "pending"}',
        "not json",
        '{"id": "a", "event": "pending", "kind": "irq"}',
    ],
)
def test_a_journal_line_that_is_no_record_is_skipped_with_one_line(tmp_path, line):
    tmp_path.chmod(0o700)  # the journal's directory is the writer's own
    (tmp_path / "journal.jsonl").write_text(line + "\n")
    journal = Journal(tmp_path)
    assert journal.entries() == []
    assert len(journal.skipped) == 1 and journal.skipped[0].endswith("skipped"), journal.skipped


def test_journal_records_read_back_typed(tmp_path):
    j = Journal(tmp_path)
    ident = j.begin(root="/", kind="irq", target={"irq": 105}, before="0-3", after="4-7", label="nic0")
    j.mark(ident, "done")
    (entry,) = j.entries()
    assert (entry.id, entry.kind, entry.target, entry.before, entry.after, entry.state) == (
        ident,
        "irq",
        {"irq": 105},
        "0-3",
        "4-7",
        "done",
    )
    first = (tmp_path / "journal.jsonl").read_text().splitlines()[0]
    assert list(json.loads(first)) == sorted(json.loads(first))  # keys sorted, as before
