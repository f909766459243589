"""NUMA affinity for VMware VMs with passthrough devices (a saved .vmx joined with ``esxcli
hardware pci list``): the verdict and the ``numa.nodeAffinity`` line.  Pure.  What the verdicts
mean: :mod:`topoagent.features.vms.advice`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from topoagent.core.errors import InputError
from topoagent.core.frozen import FrozenMap
from topoagent.core.pci import DeviceKind
from topoagent.features.vms.advice import (
    DeviceReport,
    HostView,
    Verdict,
    VmAdvice,
    VmsError,
    device_nodes,
    join_device,
    nodes_text,
)
from topoagent.features.vms.domain import parse_libvirt_set

if TYPE_CHECKING:
    from topoagent.features.vms.vmx import VmxConfig

__all__ = ["advise_vmx"]


def _node_list(text: str | None) -> set[int] | None:
    """A VMware node or CPU list (``0``, ``0,1``, ``0-3``); None for unset or ``all``."""
    if text is None or not text.strip() or text.strip().lower() == "all":
        return None

    try:
        return set(parse_libvirt_set(text.replace(" ", ""), what="node list"))
    except InputError:
        raise VmsError(f"{text!r} is not a node list") from None


def _vmx_device(
    dev_index: int,
    ref: str | None,
    bdfs: tuple[str, ...],
    vendor: int | None,
    device: int | None,
    warning: str | None,
    host: HostView,
) -> DeviceReport:
    label = ref or f"pciPassthru{dev_index} (no id)"
    if not bdfs:
        return DeviceReport(None, label, DeviceKind.OTHER, None, None, note=warning)
    found = [b for b in bdfs if b in host.devices]
    if vendor is not None and device is not None and len(found) > 1:
        found = [
            b
            for b in found
            if (host.devices[b].vendor_id, host.devices[b].device_id) in ((vendor, device), (None, None))
        ]
    if len(found) != 1:
        why = "matches no device in the host list" if not found else f"could be {' or '.join(found)}: ambiguous"
        return DeviceReport(
            bdfs[0] if len(bdfs) == 1 else None,
            label,
            DeviceKind.OTHER,
            None,
            None,
            note=f"pciPassthru{dev_index}.id {ref!r} ({' or '.join(bdfs)}) {why} ({host.source})",
        )
    report = join_device(found[0], label, host)
    h = host.devices[found[0]]
    notes = [n for n in (warning if len(bdfs) == 1 else None, report.note) if n]
    if vendor is not None and h.vendor_id is not None and (vendor, device) != (h.vendor_id, h.device_id):
        notes.append(
            f"pciPassthru{dev_index} names {vendor:04x}:{(device or 0):04x} but {found[0]} is "
            f"{h.vendor_id:04x}:{(h.device_id or 0):04x}"
        )
    return DeviceReport(
        report.bdf, label, report.kind, report.numa_node, report.name, report.rail_nics, "; ".join(notes) or None
    )


def advise_vmx(vmx: VmxConfig, host: HostView, *, name: str, state: str = "unknown") -> VmAdvice | None:
    """Verdict and the ``numa.nodeAffinity`` line for a VMware VM; None without passthrough."""
    if not vmx.devices:
        return None
    devices = tuple(_vmx_device(d.index, d.id, d.bdfs, d.vendor_id, d.device_id, d.warning, host) for d in vmx.devices)
    current = {
        k: v
        for k, v in (
            ("numa.nodeAffinity", vmx.node_affinity),
            ("sched.cpu.affinity", vmx.cpu_affinity),
            ("sched.mem.affinity", vmx.mem_affinity),
        )
        if v
    }
    notes = [d.note for d in devices if d.note]
    nodes = device_nodes(devices)
    recommend: dict[str, str] = {}
    if vmx.cpu_affinity and vmx.cpu_affinity.strip().lower() != "all":
        notes.append(
            "sched.cpu.affinity pins vCPUs to host CPUs: NUMA affinity is the lighter control "
            "(the NUMA scheduler still balances inside the node); left as it is"
        )
    if nodes is None:
        verdict = Verdict.UNKNOWN
        notes.append("nothing recommended: a device's NUMA node is unknown (never guessed)")
    else:
        target = {nodes[0]} if len(nodes) == 1 else set(nodes)
        affinity = _node_list(vmx.node_affinity)
        mem = _node_list(vmx.mem_affinity)
        if len(nodes) > 1:
            verdict = Verdict.SPLIT
            k = len(nodes)
            vcpus = vmx.numvcpus
            if vcpus and vcpus >= k:
                notes.append(
                    f"devices on nodes {nodes_text(nodes)}: a wide VM of {vcpus} vCPUs spans them "
                    f"({'+'.join(str(vcpus // k + (1 if i < vcpus % k else 0)) for i in range(k))} "
                    f"per node; node sizes cannot be checked from esxcli)"
                )
            else:
                notes.append(
                    f"devices on nodes {nodes_text(nodes)}: "
                    f"{vcpus if vcpus else 'an unknown number of'} vCPUs cannot span them; "
                    f"give the VM devices of one node"
                )
        elif (affinity is not None and affinity != target) or (mem is not None and mem != target):
            verdict = Verdict.MISALIGNED
        elif affinity == target:
            verdict = Verdict.ALIGNED
        else:
            verdict = Verdict.UNSET
        if verdict is not Verdict.ALIGNED and (len(nodes) == 1 or (vmx.numvcpus or 0) >= len(nodes)):
            if affinity != target:
                recommend["numa.nodeAffinity"] = nodes_text(nodes)
            if mem is not None and mem != target:
                recommend["sched.mem.affinity"] = nodes_text(nodes)
    snippet = "\n".join(f'{k} = "{v}"' for k, v in recommend.items())
    if snippet:
        notes.append(
            "the VM must be powered off to change this (Edit Settings > VM Options > Advanced > "
            "Configuration Parameters, or the .vmx of a powered-off VM)"
        )
    return VmAdvice(
        name,
        state,
        "vmware",
        vmx.numvcpus,
        vmx.memory_bytes,
        devices,
        FrozenMap(current),
        verdict,
        FrozenMap(recommend),
        snippet,
        None,
        tuple(notes),
    )
