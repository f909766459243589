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

GPUs are keyed by their UUID where NVML gave one (the proposal's key), else by PCI address
(a scan without NVML knows no UUID).  ``nodeUID`` is the Kubernetes Node's ``metadata.uid``,
which no host file holds: ``--node-uid`` sets it, otherwise it is null.
"""

from __future__ import annotations

from typing import Any

import msgspec

from topoagent.core.analysis.rails import NicRole
from topoagent.core.render.json_report import encode
from topoagent.core.result import ScanResult
from topoagent.core.topology import Device

#: The proposal's record version, checked by its consumers.
SCHEMA_VERSION = "v1alpha1"
RAIL_SOURCE = "topoagent"


class RecordNic(msgspec.Struct, frozen=True):
    """One NIC of a rail, seen from one GPU, as the record holds it (the proposal's shape; the
    model's rail NIC is :class:`topoagent.core.advice.plan.RailNic`)."""

    nic: str
    path: str


class GpuRails(msgspec.Struct, frozen=True, rename={"pci_address": "pciAddress"}):
    """A GPU's PCI address and its NICs on every rail."""

    pci_address: str
    rails: dict[str, list[RecordNic]]


class RailRecord(
    msgspec.Struct,
    frozen=True,
    rename={"schema_version": "schemaVersion", "node_uid": "nodeUID", "rail_source": "railSource"},
):
    """One node's record, as the proposal's shared ConfigMap holds it under the Node's name."""

    schema_version: str
    node_uid: str | None
    rail_source: str
    nics: dict[str, list[str]]
    gpus: dict[str, GpuRails]


def address(d: Device) -> str:
    """A device's PCI address, or its stable key where the source gave none (pasted text)."""
    return d.bdf or d.key


def rail_nics(result: ScanResult) -> tuple[Device, ...]:
    """The compute NICs in PCI order: rail *i* is the *i*-th."""
    roles = result.rails.roles
    return tuple(n for n in result.topology.nics if not n.is_vf and roles.get(n.id) is NicRole.COMPUTE)


def record(result: ScanResult, node_uid: str | None = None) -> RailRecord:
    """The node's rail record."""
    topo = result.topology
    nics = rail_nics(result)
    gpus: dict[str, GpuRails] = {}
    for g in topo.gpus:
        if topo.physical(g) is not g:
            continue  # a GPU VF is its PF's slice: the proposal maps physical GPUs
        rails = {}
        for i, n in enumerate(nics):
            path = result.path(g.id, n.id)
            assert path is not None  # every GPU-NIC pair has a path (analysis.paths.scan_paths)
            rails[f"rail{i}"] = [RecordNic(address(n), path.cell)]  # ? where no source shows the path
        gpus[(g.nvml.uuid if g.nvml is not None else None) or address(g)] = GpuRails(address(g), rails)
    return RailRecord(
        SCHEMA_VERSION, node_uid, RAIL_SOURCE, {address(n): [f"rail{i}"] for i, n in enumerate(nics)}, gpus
    )


def render(result: ScanResult, node_uid: str | None = None, **_: Any) -> str:
    """``plan --format rails``: the record, indented."""
    return encode(record(result, node_uid), pretty=True)
