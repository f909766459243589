"""AMD Instinct hosts as NVIDIA ones: the MI300X fixture (8 GPUs, XGMI all-to-all, 8 rail NICs)
plans, execs, writes gres.conf and draws.

ROCm names a job's GPUs with ``ROCR_VISIBLE_DEVICES`` (ROCm's runtime, by ROCm index: KFD's
GPU nodes in PCI bus order) and ``HIP_VISIBLE_DEVICES`` (indices within what ROCR shows); RCCL
reads the same ``NCCL_*`` variables as NCCL.  Slurm's gpu/rsmi autodetection
(SchedMD/slurm src/plugins/gpu/rsmi/gpu_rsmi.c, ``_get_system_gpu_list_rsmi``) gives each GPU
``File=/dev/dri/renderD<minor>`` and empty ``Links=`` in ROCm's order.
"""

from __future__ import annotations

import pytest

from tests.features.plan.test_gres_slurm import gres_lines
from tests.plan_helpers import topoagent


@pytest.fixture(scope="module")
def mi300x(fixture_root):
    return str(fixture_root("mi300x"))


def test_plan_groups_name_the_rocm_devices(mi300x):
    out = topoagent("plan", "--root", mi300x)
    assert out.returncode == 0, out.stderr
    assert "node 0: gpu0 gpu1 gpu2 gpu3  ROCR_VISIBLE_DEVICES=0,1,2,3" in out.stdout
    assert "node 1: gpu4 gpu5 gpu6 gpu7  ROCR_VISIBLE_DEVICES=4,5,6,7" in out.stdout
    assert "CUDA_VISIBLE_DEVICES" not in out.stdout


def test_gres_lines_are_what_gpu_rsmi_detects(mi300x):
    out = topoagent("plan", "--root", mi300x, "--format", "slurm")
    assert out.returncode == 0, out.stderr
    gpus = [e for e in gres_lines(out.stdout) if e.get("Name") == "gpu"]
    assert [e["File"] for e in gpus] == [f"/dev/dri/renderD{128 + i}" for i in range(8)]
    for i, e in enumerate(gpus):
        assert e["Links"] == ",".join("-1" if j == i else "0" for j in range(8))
        assert e["Cores"] == ("0-95" if i < 4 else "96-191")
        assert "Type" not in e  # ROCm SMI's brand string: no file names it


def test_exec_sets_rocr_and_hip_visible_devices_for_a_gpu(mi300x):
    out = topoagent("exec", "--root", mi300x, "--gpu", "gpu6", "--dry-run", "--", "true")
    assert out.returncode in (0, 2), out.stderr  # 2 where none of gpu6's CPUs is allowed here
    assert "export ROCR_VISIBLE_DEVICES=6" in out.stdout
    assert "export HIP_VISIBLE_DEVICES=0" in out.stdout  # HIP indexes what ROCR shows
    assert "UCX_NET_DEVICES=mlx5_6:1" in out.stdout
    assert "CUDA_VISIBLE_DEVICES" not in out.stdout


def test_exec_takes_a_schedulers_rocr_visible_devices_as_the_allocation(mi300x):
    out = topoagent(
        "exec", "--root", mi300x, "--local-rank", "1", "--dry-run", "--", "true", env={"ROCR_VISIBLE_DEVICES": "4,5"}
    )
    assert "gpu5 is the job's GPU 1 (ROCR_VISIBLE_DEVICES)" in out.stderr
    assert "ROCR_VISIBLE_DEVICES=4,5 kept as the job's" in out.stdout
    assert "UCX_NET_DEVICES=mlx5_5:1" in out.stdout


def test_draw_ties_each_gpu_to_its_rail_as_on_a_dgx(mi300x):
    out = topoagent("draw", "--root", mi300x, "--format", "dot")
    assert out.returncode == 0, out.stderr
    assert "8 GPU(s)" in out.stdout
    assert all(f'"gpu{i} -> nic{i + 2}: PIX"' in out.stdout for i in range(8))
