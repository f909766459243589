"""``topoagent audit``: the processes using each GPU, judged against the GPU's NUMA node, CPUs
and rail NICs -- on a fake ``/proc`` (tests/fakesysfs ``[[process]]``), with NVML's running
processes (tests/fakenvml.py), and on this machine's real processes.

The fake host is the DGX H100 fixture (gpu0-3 on node 0 = CPUs 0-55,112-167; gpu4-7 on node 1
= 56-111,168-223; gpu1's rail NIC is mlx5_3) with the NVIDIA driver's ``information`` files
(``Device Minor`` = PCI order) and these processes:

======  ============  ================================================  =======================
pid     uses          placed                                            verdict
======  ============  ================================================  =======================
1001    /dev/nvidia0  threads and memory on node 0, NCCL_IB_HCA all     fine (gpu-node)
1002    /dev/nvidia1  2 of 3 threads on node 1, 12 GiB on node 1,       CPUS, MEMORY, HCA
                      NCCL_IB_HCA==mlx5_6
1003    renderD129    every CPU (unbound), memory on node 1 (gpu4's)    fine (unbound)
1004    /dev/nvidia5  threads on node 1, 100 MiB, policy bind:0         MEMORY (the policy)
1005    nvidiactl     -- (no GPU device node)                           not a GPU user
1006    /dev/nvidia9  no GPU has minor 9                                unknown device
1007    /dev/nvidia2  threads on node 0, 100 MiB on node 1              fine (below 256 MiB)
======  ============  ================================================  =======================
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given

from tests.core.parse.test_fuzz_parsers import hostile_text
from tests.fakenvml import load_recording, make_fake
from tests.fakesysfs import generate, load_machine
from tests.fuzz import fuzz_settings, own_errors_only
from tests.paths import REPO
from tests.plan_helpers import topoagent
from topoagent.core.api import scan
from topoagent.core.cpuset import CpuSet
from topoagent.core.errors import InputError
from topoagent.core.findings import CATALOGUE
from topoagent.core.findings.doc import example_text
from topoagent.core.hostfs import HostFS
from topoagent.core.read.nvml import running_processes
from topoagent.core.tree import MemoryTree
from topoagent.features.audit.advise import advise
from topoagent.features.audit.parse import (
    device_node,
    parse_environ,
    parse_hca_list,
    parse_minor,
    parse_numa_maps,
    parse_status,
    policy_nodes,
)
from topoagent.features.audit.read import read_audit

NODE0 = "0-55,112-167"
NODE1 = "56-111,168-223"
ALL_HCAS = "=mlx5_0,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_9,mlx5_10,mlx5_11"

PROCESSES = [
    {
        "pid": 1001,
        "name": "good",
        "fds": ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia0"],
        "threads": [NODE0, NODE0, NODE0],
        "memory": {"0": 8192},
        "environ": {"NCCL_IB_HCA": ALL_HCAS, "CUDA_VISIBLE_DEVICES": "0", "SECRET_TOKEN": "hunter2"},
    },
    {
        "pid": 1002,
        "name": "misplaced",
        "fds": ["/dev/nvidiactl", "/dev/nvidia1"],
        "threads": [NODE1, NODE1, "0-3"],
        "memory": {"0": 1024, "1": 12288},
        "environ": {"NCCL_IB_HCA": "=mlx5_6", "CUDA_VISIBLE_DEVICES": "1"},
    },
    {"pid": 1003, "name": "unbound", "fds": ["/dev/dri/renderD129"], "memory": {"1": 4096, "0": 100}},
    {
        "pid": 1004,
        "name": "policy",
        "fds": ["/dev/nvidia5"],
        "threads": [NODE1],
        "memory": {"1": 100},
        "policy": "bind:0",
    },
    {"pid": 1005, "name": "ctl-only", "fds": ["/dev/nvidiactl"]},
    {"pid": 1006, "name": "stray", "fds": ["/dev/nvidia9"]},
    {"pid": 1007, "name": "small", "fds": ["/dev/nvidia2"], "threads": [NODE0], "memory": {"1": 100}},
]


@pytest.fixture(scope="module")
def host(module_tmp) -> Path:
    desc = load_machine("dgx-h100")
    desc["machine"]["nvidia_procfs"] = True
    desc["process"] = PROCESSES
    root = generate(desc, module_tmp / "dgx")
    # gpu4 behind a DRM render node (nvidia-drm): /sys/class/drm/renderD129/device -> its function
    drm = root / "sys/class/drm/renderD129"
    drm.mkdir(parents=True)
    (drm / "device").symlink_to("../../../bus/pci/devices/0000:9d:00.0")
    return root


@pytest.fixture(scope="module")
def report(host):
    result = scan(host, nvml="off")
    return result, advise(result, read_audit(HostFS(str(host))))


def findings_by_pid(report) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for f in report.findings:
        out.setdefault(int(f.subjects[-1].removeprefix("pid:")), []).append(f.code)
    return out


# -- the fake /proc ---------------------------------------------------------------------------------


def test_it_names_exactly_the_misplaced_processes(report):
    _, rep = report
    assert rep.source == "fd"
    assert [p.pid for p in rep.processes] == [1001, 1002, 1003, 1004, 1006, 1007]  # 1005 holds no GPU
    assert findings_by_pid(rep) == {
        1002: ["PROCESS_CPUS_OFF_GPU_NODE", "PROCESS_HCA_NOT_RAIL", "PROCESS_MEMORY_OFF_GPU_NODE"],
        1004: ["PROCESS_MEMORY_OFF_GPU_NODE"],
    }
    places = {p.pid: p.placement for p in rep.processes}
    assert places == {
        1001: "gpu-node",
        1002: "off-node",
        1003: "unbound",
        1004: "gpu-node",
        1006: "unknown",
        1007: "gpu-node",
    }


def test_the_findings_name_pid_gpu_evidence_and_the_command_that_fixes_it(report):
    _, rep = report
    cpu = next(f for f in rep.findings if f.code == "PROCESS_CPUS_OFF_GPU_NODE")
    assert cpu.severity.label == "warning"  # its threads are on the other socket
    assert cpu.subjects == ("gpu1", "pid:1002")
    assert "2 of its 3 thread(s) may run only on CPUs 56-111,168-223" in cpu.message
    assert "topoagent apply --pid 1002 --gpu 1 --yes" in cpu.remedy
    assert [e.path for e in cpu.evidence][:2] == ["/proc/1002/task/1002/status", "/proc/1002/task/1003/status"]
    assert ("/sys/bus/pci/devices/0000:43:00.0/numa_node", "0") in [(e.path, e.value) for e in cpu.evidence]
    mem = next(f for f in rep.findings if f.code == "PROCESS_MEMORY_OFF_GPU_NODE" and "pid:1002" in f.subjects)
    assert "12.0 GiB of its 13.0 GiB of anonymous memory lives on NUMA node(s) 1" in mem.message
    assert mem.remedy.startswith("Move its pages now: migratepages 1002 1 0 (numactl)")
    hca = next(f for f in rep.findings if f.code == "PROCESS_HCA_NOT_RAIL")
    assert hca.subjects == ("gpu1", "nic5", "pid:1002")
    assert "NCCL_IB_HCA='=mlx5_6' lets NCCL use none of mlx5_3" in hca.message
    assert ALL_HCAS in hca.remedy
    policy = next(f for f in rep.findings if f.code == "PROCESS_MEMORY_OFF_GPU_NODE" and "pid:1004" in f.subjects)
    assert "its memory policy (bind:0) puts new pages on node(s) 0 only" in policy.message
    assert policy.severity.label == "warning"  # node 0 is the other socket


def test_the_catalogue_words_the_audits_findings(report):
    """The audit's codes are the one catalogue's (family audit): each finding is worded by its
    entry, and the entry's example is this test's pid 1002 (docs/findings.md shows it)."""
    _, rep = report
    for code in ("PROCESS_CPUS_OFF_GPU_NODE", "PROCESS_MEMORY_OFF_GPU_NODE", "PROCESS_HCA_NOT_RAIL"):
        entry = CATALOGUE[code]
        assert entry.family == "audit"
        found = [example_text(f) for f in rep.findings if f.code == code and "pid:1002" in f.subjects]
        (example,) = entry.examples
        assert example.text in found, code


def test_per_gpu_counts(report):
    _, rep = report
    use = {g.gpu: g for g in rep.gpus}
    assert use["gpu1"].processes == (1002,) and use["gpu1"].misplaced == (1002,)
    assert use["gpu1"].by_code == {
        "PROCESS_CPUS_OFF_GPU_NODE": (1002,),
        "PROCESS_HCA_NOT_RAIL": (1002,),
        "PROCESS_MEMORY_OFF_GPU_NODE": (1002,),
    }
    assert use["gpu4"].processes == (1003,) and use["gpu4"].misplaced == ()  # found by its render node
    assert use["gpu0"].processes == (1001,) and not use["gpu0"].misplaced


def test_an_unknown_device_node_is_said_not_guessed(report):
    _, rep = report
    stray = next(p for p in rep.processes if p.pid == 1006)
    assert stray.gpus == () and stray.unknown_devices == ("/dev/nvidia9",) and stray.codes == ()


def test_only_the_named_variables_leave_the_environment(report):
    _, rep = report
    good = next(p for p in rep.processes if p.pid == 1001)
    assert good.env == {"NCCL_IB_HCA": ALL_HCAS, "CUDA_VISIBLE_DEVICES": "0"}  # no SECRET_TOKEN, PATH, HOME


def test_cli_json_is_the_scans_finding_shape_and_exit_1(host):
    out = topoagent("audit", "--root", str(host), "--no-nvml", "--format", "json")
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    import jsonschema

    jsonschema.validate(doc, json.loads((REPO / "topoagent/schema/audit.schema.json").read_text()))
    scan_schema = json.loads((REPO / "topoagent/schema/scan.schema.json").read_text())
    assert (
        json.loads((REPO / "topoagent/schema/audit.schema.json").read_text())["$defs"]["FindingEntry"]
        == scan_schema["$defs"]["FindingEntry"]
    )  # the scan's finding shape
    assert {f["code"] for f in doc["findings"]} == {
        "PROCESS_CPUS_OFF_GPU_NODE",
        "PROCESS_MEMORY_OFF_GPU_NODE",
        "PROCESS_HCA_NOT_RAIL",
    }
    assert doc["source"] == "fd" and doc["why_fd"] == "not asked (--no-nvml)"
    assert [g["gpu"] for g in doc["gpus"]] == [f"gpu{i}" for i in range(8)]
    assert topoagent("audit", "--root", str(host), "--no-nvml", "--fail-on", "critical").returncode == 0


def test_cli_text_names_each_process_and_the_fix(host):
    out = topoagent("audit", "--root", str(host), "--no-nvml")
    assert out.returncode == 1
    assert "WARNING PROCESS_CPUS_OFF_GPU_NODE: pid 1002 (misplaced) uses gpu1 (NUMA node 0)" in out.stdout
    assert "remedy: Move it now: topoagent apply --pid 1002 --gpu 1 --yes" in out.stdout
    assert "pid 1006: holds /dev/nvidia9, which no GPU of this host answers to" in out.stdout
    row = next(line for line in out.stdout.splitlines() if line.strip().startswith("1002 "))
    assert "off-node" in row and "2/3 off" in row and "=mlx5_6" in row


def test_pasted_output_is_no_option_of_audit(tmp_path):
    """audit reads a host's /proc: it offers no --paste (issue 40: --help listed it, then the
    command refused it), and one given is a usage error in one line."""
    paste = tmp_path / "topo.txt"
    paste.write_text("\tGPU0\tCPU Affinity\nGPU0\t X \t0-3\n")
    out = topoagent("audit", "--nvidia-smi-topo", str(paste))
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "No such option" in out.stderr
    assert "--paste" not in topoagent("audit", "--help").stdout


def test_what_cannot_be_read_is_said_per_process(host, tmp_path):
    """An fd directory that cannot be listed (here a link loop) puts the process among those not
    read; a numa_maps that is no regular file leaves its memory unknown, named in ``unread``."""
    root = tmp_path / "copy"
    shutil.copytree(host, root, symlinks=True)
    fd = root / "proc/1001/fd"
    shutil.rmtree(fd)
    fd.symlink_to("fd")  # loops
    maps = root / "proc/1002/numa_maps"
    maps.unlink()
    os.mkfifo(maps)
    result = scan(root, nvml="off")
    rep = advise(result, read_audit(HostFS(str(root))))
    assert [(u.pid, u.why) for u in rep.unreadable] == [(1001, "fd: symlink loop")]
    bad = next(p for p in rep.processes if p.pid == 1002)
    assert bad.memory_bytes is None and bad.unread == ("numa_maps: not a regular file (a FIFO)",)
    assert "PROCESS_MEMORY_OFF_GPU_NODE" not in bad.codes and "PROCESS_CPUS_OFF_GPU_NODE" in bad.codes


# -- hostile /proc (issue 44 items 1 and 4) ---------------------------------------------------------

#: A run of digits past what ``int()`` takes (4,300): one process's own environment, or a forged file.
BIG = "9" * 5000
#: Pid 1001 (fine) beside processes whose files hold what no kernel writes; each must cost its own
#: facts only, never the audit.  3001's NCCL_IB_HCA (its own environment: any user's to set) ends
#: in a 5,000-digit port; 3002's numa_maps counts 5,000-digit pages and 3001 lists a thread "²";
#: 3003 (threads off gpu1's node) has a Mems_allowed_list that is no list.
HOSTILE = [
    PROCESSES[0],
    {
        "pid": 3001,
        "name": "hca-port",
        "fds": ["/dev/nvidia3"],
        "threads": [NODE0],
        "environ": {"NCCL_IB_HCA": ALL_HCAS + ":" + BIG},
    },
    {"pid": 3002, "name": "pages", "fds": ["/dev/nvidia6"], "threads": [NODE1], "memory": {"1": 64}},
    {"pid": 3003, "name": "mems", "fds": ["/dev/nvidia1"], "threads": [NODE1], "memory": {"0": 64}},
]


def hostile_host(where: Path) -> Path:
    """The DGX fixture with :data:`HOSTILE`'s processes and their forged files."""
    desc = load_machine("dgx-h100")
    desc["machine"]["nvidia_procfs"] = True
    desc["process"] = HOSTILE
    root = generate(desc, where)
    with (root / "proc/3002/numa_maps").open("a") as f:
        f.write(f"\n7f0000000000 default anon=1 N1={BIG} kernelpagesize_kB=4\n")
    for status in (root / "proc/3003/status", root / "proc/3003/task/3003/status"):
        status.write_text(status.read_text().replace("Mems_allowed_list:\t0-1", "Mems_allowed_list:\tgarbage"))
    (root / "proc/3001/task/²").mkdir()
    (root / "proc/3001/task/²/status").write_text("Name:\tx\nCpus_allowed_list:\t0\n")
    return root


@pytest.fixture(scope="module")
def hostile(module_tmp) -> Path:
    return hostile_host(module_tmp / "hostile")


def test_one_process_s_bad_data_costs_its_own_facts_only(hostile):
    result = scan(hostile, nvml="off")
    rep = advise(result, read_audit(HostFS(str(hostile))))
    assert [p.pid for p in rep.processes] == [1001, 3001, 3002, 3003] and rep.unreadable == ()
    by_pid = {p.pid: p for p in rep.processes}
    assert by_pid[1001].unread == () and by_pid[1001].threads == 3 and by_pid[1001].memory_bytes
    assert by_pid[3001].threads == 1 and by_pid[3001].env is not None and by_pid[3001].unread == ()
    pages = by_pid[3002]
    assert pages.memory_bytes is None and pages.threads == 1
    assert len(pages.unread) == 1 and pages.unread[0].startswith("numa_maps: unparsable (not a page count")
    # the status field the audit never uses hid the process and its finding (exit 0)
    assert by_pid[3003].threads == 1 and by_pid[3003].memory_bytes is not None
    assert findings_by_pid(rep) == {3003: ["PROCESS_CPUS_OFF_GPU_NODE"]}


def test_the_cli_audits_a_hostile_proc_and_exits_1_for_the_findings(hostile):
    out = topoagent("audit", "--root", str(hostile), "--no-nvml")
    assert out.returncode == 1 and out.stderr == "", out.stderr
    assert "WARNING PROCESS_CPUS_OFF_GPU_NODE: pid 3003 (mems) uses gpu1" in out.stdout
    assert "numa_maps: unparsable" in out.stdout


def test_a_capture_s_numbers_past_a_device_number_name_no_device():
    """A capture holds names no file system does: a pid and a ``/dev/nvidia`` minor of 5,000
    digits are no process and no GPU device node (the link's target alone was 4 kB)."""
    tree = MemoryTree("/captured")
    tree.add_file("proc/driver/nvidia/gpus/0000:1b:00.0/information", b"Device Minor: \t 0\n")
    for pid, target in (("4001", "/dev/nvidia" + BIG), ("4002", "/dev/nvidia0"), (BIG, "/dev/nvidia0")):
        tree.add_file(f"proc/{pid}/cmdline", b"x\0")
        tree.add_file(f"proc/{pid}/status", f"Name:\tp{pid[:4]}\n".encode())
        tree.add_link(f"proc/{pid}/fd/3", target)
    facts = read_audit(HostFS(tree))
    assert [(p.pid, p.gpus) for p in facts.processes] == [(4002, ("0000:1b:00.0",))]
    assert facts.examined == 2 and facts.unreadable == ()


# -- NVML's running processes ----------------------------------------------------------------------


def test_nvml_running_processes_decide_who_uses_which_gpu(host):
    rec = load_recording("hgx_h100_8gpu")
    rec["gpus"][1]["processes"] = {"compute": [1002]}
    rec["gpus"][5]["processes"] = {"compute": [1004], "graphics": [1004]}
    rec["gpus"][6]["processes"] = {"compute": [4242]}  # not in this /proc: another PID namespace
    running = running_processes(make_fake(rec))
    assert running.why_not is None and running.by_bdf["0000:43:00.0"] == (1002,)
    result = scan(host, nvml="off")
    rep = advise(result, read_audit(HostFS(str(host)), nvml_pids=running.by_bdf))
    assert rep.source == "nvml"
    assert [(p.pid, p.gpus, p.devices) for p in rep.processes] == [
        (1002, ("gpu1",), ("nvml",)),
        (1004, ("gpu5",), ("nvml",)),
    ]
    assert [u.pid for u in rep.unreadable] == [4242]
    assert findings_by_pid(rep) == {
        1002: ["PROCESS_CPUS_OFF_GPU_NODE", "PROCESS_HCA_NOT_RAIL", "PROCESS_MEMORY_OFF_GPU_NODE"],
        1004: ["PROCESS_MEMORY_OFF_GPU_NODE"],
    }


def test_nvml_without_a_driver_says_why():
    rec = load_recording("hgx_h100_8gpu")
    rec["init_error"] = "NVML_ERROR_DRIVER_NOT_LOADED"
    running = running_processes(make_fake(rec))
    assert running.by_bdf == {} and running.why_not is not None and "nvmlInit failed" in running.why_not


# -- the parsers, on real strings ------------------------------------------------------------------


REAL_STATUS = (
    "Name:\tpt_main_thread\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\nPid:\t4250\n"
    "Uid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nThreads:\t87\n"
    "Cpus_allowed:\tff,ffffffff,ffffffff\nCpus_allowed_list:\t0-71\n"
    "Mems_allowed:\t00000000,00000003\nMems_allowed_list:\t0-1\n"
)


@pytest.mark.parametrize(
    "line, bad, facts",
    [
        (None, None, ("pt_main_thread", 1000, CpuSet(range(72)))),
        # a field the audit does not use costs nothing (issue 44 item 4: it voided the status)
        ("Mems_allowed_list:\t0-1", "Mems_allowed_list:\tgarbage", ("pt_main_thread", 1000, CpuSet(range(72)))),
        ("Cpus_allowed_list:\t0-71", "Cpus_allowed_list:\t0-99999999", ("pt_main_thread", 1000, None)),
        ("Uid:\t1000", "Uid:\t" + "9" * 5000, ("pt_main_thread", None, CpuSet(range(72)))),
        ("Uid:\t1000", "Uid:\t١٠٠٠", ("pt_main_thread", None, CpuSet(range(72)))),
    ],
)
def test_status_of_a_real_task_one_bad_field_loses_one_fact(line, bad, facts):
    s = parse_status(REAL_STATUS.replace(line, bad) if line else REAL_STATUS)
    assert (s.name, s.uid, s.cpus) == facts


#: numa_maps of a python process (real lines).
REAL_NUMA_MAPS = (
    "5623b7e4a000 default file=/usr/bin/python3.11 mapped=2 mapmax=2 N0=2 kernelpagesize_kB=4\n"
    "5623b9c80000 default heap anon=3210 dirty=3210 N0=3000 N1=210 kernelpagesize_kB=4\n"
    "7f2a40000000 default anon=512 dirty=512 N1=512 kernelpagesize_kB=2048\n"
    "7ffd6c1f3000 default stack anon=9 dirty=9 N0=9 kernelpagesize_kB=4"
)
#: /proc/driver/nvidia/gpus/<bdf>/information of an H100 (real lines).
REAL_INFORMATION = (
    "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 596\nGPU UUID: \t GPU-0d3c8f8e-1111-2222-3333-444455556666\n"
    "Video BIOS: \t 96.00.74.00.0c\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\n"
    "Bus Location: \t 0000:1b:00.0\nDevice Minor: \t 3\nGPU Firmware: \t 535.161.08\nGPU Excluded:\t No\n"
)


@pytest.mark.parametrize(
    "text, by_node, policies",
    [
        # real lines (a python process), file pages left out
        (REAL_NUMA_MAPS, {0: 3009 * 4096, 1: 210 * 4096 + 512 * 2048 * 1024}, ()),
        ("7f0000000000 bind:1 anon=4 dirty=4 N1=4 kernelpagesize_kB=4", {1: 4 * 4096}, ("bind:1",)),
        (
            "7f0000000000 interleave=static:0-3 anon=8 N0=2 N1=2 N2=2 N3=2",
            dict.fromkeys(range(4), 2 * 4096),
            ("interleave=static:0-3",),
        ),
        ("7f0000000000 weighted interleave:0-1 anon=2 N0=1 N1=1", {0: 4096, 1: 4096}, ("weighted interleave:0-1",)),
        ("7f0000000000 prefer (many):2-3 anon=1 N2=1", {2: 4096}, ("prefer (many):2-3",)),
        ("7f0000000000 local anon=1 N0=1", {0: 4096}, ("local",)),
        ("garbage\n\n", {}, ()),
    ],
)
def test_numa_maps(text, by_node, policies):
    got = parse_numa_maps(text)
    assert got.bytes_by_node == by_node and got.policies == policies


@pytest.mark.parametrize("word", [f"N0={BIG}", f"N{BIG}=1"])
def test_numa_maps_with_a_count_no_kernel_writes_is_refused(word):
    with pytest.raises(InputError, match="not a page count"):
        parse_numa_maps(f"7f0000000000 default anon=1 {word} kernelpagesize_kB=4")


@pytest.mark.parametrize(
    "policy, nodes",
    [("bind:1", {1}), ("interleave=static:0-3", {0, 1, 2, 3}), ("local", None), ("prefer (many):2-3", {2, 3})],
)
def test_policy_nodes(policy, nodes):
    assert policy_nodes(policy) == (CpuSet(nodes) if nodes is not None else None)


def test_environ_keeps_only_what_is_asked():
    data = b"PATH=/usr/bin\0NCCL_IB_HCA==mlx5_0,mlx5_1\0AWS_SECRET_ACCESS_KEY=x\0CUDA_VISIBLE_DEVICES=3\0BROKEN\0"
    assert parse_environ(data, ("NCCL_IB_HCA", "CUDA_VISIBLE_DEVICES")) == {
        "NCCL_IB_HCA": "=mlx5_0,mlx5_1",
        "CUDA_VISIBLE_DEVICES": "3",
    }


def test_nvidia_information_minor():
    assert parse_minor(REAL_INFORMATION) == 3
    assert parse_minor("Model: x\n") is None
    assert parse_minor(f"Device Minor: \t {BIG}\n") is None


@pytest.mark.parametrize(
    "target, kind, number",
    [
        ("dev/nvidia3", "nvidia", 3),
        ("dev/dri/renderD128", "render", 128),
        ("dev/dri/card1", "card", 1),
        ("dev/nvidiactl", None, None),
        ("dev/nvidia-uvm", None, None),
        ("dev/nvidia-caps/nvidia-cap1", None, None),
        ("proc/4242/fd/socket:[1234]", None, None),
        ("dev/nvidia" + BIG, None, None),  # more than a minor's 20 bits: no device node
        ("dev/dri/renderD" + "1" * 8, None, None),
    ],
)
def test_device_nodes(target, kind, number):
    node = device_node(target)
    assert (node.kind, node.number) == (kind, number) if node else kind is None


@pytest.mark.parametrize(
    "value, device, port, allowed",
    [
        ("mlx5_0", "mlx5_0", 1, True),
        ("mlx5_1", "mlx5_10", 1, True),  # a prefix: mlx5_1 also names mlx5_10
        ("=mlx5_1", "mlx5_10", 1, False),  # exact
        ("^mlx5_0", "mlx5_0", 1, False),
        ("^mlx5_0", "mlx5_3", 1, True),
        ("^=mlx5_1", "mlx5_10", 1, True),
        ("mlx5_0:1,mlx5_1:1", "mlx5_1", 2, False),  # port 2 not listed
        ("mlx5_0:1,mlx5_1:1", "mlx5_1", 1, True),
        ("mlx5_0:1", "mlx5_0", None, True),
        ("", "mlx5_0", 1, True),  # no list: every device
        ("mlx5_0:" + BIG, "mlx5_0", 2, True),  # a port past any number names none
        ("=mlx5_1:" + BIG, "mlx5_10", 1, False),
    ],
)
def test_nccl_ib_hca_matches_as_nccl_does(value, device, port, allowed):
    assert parse_hca_list(value).allows(device, port) is allowed


@fuzz_settings()
@given(
    hostile_text(
        (REAL_STATUS, REAL_NUMA_MAPS, REAL_INFORMATION, ALL_HCAS, "^=mlx5_0:1,mlx5_3:2", "dev/nvidia3", "bind:0-1")
    )
)
def test_the_audit_parsers_take_any_text(text):
    """What a process writes (its environment) or a capture forges, mangled, with hostile values
    and 5,000-digit numbers spliced in: each parser answers or refuses with the project's error."""
    for parse in (parse_status, parse_numa_maps, parse_minor, device_node, parse_hca_list, policy_nodes):
        own_errors_only(parse, text)
    own_errors_only(parse_environ, text.encode("utf-8", "surrogateescape"), ("NCCL_IB_HCA",))


# -- this machine's real processes -------------------------------------------------------------------


def test_the_live_host_is_audited_without_errors():
    """``topoagent audit`` on this machine, with no GPU holder: a report, no traceback, and this
    test's own process among those examined (its files are readable to itself)."""
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("no /proc here")
    out = topoagent("audit", "--no-nvml", "--format", "json")
    assert out.returncode in (0, 1), out.stderr
    doc = json.loads(out.stdout)
    assert doc["examined"] > 0 and "Traceback" not in out.stderr
    assert os.getpid() not in [u["pid"] for u in doc["unreadable"]]


def _namespaced_holder(device: str, env: dict[str, str]) -> subprocess.Popen[bytes] | None:
    """A child holding ``/dev/<device>`` open: in a mount namespace of its own, /dev is a tmpfs
    with a plain file of that name (nothing on this machine's /dev is touched).  None where
    namespaces cannot be made (not root, no unshare)."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        return None
    script = f"mount -t tmpfs none /dev && : > /dev/{device} && exec sleep 60 3</dev/{device}"
    child = subprocess.Popen([unshare, "-m", "sh", "-c", script], env={"PATH": os.environ.get("PATH", ""), **env})
    for _ in range(100):  # until the child holds the device (or fails)
        try:
            if any(
                os.readlink(f"/proc/{child.pid}/fd/{fd}") == f"/dev/{device}"
                for fd in os.listdir(f"/proc/{child.pid}/fd")
            ):
                return child
        except OSError:
            pass
        if child.poll() is not None:
            return None
        time.sleep(0.05)
    child.kill()
    child.wait()
    return None


def test_a_real_process_holding_a_gpu_node_is_found_and_read():
    """A real child process holding ``/dev/nvidia0`` (a fake node: see _namespaced_holder) is
    found by its fd link, its threads, memory and environment read -- and, as nobody, named
    among the processes that could not be read instead of failing."""
    child = _namespaced_holder("nvidia0", {"NCCL_IB_HCA": "=mlx5_0", "CUDA_VISIBLE_DEVICES": "0"})
    if child is None:
        pytest.skip("needs root and unshare(1) to give a child a /dev/nvidia0 of its own")
    try:
        out = topoagent("audit", "--no-nvml", "--format", "json")
        assert out.returncode in (0, 1), out.stderr
        doc = json.loads(out.stdout)
        (me,) = [p for p in doc["processes"] if p["pid"] == child.pid]
        assert me["devices"] == ["/dev/nvidia0"] and me["unread"] == []
        assert me["threads"] == 1 and me["cpus"] == str(CpuSet(os.sched_getaffinity(child.pid)))
        assert me["env"] == {"NCCL_IB_HCA": "=mlx5_0", "CUDA_VISIBLE_DEVICES": "0"}
        assert me["memory_bytes"] is not None
        # no GPU of this machine has minor 0 here unless it really has an NVIDIA driver
        if not os.path.isdir("/proc/driver/nvidia/gpus"):
            assert me["unknown_devices"] == ["/dev/nvidia0"] and not me["codes"]
        setpriv = shutil.which("setpriv")
        if setpriv is not None:
            as_nobody = subprocess.run(
                [
                    setpriv,
                    "--reuid=65534",
                    "--regid=65534",
                    "--clear-groups",
                    sys.executable,
                    "-m",
                    "topoagent",
                    "audit",
                    "--no-nvml",
                    "--format",
                    "json",
                ],
                capture_output=True,
                text=True,
                timeout=120,
                cwd="/",
                env={"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "")},
            )
            if (
                as_nobody.returncode != 0
                and "topoagent:" not in as_nobody.stderr
                and "Permission denied" in as_nobody.stderr
            ):
                pytest.skip("the checkout is not readable to nobody")
            assert as_nobody.returncode in (0, 1), as_nobody.stderr
            assert "Traceback" not in as_nobody.stderr
            seen = json.loads(as_nobody.stdout)
            assert seen["as_root"] is False
            assert (child.pid, "fd: permission denied") in [(u["pid"], u["why"]) for u in seen["unreadable"]]
            assert child.pid not in [p["pid"] for p in seen["processes"]]
    finally:
        child.kill()
        child.wait()
