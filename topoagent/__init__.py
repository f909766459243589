"""topoagent: host topology discovery and NUMA/affinity agent for GPU servers.

Data flows one way: sources -> snapshot -> topology -> analysis -> advice -> result -> outputs.
Only :mod:`topoagent.core.read` (through :class:`topoagent.core.hostfs.HostFS`) reads the host and only
:mod:`topoagent.features.act` writes to it.

The public API, importable from here::

    import topoagent
    result = topoagent.scan("/")                  # or topoagent.run(topoagent.Inputs(...))
    result.path("gpu0", "nic0").token             # 'PIX' (None where the host has no gpu0 or nic0)

Names are imported on first use, so ``import topoagent`` (and the CLI's start-up) stays cheap.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from topoagent.core.version import __version__

#: public name -> module that defines it
_EXPORTS = {
    "scan": "topoagent.core.api",
    "run": "topoagent.core.api",
    "read_host": "topoagent.core.api",
    "read_offline": "topoagent.core.api",
    "analyse": "topoagent.core.result",
    "ScanResult": "topoagent.core.result",
    "Inputs": "topoagent.core.inputs",
    "Snapshot": "topoagent.core.snapshot",
    "Topology": "topoagent.core.topology",
    "Device": "topoagent.core.topology",
    "DeviceKind": "topoagent.core.pci",
    "Path": "topoagent.core.analysis.paths",
    "PathClass": "topoagent.core.analysis.paths",
    "Finding": "topoagent.core.analysis.findings",
    "Severity": "topoagent.core.analysis.findings",
    "Plan": "topoagent.core.advice.plan",
    "CpuSet": "topoagent.core.cpuset",
    "FrozenMap": "topoagent.core.frozen",
    "TopoagentError": "topoagent.core.errors",
    "InputError": "topoagent.core.errors",
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
    from topoagent.core.advice.plan import Plan
    from topoagent.core.analysis.findings import Finding, Severity
    from topoagent.core.analysis.paths import Path, PathClass
    from topoagent.core.api import read_host, read_offline, run, scan
    from topoagent.core.cpuset import CpuSet
    from topoagent.core.errors import InputError, TopoagentError
    from topoagent.core.frozen import FrozenMap
    from topoagent.core.inputs import Inputs
    from topoagent.core.pci import DeviceKind
    from topoagent.core.result import ScanResult, analyse
    from topoagent.core.snapshot import Snapshot
    from topoagent.core.topology import Device, Topology


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'topoagent' has no attribute {name!r}")


def __dir__() -> list[str]:
    # The lazy names too, so dir(), completion and help() find the API before its first use.
    return sorted(set(globals()) | set(__all__))
