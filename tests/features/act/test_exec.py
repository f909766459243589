"""`topoagent exec`: a real child runs with the planned CPUs, memory policy and environment,
and the wrapper's exit status and signals are the child's own.

The plan comes from a tiny fake host (CPUs 0-1, two GPUs each with a ConnectX-7) and is
applied to the real process, as ``--root`` is documented to do.  The child reports what it
got from inside: ``os.sched_getaffinity``, its environment and ``get_mempolicy``.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import pytest

from tests.plan_helpers import REPO, needs_two_cpus, this_boot, tiny, topoagent

REPORT = (
    f"import json, os, sys; sys.path.insert(0, {str(REPO)!r})\n"
    "from topoagent.features.act.mempolicy import get_policy, MempolicyError\n"
    "try:\n    mode, nodes = get_policy(); pol = [mode, sorted(nodes)]\n"
    "except (MempolicyError, OSError) as exc:\n    pol = str(exc)\n"
    "status = open('/proc/self/status').read()\n"
    "mems = [l.split(':', 1)[1].strip() for l in status.splitlines() if l.startswith('Mems_allowed_list')]\n"
    "print(json.dumps({'cpus': sorted(os.sched_getaffinity(0)), 'env': dict(os.environ), 'policy': pol,"
    " 'mems': mems}))\n"
    "sys.exit(int(os.environ.get('CHILD_EXIT', '0')))\n"
)


@pytest.fixture(scope="module")
def root(module_tmp):
    from tests.fakesysfs import generate

    return str(this_boot(generate(tiny(gpus=2), module_tmp / "tiny")))  # its plan binds a real child here


def run_child(root, *args, env=None, preexec_fn=None):
    out = topoagent("exec", "--root", root, *args, "--", sys.executable, "-c", REPORT, env=env, preexec_fn=preexec_fn)
    report = json.loads(out.stdout) if out.stdout.startswith("{") else None
    return out, report


def test_child_gets_the_planned_cpus_memory_policy_and_environment(root):
    needs_two_cpus()
    out, got = run_child(root, "--gpu", "1", env={"CHILD_EXIT": "7"})
    assert out.returncode == 7, out.stderr  # the child's own status
    assert got["cpus"] == [1]  # GPU 1's share of node 0: core 1
    env = got["env"]
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" and env["CUDA_VISIBLE_DEVICES"] == "1"
    assert env["NCCL_IB_HCA"] == "=mlx5_0,mlx5_1" and env["UCX_NET_DEVICES"] == "mlx5_1:1"
    assert "NCCL_SOCKET_IFNAME" not in env and env["OMP_NUM_THREADS"] == "1"
    assert env["OMP_PLACES"] == "cores"
    if isinstance(got["policy"], list):
        if "memory policy not set" in out.stderr:
            pytest.skip(f"set_mempolicy refused here: {out.stderr.strip()}")
        assert got["policy"] == [1, [0]]  # MPOL_PREFERRED, node 0
    else:  # no get_mempolicy on this platform: exec must have said so
        assert "memory policy not set" in out.stderr


def test_bind_policy_and_keep_visible(root):
    needs_two_cpus()
    out, got = run_child(root, "--gpu", "0", "--mem", "bind", "--keep-visible", env={"CUDA_VISIBLE_DEVICES": "5"})
    assert out.returncode == 0, out.stderr
    assert got["cpus"] == [0] and got["env"]["CUDA_VISIBLE_DEVICES"] == "5"
    if isinstance(got["policy"], list) and "memory policy not set" not in out.stderr:
        assert got["policy"] == [2, [0]]  # MPOL_BIND


def test_auto_takes_local_rank_from_launchers_in_order(root):
    needs_two_cpus()
    out, got = run_child(
        root, "--auto", env={"SLURM_LOCALID": "0", "LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_RANK": "0"}
    )
    assert out.returncode == 0, out.stderr
    assert "local rank 1 from LOCAL_RANK" in out.stderr
    assert got["env"]["CUDA_VISIBLE_DEVICES"] == "1" and got["cpus"] == [1]
    env = dict.fromkeys(("LOCAL_RANK", "SLURM_LOCALID"), "")
    out, got = run_child(root, "--auto", env={**env, "OMPI_COMM_WORLD_LOCAL_RANK": "0", "MPI_LOCALRANKID": "1"})
    assert "local rank 0 from OMPI_COMM_WORLD_LOCAL_RANK" in out.stderr and got["env"]["CUDA_VISIBLE_DEVICES"] == "0"
    clean = dict.fromkeys(("LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"), "")
    out, _ = run_child(root, "--auto", env=clean)
    assert out.returncode == 2 and "none of LOCAL_RANK" in out.stderr


def test_restricted_caller_is_never_widened(root):
    needs_two_cpus()
    only0 = lambda: os.sched_setaffinity(0, {0})  # noqa: E731
    out, got = run_child(root, "--gpu", "0", "--ranks-per-gpu", "1", preexec_fn=only0)
    assert out.returncode == 0 and got["cpus"] == [0]
    # One core left for two GPUs: they share it (and exec says so) rather than get none.
    out, got = run_child(root, "--gpu", "1", preexec_fn=only0)
    assert out.returncode == 0 and got["cpus"] == [0] and "RANKS_SHARE_CORES" in out.stderr
    # A CPU list beyond the caller's own is cut to it, and an empty result is refused.
    out, got = run_child(root, "--gpu", "1", "--allowed-cpus", "1", preexec_fn=only0)
    assert got is None and out.returncode == 2
    assert "none of gpu1's CPUs" in out.stderr and "refusing to run it unbound" in out.stderr


def test_ranks_per_gpu_maps_local_ranks_to_gpus(tmp_path):
    needs_two_cpus()
    from tests.fakesysfs import generate

    root = str(this_boot(generate(tiny(gpus=1), tmp_path / "one")))
    seen = []
    for rank in (0, 1):
        out, got = run_child(root, "--local-rank", str(rank), "--ranks-per-gpu", "2")
        assert out.returncode == 0, out.stderr
        seen.append(got["cpus"])
        assert got["env"]["CUDA_VISIBLE_DEVICES"] == "0" and got["env"]["OMP_NUM_THREADS"] == "1"
    assert seen == [[0], [1]]
    out, _ = run_child(root, "--local-rank", "2", "--ranks-per-gpu", "2")
    assert out.returncode == 2 and "host has 1 GPU(s)" in out.stderr


def test_dry_run_prints_and_runs_nothing(root, tmp_path):
    marker = tmp_path / "ran"
    out = topoagent("exec", "--root", root, "--gpu", "1", "--dry-run", "--", "touch", str(marker))
    assert out.returncode in (0, 2)
    assert not marker.exists()
    assert "export CUDA_VISIBLE_DEVICES=1" in out.stdout and "export NCCL_IB_HCA==mlx5_0,mlx5_1" in out.stdout
    assert "memory policy: preferred NUMA node 0" in out.stdout and f"exec touch {marker}" in out.stdout


def test_signals_and_missing_commands_are_the_childs(root):
    needs_two_cpus()
    out = topoagent(
        "exec",
        "--root",
        root,
        "--gpu",
        "0",
        "--",
        sys.executable,
        "-c",
        "import os, signal; os.kill(os.getpid(), signal.SIGTERM)",
    )
    assert out.returncode == -signal.SIGTERM  # the process *is* the command after execvp
    out = topoagent("exec", "--root", root, "--gpu", "0", "--", "no-such-command-xyz")
    assert out.returncode == 127 and "no-such-command-xyz: command not found" in out.stderr
    out = topoagent("exec", "--root", root, "--", "true")
    assert out.returncode == 2 and "say which GPU" in out.stderr


# -- inside an allocation (CUDA_VISIBLE_DEVICES, Slurm, containers) ---------------------------


@pytest.fixture(scope="module")
def dgx(fixture_root):
    return str(fixture_root("dgx-h100"))


def dry(root, *args, env):
    return topoagent("exec", "--root", root, *args, "--dry-run", "--", "python", "train.py", env=env)


@pytest.mark.parametrize(
    "env",
    [
        {"CUDA_VISIBLE_DEVICES": "4,5", "SLURM_LOCALID": "1"},
        {"CUDA_VISIBLE_DEVICES": "4,5", "SLURM_STEP_GPUS": "4,5", "SLURM_LOCALID": "1"},
        {"CUDA_VISIBLE_DEVICES": "0,1", "SLURM_STEP_GPUS": "4,5", "SLURM_LOCALID": "1"},  # ConstrainDevices
        {"NVIDIA_VISIBLE_DEVICES": "4,5", "LOCAL_RANK": "1"},
    ],
)
def test_auto_rank_indexes_the_jobs_gpus_and_keeps_their_mask(dgx, env):
    out = dry(dgx, "--auto", env=env)
    assert out.stdout.startswith("# gpu5 (0000:c3:00.0), NUMA node 1\n"), out.stdout + out.stderr
    assert "memory policy: preferred NUMA node 1" in out.stdout
    assert "export CUDA_VISIBLE_DEVICES" not in out.stdout  # the scheduler's own value stays
    assert "gpu5 is the job's GPU 1" in out.stderr
    assert "export UCX_NET_DEVICES=mlx5_9:1" in out.stdout  # gpu5's own rail
    narrowed = dry(dgx, "--auto", "--narrow-visible", env=env)
    # Narrowed: the scheduler's own entry for the GPU (a container's GPUs are numbered from 0).
    entry = env["CUDA_VISIBLE_DEVICES"].split(",")[1] if "CUDA_VISIBLE_DEVICES" in env else "1"
    assert f"export CUDA_VISIBLE_DEVICES={entry}\n" in narrowed.stdout, narrowed.stdout + narrowed.stderr


def test_keep_visible_and_local_rank_inside_an_allocation(dgx):
    env = {"CUDA_VISIBLE_DEVICES": "4,5"}
    out = dry(dgx, "--local-rank", "0", "--keep-visible", env=env)
    assert out.stdout.startswith("# gpu4 (0000:9d:00.0), NUMA node 1\n"), out.stdout + out.stderr
    out = dry(dgx, "--local-rank", "2", env=env)
    assert out.returncode == 2 and out.stderr.strip().endswith("but CUDA_VISIBLE_DEVICES gives it 2")
    out = dry(dgx, "--local-rank", "0", env={"CUDA_VISIBLE_DEVICES": "GPU-0000"})
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "GPU UUIDs need NVML" in out.stderr
    out = dry(dgx, "--local-rank", "0", "--keep-visible", "--narrow-visible", env=env)
    assert out.returncode == 2 and "one of --keep-visible or --narrow-visible" in out.stderr


def test_allow_no_gpu_runs_the_command_unbound_with_one_warning(scratch_root, root):
    nogpu = str(this_boot(scratch_root("no-gpu")))
    # Issue 40: --allow-no-gpu asked which GPU before it knew there is none.
    out, got = run_child(nogpu, "--allow-no-gpu")
    assert out.returncode == 0 and got["cpus"] == sorted(os.sched_getaffinity(0)), out.stderr
    out, got = run_child(root, "--allow-no-gpu")  # a GPU host: which GPU, then
    assert got is None and out.returncode == 2 and "the host has 2 GPU(s): say which" in out.stderr
    out, got = run_child(nogpu, "--auto", env={"LOCAL_RANK": "0"})
    assert got is None and out.returncode == 2 and "--allow-no-gpu runs it unbound" in out.stderr
    out, got = run_child(nogpu, "--auto", "--allow-no-gpu", env={"LOCAL_RANK": "0", "CHILD_EXIT": "3"})
    assert out.returncode == 3 and got["cpus"] == sorted(os.sched_getaffinity(0))  # unbound
    assert "CUDA_DEVICE_ORDER" not in got["env"]
    warnings = [line for line in out.stderr.splitlines() if "warning" in line]
    assert warnings == ["topoagent: warning: no GPU on this host: running the command unbound (--allow-no-gpu)"]
    # A job given no GPU on a GPU node (Slurm's NoDevFiles) is the same case.
    out, got = run_child(
        root, "--auto", "--allow-no-gpu", env={"LOCAL_RANK": "0", "CUDA_VISIBLE_DEVICES": "NoDevFiles"}
    )
    assert out.returncode == 0 and got["env"]["CUDA_VISIBLE_DEVICES"] == "NoDevFiles"
    assert "the job was given no GPU" in out.stderr


def test_unknown_exec_option_is_a_usage_error(root):
    """Only what follows -- is the command: a misspelt option was run as the command (127)."""
    out = topoagent("exec", "--root", root, "--gpu", "0", "--dryrun", "--", "true")
    assert out.returncode == 2 and "--dryrun" in out.stderr
    out = topoagent("exec", "--root", root, "--gpu", "0", "true")
    assert out.returncode == 2 and "the command goes after --" in out.stderr
    out = topoagent("exec", "--root", root, "--gpu", "0", "--dry-run", "--", "-x", "--y")
    assert out.returncode == 0 and "-x --y" in out.stdout + out.stderr


@pytest.mark.parametrize("name", ["LOCAL_RANK", "SLURM_LOCALID", "CUDA_VISIBLE_DEVICES", "SLURM_JOB_GPUS"])
def test_a_rank_or_gpu_list_of_thousands_of_digits_is_one_line(root, name):
    """Issue 31 item 6: 4,301+ digits passed the digit check and failed int() (internal error)."""
    env = {"SLURM_LOCALID": "0", name: "7" * 5000}
    out = topoagent("exec", "--root", str(root), "--auto", "--dry-run", "--", "true", env=env)
    assert out.returncode == 2 and "internal error" not in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) <= 2 and "Traceback" not in out.stderr


def test_another_hosts_topology_binds_nothing_here(fixture_root, tmp_path):
    """Issue 40: ``exec --paste`` bound a local command with another host's topology.  Pasted
    output, or a tree that is not this machine's running boot, gives a dry run only: the command
    is refused in one line (and not run), --dry-run shows the plan."""
    marker = tmp_path / "ran"
    paste = REPO / "tests/core/paste_samples/ellipsis_dgx_a100_nv12.txt"
    for source in (["--paste", str(paste)], ["--root", str(fixture_root("dgx-h100"))]):
        out = topoagent("exec", *source, "--gpu", "0", "--", "touch", str(marker))
        assert out.returncode == 2 and not marker.exists()
        assert out.stderr.count("\n") == 1 and "exec acts on this machine" in out.stderr, out.stderr
        assert "exec --dry-run shows it" in out.stderr
        out = topoagent("exec", *source, "--gpu", "0", "--dry-run", "--", "touch", str(marker))
        assert out.returncode in (0, 2) and "exec touch" in out.stdout and not marker.exists(), out.stderr
