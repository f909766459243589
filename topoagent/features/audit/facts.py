"""What the audit read about the processes using GPUs: plain frozen values (the reader fills
them, the advice judges them; neither side needs the other)."""

from __future__ import annotations

import msgspec

from topoagent.core.snapshot import ThreadAffinity
from topoagent.features.audit.parse import MemoryPlacement

__all__ = ["ENV_KEYS", "AuditFacts", "ProcessFacts", "Unreadable"]

#: The variables the audit keeps from a process's environment (nothing else: it holds secrets).
ENV_KEYS = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES", "NCCL_IB_HCA")


class ProcessFacts(msgspec.Struct, frozen=True):
    """One process that uses GPUs, as ``/proc`` shows it.

    ``gpus``: the BDFs of the GPUs it uses; ``devices``: the device nodes it holds open
    (``/dev/nvidia3``) or, from NVML, ``nvml``; ``unknown``: device nodes no GPU of the host
    answers to.  What could not be read is in ``unread`` (``"numa_maps: permission denied"``)
    and its field is None.
    """

    pid: int
    name: str | None
    uid: int | None
    gpus: tuple[str, ...]
    devices: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()
    threads: tuple[ThreadAffinity, ...] | None = None
    memory: MemoryPlacement | None = None
    #: numa_maps was larger than the audit reads: ``memory`` counts its first part.
    memory_truncated: bool = False
    env: dict[str, str] | None = None
    unread: tuple[str, ...] = ()


class Unreadable(msgspec.Struct, frozen=True):
    """A process whose open files could not be listed (so whether it uses a GPU is unknown),
    or that NVML names but ``/proc`` does not show (another PID namespace, or it ended)."""

    pid: int
    why: str


class AuditFacts(msgspec.Struct, frozen=True):
    """Everything one audit read.  ``source``: how GPU users were found -- ``nvml`` (the
    driver's running processes) or ``fd`` (open device nodes, read as links); ``why_fd``: why
    NVML was not used."""

    source: str
    processes: tuple[ProcessFacts, ...] = ()
    unreadable: tuple[Unreadable, ...] = ()
    #: Processes looked at (every pid under /proc for ``fd``; NVML's for ``nvml``).
    examined: int = 0
    why_fd: str | None = None
    #: Whether the reader ran as root (other users' processes are readable only then).
    as_root: bool = True
