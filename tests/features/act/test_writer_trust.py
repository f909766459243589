"""The writer trusts only what it wrote (issue 20, item 2): each reproduction of a path,
journal or lock turned against the host, as a test that failed before the change."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys

import pytest

from plan_helpers import tiny, topoagent
from topoagent.core.frozen import FrozenMap
from topoagent.core.write.files import write_atomically
from topoagent.features.act.changes import IRQ, MODULE, PCI_CONFIG, THREAD, HostChange
from topoagent.features.act.execute import APPLIED, LEFT, SKIPPED, apply_changes, undo
from topoagent.features.act.journal import Journal, JournalError, seal
from topoagent.features.act.writer import HostWriter, WriteError


@pytest.fixture
def dgx_copy(scratch_root):
    return scratch_root("dgx-h100")


@pytest.fixture
def faulty(scratch_root):
    return scratch_root("faulty-gpu-node")


@pytest.fixture
def tiny_root(tmp_path):
    from tests.fakesysfs import generate

    return str(generate(tiny(gpus=1), tmp_path / "tiny"))


def irq(root, n: int) -> str:
    return (root / f"proc/irq/{n}/smp_affinity_list").read_text().strip()


def irq_change(n: int, before: str, after: str) -> HostChange:
    return HostChange(IRQ, FrozenMap({"irq": n}), before, after, "0000:18:00.0", f"IRQ {n}")


# -- output paths: one atomic writer, a regular file or nothing replaced -------------------------


def non_regular_targets(tmp_path):
    """A FIFO, a symbolic link (to a file that must survive) and a directory at output paths."""
    fifo, link, directory, victim = (tmp_path / n for n in ("fifo", "link", "dir", "victim"))
    os.mkfifo(fifo)
    victim.write_bytes(b"keep me")
    os.symlink(victim, link)
    directory.mkdir()
    return victim, {"a FIFO": fifo, "a symbolic link": link, "a directory": directory}


def test_write_atomically_refuses_device_fifo_symlink_and_directory(tmp_path):
    victim, targets = non_regular_targets(tmp_path)
    for kind, path in targets.items():
        with pytest.raises(OSError, match=f"{kind} is there, not a regular file: refused"):
            write_atomically(str(path), b"data")
    with pytest.raises(OSError, match="a character device is there"):
        write_atomically("/dev/null", b"data")  # refused before any temp file is made in /dev
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert victim.read_bytes() == b"keep me" and stat.S_ISFIFO(os.lstat(targets["a FIFO"]).st_mode)
    assert sorted(os.listdir(tmp_path)) == ["dir", "fifo", "link", "victim"]  # no temp file left behind
    write_atomically(str(victim), b"new")  # a regular file is replaced
    assert victim.read_bytes() == b"new"


def test_capture_o_refuses_device(tiny_root, tmp_path):
    victim, targets = non_regular_targets(tmp_path)
    for kind, path in targets.items():
        out = topoagent("capture", "--root", tiny_root, "-o", str(path))
        assert out.returncode == 2 and f"{kind} is there, not a regular file: refused" in out.stderr, out.stderr
        assert "Traceback" not in out.stderr
    out = topoagent("capture", "--root", tiny_root, "-o", "/dev/null")
    assert out.returncode == 2 and "a character device is there" in out.stderr
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode) and victim.read_bytes() == b"keep me"


def test_draw_o_refuses_fifo_and_symlink(tiny_root, tmp_path):
    victim, targets = non_regular_targets(tmp_path)
    for kind, path in targets.items():
        out = topoagent("draw", "--root", tiny_root, "-o", str(path))
        assert out.returncode == 2 and f"{kind} is there" in out.stderr, out.stderr
    assert victim.read_bytes() == b"keep me"
    good = tmp_path / "good.svg"
    assert topoagent("draw", "--root", tiny_root, "-o", str(good)).returncode == 0
    assert good.read_text().startswith("<")


# -- the host writer: beneath its root, regular files only, no waiting on a FIFO ------------------


def test_fifo_under_proc_irq(dgx_copy, tmp_path):
    path = dgx_copy / "proc/irq/104/smp_affinity_list"
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(WriteError, match="FIFO, not a regular file: refused"):
        HostWriter(dgx_copy).write_text("proc/irq/104/smp_affinity_list", "0-3")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "topoagent",
            "apply",
            "--root",
            str(dgx_copy),
            "--irqs",
            "--yes",
            "--state-dir",
            str(tmp_path / "state"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "FIFO" in out.stderr and "nothing changed" in out.stderr, out.stderr
    assert "needs root" not in out.stderr  # the real reason, not a guess


def test_writer_follows_links_only_inside_its_root(dgx_copy):
    """sysfs is links all the way (bus/pci/devices -> devices/pci0000:00/...): those resolve
    beneath the root; a link that climbs out, or an absolute one, is refused."""
    rel = "sys/bus/pci/devices/0000:18:00.0/config"
    assert os.path.islink(dgx_copy / "sys/bus/pci/devices/0000:18:00.0")
    before = (dgx_copy / rel).read_bytes()
    HostWriter(dgx_copy).write_at(rel, 0x40, before[0x40:0x42])
    assert (dgx_copy / rel).read_bytes() == before
    os.symlink("../../../..", dgx_copy / "proc/irq/escape")
    with pytest.raises(WriteError, match="outside the root"):
        HostWriter(dgx_copy).write_text("proc/irq/escape/etc/passwd", "x")


def test_out_of_root_refusal_says_why_not_needs_root(dgx_copy, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "smp_affinity_list").write_text("0-223\n")
    target = dgx_copy / "proc/irq/104"
    shutil.rmtree(target)
    os.symlink(outside, target)
    out = topoagent("apply", "--root", str(dgx_copy), "--irqs", "--yes", "--state-dir", str(tmp_path / "state"))
    assert out.returncode == 2 and "outside the root" in out.stderr and "needs root" not in out.stderr, out.stderr
    assert (outside / "smp_affinity_list").read_text() == "0-223\n"


# -- the journal: the writer's own, checksummed, validated -----------------------------------------


def test_state_dir_is_owner_only(dgx_copy, tmp_path):
    journal = Journal(tmp_path / "state")
    apply_changes([irq_change(104, "0-223", "0-3")], HostWriter(dgx_copy), journal)
    assert stat.S_IMODE(os.stat(journal.dir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(journal.path).st_mode) == 0o600


def test_symlinked_journal_refused(dgx_copy, tmp_path):
    state, victim = tmp_path / "state", tmp_path / "victim"
    state.mkdir(mode=0o700)
    victim.write_text("precious\n")
    os.symlink(victim, state / "journal.jsonl")
    with pytest.raises(JournalError, match="symbolic link"):
        apply_changes([irq_change(104, "0-223", "0-3")], HostWriter(dgx_copy), Journal(state))
    assert victim.read_text() == "precious\n" and irq(dgx_copy, 104) == "0-223"  # record first: nothing changed


def test_journal_writable_by_others_refused(tmp_path):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "journal.jsonl").write_bytes(b"")
    os.chmod(state / "journal.jsonl", 0o666)
    with pytest.raises(JournalError, match="writable by other users"):
        Journal(state).to_undo()
    os.chmod(state / "journal.jsonl", 0o600)
    os.chmod(state, 0o777)
    with pytest.raises(JournalError, match="state directory is writable by other users"):
        Journal(state).to_undo()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_journal_foreign_owner_refused(tmp_path):
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "journal.jsonl").write_bytes(b"")
    os.chown(state / "journal.jsonl", 4242, 4242)
    with pytest.raises(JournalError, match="owned by uid 4242"):
        Journal(state).to_undo()


def forged(journal: Journal, records: list[dict]) -> None:
    """Records an attacker who can write the journal would write (checksums and all)."""
    os.makedirs(journal.dir, mode=0o700, exist_ok=True)
    with open(journal.path, "ab") as fh:
        for i, r in enumerate(records):
            base = {"id": f"forged{i}", "at": 0, "event": "pending", "before": None, "after": None, "label": "x"}
            fh.write(seal({**base, **r}))
            fh.write(seal({"id": f"forged{i}", "at": 0, "event": "done", "detail": None}))
    os.chmod(journal.path, 0o600)


def test_tampered_journal_records_are_validated_not_obeyed(dgx_copy, tmp_path):
    """Each record names its own root, kind and target: undo checks them against what apply
    could have written for the root given now."""
    journal = Journal(tmp_path / "state")
    root = str(os.path.realpath(dgx_copy))
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    forged(
        journal,
        [
            {"root": "/", "kind": IRQ, "target": {"irq": 104}, "before": "0", "after": "0-223"},  # the live host
            {
                "root": root,
                "kind": PCI_CONFIG,
                "target": {"bdf": "../../..", "offset": 0x104},
                "before": "0x0000",
                "after": "0x0000",
            },
            {
                "root": root,
                "kind": MODULE,
                "target": {"module": "--config=/tmp/x"},
                "before": "loaded",
                "after": "absent",
            },
            {"root": root, "kind": "file", "target": {"path": "../victim"}, "before": None, "after": "keep\n"},
            {"root": root, "kind": "shell", "target": {}, "before": None, "after": None},
            {"root": root, "kind": IRQ, "target": {"irq": "104/../../etc"}, "before": "0", "after": "0-223"},
            {  # a setuid mode for the file undo would write back
                "root": root,
                "kind": "file",
                "target": {"path": "etc/modules-load.d/nvidia-peermem.conf", "mode": 0o4777, "uid": 0, "gid": 0},
                "before": "x\n",
                "after": None,
            },
        ],
    )
    entries = journal.to_undo()
    outcomes = undo(journal, entries, root)
    assert [o.status for o in outcomes] == [SKIPPED] * 7
    whys = " | ".join(o.detail for o in outcomes)
    for why in (
        "not '" + root + "' given now",
        "not a PCI address",
        "not a module topoagent loads",
        "not a file topoagent installs",
        "unknown kind 'shell'",
        "IRQ is not a number",
        "its mode and owner are not a file's",
    ):
        assert why in whys
    assert victim.read_text() == "keep\n" and irq(dgx_copy, 104) == "0-223"


def test_torn_journal_tail_is_skipped_and_the_rest_undone(dgx_copy, tmp_path):
    journal = Journal(tmp_path / "state")
    writer = HostWriter(dgx_copy)
    apply_changes([irq_change(104, "0-223", "0-3")], writer, journal)
    with open(journal.path, "ab") as fh:
        fh.write(b'{"id": "abc", "event": "pend')  # a full disk tore this record
    apply_changes([irq_change(105, "0-223", "4-7")], writer, journal)  # a later apply appends on its own line
    entries = journal.to_undo()
    assert [e.target["irq"] for e in entries] == [105, 104]
    assert len(journal.skipped) == 1 and "torn or altered" in journal.skipped[0]
    outcomes = undo(journal, entries, writer.root)
    assert [o.status for o in outcomes] == [APPLIED, APPLIED]
    assert irq(dgx_copy, 104) == irq(dgx_copy, 105) == "0-223"


def test_undo_continues_past_a_bad_record(dgx_copy, tmp_path):
    state = tmp_path / "state"
    journal = Journal(state)
    writer = HostWriter(dgx_copy)
    apply_changes([irq_change(104, "0-223", "0-3")], writer, journal)
    forged(journal, [{"root": writer.root, "kind": THREAD, "target": {"tid": "x"}, "before": "0", "after": "1"}])
    with open(journal.path, "ab") as fh:
        fh.write(b"[1, 2]\n")  # not a record at all
    apply_changes([irq_change(105, "0-223", "4-7")], writer, journal)
    out = topoagent("apply", "--undo", "--yes", "--root", str(dgx_copy), "--state-dir", str(state))
    assert out.returncode == 1 and "internal error" not in out.stderr
    assert out.stdout.count("applied:") == 2 and out.stdout.count("skipped:") == 1
    assert out.stderr.count("torn or altered") == 1
    assert irq(dgx_copy, 104) == irq(dgx_copy, 105) == "0-223"


def test_undo_leaves_a_later_change(dgx_copy, tmp_path):
    journal = Journal(tmp_path / "state")
    writer = HostWriter(dgx_copy)
    apply_changes([irq_change(104, "0-223", "0-3")], writer, journal)
    (dgx_copy / "proc/irq/104/smp_affinity_list").write_text("8-9\n")  # an operator's deliberate change
    outcomes = undo(journal, journal.to_undo(), writer.root)
    assert outcomes[0].status == LEFT and "changed since apply" in outcomes[0].detail and "8-9" in outcomes[0].detail
    assert irq(dgx_copy, 104) == "8-9"
    assert journal.to_undo() == []  # reported once; the later change stands


def test_undo_pid_reuse(tmp_path):
    """A tid whose start time is not the recorded one is another thread now: left alone."""
    from topoagent.core.read.process import thread_start

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        cpus = os.sched_getaffinity(proc.pid)
        start = thread_start(proc.pid)
        assert start is not None
        journal = Journal(tmp_path / "state")
        forged(
            journal,
            [
                {
                    "root": "/",
                    "kind": THREAD,
                    "target": {"pid": proc.pid, "tid": proc.pid, "start": start + 1},
                    "before": "0",
                    "after": ",".join(map(str, sorted(cpus))),
                }
            ],
        )
        outcomes = undo(journal, journal.to_undo(), "/")
        assert outcomes[0].status == LEFT and "id was reused" in outcomes[0].detail
        assert os.sched_getaffinity(proc.pid) == cpus
    finally:
        proc.kill()
        proc.wait()


# -- files saved for undo: byte for byte, bounded --------------------------------------------------


def test_peermem_conf_kept_byte_for_byte(faulty, tmp_path):
    state = str(tmp_path / "state")
    conf = faulty / "etc/modules-load.d/nvidia-peermem.conf"
    conf.parent.mkdir(parents=True, exist_ok=True)
    original = b"# \xff\xfe not UTF-8 \xe9\nrdma_ucm\n"
    conf.write_bytes(original)
    done = topoagent("fix", "peermem", "--root", str(faulty), "--state-dir", state, "--yes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert conf.read_bytes() == original + b"nvidia_peermem\n"
    undone = topoagent("apply", "--undo", "--yes", "--root", str(faulty), "--state-dir", state)
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert conf.read_bytes() == original


def test_peermem_conf_over_the_cap_is_refused_not_absent(faulty, tmp_path):
    conf = faulty / "etc/modules-load.d/nvidia-peermem.conf"
    conf.parent.mkdir(parents=True, exist_ok=True)
    big = b"# padding\n" * (500 * 1024)  # 5 MiB
    conf.write_bytes(big)
    out = topoagent("fix", "peermem", "--root", str(faulty), "--state-dir", str(tmp_path / "state"), "--yes")
    assert out.returncode == 2 and "cannot be saved for undo" in out.stderr, out.stdout + out.stderr
    assert conf.read_bytes() == big


# -- the daemon's lock -------------------------------------------------------------------------


def test_symlinked_lock_refused(tmp_path):
    from topoagent.features.daemon.lock import LockRefused, StateLock

    state, victim = tmp_path / "state", tmp_path / "victim"
    state.mkdir()
    victim.write_text("precious\n")
    os.symlink(victim, state / "topoagent.lock")
    with pytest.raises(LockRefused, match="symbolic link"):
        StateLock(str(state)).acquire()
    assert victim.read_text() == "precious\n"
    os.unlink(state / "topoagent.lock")
    os.mkfifo(state / "topoagent.lock")
    with pytest.raises(LockRefused, match="not a regular file"):
        StateLock(str(state)).acquire()


# -- apply --pid converges ----------------------------------------------------------------------


def test_pid_threads_started_meanwhile_are_bound_and_unbound_named(monkeypatch, capsys):
    """The first bind and the rounds after it are one loop (commands.apply.bind_threads): the
    threads listed first, then those started meanwhile, each tried once; a dry run lists once."""
    from topoagent.core.cpuset import CpuSet
    from topoagent.core.snapshot import ThreadAffinity
    from topoagent.features.act import apply as cmd

    target, other = CpuSet({0, 1}), CpuSet({0})
    bound: list[int] = []
    calls: list[tuple[tuple[int, ...], bool]] = []

    def listing(pid, tids):
        return tuple(ThreadAffinity(t, target if t in bound or t == 1 else other, 100 + t) for t in tids)

    def run_changes(changes, root, state_dir, yes, *, needs):
        calls.append((tuple(c.target["tid"] for c in changes), yes))
        if yes:
            bound.extend(c.target["tid"] for c in changes if c.target["tid"] not in (3, 5))  # the kernel refuses 3, 5
        return 0

    # 4 and 5 started after the first listing (1, 2, 3); 1 is on the target already
    monkeypatch.setattr(cmd, "threads", lambda pid: listing(pid, [1, 2, 3, 4, 5]))
    monkeypatch.setattr(cmd, "run_changes", run_changes)
    assert cmd.bind_threads(42, target, listing(42, [1, 2, 3]), "/", "/nonexistent", False) == 0
    assert calls == [((2, 3), False)] and bound == []  # shown once, nothing listed again
    calls.clear()
    status = cmd.bind_threads(42, target, listing(42, [1, 2, 3]), "/", "/nonexistent", True)
    assert calls == [((2, 3), True), ((4, 5), True)]  # 3 was tried already: not again
    assert bound == [2, 4] and status == 1
    assert "not bound: 2 thread(s) of pid 42 are not on CPUs 0-1: 3 5" in capsys.readouterr().out


@pytest.mark.skipif(shutil.which("virsh") is None, reason="virsh is not installed")
def test_virsh_domain_names_follow_double_dash():
    """A domain named like an option is a name: it cannot make virsh read another domain."""
    from topoagent.features.vms.libvirt import LibvirtError, domain_state, dumpxml

    assert domain_state("test:///default", "test") == "running"
    with pytest.raises(LibvirtError):
        domain_state("test:///default", "--domain=test")  # before: answered 'running' for 'test'
    with pytest.raises(LibvirtError):
        dumpxml("test:///default", "--domain=test")


def test_a_link_as_the_last_name_is_refused_not_followed(tmp_path):
    """A configuration file that is a link (to /etc/shadow, say) is neither replaced through
    the link nor removed on undo: the writer resolves links on the way, never the last name."""
    root = tmp_path / "root"
    (root / "etc/modules-load.d").mkdir(parents=True)
    victim = root / "etc/shadow"
    victim.write_text("precious\n")
    os.symlink("../shadow", root / "etc/modules-load.d/nvidia-peermem.conf")
    writer = HostWriter(str(root))
    with pytest.raises(WriteError):
        writer.replace_file("etc/modules-load.d/nvidia-peermem.conf", "nvidia-peermem\n")
    with pytest.raises(WriteError):
        writer.remove_file("etc/modules-load.d/nvidia-peermem.conf")
    assert victim.read_text() == "precious\n"
    assert os.path.islink(root / "etc/modules-load.d/nvidia-peermem.conf")


def test_a_file_is_replaced_with_its_own_mode_and_owner_or_not_at_all(tmp_path, monkeypatch):
    """Issue 44 item 3: a file replaced keeps its mode and owner (it became 0644 and the
    writer's); an owner the writer may not give (only root gives a file away) refuses the
    write in one line and leaves the file as it was."""
    from topoagent.core.write import files

    (tmp_path / "etc/modules-load.d").mkdir(parents=True)
    conf = tmp_path / "etc/modules-load.d/nvidia-peermem.conf"
    conf.write_text("mine\n")
    conf.chmod(0o600)
    writer = HostWriter(str(tmp_path))
    mine = {"mode": 0o600, "uid": os.getuid(), "gid": os.getgid()}
    assert writer.file_meta("etc/modules-load.d/nvidia-peermem.conf") == mine
    writer.replace_file("etc/modules-load.d/nvidia-peermem.conf", "nvidia_peermem\n")
    assert conf.read_text() == "nvidia_peermem\n" and stat.S_IMODE(conf.stat().st_mode) == 0o600

    def refused(fd, uid, gid):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(files.os, "fchown", refused)
    with pytest.raises(WriteError, match=r"its owner 4242:4242 cannot be kept: refused \(nothing written\)$"):
        writer.replace_file("etc/modules-load.d/nvidia-peermem.conf", "x\n", {"mode": 0o600, "uid": 4242, "gid": 4242})
    assert conf.read_text() == "nvidia_peermem\n" and os.listdir(conf.parent) == [conf.name]


def test_a_hard_linked_lock_is_refused(tmp_path):
    from topoagent.features.daemon.lock import LockRefused, StateLock

    state, victim = tmp_path / "state", tmp_path / "victim"
    state.mkdir()
    victim.write_text("precious\n")
    os.link(victim, state / "topoagent.lock")
    with pytest.raises(LockRefused, match="hard link"):
        StateLock(str(state)).acquire()
    assert victim.read_text() == "precious\n"


def test_baseline_o_refuses_a_device(tiny_root):
    out = topoagent("baseline", "--root", str(tiny_root), "-o", "/dev/null")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "refused" in out.stderr
    assert os.path.exists("/dev/null") and not os.path.isfile("/dev/null")


def _backup(tmp_path) -> tuple[str, str]:
    from topoagent.features.vms.backup import save_backup

    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    path, written = save_backup(str(state), "vm1", "<domain><name>vm1</name></domain>")
    assert written
    return str(state), path


def test_libvirt_backup_writable_by_others_is_refused_as_the_journal_is(tmp_path):
    """Undo defines what the backup holds: a backup (or its directories) that group or others
    may write is refused by the journal's own check (apply.files.untrusted)."""
    from topoagent.features.vms.backup import BackupError, load_backup

    state, path = _backup(tmp_path)
    assert load_backup(state, "vm1")[1] == "<domain><name>vm1</name></domain>"
    for target, mode, back in ((path, 0o620, 0o600), (os.path.dirname(path), 0o770, 0o700), (state, 0o707, 0o700)):
        os.chmod(target, mode)
        with pytest.raises(BackupError, match=r"is writable by other users \(mode 0[67][0-7][0-7]\): not trusted"):
            load_backup(state, "vm1")
        os.chmod(target, back)
    assert load_backup(state, "vm1")[0] == path


def test_libvirt_backup_that_is_a_link_is_refused(tmp_path):
    from topoagent.features.vms.backup import BackupError, load_backup

    state, path = _backup(tmp_path)
    os.rename(path, path + ".real")
    os.symlink(path + ".real", path)
    with pytest.raises(BackupError, match="symbolic link"):
        load_backup(state, "vm1")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_libvirt_backup_of_another_user_is_refused(tmp_path):
    from topoagent.features.vms.backup import BackupError, load_backup

    state, path = _backup(tmp_path)
    os.chown(path, 4242, 4242)
    with pytest.raises(BackupError, match="owned by uid 4242"):
        load_backup(state, "vm1")


def test_a_backup_saved_under_a_loose_umask_is_trusted_by_undo(tmp_path):
    """os.makedirs gives its mode to the last directory only: a state directory made on the way
    under umask 002 came out 0775, and undo then refused the backup apply had just written."""
    from topoagent.features.vms.backup import load_backup, save_backup

    state = tmp_path / "fresh" / "state"
    old = os.umask(0o002)
    try:
        path, written = save_backup(str(state), "vm1", "<domain/>")
    finally:
        os.umask(old)
    assert written and stat.S_IMODE(state.stat().st_mode) == 0o700
    assert load_backup(str(state), "vm1") == (path, "<domain/>")
