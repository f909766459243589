"""``topoagent vms`` for a person: a PTNumaTopology-style table, then what to add to each VM.

The table has one row per passthrough device: VM, state, passthrough address, device, NUMA
node, current affinity, verdict (the VM's columns on its first row only).  Below it, per VM
that needs one, the reasons and the XML (libvirt) or the line (.vmx) to add.

Like every renderer this is ``render(result, **options)``; the VM report comes as the option
``vms`` (a :class:`~topoagent.features.vms.advice.VmReport`), and ``result`` may be None (an ESXi
report has no scan).
"""

from __future__ import annotations

from typing import Any

from topoagent.core.pci import DeviceKind
from topoagent.core.render.columns import columns
from topoagent.core.render.escape import shown
from topoagent.features.vms.advice import VmAdvice, VmReport

HEADERS = ("VM", "state", "passthrough", "device", "NUMA", "current affinity", "verdict")
_DEVICE_WIDTH = 34


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def current_summary(vm: VmAdvice) -> str:
    """The VM's affinity settings in a few words (``-`` when none is set)."""
    cur = vm.current
    if vm.platform == "vmware":
        parts = [f"{k}={v}" for k, v in cur.items()]
        return "; ".join(parts) if parts else "-"
    parts = []
    if cur.get("vcpu.placement") == "auto":
        parts.append("placement auto")
    if "vcpu.cpuset" in cur:
        parts.append(f"cpuset {cur['vcpu.cpuset']}")
    if "numatune.memory.nodeset" in cur:
        parts.append(f"mem {cur.get('numatune.memory.mode', 'strict')}:{cur['numatune.memory.nodeset']}")
    elif cur.get("numatune.memory.placement") == "auto":
        parts.append("mem auto")
    cells = [k for k in cur if k.startswith("numatune.memnode.")]
    if cells:
        parts.append(f"{len(cells)} memnode{'s' if len(cells) > 1 else ''}")
    pins = [k for k in cur if k.startswith("cputune.vcpupin.")]
    if pins:
        parts.append(f"{len(pins)} vcpupin{'s' if len(pins) > 1 else ''}")
    if "cputune.emulatorpin" in cur:
        parts.append(f"emulatorpin {cur['cputune.emulatorpin']}")
    return "; ".join(parts) if parts else "-"


def _rows(vm: VmAdvice) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for i, d in enumerate(vm.devices):
        device = d.kind.value + (f" {d.name}" if d.name else "")
        address = d.bdf or "?"
        if d.ref != d.bdf:
            address = f"{d.ref} ({d.bdf})" if d.bdf else d.ref
        node = "?" if d.numa_node is None else str(d.numa_node)
        first = i == 0
        row = (
            vm.name if first else "",
            vm.state if first else "",
            address,
            _clip(device, _DEVICE_WIDTH),
            node,
            current_summary(vm) if first else "",
            vm.verdict.value if first else "",
        )
        rows.append(tuple(shown(c) for c in row))  # a name or .vmx value is one cell, never a row
    return rows


def _rail_notes(vm: VmAdvice) -> list[str]:
    passed = {d.bdf for d in vm.devices}
    out = []
    for d in vm.devices:
        if d.kind is DeviceKind.GPU and d.rail_nics:
            rails = ", ".join(f"{n} ({'passed through' if n in passed else 'not passed through'})" for n in d.rail_nics)
            out.append(f"GPU {d.bdf} rail NIC: {rails}")
    return out


def _details(vm: VmAdvice) -> list[str]:
    lines = [f"{shown(vm.name)} ({vm.verdict.value}):"]
    lines += [f"  - {shown(n)}" for n in (*vm.notes, *_rail_notes(vm))]
    if vm.snippet:
        if vm.platform == "kvm":
            how = (
                f"add to the domain (virsh edit {shown(vm.name)}; or topoagent vms --apply {shown(vm.name)} "
                f"on the shut-off domain):"
            )
        else:
            how = "set in the .vmx (with the VM powered off):"
        lines.append(f"  {how}")
        lines += [f"    {shown(line)}" for line in vm.snippet.splitlines()]
    return lines


def render(result: object = None, *, vms: VmReport, **_: Any) -> str:
    """The table and, per VM, the notes and the settings to add."""
    out = [f"VMs with PCI passthrough ({shown(vms.source)}; host: {shown(vms.host)})", ""]
    if vms.vms:
        rows = [HEADERS] + [row for vm in vms.vms for row in _rows(vm)]
        table = columns(rows)
        out += [table[0], "-" * len(table[0]), *table[1:]]
        for vm in vms.vms:
            if vm.notes or vm.snippet or _rail_notes(vm):
                out += ["", *_details(vm)]
    else:
        out.append("no VM has a PCI passthrough device" if vms.without_passthrough else "no VMs found")
    if vms.without_passthrough:
        out += ["", "without PCI passthrough: " + ", ".join(map(shown, vms.without_passthrough))]
    if vms.notes:
        out += ["", *map(shown, vms.notes)]
    return "\n".join(out) + "\n"
