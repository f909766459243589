"""topoagent: host topology discovery and NUMA/affinity agent for GPU servers.

Data flows one way: sources -> snapshot -> topology -> analysis -> advice -> result -> outputs.
Only :mod:`topoagent.sources` (through :class:`topoagent.hostfs.HostFS`) reads the host and only
:mod:`topoagent.apply` writes to it.

The public API, importable from here::

    import topoagent
    result = topoagent.scan("/")                  # or topoagent.run(topoagent.Inputs(...))
    result.path("gpu0", "nic0").token             # 'PIX' (None where the host has no gpu0 or nic0)

Names are imported on first use, so ``import topoagent`` (and the CLI's start-up) stays cheap.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from topoagent.version import __version__

#: public name -> module that defines it
_EXPORTS = {
    "scan": "topoagent.api",
    "run": "topoagent.api",
    "read_host": "topoagent.api",
    "read_offline": "topoagent.api",
    "analyse": "topoagent.result",
    "ScanResult": "topoagent.result",
    "Inputs": "topoagent.inputs",
    "Snapshot": "topoagent.snapshot",
    "Topology": "topoagent.topology",
    "Device": "topoagent.topology",
    "DeviceKind": "topoagent.pci",
    "Path": "topoagent.analysis.paths",
    "PathClass": "topoagent.analysis.paths",
    "Finding": "topoagent.analysis.findings",
    "Severity": "topoagent.analysis.findings",
    "Plan": "topoagent.advice.plan",
    "CpuSet": "topoagent.cpuset",
    "FrozenMap": "topoagent.frozen",
    "TopoagentError": "topoagent.errors",
    "InputError": "topoagent.errors",
}

__all__ = [
    "__version__",
    "CpuSet",
    "Device",
    "DeviceKind",
    "Finding",
    "FrozenMap",
    "InputError",
    "Inputs",
    "Path",
    "PathClass",
    "Plan",
    "ScanResult",
    "Severity",
    "Snapshot",
    "TopoagentError",
    "Topology",
    "analyse",
    "read_host",
    "read_offline",
    "run",
    "scan",
]

if TYPE_CHECKING:
    from topoagent.advice.plan import Plan
    from topoagent.analysis.findings import Finding, Severity
    from topoagent.analysis.paths import Path, PathClass
    from topoagent.api import read_host, read_offline, run, scan
    from topoagent.cpuset import CpuSet
    from topoagent.errors import InputError, TopoagentError
    from topoagent.frozen import FrozenMap
    from topoagent.inputs import Inputs
    from topoagent.pci import DeviceKind
    from topoagent.result import ScanResult, analyse
    from topoagent.snapshot import Snapshot
    from topoagent.topology import Device, Topology


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'topoagent' has no attribute {name!r}")


def __dir__() -> list[str]:
    # The lazy names too, so dir(), completion and help() find the API before its first use.
    return sorted(set(globals()) | set(__all__))
