"""topoagent: host topology discovery and NUMA/affinity agent for GPU servers.

Data flows one way through the core (:mod:`topoagent.core`): read -> snapshot -> topology ->
analysis -> advice -> result -> render; each feature (:mod:`topoagent.features`) is one slice
above it.  Only :mod:`topoagent.core.read` (through :class:`topoagent.core.hostfs.HostFS`) reads
the host and only :mod:`topoagent.core.write` (under :mod:`topoagent.features.act`) writes to it.

The public API, importable from here::

    import topoagent
    result = topoagent.scan("/")                  # or topoagent.run(topoagent.Inputs(...))
    result.path("gpu0", "nic0").token             # 'PIX' (None where the host has no gpu0 or nic0)

Each name is imported from its module when first asked for (PEP 562 ``__getattr__``), so
``import topoagent`` -- which every ``topoagent`` command and ``python -m topoagent`` does
first -- costs nothing until the API is used.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from topoagent.core.version import __version__

if TYPE_CHECKING:  # the names as the type checker sees them (explicit re-exports)
    from topoagent.core.advice.plan import Plan as Plan
    from topoagent.core.analysis.paths import Path as Path
    from topoagent.core.api import read_host as read_host
    from topoagent.core.api import read_offline as read_offline
    from topoagent.core.api import run as run
    from topoagent.core.api import scan as scan
    from topoagent.core.cpuset import CpuSet as CpuSet
    from topoagent.core.errors import InputError as InputError
    from topoagent.core.errors import TopoagentError as TopoagentError
    from topoagent.core.findings import Finding as Finding
    from topoagent.core.findings import Severity as Severity
    from topoagent.core.frozen import FrozenMap as FrozenMap
    from topoagent.core.inputs import Inputs as Inputs
    from topoagent.core.pathclass import PathClass as PathClass
    from topoagent.core.pci import DeviceKind as DeviceKind
    from topoagent.core.result import ScanResult as ScanResult
    from topoagent.core.result import analyse as analyse
    from topoagent.core.snapshot import Snapshot as Snapshot
    from topoagent.core.topology import Device as Device
    from topoagent.core.topology import Topology as Topology

#: Each public name and the module that defines it.
_API = {
    "CpuSet": "topoagent.core.cpuset",
    "Device": "topoagent.core.topology",
    "DeviceKind": "topoagent.core.pci",
    "Finding": "topoagent.core.findings",
    "FrozenMap": "topoagent.core.frozen",
    "InputError": "topoagent.core.errors",
    "Inputs": "topoagent.core.inputs",
    "Path": "topoagent.core.analysis.paths",
    "PathClass": "topoagent.core.pathclass",
    "Plan": "topoagent.core.advice.plan",
    "ScanResult": "topoagent.core.result",
    "Severity": "topoagent.core.findings",
    "Snapshot": "topoagent.core.snapshot",
    "TopoagentError": "topoagent.core.errors",
    "Topology": "topoagent.core.topology",
    "analyse": "topoagent.core.result",
    "read_host": "topoagent.core.api",
    "read_offline": "topoagent.core.api",
    "run": "topoagent.core.api",
    "scan": "topoagent.core.api",
}

__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    """The public name ``name``, imported from its module (PEP 562)."""
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'topoagent' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # asked once: later lookups find it as an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
