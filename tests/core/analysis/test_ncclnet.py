"""The one model of NCCL's NET choice (topoagent.core.analysis.ncclnet): rails and PXN ask it alike.

Two copies of ``ncclTopoGetLocalNet`` once disagreed (path type only for PXN, bandwidth first for
the rails) on 3 of the fixture hosts -- epyc-nps2-mixed, gb200-tray, gb200-tray-faults -- in 16
channel picks and 7 NICs' local GPU (issue 39).  Here every fixture and every pasted matrix is
checked for the agreement that follows from there being one model: each rail is the NET NCCL's
channel 0 gives the GPU, each PXN relay is the NET's local GPU, and that GPU's own rail uses the
NET.  What NCCL 2.30.7 itself answers is tests/features/plan/test_ncclxml.py's (nccl-topo-check).
"""

from __future__ import annotations

import pytest

from tests.fakesysfs import machine_names
from tests.paths import REPO
from topoagent.core.analysis.ncclnet import NetChoice, nccl_net_choice
from topoagent.core.analysis.paths import path_index
from topoagent.core.analysis.rails import compute_nics
from topoagent.core.api import analyse, read_offline, scan

NVSMI = REPO / "tests/core/parse/samples/nvsmi"
MATRICES = sorted(p.name for p in NVSMI.glob("*.txt"))


def _choice(result) -> NetChoice:
    topo = result.topology
    return nccl_net_choice(topo, compute_nics(topo, result.rails.roles), path_index(result.paths))


def _agree(result) -> tuple[int, int]:
    """Assert that the rails and the PXN relays are the model's; return (rails with a NIC, PXN relays)."""
    rails = result.rails
    if not compute_nics(result.topology, rails.roles):
        assert all(r.nic is None for r in rails.rails)
        return 0, 0
    choice = _choice(result)
    for rail in rails.rails:
        used = choice.channels(rail.gpu)
        assert rail.nic == (used[0] if used else None), rail
        assert rail.nics[: len(used)] == tuple(used), rail
        assert rail.pxn_via == (choice.via(rail.gpu, rail.nic) if rail.nic else None), rail
        if rail.pxn_via is not None:
            assert rail.pxn_via == choice.local_gpu(rail.nic)
    for net in choice.nets:
        via = choice.local_gpu(net.id)
        if via is not None:  # the GPU PXN relays through uses the NET itself
            own = rails.rail(via)
            assert own is not None and net.id in own.nics, (net.id, via)
    return sum(r.nic is not None for r in rails.rails), sum(r.pxn_via is not None for r in rails.rails)


@pytest.mark.parametrize("machine", machine_names())
def test_rails_and_pxn_agree_on_every_fixture(fixture_root, machine):
    picks, _ = _agree(scan(fixture_root(machine), nvml="off"))
    assert picks or machine in ("no-gpu", "workstation", "cloud-vm", "mi300x")


def test_rails_and_pxn_agree_on_every_pasted_matrix():
    relays = 0
    for name in MATRICES:
        _, pxn = _agree(analyse(read_offline(nvidia_smi_topo=(NVSMI / name).read_text(encoding="utf-8"))))
        relays += pxn
    assert relays  # NVLinked pastes do route through a peer (v100_nv1_nv2_one_mlx5.txt)


def test_nccl_numbers_gpus_and_nets_in_its_fused_trees_order():
    """ALCF Polaris (one EPYC in NPS4; GPU0..3 on nodes 3, 2, 1, 0; mlx5_0 on node 0, mlx5_1 on
    node 2): NCCL lists GPU0's CPU first, then the CPUs its net plugin's devices walk to (mlx5_0's,
    mlx5_1's), then the rest.  NCCL 2.30.7 (nccl-topo-check on a sysfs tree of this node) lists
    its ranks 0, 3, 1, 2 and gives ranks 0 and 2 mlx5_0 on channel 0, mlx5_1 on channel 1."""
    r = analyse(read_offline(nvidia_smi_topo=(NVSMI / "verdict_polaris_a100_nps4_markdown.txt").read_text()))
    choice = _choice(r)
    assert [g.id for g in choice.gpus] == ["gpu0", "gpu3", "gpu1", "gpu2"]
    assert [n.rdma_devices for n in choice.nets] == [("mlx5_0",), ("mlx5_1",)]
    assert [choice.channels(g) for g in ("gpu0", "gpu2")] == [["nic0", "nic1"]] * 2
    assert (choice.local_gpu("nic0"), choice.local_gpu("nic1")) == ("gpu3", "gpu1")
