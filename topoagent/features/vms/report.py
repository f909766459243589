"""``topoagent vms --format json``: the VM report as JSON (schema: topoagent/schema/vms.schema.json).

Like every renderer this is ``render(result, **options)``; the VM report comes as the option
``vms`` (a :class:`~topoagent.features.vms.advice.VmReport`), and ``result`` (the host's
:class:`~topoagent.core.result.ScanResult`) may be None: an ESXi report is made from saved esxcli
text, without a scan.  The shape automation reads::

    {"schema_version": 1, "source": …, "host": …,
     "vms": [{"name", "state", "platform", "vcpus", "memory_bytes",
              "devices": [{"bdf", "kind", "numa_node", "ref", "name", "rail_nics", "note"}],
              "current": {setting: value}, "verdict", "recommend": {setting: value},
              "snippet", "notes": [...]}],
     "without_passthrough": [...], "notes": [...]}

``bdf`` is Linux's hex form (``0000:3b:00.0``) or null when the VM's config names no function;
``numa_node`` is null when unknown.  ``schema_version`` changes only for breaking changes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from topoagent.core.pci import DeviceKind
from topoagent.core.render.json_report import Bdf, NodeId, encode
from topoagent.features.vms.advice import Verdict, VmAdvice, VmReport

SCHEMA_VERSION: Literal[1] = 1

#: setting -> value: libvirt paths (``vcpu.cpuset``, ``numatune.memory.nodeset``,
#: ``cputune.vcpupin.N`` ...) or .vmx keys (``numa.nodeAffinity`` ...).
Settings = Annotated[
    dict[str, str],
    msgspec.Meta(
        description=(
            "setting -> value: libvirt paths (vcpu.cpuset, numatune.memory.nodeset, cputune.vcpupin.N ...) "
            "or .vmx keys (numa.nodeAffinity ...)"
        )
    ),
]


class VmDeviceEntry(msgspec.Struct, frozen=True):
    """A passthrough device of a VM, as the host knows it."""

    bdf: Bdf | None
    kind: DeviceKind
    numa_node: NodeId | None
    ref: str
    name: str | None
    rail_nics: list[str]
    note: str | None


class VmEntry(msgspec.Struct, frozen=True):
    """One VM: its devices, current and recommended settings, verdict and notes."""

    name: str
    state: str
    platform: Literal["kvm", "vmware"]
    vcpus: int | None
    memory_bytes: int | None
    devices: Annotated[list[VmDeviceEntry], msgspec.Meta(min_length=1)]
    current: Settings
    verdict: Verdict
    recommend: Settings
    snippet: str | None
    notes: list[str]


class VmsReport(msgspec.Struct, frozen=True):
    """``topoagent vms --format json``."""

    schema_version: Literal[1]
    source: Annotated[str, msgspec.Meta(description="where the VM definitions came from")]
    host: Annotated[str, msgspec.Meta(description="where the host side (device NUMA nodes) came from")]
    vms: list[VmEntry]
    without_passthrough: list[str]
    notes: list[str]


def vm_entry(vm: VmAdvice) -> VmEntry:
    """One VM as the contract's ``vms[]`` entry."""
    return VmEntry(
        name=vm.name,
        state=vm.state,
        platform=vm.platform,  # type: ignore[arg-type]  # "kvm" or "vmware"
        vcpus=vm.vcpus,
        memory_bytes=vm.memory_bytes,
        devices=[
            VmDeviceEntry(d.bdf, d.kind, d.numa_node, d.ref, d.name, list(d.rail_nics), d.note) for d in vm.devices
        ],
        current=dict(vm.current),
        verdict=vm.verdict,
        recommend=dict(vm.recommend),
        snippet=vm.snippet or None,
        notes=list(vm.notes),
    )


def report_dict(report: VmReport) -> VmsReport:
    """The report as the JSON contract's object."""
    return VmsReport(
        schema_version=SCHEMA_VERSION,
        source=report.source,
        host=report.host,
        vms=[vm_entry(vm) for vm in report.vms],
        without_passthrough=list(report.without_passthrough),
        notes=list(report.notes),
    )


def render(result: object = None, *, vms: VmReport, pretty: bool = False, **_: Any) -> str:
    """The report as one JSON document, one compact line (``pretty``: indented)."""
    return encode(report_dict(vms), pretty=pretty)
