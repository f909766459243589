"""The GPUs a scheduler or container runtime gave this process, from its environment.

A job's local rank indexes *its* GPUs, not the host's: inside ``CUDA_VISIBLE_DEVICES=4,5``
local rank 1 is the host's GPU 5.  The variables, as their owners define them:

- ``CUDA_VISIBLE_DEVICES`` (CUDA): indices in CUDA's enumeration or ``GPU-…``/``MIG-…``
  UUIDs, comma separated; CUDA stops at the first entry that names no device, and an empty
  value hides every GPU.  Indices follow PCI bus order under ``CUDA_DEVICE_ORDER=PCI_BUS_ID``
  (which ``exec`` sets), the order nvidia-smi, NVML and Slurm number GPUs in.
- ``SLURM_STEP_GPUS`` / ``SLURM_JOB_GPUS`` (Slurm): the allocated GPUs' host indices.  Slurm
  also sets ``CUDA_VISIBLE_DEVICES``, to the same GPUs in the same order -- renumbered from 0
  when cgroup.conf has ``ConstrainDevices=yes`` (the job then sees only its devices), and to
  ``NoDevFiles`` when the step has none.
- ``NVIDIA_VISIBLE_DEVICES`` (NVIDIA Container Toolkit): host indices or UUIDs, or ``all``;
  ``none``/``void``/empty give no GPU.  Inside the container CUDA numbers them from 0.
- DRA device metadata (Kubernetes KEP-5304): the files a DRA driver's kubelet plugin mounts
  into the container name each allocated device's ``pciBusID``; where no variable says
  anything, the GPUs among them, in PCI bus order (the order CUDA numbers a container's GPUs
  in under ``CUDA_DEVICE_ORDER=PCI_BUS_ID``), are the allocation (:func:`allocation_from_dra`).

Pure: the environment is passed in; resolving UUIDs needs the snapshot's NVML facts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import msgspec

from topoagent.core.bdf import bdf_key, is_bdf
from topoagent.core.digits import is_decimal
from topoagent.core.errors import InputError

if TYPE_CHECKING:
    from topoagent.core.advice.plan import GpuPlan, Plan
    from topoagent.core.snapshot import NvmlGpu

__all__ = ["Allocation", "allocated_gpus", "allocation_from", "allocation_from_dra"]

#: Slurm's variables naming a step's (then a job's) GPUs by host index.
SLURM_GPU_VARS = ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS")


class Allocation(msgspec.Struct, frozen=True):
    """The GPUs this process was given, in its own (local-rank) order.

    ``gpus``: each a host index (``"5"``, PCI bus order), a UUID (``GPU-…``, ``MIG-…``) or
    a PCI address (``0000:1b:00.0``, from DRA device metadata).
    ``source``: the variables it came from, as a person reads them.  ``cuda``: the
    ``CUDA_VISIBLE_DEVICES`` entry naming each GPU to this process (what narrowing to one
    GPU writes); None where that variable is unset.
    """

    gpus: tuple[str, ...]
    source: str
    cuda: tuple[str, ...] | None = None


def _is_uuid(token: str) -> bool:
    return token.upper().startswith(("GPU-", "MIG-"))


def _entries(name: str, value: str, *, cuda: bool) -> tuple[str, ...]:
    """The entries of one list variable; InputError for an entry that is no index or UUID.

    ``cuda``: CUDA's rule -- the list ends at ``-1`` (it names no device) -- applies.
    """
    out: list[str] = []
    for raw in value.split(","):
        token = raw.strip()
        if cuda and token == "-1":
            break
        if is_decimal(token):
            out.append(str(int(token)))
        elif _is_uuid(token):
            out.append(token)
        else:
            raise InputError(f"{name}={value!r}: {token!r} is not a GPU index or a GPU-/MIG- UUID")
    return tuple(out)


def _no_gpus(name: str, value: str) -> bool:
    """Whether a variable that is set says "no GPU" (rather than listing some, or all)."""
    text = value.strip()
    if name == "CUDA_VISIBLE_DEVICES":
        return text == "" or text == "NoDevFiles" or text.split(",")[0].strip() == "-1"
    if name == "NVIDIA_VISIBLE_DEVICES":
        return text.lower() in ("", "none", "void")
    return text == ""


def allocation_from(env: Mapping[str, str]) -> Allocation | None:
    """The GPUs the environment allocates to this process; None when nothing restricts them.

    The base list is Slurm's (``SLURM_STEP_GPUS``, else ``SLURM_JOB_GPUS``), else the
    container's ``NVIDIA_VISIBLE_DEVICES``.  ``CUDA_VISIBLE_DEVICES`` then selects from it:
    UUIDs name GPUs outright; indices are host indices where they all lie in Slurm's list
    (Slurm without ``ConstrainDevices``), else positions in the base list (a container, or
    Slurm's renumbering).  InputError (one line) for values that contradict each other.
    """
    base: tuple[str, ...] | None = None
    base_name = ""
    for name in (*SLURM_GPU_VARS, "NVIDIA_VISIBLE_DEVICES"):
        value = env.get(name)
        if value is None or (name != "NVIDIA_VISIBLE_DEVICES" and value.strip() == ""):
            continue
        if name == "NVIDIA_VISIBLE_DEVICES" and value.strip().lower() == "all":
            break
        base, base_name = (() if _no_gpus(name, value) else _entries(name, value, cuda=False)), name
        break

    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return None if base is None else Allocation(base, base_name)
    if _no_gpus("CUDA_VISIBLE_DEVICES", cvd):
        return Allocation((), "CUDA_VISIBLE_DEVICES", ())
    tokens = _entries("CUDA_VISIBLE_DEVICES", cvd, cuda=True)
    if base is None:
        return Allocation(tokens, "CUDA_VISIBLE_DEVICES", tokens)
    gpus: list[str] = []
    host_indices = base_name != "NVIDIA_VISIBLE_DEVICES" and all(_is_uuid(t) or t in base for t in tokens)
    for t in tokens:
        if _is_uuid(t) or host_indices:
            gpus.append(t)
        elif int(t) < len(base):
            gpus.append(base[int(t)])
        else:
            raise InputError(
                f"CUDA_VISIBLE_DEVICES={cvd!r} does not fit {base_name}={env[base_name]!r}: "
                f"entry {t} is neither one of its GPUs nor a position in it"
            )
    how = "CUDA_VISIBLE_DEVICES" if host_indices else f"CUDA_VISIBLE_DEVICES within {base_name}"
    return Allocation(tuple(gpus), how, tokens)


def allocation_from_dra(bdfs: Sequence[str], gpu_bdfs: Sequence[str], where: str) -> Allocation | None:
    """The GPUs among the PCI addresses DRA device metadata names (``gpu_bdfs``: the host's
    GPUs), in PCI bus order; None where it names none of them (only NICs, or no file)."""
    mine = sorted({b for b in bdfs if b in set(gpu_bdfs)}, key=bdf_key)
    return Allocation(tuple(mine), f"DRA device metadata ({where})") if mine else None


def _uuid_map(nvml: Sequence[NvmlGpu]) -> dict[str, str]:
    return {g.uuid.upper(): g.bdf for g in nvml if g.uuid}


def allocated_gpus(alloc: Allocation, plan: Plan, nvml: Sequence[NvmlGpu]) -> tuple[GpuPlan, ...]:
    """The plan's GPUs an allocation names, in its order.  InputError (one line) for a GPU
    the host does not have, or a UUID the scan cannot match (NVML's UUIDs are needed)."""
    by_index = {g.cuda_index: g for g in plan.gpus}
    by_bdf = {g.bdf: g for g in plan.gpus if g.bdf}
    uuids = _uuid_map(nvml)
    out = []
    for ref in alloc.gpus:
        if is_bdf(ref):
            if ref.lower() not in by_bdf:
                raise InputError(f"{alloc.source} names {ref}: not a GPU of this host")
            out.append(by_bdf[ref.lower()])
            continue
        if not _is_uuid(ref):
            g = by_index.get(int(ref))
            if g is None:
                raise InputError(
                    f"{alloc.source} names GPU {ref}, but the host has {len(plan.gpus)} GPU(s)"
                    + (f" (0-{len(plan.gpus) - 1})" if plan.gpus else "")
                )
            out.append(g)
            continue
        key = ref.upper()
        if key.startswith("MIG-GPU-"):  # the pre-R470 MIG form MIG-GPU-<uuid>/<gi>/<ci> names its GPU
            key = key[len("MIG-") :].split("/")[0]
        if not uuids:
            raise InputError(f"{alloc.source} names {ref}: GPU UUIDs need NVML, and this scan has none")
        bdf = uuids.get(key)
        if bdf is None or bdf not in by_bdf:
            what = (
                "a MIG device UUID, which NVML's GPU list here does not hold"
                if key.startswith("MIG-")
                else "not a GPU of this host"
            )
            raise InputError(f"{alloc.source} names {ref}: {what} (known: {', '.join(sorted(uuids))})")
        out.append(by_bdf[bdf])
    return tuple(out)
