"""The GPUs a job was given (topoagent/core/advice/allocation.py): the environment read as CUDA,
Slurm and the NVIDIA Container Toolkit define it, then matched to the host's GPUs."""

from __future__ import annotations

import pytest

from topoagent.core.advice.allocation import Allocation, allocated_gpus, allocation_from
from topoagent.core.errors import InputError

U0 = "GPU-11111111-2222-3333-4444-555555555555"
U1 = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"

TABLE = [
    # environment -> (gpus, source, cuda entries)  or None (nothing restricts the GPUs)
    ({}, None),
    ({"LOCAL_RANK": "1"}, None),
    ({"CUDA_VISIBLE_DEVICES": "4,5"}, (("4", "5"), "CUDA_VISIBLE_DEVICES", ("4", "5"))),
    ({"CUDA_VISIBLE_DEVICES": " 05, 4 "}, (("5", "4"), "CUDA_VISIBLE_DEVICES", ("5", "4"))),
    ({"CUDA_VISIBLE_DEVICES": "2,-1,3"}, (("2",), "CUDA_VISIBLE_DEVICES", ("2",))),  # CUDA stops at -1
    ({"CUDA_VISIBLE_DEVICES": U1}, ((U1,), "CUDA_VISIBLE_DEVICES", (U1,))),
    ({"CUDA_VISIBLE_DEVICES": ""}, ((), "CUDA_VISIBLE_DEVICES", ())),
    ({"CUDA_VISIBLE_DEVICES": "NoDevFiles", "SLURM_JOB_GPUS": ""}, ((), "CUDA_VISIBLE_DEVICES", ())),
    # Slurm without ConstrainDevices: CUDA_VISIBLE_DEVICES holds the host indices Slurm lists.
    ({"CUDA_VISIBLE_DEVICES": "4,5", "SLURM_STEP_GPUS": "4,5"}, (("4", "5"), "CUDA_VISIBLE_DEVICES", ("4", "5"))),
    # With ConstrainDevices=yes Slurm renumbers from 0: positions in SLURM_STEP_GPUS.
    (
        {"CUDA_VISIBLE_DEVICES": "0,1", "SLURM_STEP_GPUS": "4,5", "SLURM_JOB_GPUS": "2,3,4,5"},
        (("4", "5"), "CUDA_VISIBLE_DEVICES within SLURM_STEP_GPUS", ("0", "1")),
    ),
    (
        {"CUDA_VISIBLE_DEVICES": "0,1", "SLURM_JOB_GPUS": "1,2"},
        (("1", "2"), "CUDA_VISIBLE_DEVICES within SLURM_JOB_GPUS", ("0", "1")),
    ),
    ({"SLURM_JOB_GPUS": "6,7"}, (("6", "7"), "SLURM_JOB_GPUS", None)),
    ({"SLURM_STEP_GPUS": "", "SLURM_JOB_GPUS": "6"}, (("6",), "SLURM_JOB_GPUS", None)),
    # Containers: host indices or UUIDs; CUDA numbers the container's GPUs from 0.
    ({"NVIDIA_VISIBLE_DEVICES": "all"}, None),
    ({"NVIDIA_VISIBLE_DEVICES": "all", "CUDA_VISIBLE_DEVICES": "1"}, (("1",), "CUDA_VISIBLE_DEVICES", ("1",))),
    ({"NVIDIA_VISIBLE_DEVICES": f"{U0},{U1}"}, ((U0, U1), "NVIDIA_VISIBLE_DEVICES", None)),
    (
        {"NVIDIA_VISIBLE_DEVICES": "3,7", "CUDA_VISIBLE_DEVICES": "1"},
        (("7",), "CUDA_VISIBLE_DEVICES within NVIDIA_VISIBLE_DEVICES", ("1",)),
    ),
    ({"NVIDIA_VISIBLE_DEVICES": "void"}, ((), "NVIDIA_VISIBLE_DEVICES", None)),
    ({"NVIDIA_VISIBLE_DEVICES": "none"}, ((), "NVIDIA_VISIBLE_DEVICES", None)),
]


@pytest.mark.parametrize("env, want", TABLE)
def test_allocation_from_the_environment(env, want):
    got = allocation_from(env)
    assert got == (None if want is None else Allocation(*want))


@pytest.mark.parametrize(
    "env, message",
    [
        ({"CUDA_VISIBLE_DEVICES": "0,gpu1"}, "'gpu1' is not a GPU index"),
        ({"SLURM_STEP_GPUS": "4,x"}, "SLURM_STEP_GPUS='4,x'"),
        ({"CUDA_VISIBLE_DEVICES": "0,3", "SLURM_STEP_GPUS": "4,5"}, "does not fit SLURM_STEP_GPUS='4,5'"),
    ],
)
def test_bad_values_are_one_clear_error(env, message):
    with pytest.raises(InputError) as err:
        allocation_from(env)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.fixture(scope="module")
def dgx(fixture_root):
    from tests.fakenvml import make_fake
    from topoagent.core.advice.plan import PlanOptions
    from topoagent.core.api import scan

    result = scan(fixture_root("dgx-h100"), nvml=make_fake("hgx_h100_8gpu"))
    return result, result.plan_with(PlanOptions(allowed=None))


def test_indices_and_uuids_name_the_hosts_gpus(dgx):
    result, plan = dgx
    nvml = result.snapshot.nvml_gpus
    uuid5 = next(n.uuid for n in nvml if n.bdf == plan.gpus[5].bdf)
    got = allocated_gpus(Allocation(("4", "5"), "CUDA_VISIBLE_DEVICES"), plan, nvml)
    assert [(g.gpu, g.numa_node) for g in got] == [("gpu4", 1), ("gpu5", 1)]
    got = allocated_gpus(Allocation((uuid5.lower(), f"MIG-{uuid5}/1/0"), "CUDA_VISIBLE_DEVICES"), plan, nvml)
    assert [g.gpu for g in got] == ["gpu5", "gpu5"]  # a UUID in any case; the old MIG-GPU-<uuid>/gi/ci form


@pytest.mark.parametrize(
    "gpus, nvml, message",
    [
        (("8",), True, "names GPU 8, but the host has 8 GPU(s) (0-7)"),
        ((U0,), True, f"names {U0}: not a GPU of this host (known: GPU-"),
        (("MIG-0d5a1f3c-1111-2222-3333-444444444444",), True, "a MIG device UUID"),
        ((U0,), False, "GPU UUIDs need NVML (or KFD), and this scan has none"),
    ],
)
def test_gpus_the_host_cannot_match_are_one_clear_error(dgx, gpus, nvml, message):
    result, plan = dgx
    with pytest.raises(InputError) as err:
        allocated_gpus(Allocation(gpus, "CUDA_VISIBLE_DEVICES"), plan, result.snapshot.nvml_gpus if nvml else ())
    assert message in str(err.value) and "\n" not in str(err.value)


def test_an_allocations_gpus_share_their_nodes_cores(dgx):
    """Two allocated GPUs on node 1 split its 56 cores between them, not four ways."""
    from topoagent.core.advice.plan import PlanOptions

    result, whole = dgx
    plan = result.plan_with(PlanOptions(gpus=("gpu4", "gpu5")))
    g5 = next(g for g in plan.gpus if g.gpu == "gpu5")
    w5 = next(g for g in whole.gpus if g.gpu == "gpu5")
    assert len(g5.rank_cpus[0]) == 56 and len(w5.rank_cpus[0]) == 28  # 28 and 14 cores, two threads each
    assert not g5.rank_cpus[0] & next(g for g in plan.gpus if g.gpu == "gpu4").rank_cpus[0]
