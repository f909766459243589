"""What a person who knows the hardware expects of each fixture shape."""

import pytest
from click.testing import CliRunner

from topoagent.cli import cli
from topoagent.core.api import scan
from topoagent.core.findings import Severity


def codes(result, code):
    return [f for f in result.findings if f.code == code]


def test_dgx_h100_each_gpu_on_its_own_pix_rail_nothing_critical(fixture_root):
    r = scan(fixture_root("dgx-h100"))
    assert len(r.topology.gpus) == 8
    rails = r.rails.rails
    assert all(x.cls is not None and x.cls.name == "PIX" for x in rails)
    assert len({x.nic for x in rails}) == 8  # one NIC per GPU
    names = {x.gpu: r.topology.by_id(x.nic).rdma_devices for x in rails}
    assert names["gpu0"] == ("mlx5_0",) and names["gpu7"] == ("mlx5_11",)
    assert r.worst() is None or r.worst() < Severity.CRITICAL
    storage = [n for n, role in r.rails.roles.items() if role.value == "storage"]
    assert len(storage) == 4  # the two dual-port storage ConnectX-7s


def test_dgx_a100_nps4_pairs_within_quadrants(fixture_root):
    r = scan(fixture_root("dgx-a100-nps4"))
    assert len(r.rails.rails) == 8
    for x in r.rails.rails:
        g, n = r.topology.by_id(x.gpu), r.topology.by_id(x.nic)
        assert g.numa_node == n.numa_node and x.cls.name in ("PIX", "PXB")
    assert not r.findings


def test_wrong_socket_nic_flags_all_four_gpus(fixture_root):
    r = scan(fixture_root("wrong-socket-nic"))
    cross = codes(r, "GPU_NIC_CROSS_SOCKET")
    assert sorted(f.subjects[0] for f in cross) == ["gpu0", "gpu1", "gpu2", "gpu3"]
    assert all(f.severity is Severity.CRITICAL for f in cross)
    assert codes(r, "SOCKET_WITHOUT_RAIL")


def test_cloud_vm_unknown_numa(fixture_root):
    r = scan(fixture_root("cloud-vm"))
    (f,) = codes(r, "NUMA_UNKNOWN")
    assert {d for d in f.subjects if d.startswith("gpu")} == {g.id for g in r.topology.gpus}
    assert all(not p.locality_known for p in r.paths if p.pcie.name == "SYS")
    assert all(g.numa_node is None for g in r.topology.gpus)  # never guessed as 0


def test_grace_binds_to_the_cpu_node_and_gdr_is_fine(fixture_root):
    r = scan(fixture_root("grace-hopper"))
    assert codes(r, "CPU_LESS_NUMA_NODE")[0].remedy.startswith("numactl --cpunodebind=0")
    assert not codes(r, "GPU_NIC_VIA_HOST_BRIDGE")  # P2C on Grace
    assert r.plan.gpus[0].numa_node == 0


def test_p4d_two_gpus_share_each_efa(fixture_root):
    r = scan(fixture_root("p4d-efa"))
    users = {}
    for x in r.rails.rails:
        users.setdefault(x.nic, []).append(x.gpu)
    assert sorted(len(v) for v in users.values()) == [2, 2, 2, 2]
    assert not codes(r, "NIC_SHARED_WHILE_IDLE")  # sharing is forced: no idle EFA
    assert "NCCL_IB_HCA" not in r.plan.gpus[0].env  # EFA goes through libfabric, not verbs


def test_sriov_vfs_are_not_rails(fixture_root):
    r = scan(fixture_root("sriov-nic"))
    vfs = [n for n in r.topology.nics if n.is_vf]
    assert vfs and all(n.id not in r.rails.roles for n in vfs)
    pf = r.topology.by_bdf("0000:39:00.0")
    assert pf.virtfns == tuple(v.bdf for v in vfs)


def test_unprivileged_view_never_claims_acs_ok(fixture_root):
    r = scan(fixture_root("unprivileged"))
    assert codes(r, "ACS_UNKNOWN") and not codes(r, "ACS_REDIRECT")
    # Recommendations stay inside the container's cpuset (8-15,72-79).
    assert all(set(str(g.cpus).replace("-", ",").split(",")) <= {"8", "15", "72", "79"} for g in r.plan.gpus)


def test_faulty_node_raises_each_fault(fixture_root):
    r = scan(fixture_root("faulty-gpu-node"))
    raised = {f.code for f in r.findings}
    assert {
        "ACS_REDIRECT",
        "IOMMU_TRANSLATING",
        "NO_PEER_MEMORY",
        "LINK_WIDTH_DEGRADED",
        "LINK_SPEED_DEGRADED",
        "NUMA_CPULIST_MISMATCH",
    } <= raised
    (acs,) = codes(r, "ACS_REDIRECT")
    assert r.topology.by_id(acs.subjects[0]).bdf == "0000:17:01.0"


@pytest.mark.parametrize(
    "machine, fail_on, code",
    [
        ("dgx-h100", "critical", 0),
        ("wrong-socket-nic", "critical", 1),
        ("cloud-vm", "critical", 0),
        ("cloud-vm", "warning", 1),
        ("workstation", "warning", 0),
        ("workstation", "info", 1),
    ],
)
def test_fail_on_exit_codes(machine, fail_on, code, fixture_root):
    res = CliRunner().invoke(
        cli, ["scan", "--root", str(fixture_root(machine)), "--format", "json", "--fail-on", fail_on]
    )
    assert res.exit_code == code
