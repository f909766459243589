"""Which local rank this process is: launchers' environment variables, in a fixed order.

torchrun sets ``LOCAL_RANK``, Slurm's srun ``SLURM_LOCALID``, Open MPI
``OMPI_COMM_WORLD_LOCAL_RANK``, MPICH/Intel MPI ``MPI_LOCALRANKID``.  The first one set
wins, so a torchrun started by srun uses torchrun's own numbering.  Pure: the environment is
passed in.
"""

from __future__ import annotations

from collections.abc import Mapping

from topoagent.core.digits import decimal
from topoagent.core.errors import InputError

#: Launchers' local-rank variables, in the order they are consulted.
LOCAL_RANK_VARS = ("LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID")


def local_rank_from(env: Mapping[str, str]) -> tuple[int, str]:
    """(local rank, the variable it came from); InputError when none is set or one is bad."""
    for name in LOCAL_RANK_VARS:
        value = env.get(name)
        if value is None or value == "":
            continue
        rank = decimal(value.strip())
        if rank is None:
            raise InputError(f"{name}={value!r} is not a local rank (a number >= 0)")
        return rank, name
    raise InputError(f"--auto: none of {', '.join(LOCAL_RANK_VARS)} is set (not started by a launcher?)")
