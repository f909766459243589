"""The JSON contract of ``topoagent scan --format json`` (schema in ``topoagent/schema``).

``schema_version`` is bumped only for breaking changes; additive fields keep it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from topoagent.analysis.findings import Finding
from topoagent.analysis.rails import NicRole
from topoagent.result import ScanResult
from topoagent.snapshot import to_dict
from topoagent.topology import Device, Topology
from topoagent.typecheck import TYPE_CHECKING
from topoagent.version import __version__

if TYPE_CHECKING:
    from typing import Any

SCHEMA_VERSION = 1


def str_or_none(value: object) -> str | None:
    """``str(value)``, or None for None (a CPU set that is unknown stays null in JSON)."""
    return None if value is None else str(value)


def _hex(value: int | None, width: int) -> str | None:
    return None if value is None else f"0x{value:0{width}x}"


def device_dict(d: Device, roles: Mapping[str, NicRole]) -> dict[str, Any]:
    """One device as the contract's ``devices[]`` entry."""
    return {
        "id": d.id,
        "bdf": d.bdf,
        "kind": d.kind.value,
        "role": d.role.value if d.role else None,
        "vendor_id": _hex(d.vendor_id, 4),
        "device_id": _hex(d.device_id, 4),
        "subsystem_vendor_id": _hex(d.subsystem_vendor_id, 4),
        "subsystem_device_id": _hex(d.subsystem_device_id, 4),
        "class": _hex(d.class_code, 6),
        "name": d.name,
        "numa_node": d.numa_node,
        "numa_source": d.numa_source,
        "local_cpus": str_or_none(d.local_cpus),
        "socket": d.socket,
        "parent": d.parent,
        "driver": d.driver,
        "link": to_dict(d.link),
        "nic_role": roles[d.id].value if d.id in roles else None,
        "netdevs": list(d.netdevs),
        "rdma_devices": list(d.rdma_devices),
        "iommu_group": d.iommu_group,
        "iommu_type": d.iommu_type,
        "physfn": d.physfn,
        "virtfns": list(d.virtfns),
        "acs_control": list(d.config.acs.enabled()) if d.config and d.config.acs else None,
        "notes": list(d.notes),
    }


def finding_dict(f: Finding) -> dict[str, Any]:
    return {
        "code": f.code,
        "severity": f.severity.label,
        "subjects": list(f.subjects),
        "message": f.message,
        "evidence": [{"path": e.path, "value": e.value} for e in f.evidence],
        "remedy": f.remedy,
    }


def numa_dict(topo: Topology) -> list[dict[str, Any]]:
    ids = [n.id for n in topo.nodes]
    return [
        {
            "id": n.id,
            "cpus": n.cpulist if n.cpus_known else None,
            "socket": n.socket,
            "memory_bytes": n.memory_bytes,
            "distances": [n.distances.get(i) for i in ids] if n.distances else [],
            "cpu_less": n.cpu_less if n.cpus_known else None,
            "nearest_cpu_node": n.nearest_cpu_node,
        }
        for n in topo.nodes
    ]


def report(result: ScanResult) -> dict[str, Any]:
    """The scan as the JSON contract's object (field order is part of the contract)."""
    snap, topo = result.snapshot, result.topology
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "topoagent", "version": __version__},
        "host": {
            "hostname": snap.hostname,
            "root": snap.root,
            "sources": [to_dict(s) for s in snap.sources],
            "virtualized": snap.virtualized,
            "kernel_cmdline": snap.kernel_cmdline,
            "allowed_cpus": str_or_none(snap.allowed_cpus),
            "modules": list(snap.modules),
            "memory_peers": list(snap.memory_peers),
            "driver_version": snap.driver_version,
        },
        "sockets": [
            {"id": s.id, "numa_nodes": list(s.nodes), "cpus": str(s.cpus)} for s in topo.sockets
        ],
        "numa_nodes": numa_dict(topo),
        "host_bridges": [
            {"name": h.name, "numa_node": h.numa_node, "socket": h.socket} for h in topo.host_bridges
        ],
        "devices": [device_dict(d, result.rails.roles) for d in topo.devices],
        "paths": [
            {
                "a": p.a,
                "b": p.b,
                "kind": p.token,
                "pcie": p.pcie.name,
                "nvlinks": p.nvlinks,
                "same_socket": p.same_socket,
                "locality_known": p.locality_known,
            }
            for p in result.paths
        ],
        "rails": [
            {"gpu": r.gpu, "nic": r.nic, "kind": r.cls.name if r.cls is not None else None,
             "nics": list(r.nics), "shared_with": list(r.shared_with)}
            for r in result.rails.rails
        ],
        "findings": [finding_dict(f) for f in result.findings],
        "recommendations": {
            "gpus": [
                {"gpu": g.gpu, "bdf": g.bdf, "numa_node": g.numa_node, "cpus": str_or_none(g.cpus), "nics": list(g.nics),
                 "env": dict(g.env), "numactl": g.numactl}
                for g in result.plan.gpus
            ],
            "numa_groups": [
                {"numa_node": n.numa_node, "gpus": list(n.gpus), "cuda_visible_devices": n.cuda_visible_devices,
                 "cpus": str_or_none(n.cpus)}
                for n in result.plan.numa_groups
            ],
        },
        "probe_errors": [to_dict(e) for e in snap.probe_errors],
    }


def render(result: ScanResult, *, pretty: bool = False, **_: Any) -> str:
    """``scan --format json``: the JSON contract, one compact line (``pretty``: indented).

    Compact by default: automation reads it, and ``indent=`` forces json's pure-Python
    encoder, several times slower than the C one on a large host.
    """
    if pretty:
        return json.dumps(report(result), indent=2) + "\n"
    return json.dumps(report(result), separators=(",", ":")) + "\n"
