"""Helpers shared by the plan/exec/apply/fix tests: run the CLI in this process or as a real
one, and a tiny machine whose CPU ids exist on any test runner with two CPUs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent


def tiny(gpus: int = 2, **machine: Any) -> dict[str, Any]:
    """One socket, two cores, one thread each (CPUs 0-1, node 0); each GPU shares a Gen5
    switch with a ConnectX-7 (mlx5_0, mlx5_1 ...)."""
    rails = "\n".join(
        f"""{i + 1:02x}.0 spr-rp
  pex890
    pex890 > cx7-ib
    pex890 > h100"""
        for i in range(gpus)
    )
    return {
        "machine": {
            "hostname": "tiny",
            "config": 4096,
            "modules": {"nvidia": "535.161.08", "nvidia_peermem": "535.161.08", "mlx5_core": ""},
            **machine,
        },
        "cpu": {"sockets": 1, "cores": 2, "threads": 1},
        "rootbus": [{"id": "0000:10", "node": 0, "tree": rails}],
    }


#: The variables that allocate GPUs to a process (topoagent/core/advice/allocation.py).
ALLOCATION_VARS = (
    "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "SLURM_STEP_GPUS",
    "SLURM_JOB_GPUS",
    "NVIDIA_VISIBLE_DEVICES",
)


def needs_two_cpus() -> None:
    """Skip unless CPUs 0 and 1 exist and this process may use them (exec/apply act for real)."""
    if not {0, 1} <= os.sched_getaffinity(0):
        pytest.skip("needs CPUs 0 and 1 in this process's affinity")


def topoagent(
    *args: str, env: dict[str, str] | None = None, preexec_fn: Any = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``python -m topoagent ARGS`` as a child process; its stdout, stderr and status."""
    # A runner inside a Slurm job or a GPU container must not hand its own GPUs to exec --auto.
    full_env = {k: v for k, v in os.environ.items() if k not in ALLOCATION_VARS}
    full_env["PYTHONPATH"] = str(REPO) + os.pathsep + full_env.get("PYTHONPATH", "")
    if env:
        full_env.update(env)
    return subprocess.run(
        [sys.executable, "-m", "topoagent", *args],
        capture_output=True,
        text=True,
        env=full_env,
        preexec_fn=preexec_fn,
        timeout=timeout,
        cwd=REPO,
    )


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``topoagent ARGS`` run by :func:`topoagent.cli.main` in this process (stdout and stderr
    captured as click's CliRunner does): for tests of a command's output, messages and exit
    status.  Use :func:`topoagent` where the process is the point (``exec``, a cpuset set on
    the child, the console script's exit)."""
    from click.testing import CliRunner

    from topoagent.cli import main

    code: int = 0
    with CliRunner().isolation() as streams:
        try:
            main(list(args))
        except SystemExit as exc:
            if isinstance(exc.code, str):
                sys.stderr.write(exc.code + "\n")
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        sys.stdout.flush()
        sys.stderr.flush()
        out, err = streams[0].getvalue().decode(), streams[1].getvalue().decode()
    return subprocess.CompletedProcess(["topoagent", *args], code, out, err)


#: Where the kernel gives the running boot's id (proc(5)).
BOOT_ID = "proc/sys/kernel/random/boot_id"


def this_boot(root: Path | str) -> Path:
    """``root`` made a tree of this machine's running boot (its ``proc/sys/kernel/random/
    boot_id`` this kernel's, as the host's /proc mounted in a container is): what a command that
    acts on this machine (``exec``, ``apply --pid --yes``, ``health --yes``) needs of ``--root``.
    Only on a tree the test may change (``scratch_root``, its own)."""
    path = Path(root) / BOOT_ID
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(Path("/", BOOT_ID).read_text())
    return Path(root)
