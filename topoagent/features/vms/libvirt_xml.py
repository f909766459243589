"""The libvirt domain XML of a VM recommendation (:mod:`topoagent.features.vms.libvirt_advice`): the
elements to put in the definition, as ``virsh edit`` shows them.  Element and attribute names
follow libvirt's domain format (https://libvirt.org/formatdomain.html: "CPU Allocation",
"CPU Tuning", "Memory Tuning", "NUMA topology").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from topoagent.features.vms.advice import nodes_text

if TYPE_CHECKING:
    from topoagent.features.vms.advice import Affinity
    from topoagent.features.vms.domain import Domain

__all__ = ["affinity_xml", "cell_memory_kib", "cells_xml"]


def affinity_xml(dom: Domain, aff: Affinity) -> str:
    """The ``<vcpu>``, ``<cputune>`` (with pins) and ``<numatune>`` elements that set ``aff``."""
    current = f" current='{dom.vcpus_current}'" if dom.vcpus_current is not None else ""
    lines = [f"<vcpu placement='static' cpuset='{aff.cpuset}'{current}>{dom.vcpus or 1}</vcpu>"]
    if aff.vcpupins is not None:
        lines.append("<cputune>")
        lines += [f"  <vcpupin vcpu='{v}' cpuset='{cpus}'/>" for v, cpus in aff.vcpupins]
        if aff.emulatorpin is not None:
            lines.append(f"  <emulatorpin cpuset='{aff.emulatorpin}'/>")
        lines.append("</cputune>")
    lines += ["<numatune>", f"  <memory mode='{aff.mem_mode}' nodeset='{aff.nodeset}'/>"]
    lines += [f"  <memnode cellid='{c}' mode='strict' nodeset='{n}'/>" for c, n in aff.memnodes]
    lines.append("</numatune>")
    return "\n".join(lines)


def cell_memory_kib(memory: int | None, cells: int) -> tuple[int, ...]:
    """The domain's memory (bytes) split over ``cells`` guest NUMA cells in KiB: evenly, the
    remainder to the last cell, so the cells add up to exactly the domain's ``<memory>``
    (QEMU refuses to start a guest whose NUMA nodes do not: "total memory for NUMA nodes ...
    should equal RAM size").  () when the memory is unknown."""
    if not memory or cells < 1:
        return ()
    total = memory // 1024
    each = total // cells
    return (each,) * (cells - 1) + (total - each * (cells - 1),)


def cells_xml(vcpus: int, memory: int | None, nodes: tuple[int, ...], shares: tuple[int, ...]) -> str:
    """The guest NUMA cells (``<cpu><numa>``) of ``shares`` vCPUs, one per node, memory split
    evenly, and the ``<numatune>`` that binds each cell to its node."""
    lines = ["<cpu>", "  <numa>"]
    first = 0
    kib = cell_memory_kib(memory, len(shares))
    for i, share in enumerate(shares):
        mem = f" memory='{kib[i]}' unit='KiB'" if kib and kib[i] else ""
        lines.append(f"    <cell id='{i}' cpus='{first}-{first + share - 1}'{mem}/>")
        first += share
    lines += ["  </numa>", "</cpu>", "<numatune>", f"  <memory mode='strict' nodeset='{nodes_text(nodes)}'/>"]
    lines += [f"  <memnode cellid='{i}' mode='strict' nodeset='{n}'/>" for i, n in enumerate(nodes)]
    lines.append("</numatune>")
    return "\n".join(lines)
