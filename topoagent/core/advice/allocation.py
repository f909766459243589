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
- ``ROCR_VISIBLE_DEVICES`` (ROCm, AMD GPUs): KFD device indices or ``GPU-…`` UUIDs, read like
  ``CUDA_VISIBLE_DEVICES`` where that is unset (Slurm's gpu/rsmi sets it: ``GRES_CONF_ENV_RSMI``);
  ``HIP_VISIBLE_DEVICES`` then picks positions among the devices it leaves (HIP numbers them
  from 0).
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
from topoagent.core.digits import decimal
from topoagent.core.errors import InputError

if TYPE_CHECKING:
    from topoagent.core.advice.plan import GpuPlan, Plan
    from topoagent.core.snapshot import AmdGpu, NvmlGpu

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
    #: The variable ``cuda`` holds the entries of: ``CUDA_VISIBLE_DEVICES``, or on an AMD host
    #: ``ROCR_VISIBLE_DEVICES`` (what narrowing to one GPU writes).
    var: str = "CUDA_VISIBLE_DEVICES"


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
        if (index := decimal(token)) is not None:
            out.append(str(index))
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

    # The runtime's own list: CUDA's, else ROCm's (ROCR_VISIBLE_DEVICES: KFD indices or GPU-
    # UUIDs, the one AMD recommends on Linux -- ROCm docs, "GPU isolation techniques").
    var = "CUDA_VISIBLE_DEVICES" if "CUDA_VISIBLE_DEVICES" in env else "ROCR_VISIBLE_DEVICES"
    cvd = env.get(var)
    if cvd is None:
        alloc = None if base is None else Allocation(base, base_name)
    elif _no_gpus("CUDA_VISIBLE_DEVICES", cvd):
        return Allocation((), var, (), var)
    else:
        alloc = _selected(env, base, base_name, var, cvd)
    hip = env.get("HIP_VISIBLE_DEVICES")
    if hip is not None and var == "ROCR_VISIBLE_DEVICES":
        alloc = _hip_selected(alloc, hip)
    return alloc


def _selected(env: Mapping[str, str], base: tuple[str, ...] | None, base_name: str, var: str, cvd: str) -> Allocation:
    """The GPUs a runtime's list (``var``, value ``cvd``) selects from the scheduler's ``base``."""
    tokens = _entries(var, cvd, cuda=True)
    if base is None:
        return Allocation(tokens, var, tokens, var)
    gpus: list[str] = []
    host_indices = base_name != "NVIDIA_VISIBLE_DEVICES" and all(_is_uuid(t) or t in base for t in tokens)
    for t in tokens:
        if _is_uuid(t) or host_indices:
            gpus.append(t)
        elif int(t) < len(base):
            gpus.append(base[int(t)])
        else:
            raise InputError(
                f"{var}={cvd!r} does not fit {base_name}={env[base_name]!r}: "
                f"entry {t} is neither one of its GPUs nor a position in it"
            )
    how = var if host_indices else f"{var} within {base_name}"
    return Allocation(tuple(gpus), how, tokens, var)


def _hip_selected(alloc: Allocation | None, hip: str) -> Allocation:
    """HIP_VISIBLE_DEVICES on top of ROCm's list: HIP numbers the devices ROCR_VISIBLE_DEVICES
    left visible from 0 (the host's, without it), and HIP_VISIBLE_DEVICES picks among them."""
    if _no_gpus("CUDA_VISIBLE_DEVICES", hip):
        return Allocation((), "HIP_VISIBLE_DEVICES", (), "HIP_VISIBLE_DEVICES")
    tokens = _entries("HIP_VISIBLE_DEVICES", hip, cuda=True)
    if alloc is None:
        return Allocation(tokens, "HIP_VISIBLE_DEVICES", tokens, "HIP_VISIBLE_DEVICES")
    picked = []
    for t in tokens:
        if _is_uuid(t) or int(t) >= len(alloc.gpus):
            raise InputError(
                f"HIP_VISIBLE_DEVICES={hip!r} does not fit {alloc.source}: entry {t} is no position in its "
                f"{len(alloc.gpus)} GPU(s)"
            )
        picked.append(alloc.gpus[int(t)])
    return Allocation(tuple(picked), f"HIP_VISIBLE_DEVICES within {alloc.source}", tokens, "HIP_VISIBLE_DEVICES")


def allocation_from_dra(bdfs: Sequence[str], gpu_bdfs: Sequence[str], where: str) -> Allocation | None:
    """The GPUs among the PCI addresses DRA device metadata names (``gpu_bdfs``: the host's
    GPUs), in PCI bus order; None where it names none of them (only NICs, or no file)."""
    mine = sorted({b for b in bdfs if b in set(gpu_bdfs)}, key=bdf_key)
    return Allocation(tuple(mine), f"DRA device metadata ({where})") if mine else None


def _uuid_map(nvml: Sequence[NvmlGpu], amd: Sequence[AmdGpu] = ()) -> dict[str, str]:
    uuids = {g.uuid.upper(): g.bdf for g in nvml if g.uuid}
    uuids.update({g.uuid.upper(): g.bdf for g in amd if g.uuid})
    return uuids


def allocated_gpus(
    alloc: Allocation, plan: Plan, nvml: Sequence[NvmlGpu], amd: Sequence[AmdGpu] = ()
) -> tuple[GpuPlan, ...]:
    """The plan's GPUs an allocation names, in its order.  InputError (one line) for a GPU
    the host does not have, or a UUID the scan cannot match (NVML's UUIDs are needed; an AMD
    GPU's come from KFD's ``unique_id``)."""
    by_index = {g.cuda_index: g for g in plan.gpus}
    by_bdf = {g.bdf: g for g in plan.gpus if g.bdf}
    uuids = _uuid_map(nvml, amd)
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
            raise InputError(f"{alloc.source} names {ref}: GPU UUIDs need NVML (or KFD), and this scan has none")
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
