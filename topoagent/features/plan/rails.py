"""``plan --format rails``: each GPU's NIC on every rail, as the record of NVIDIA/topograph's
GPU-to-NIC rail mapping proposal (NVIDIA/topograph issue #442, design document
``docs/design/gpu-nic-rail-mapping-sdd.md``, "Shared Record Contract", schema ``v1alpha1``)::

    {"schemaVersion": "v1alpha1", "nodeUID": ..., "railSource": "topoagent",
     "nics": {"0000:18:00.0": ["rail0"]},
     "gpus": {"<GPU UUID>": {"pciAddress": "0000:1b:00.0",
                             "rails": {"rail0": [{"nic": "0000:18:00.0", "path": "PIX"}]}}}}

The rail rule: rail *i* is the *i*-th compute NIC (:class:`~topoagent.core.analysis.rails.NicRole`
``compute``, physical functions) in PCI bus order.  Hosts of one build hold their rail NICs in
the same slots, so rail *i* is the same slot on each of them; storage and management NICs are
on no rail.  As the proposal says, each GPU lists every rail with the NICs of that rail at
their path class to the GPU (one NIC per rail here), ``nic`` and ``pciAddress`` are lower-case
``dddd:bb:dd.f`` PCI addresses, and ``path`` is the ``nvidia-smi topo -m`` class.

GPUs are keyed by their UUID (the proposal's key) where NVML gave every GPU's, else all by PCI
address (a scan without NVML knows no UUID); ``gpuKey`` says which (``uuid`` or ``pciAddress``,
an addition to the proposal's record), so a consumer never mistakes one for the other.  Where
NCCL classes a path otherwise than nvidia-smi prints it -- a Grace GPU's NIC on its own CPU is
``SYS`` in nvidia-smi's matrix and ``P2C`` (GPUDirect RDMA on) to NCCL, ``PHB`` for a slower
one, ``PXN`` for a NIC reached through an NVLinked GPU near it (NVIDIA/nccl
src/graph/paths.cc, ``ncclTopoComputePaths``) -- the NIC's entry adds NCCL's
class as ``ncclPath`` (also an addition), so the own CPU's NIC and the other CPU's tell apart.
``nodeUID`` is the Kubernetes Node's ``metadata.uid``, which no host file holds: ``--node-uid``
sets it, otherwise it is null.
"""

from __future__ import annotations

from typing import Any

import msgspec

from topoagent.core.analysis.paths import nccl_view
from topoagent.core.analysis.rails import compute_nics
from topoagent.core.pathclass import PathClass
from topoagent.core.render.json_report import encode
from topoagent.core.result import ScanResult
from topoagent.core.topology import Device

#: The proposal's record version, checked by its consumers.
SCHEMA_VERSION = "v1alpha1"
RAIL_SOURCE = "topoagent"


class RecordNic(msgspec.Struct, frozen=True, omit_defaults=True, rename={"nccl_path": "ncclPath"}):
    """One NIC of a rail, seen from one GPU, as the record holds it (the proposal's shape; the
    model's rail NIC is :class:`topoagent.core.advice.plan.RailNic`); ``ncclPath`` only where
    NCCL's class differs from nvidia-smi's."""

    nic: str
    path: str
    nccl_path: str | None = None


class GpuRails(msgspec.Struct, frozen=True, rename={"pci_address": "pciAddress"}):
    """A GPU's PCI address and its NICs on every rail."""

    pci_address: str
    rails: dict[str, list[RecordNic]]


class RailRecord(
    msgspec.Struct,
    frozen=True,
    rename={
        "schema_version": "schemaVersion",
        "node_uid": "nodeUID",
        "rail_source": "railSource",
        "gpu_key": "gpuKey",
    },
):
    """One node's record, as the proposal's shared ConfigMap holds it under the Node's name."""

    schema_version: str
    node_uid: str | None
    rail_source: str
    gpu_key: str
    nics: dict[str, list[str]]
    gpus: dict[str, GpuRails]


def address(d: Device) -> str:
    """A device's PCI address, or its stable key where the source gave none (pasted text)."""
    return d.bdf or d.key


def record(result: ScanResult, node_uid: str | None = None) -> RailRecord:
    """The node's rail record."""
    topo = result.topology
    nics = compute_nics(topo, result.rails.roles)
    physical = [g for g in topo.gpus if topo.physical(g) is g]  # a GPU VF is its PF's slice
    by_uuid = bool(physical) and all(g.nvml is not None and g.nvml.uuid for g in physical)
    gpus: dict[str, GpuRails] = {}
    for g in physical:
        rails = {}
        own = result.rails.rail(g.id)
        # the NICs NCCL reaches through an NVLinked peer near them (PXN: analysis.ncclnet)
        relayed = own.nics if own is not None and own.nccl_path is PathClass.PXN else ()
        for i, n in enumerate(nics):
            path = result.path(g.id, n.id)
            assert path is not None  # every GPU-NIC pair has a path (analysis.paths.scan_paths)
            nccl = PathClass.PXN if n.id in relayed else nccl_view(topo, g, n, path)[0]
            # path.cell: ? where no source shows the path
            rails[f"rail{i}"] = [RecordNic(address(n), path.cell, nccl.name if nccl is not None else None)]
        key = g.nvml.uuid if by_uuid and g.nvml is not None and g.nvml.uuid else address(g)
        gpus[key] = GpuRails(address(g), rails)
    return RailRecord(
        SCHEMA_VERSION,
        node_uid,
        RAIL_SOURCE,
        "uuid" if by_uuid else "pciAddress",
        {address(n): [f"rail{i}"] for i, n in enumerate(nics)},
        gpus,
    )


def render(result: ScanResult, node_uid: str | None = None, pretty: bool = False, **_: Any) -> str:
    """``plan --format rails``: the record, one compact line (``pretty``: indented)."""
    return encode(record(result, node_uid), pretty=pretty)
