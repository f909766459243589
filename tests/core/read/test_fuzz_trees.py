"""Hostile-input suite, host trees: fixture trees damaged every way a broken capture or a hostile
one can be (tests/fuzz/trees.py), scanned in process, under an audit hook in a subprocess, as an
unprivileged user, and through the CLI.  Promises checked on every input:

* no exception but the project's own (:class:`~topoagent.core.errors.TopoagentError`); the CLI exits
  0, 1 or 2 with no traceback and no "internal error";
* nothing outside the root is opened or listed (audit hook, PEP 578);
* bounded time (CLI runs under a subprocess timeout; in process, an absurd bound only);
* no device lost or doubled: ``scan --all``'s tree shows exactly the JSON's devices, ids and
  BDFs unique.

Size: ``TOPOAGENT_FUZZ_EXAMPLES`` (see tests/fuzz/__init__.py); deterministic for CI.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fakesysfs import generate
from tests.fuzz import examples, fuzz_settings, views_agree
from tests.fuzz.check import read_paths, scan_and_check
from tests.fuzz.deep import deep_chain
from tests.fuzz.trees import Mutation, apply_all, draw_mutations, targets
from tests.paths import REPO

FIXTURES = ("sriov-nic", "cloud-vm", "faulty-gpu-node", "grace-hopper", "no-gpu", "dgx-h100")
SMALL = ("sriov-nic", "cloud-vm", "faulty-gpu-node")


@pytest.fixture(scope="module")
def base() -> Path:
    """A scratch directory every user can traverse (the unprivileged test scans as nobody)."""
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    d = Path(tempfile.mkdtemp(prefix="topoagent-fuzz-", dir=shm))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def trees(base: Path) -> dict[str, tuple[Path, object]]:
    """Each fixture generated once, with the paths its clean scan reads."""
    out = {}
    for name in FIXTURES:
        (base / name).mkdir(mode=0o755)
        root = generate(name, base / name / "root")
        out[name] = (root, targets(root, read_paths(root)))
    return out


# -- in process, hypothesis -----------------------------------------------------------------------


@fuzz_settings()
@given(fixture=st.sampled_from(FIXTURES), rng=st.randoms(use_true_random=False))
def test_damaged_trees_scan_cleanly(trees, fixture, rng):
    root, t = trees[fixture]
    done, undo = apply_all(root, draw_mutations(rng, t))
    try:
        assert scan_and_check(root) == [], [str(m) for m in done]
    finally:
        undo()


# -- in a subprocess, under an audit hook ---------------------------------------------------------


def test_damaged_trees_read_nothing_outside_the_root():
    # As many damaged trees as the in-process property above (each is a scan in a subprocess
    # under the audit hook); TOPOAGENT_FUZZ_EXAMPLES raises both for a long sitting.
    count = examples(1)
    shm = ["--base", "/dev/shm"] if os.access("/dev/shm", os.W_OK) else []  # its trees in memory
    proc = subprocess.run(
        [sys.executable, "-m", "tests.fuzz.worker", "--count", str(count), "--seed", "12", *shm],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60 + count,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["count"] == count and report["applied"] >= count
    assert report["failures"] == [], json.dumps(report["failures"][:3], indent=1)


def test_the_audit_hook_sees_a_read_outside_the_root(tmp_path):
    """The worker's hook is what the suite relies on: it must flag an open outside the root."""
    code = (
        "import sys; from tests.fuzz import worker as w; sys.addaudithook(w._hook);"
        f"w._active.append({str(tmp_path)!r}); open('/etc/hostname').close();"
        f"open({str(tmp_path / 'x')!r}, 'w').close(); w._active.clear(); print(w._leaks)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.stdout.strip() == "['/etc/hostname']", proc.stderr


# -- as an unprivileged user ----------------------------------------------------------------------


def _scan_as_nobody(root: Path, conn) -> None:  # runs in a forked child
    try:
        os.setgid(65534)
        os.setuid(65534)
        conn.send(scan_and_check(root))
    except BaseException as exc:  # noqa: BLE001 - report, never hang the parent
        conn.send(f"{type(exc).__name__}: {exc}")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop privileges to nobody")
def test_permission_denied_anywhere(trees):
    rng = random.Random(7)
    ctx = multiprocessing.get_context("fork")
    for _ in range(examples(0.5)):
        name = rng.choice(SMALL)
        root, t = trees[name]
        chosen = [rng.choice(t.read) for _ in range(rng.randint(1, 4))]
        modes = {p: os.lstat(root / p).st_mode for p in chosen if not (root / p).is_symlink()}
        try:
            for p in modes:
                os.chmod(root / p, 0o000)
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_scan_as_nobody, args=(root, child))
            proc.start()
            assert parent.poll(60), f"scan as nobody hung on {name} with {chosen}"
            result = parent.recv()
            proc.join(30)
        finally:
            for p, mode in modes.items():
                os.chmod(root / p, mode)
        assert result == [], (name, chosen, result)


# -- through the CLI ------------------------------------------------------------------------------


def cli(*args: str, timeout: int = 60, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "topoagent", *args], capture_output=True, text=True, timeout=timeout, cwd=REPO, **kwargs
    )


def assert_clean_cli(root: Path, label: str) -> None:
    """tree --all and JSON: exit 0/1/2, no traceback, the two views agree."""
    tree = cli("scan", "--root", str(root), "--all", "--fail-on", "critical")
    doc = cli("scan", "--root", str(root), "--format", "json")
    for proc in (tree, doc):
        assert proc.returncode in (0, 1, 2), (label, proc.returncode, proc.stderr[-1500:])
        assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, (label, proc.stderr[-1500:])
    assert tree.returncode == doc.returncode, label
    if doc.returncode != 2:
        assert views_agree(tree.stdout, json.loads(doc.stdout)) == [], label


HOSTILE_CASES: dict[str, list[Mutation]] = {
    "numa_node -> /etc/passwd": [Mutation("sys/bus/pci/devices/0000:17:00.0/numa_node", "link_out", b"/etc/passwd")],
    "vendor climbs out": [Mutation("sys/bus/pci/devices/0000:17:00.0/vendor", "link_escape", b"/proc/self/environ", 3)],
    "sys -> /sys": [Mutation("sys", "link_out", b"/sys")],
    "FIFO as config": [Mutation("sys/bus/pci/devices/0000:17:00.0/config", "fifo")],
    "char device as cpulist": [Mutation("sys/devices/system/node/node0/cpulist", "chardev")],
    "sparse GiB meminfo": [Mutation("sys/devices/system/node/node0/meminfo", "huge")],
    "cpulist 0-999999999": [Mutation("sys/devices/system/node/node0/cpulist", "hostile_text", b"0-999999999\n")],
    "numa_node ²": [Mutation("sys/bus/pci/devices/0000:17:00.0/numa_node", "hostile_text", "²\n".encode())],
    "node١ listed": [Mutation("sys/devices/system/node", "odd_name", "node١".encode())],
    "iommu_group -> ²": [Mutation("sys/bus/pci/devices/0000:17:00.0/iommu_group", "odd_link", "²".encode())],
    "non-UTF-8 entry in bus/pci/devices": [Mutation("sys/bus/pci/devices", "odd_name", b"\xff\xfe")],
    "upper-case alias": [Mutation("sys/bus/pci/devices", "alias_name")],
    "class is a directory": [Mutation("sys/bus/pci/devices/0000:39:00.0/class", "dir_for_file")],
    "PF class garbled": [Mutation("sys/bus/pci/devices/0000:39:00.0/class", "hostile_text", b"+1")],
    "bus/pci/devices is a file": [Mutation("sys/bus/pci/devices", "file_for_dir")],
    "symlink loop for a device": [Mutation("sys/bus/pci/devices/0000:39:00.2", "link_loop")],
    "garbage config": [Mutation("sys/bus/pci/devices/0000:39:00.0/config", "garbage", b"\xff" * 7)],
}


@pytest.mark.parametrize("case", sorted(HOSTILE_CASES))
def test_cli_on_hostile_trees(trees, case):
    root, _ = trees["sriov-nic"]
    done, undo = apply_all(root, HOSTILE_CASES[case])
    try:
        assert done, f"{case}: the damage could not be applied (fixture changed?)"
        assert_clean_cli(root, case)
    finally:
        undo()


def test_cli_on_random_damage(trees):
    rng = random.Random(99)
    for _ in range(max(3, examples(0.1))):
        name = rng.choice(FIXTURES)
        root, t = trees[name]
        done, undo = apply_all(root, draw_mutations(rng, t))
        try:
            assert_clean_cli(root, f"{name} {[str(m) for m in done]}")
        finally:
            undo()


def test_deep_bridge_chain(tmp_path):
    """600 bridges nested in sysfs (paths past PATH_MAX; only the first ~300 fit in a link)."""
    root, bdfs = deep_chain(tmp_path / "root", 600)
    assert scan_and_check(root) == []
    assert_clean_cli(root, "deep chain")
    from topoagent.core.api import scan

    r = scan(root, nvml="off")
    listed = set(os.listdir(root / "sys/bus/pci/devices"))
    assert {d.bdf for d in r.topology.devices} == listed
    deepest = r.topology.by_bdf(max(listed, key=bdfs.index))
    assert len(deepest.ancestors) == len(listed) - 1


# -- regressions found by this suite --------------------------------------------------------------


def test_vf_of_an_unclassifiable_pf_still_renders(trees):
    """A PF whose class is garbage keeps the kind its known ids give (a ConnectX: a NIC), so
    its VFs stay its VFs; the matrix looks up no path that was never built (once a KeyError)."""
    root, _ = trees["sriov-nic"]
    done, undo = apply_all(root, HOSTILE_CASES["PF class garbled"])
    try:
        assert done
        assert scan_and_check(root) == []
        from topoagent.core.api import scan

        r = scan(root, nvml="off")
        vf = r.device("0000:39:00.2")
        pf = r.device(vf.physfn) if vf is not None and vf.physfn else None
        assert vf is not None and vf.is_vf and pf is not None and pf.kind.value == "nic"
        assert r.topology.physical(vf) is pf
        assert r.path("gpu0", vf.id) is not None
    finally:
        undo()


@pytest.mark.parametrize(
    "mutation",
    [
        Mutation("sys/bus/pci/devices/0000:17:00.0/iommu_group", "odd_link", "²".encode()),
        Mutation("sys/bus/pci/devices/0000:17:00.0/iommu_group", "odd_link", "١".encode()),
        Mutation("sys/kernel/iommu_groups", "odd_name", "²".encode()),
        Mutation("sys/class/infiniband/mlx5_0/ports", "odd_name", "١".encode()),
    ],
    ids=str,
)
def test_non_ascii_digit_names_are_not_numbers(trees, mutation):
    """``"²".isdigit()`` is True and ``int("²")`` raises; ``int("١")`` is 1: names with such
    digits are no iommu group, port or group id (they crashed the scan or became one)."""
    root, _ = trees["sriov-nic"]
    done, undo = apply_all(root, [mutation])
    try:
        assert done
        assert scan_and_check(root) == []
        from topoagent.core.api import scan

        r = scan(root, nvml="off")
        gpu = r.device("0000:17:00.0")
        if mutation.op == "odd_link":
            assert gpu.iommu_group is None
        assert all(g.id != 1 or os.path.isdir(root / "sys/kernel/iommu_groups/1") for g in r.snapshot.iommu_groups)
    finally:
        undo()
