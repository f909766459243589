"""`topoagent plan`: every format names each GPU's rail NIC and node CPUs; CPU sets are never
widened; reserve, ranks-per-gpu and split share out whole cores."""

from __future__ import annotations

import json
import os
import re
import shlex

import pytest

from tests.plan_helpers import REPO, needs_two_cpus, run_cli, tiny, topoagent
from topoagent.core.advice.cores import cores_in, host_cores, split_cores
from topoagent.core.advice.plan import Plan, PlanError, PlanOptions, rank_env
from topoagent.core.api import scan
from topoagent.core.cpuset import CpuSet
from topoagent.core.result import ScanResult


def _plan_for(result: ScanResult, options: PlanOptions) -> Plan:
    return result.plan_with(options)


NODE0, NODE1 = CpuSet.parse("0-55,112-167"), CpuSet.parse("56-111,168-223")
#: dgx-h100: GPU BDF -> (its PIX NIC's RDMA device, netdev, node CPUs)
DGX = {
    "0000:1b:00.0": ("mlx5_0", "ibp24s0", NODE0),
    "0000:43:00.0": ("mlx5_3", "ibp64s0", NODE0),
    "0000:52:00.0": ("mlx5_4", "ibp79s0", NODE0),
    "0000:61:00.0": ("mlx5_5", "ibp94s0", NODE0),
    "0000:9d:00.0": ("mlx5_6", "ibp154s0", NODE1),
    "0000:c3:00.0": ("mlx5_9", "ibp192s0", NODE1),
    "0000:d1:00.0": ("mlx5_10", "ibp206s0", NODE1),
    "0000:df:00.0": ("mlx5_11", "ibp220s0", NODE1),
}

#: Every rank's NCCL_IB_HCA on dgx-h100: the node's compute HCAs, storage ports (mlx5_1, 2, 7, 8) left out.
DGX_HCAS = "=" + ",".join(rdma for rdma, _, _ in DGX.values())


@pytest.fixture(scope="module")
def dgx(fixture_root):
    return fixture_root("dgx-h100")


def test_dgx_text_names_each_gpus_pix_nic_and_node_cpus(dgx):
    out = run_cli("plan", "--root", str(dgx), "--no-nvml")
    assert out.returncode == 0, out.stderr
    for bdf, (rdma, netdev, cpus) in DGX.items():
        row = next(line for line in out.stdout.splitlines() if bdf in line)
        assert f" {cpus} " in row and rdma in row and netdev in row and "PIX" in row, row


def test_dgx_json_matches_the_schema_and_names_pix_nics(dgx):
    import jsonschema

    out = run_cli("plan", "--root", str(dgx), "--no-nvml", "--format", "json")
    data = json.loads(out.stdout)
    jsonschema.validate(data, json.loads((REPO / "topoagent/schema/plan.schema.json").read_text()))
    scan_ids = {
        d["id"]: d["bdf"] for d in json.loads(run_cli("scan", "--root", str(dgx), "--format", "json").stdout)["devices"]
    }
    assert len(data["gpus"]) == 8
    for g in data["gpus"]:
        rdma, netdev, cpus = DGX[g["bdf"]]
        assert scan_ids[g["gpu"]] == g["bdf"] == g["key"]  # the scan's ids
        assert CpuSet.parse(g["cpus"]) == cpus
        (nic,) = g["nics"]
        assert (nic["rdma"], nic["netdevs"], nic["kind"], nic["remote"]) == ([rdma], [netdev], "PIX", False)
        assert scan_ids[nic["nic"]] == nic["bdf"]
        assert g["env"]["NCCL_IB_HCA"] == DGX_HCAS and g["env"]["UCX_NET_DEVICES"] == f"{rdma}:1"


def test_gpu_narrows_the_table_and_json_and_is_refused_where_it_cannot(dgx):
    # --gpu used to be read by --format env alone and silently ignored by the others.
    text = topoagent("plan", "--root", str(dgx), "--no-nvml", "--gpu", "1")
    assert text.returncode == 0, text.stderr
    rows = [line for line in text.stdout.splitlines() if line.startswith("gpu")]
    assert len(rows) == 1 and rows[0].split()[:2] == ["gpu1", "0000:43:00.0"]
    assert "node 0: gpu0 gpu1 gpu2 gpu3" in text.stdout and "node 1:" not in text.stdout
    data = json.loads(topoagent("plan", "--root", str(dgx), "--no-nvml", "--gpu", "5", "--format", "json").stdout)
    assert [g["bdf"] for g in data["gpus"]] == ["0000:c3:00.0"] and len(data["numa_groups"]) == 1
    for args, says in [
        (("--gpu", "8"), "--gpu 8: the host has 8 GPU(s) (0-7)"),
        (("--gpu", "1", "--format", "slurm"), "--gpu is for --format text, json, env"),
        (("--local-rank", "1"), "--local-rank is for --format env"),
    ]:
        out = topoagent("plan", "--root", str(dgx), "--no-nvml", *args)
        assert (
            out.returncode == 2 and out.stdout == "" and out.stderr == f"topoagent: {says}" + out.stderr.split(says)[1]
        )
        assert len(out.stderr.splitlines()) == 1


def test_dgx_env_for_every_gpu(dgx):
    for index, (bdf, (rdma, _netdev, cpus)) in enumerate(DGX.items()):
        out = run_cli("plan", "--root", str(dgx), "--no-nvml", "--format", "env", "--gpu", str(index))
        assert out.returncode == 0, out.stderr
        exports = dict(
            line[len("export ") :].split("=", 1) for line in out.stdout.splitlines() if line.startswith("export ")
        )
        values = {k: shlex.split(v)[0] for k, v in exports.items()}
        assert values["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" and values["CUDA_VISIBLE_DEVICES"] == str(index)
        assert values["NCCL_IB_HCA"] == DGX_HCAS and values["UCX_NET_DEVICES"] == f"{rdma}:1"
        assert "NCCL_SOCKET_IFNAME" not in values and "# NCCL_SOCKET_IFNAME left unset" in out.stdout
        assert values["OMP_PLACES"] == "cores" and int(values["OMP_NUM_THREADS"]) == 14  # 56 cores / 4 GPUs
        bind = re.search(r"taskset -c (\S+)", out.stdout).group(1)
        assert CpuSet.parse(bind) <= cpus and bdf in out.stdout


def test_dgx_slurm_cores_are_logical_core_indices_of_the_node(dgx):
    out = run_cli("plan", "--root", str(dgx), "--no-nvml", "--format", "slurm")
    lines = [line for line in out.stdout.splitlines() if line.startswith("Name=gpu")]
    assert len(lines) == 8
    for i, line in enumerate(lines):
        assert f"File=/dev/nvidia{i}" in line and "Type=" not in line  # no NVML: no Slurm name
        cores = re.search(r"Cores=(\S+)", line).group(1)
        # Node 0 holds cores 0-55 (threads 0-55 + 112-167), node 1 cores 56-111: Slurm counts cores.
        assert cores == ("0-55" if i < 4 else "56-111")


def test_slurm_cores_match_lstopo_logical_core_numbers(dgx):
    import shutil
    import subprocess

    lstopo = shutil.which("lstopo-no-graphics") or shutil.which("lstopo")
    if lstopo is None:
        pytest.skip("lstopo (hwloc) not installed")
    xml = subprocess.run([lstopo, "-i", str(dgx), "--of", "xml"], capture_output=True, text=True, timeout=120)
    if xml.returncode != 0:
        pytest.skip(f"lstopo cannot read the fake tree: {xml.stderr.strip()[:200]}")
    import xml.etree.ElementTree as ET

    cores = [o for o in ET.fromstring(xml.stdout).iter("object") if o.get("type") == "Core"]
    # hwloc's logical index is document order; each core's cpuset is a hex mask.
    lstopo_cores = [_hwloc_bitmap(c.get("cpuset")) for c in cores]
    ours = host_cores(scan(dgx, nvml="off").snapshot.cpus)
    assert list(ours) == lstopo_cores


def _hwloc_bitmap(text: str) -> CpuSet:
    """hwloc's bitmap string: 32-bit hex words, most significant first, ``0x`` prefixes, and
    zero words left empty (``0x00000001,,,0x00000001``)."""
    words = [int(w, 16) if w else 0 for w in text.split(",")]
    mask = 0
    for w in words:
        mask = (mask << 32) | w
    return CpuSet(i for i in range(mask.bit_length()) if mask >> i & 1)


def test_wrong_socket_says_the_nic_is_remote_and_what_to_do(fixture_root):
    root = str(fixture_root("wrong-socket-nic"))
    text = run_cli("plan", "--root", root).stdout
    for g in ("gpu0", "gpu1", "gpu2", "gpu3"):
        row = next(line for line in text.splitlines() if line.startswith(g + " "))
        assert "mlx5_0" in row and "SYS remote (node 1, socket 1)" in row
    assert "GPU_NIC_CROSS_SOCKET" in text and "do: Move the NIC" in text
    env = run_cli("plan", "--root", root, "--format", "env", "--local-rank", "2").stdout
    assert "is remote" in env and "GPU_NIC_CROSS_SOCKET" in env
    data = json.loads(run_cli("plan", "--root", root, "--format", "json").stdout)
    assert all(n["remote"] and n["kind"] == "SYS" for g in data["gpus"] for n in g["nics"])
    assert all(g["numa_node"] == 0 and CpuSet.parse(g["cpus"]) == CpuSet.parse("0-31,64-95") for g in data["gpus"])


def test_tree_record_of_allowed_cpus_bounds_the_plan(fixture_root):
    allowed = CpuSet.parse("8-15,72-79")  # the unprivileged fixture's container cpuset
    data = json.loads(run_cli("plan", "--root", str(fixture_root("unprivileged")), "--format", "json").stdout)
    assert CpuSet.parse(data["allowed_cpus"]) == allowed
    assert data["gpus"]
    for g in data["gpus"]:
        assert CpuSet.parse(g["cpus"]) <= allowed
        assert all(CpuSet.parse(r["cpus"]) <= allowed for r in g["ranks"])


def test_plan_in_a_restricted_child_process_never_widens(tmp_path):
    """The child runs with CPU 1 only (as under a Slurm or container cpuset)."""
    needs_two_cpus()
    from tests.fakesysfs import generate

    root = generate(tiny(), tmp_path / "tiny")
    for fmt in ("json", "text", "slurm"):
        out = topoagent(
            "plan",
            "--root",
            str(root),
            "--allowed-cpus",
            "self",
            "--format",
            fmt,
            preexec_fn=lambda: os.sched_setaffinity(0, {1}),
        )
        assert out.returncode in (0, 1), out.stderr
        if fmt == "json":
            data = json.loads(out.stdout)
            assert data["allowed_cpus"] == "1" and data["gpus"]
            for g in data["gpus"]:
                assert CpuSet.parse(g["cpus"]) <= {1}
                assert all(CpuSet.parse(r["cpus"]) <= {1} for r in g["ranks"])
        elif fmt == "slurm":
            # gres.conf names the GPU's whole socket (Slurm's rule), whatever this process may use.
            assert all("Cores=0-1" in line for line in out.stdout.splitlines() if line.startswith("Name=gpu"))


def test_empty_intersection_is_a_finding_and_a_nonzero_exit(fixture_root):
    root = str(fixture_root("dgx-h100"))
    out = run_cli("plan", "--root", root, "--allowed-cpus", "60-63", "--format", "json")
    assert out.returncode == 1
    data = json.loads(out.stdout)
    empty = [n for n in data["notes"] if n["code"] == "CPUSET_EMPTY"]
    assert sorted(s for n in empty for s in n["subjects"]) == ["gpu0", "gpu1", "gpu2", "gpu3"]
    for g in data["gpus"]:
        cpus = CpuSet.parse(g["cpus"])
        assert cpus <= CpuSet.parse("60-63")  # never "all CPUs" as a fallback
        assert (not cpus) == (g["numa_node"] == 0)
    env = run_cli("plan", "--root", root, "--allowed-cpus", "60-63", "--format", "env", "--gpu", "0")
    assert env.returncode == 1 and "no CPU of this GPU is allowed" in env.stdout and "OMP_NUM_THREADS" not in env.stdout


@pytest.mark.parametrize("allowed", ["0-3", "1,113,5-9", "56-60,170", "0-223", "100-140"])
def test_no_plan_widens_the_allowed_cpus(dgx, allowed):
    a = CpuSet.parse(allowed)
    p = _plan_for(scan(dgx, nvml="off"), PlanOptions(allowed=a, ranks_per_gpu=2, reserve_cores=1, split=2))
    assert len(p.gpus) == 8
    for g in p.gpus:
        assert g.cpus <= a and all(r <= g.cpus for r in g.rank_cpus)
    assert all(s.cpus <= a for s in p.split)
    assert all(ng.cpus is None or ng.cpus <= a for ng in p.numa_groups)


def test_reserve_and_ranks_per_gpu_use_whole_cores(dgx):
    result = scan(dgx, nvml="off")
    p = _plan_for(result, PlanOptions(reserve_cores=2, ranks_per_gpu=3))
    assert p.reserved == CpuSet.parse("0-1,56-57,112-113,168-169")  # 2 cores per node, SMT siblings too
    cores = host_cores(result.snapshot.cpus)
    sets = [r for g in p.gpus for r in g.rank_cpus]
    assert len(sets) == 24 and all(sets)
    seen: set[int] = set()
    for r in sets:
        assert not (set(r) & seen)  # disjoint across every rank of every GPU
        seen |= set(r)
        for core in cores:  # whole cores: a core is all in or all out
            assert not (core & r) or core <= r
    assert not (seen & p.reserved)
    g, cpus, env = rank_env(p, 7)  # local rank 7 = GPU 2, its second rank
    assert g.gpu == "gpu2" and cpus == g.rank_cpus[1] and env["OMP_NUM_THREADS"] == str(len(cpus) // 2)


def test_split_two_is_numa_local_and_three_says_what_crosses(dgx):
    data = json.loads(run_cli("plan", "--root", str(dgx), "--no-nvml", "--split", "2", "--format", "json").stdout)
    assert [s["numa_nodes"] for s in data["split"]] == [[0], [1]]
    assert [s["crosses"] for s in data["split"]] == [None, None]
    assert CpuSet.parse(data["split"][0]["cpus"]) == NODE0
    text = run_cli("plan", "--root", str(dgx), "--no-nvml", "--split", "3").stdout
    assert "group 1: gpu3 gpu4 gpu5" in text and "crosses NUMA nodes 0 and 1 (sockets 0 and 1)" in text
    assert "SPLIT_CROSSES_NUMA" in text and "SPLIT_UNEVEN" in text
    p = _plan_for(scan(dgx, nvml="off"), PlanOptions(split=3))
    assert len(p.split) == 3
    for a in p.split:
        for b in p.split:
            assert a.index == b.index or not (a.cpus & b.cpus)
    assert sorted(g for s in p.split for g in s.gpus) == sorted(g.gpu for g in p.gpus)


def test_split_cores_is_even_and_never_empty():
    cores = [CpuSet((i, i + 8)) for i in range(8)]
    parts = split_cores(cores, 3).parts
    assert [len(p) // 2 for p in parts] == [3, 3, 2]
    shared = split_cores(cores[:2], 3)
    assert shared.shared and all(shared.parts)
    assert cores_in(cores, CpuSet((0, 9))) == (CpuSet((0,)), CpuSet((9,)))  # one thread allowed: that thread


def test_bad_options_give_one_line(dgx):
    for args, words in (
        (["--format", "env"], "give --gpu GPU or --local-rank R"),
        (["--format", "env", "--local-rank", "99"], "has 8 GPU(s)"),
        (["--allowed-cpus", "bogus"], "--allowed-cpus"),
        (["--split", "9"], "cannot split 8 GPU(s) into 9 groups"),
    ):
        out = run_cli("plan", "--root", str(dgx), *args)
        assert out.returncode == 2 and words in out.stderr and "Traceback" not in out.stderr, (args, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1


def test_scan_nagios_exit_codes(fixture_root, tmp_path):
    expected = {"dgx-h100": 0, "unprivileged": 0, "sriov-nic": 1, "wrong-socket-nic": 2}
    for name, code in expected.items():
        out = topoagent("scan", "--root", str(fixture_root(name)), "--format", "json", "--exit-codes", "nagios")
        assert out.returncode == code, (name, out.stderr)
    missing = topoagent("scan", "--root", str(tmp_path / "nothing"), "--exit-codes", "nagios")
    assert missing.returncode == 3 and "no such directory" in missing.stderr
    assert topoagent("scan", "--root", str(tmp_path / "nothing")).returncode == 2


def test_ranks_per_gpu_is_bounded(dgx):
    """Each rank gets its own set of cores: more ranks than there can be CPUs is refused."""
    from topoagent.core.cpuset import MAX_CPUS

    with pytest.raises(PlanError):  # a TopoagentError, and a ValueError as before
        _plan_for(scan(dgx, nvml="off"), PlanOptions(ranks_per_gpu=MAX_CPUS + 1))
    out = run_cli("plan", "--root", str(dgx), "--no-nvml", "--ranks-per-gpu", str(MAX_CPUS + 1))
    assert out.returncode == 2 and "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "machine",
    [
        "dgx-h100",
        "dgx-a100-nps4",
        "epyc-nps2-mixed",
        "wrong-socket-nic",
        "faulty-gpu-node",
        "unprivileged",
        "sriov-nic",
        "workstation",
    ],
)
def test_every_local_rank_of_a_node_gets_the_same_nccl_ib_hca(fixture_root, machine):
    """NCCL fuses the ranks' topologies and needs one NCCL_IB_HCA per node (NVIDIA/nccl#1478):
    the node's compute HCAs, storage and management ports left out; UCX_NET_DEVICES stays the
    rank's own rail; NCCL_SOCKET_IFNAME is never set (the snapshot knows no addresses)."""
    from topoagent.core.analysis.rails import NicRole

    r = scan(fixture_root(machine), nvml="off")
    p = r.plan_with(PlanOptions(ranks_per_gpu=2))
    envs = [rank_env(p, rank)[2] for rank in range(2 * len(p.gpus))]
    compute = [name for n in r.topology.nics if r.rails.roles.get(n.id) is NicRole.COMPUTE for name in n.rdma_devices]
    others = {
        name
        for n in r.topology.nics
        if r.rails.roles.get(n.id) not in (None, NicRole.COMPUTE)
        for name in n.rdma_devices
    }
    assert {e.get("NCCL_IB_HCA") for e in envs} == {"=" + ",".join(compute) if compute else None}
    assert not others & set(",".join(compute).split(","))
    assert all("NCCL_SOCKET_IFNAME" not in e for e in envs)
    for g in p.gpus:  # each rank's UCX device is its own nearest rail
        assert g.env.get("UCX_NET_DEVICES", "") == ",".join(f"{x}:{rl.port or 1}" for rl in g.rails for x in rl.rdma)
    if machine in ("dgx-h100", "dgx-a100-nps4"):
        assert len(compute) == 8 and envs[0]["UCX_NET_DEVICES"] != envs[2]["UCX_NET_DEVICES"]
    if machine == "dgx-h100":
        assert others == {"mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8"}  # the storage ports


def test_every_output_names_the_active_port_of_a_dual_port_hca(tmp_path):
    """mlx5_0's port 1 is down and its port 2 up: the scan's summary env, the plan's rail and
    env, and the NCCL topology file all name port 2 (one helper for the UCX device name)."""
    import xml.etree.ElementTree as ET

    from tests.fakesysfs import generate
    from topoagent.features.plan.nccl_topo import render

    root = generate(tiny(gpus=1), tmp_path / "tiny")
    ports = root / "sys/class/infiniband/mlx5_0/ports"
    (ports / "1/state").write_text("1: DOWN\n")
    (ports / "2").mkdir()
    for name, value in (("state", "4: ACTIVE"), ("phys_state", "5: LinkUp"), ("rate", "400 Gb/sec (4X NDR)")):
        (ports / "2" / name).write_text(value + "\n")
    (ports / "2/link_layer").write_text((ports / "1/link_layer").read_text())
    result = scan(root=str(root), nvml=False)
    assert [g.env["UCX_NET_DEVICES"] for g in result.plan.gpus] == ["mlx5_0:2"]
    planned = result.plan_with().gpus[0]
    assert planned.rails[0].port == 2 and planned.env["UCX_NET_DEVICES"] == "mlx5_0:2"
    net = next(e for e in ET.fromstring(render(result)).iter("net") if e.get("name") == "mlx5_0")
    assert net.get("port") == "2"
