"""``topoagent vms --format json``: the VM report as JSON (schema: topoagent/schema/vms.schema.json).

Like every renderer this is ``render(result, **options)``; the VM report comes as the option
``vms`` (a :class:`~topoagent.advice.vms.VmReport`), and ``result`` (the host's
:class:`~topoagent.result.ScanResult`) may be None: an ESXi report is made from saved esxcli
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

from typing import Any

from topoagent.advice.vms import VmAdvice, VmReport
from topoagent.outputs.json_report import encode

SCHEMA_VERSION = 1


def vm_dict(vm: VmAdvice) -> dict[str, Any]:
    """One VM as the contract's ``vms[]`` entry."""
    return {
        "name": vm.name,
        "state": vm.state,
        "platform": vm.platform,
        "vcpus": vm.vcpus,
        "memory_bytes": vm.memory_bytes,
        "devices": [
            {"bdf": d.bdf, "kind": d.kind, "numa_node": d.numa_node, "ref": d.ref, "name": d.name,
             "rail_nics": list(d.rail_nics), "note": d.note}
            for d in vm.devices
        ],
        "current": dict(vm.current),
        "verdict": vm.verdict.value,
        "recommend": dict(vm.recommend),
        "snippet": vm.snippet or None,
        "notes": list(vm.notes),
    }


def report_dict(report: VmReport) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "source": report.source,
        "host": report.host,
        "vms": [vm_dict(vm) for vm in report.vms],
        "without_passthrough": list(report.without_passthrough),
        "notes": list(report.notes),
    }


def render(result: object = None, *, vms: VmReport, pretty: bool = True, **_: Any) -> str:
    """The report as one JSON document (indented unless ``pretty`` is false: then one compact line)."""
    return encode(report_dict(vms), pretty=pretty)
