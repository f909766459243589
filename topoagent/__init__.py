"""topoagent: host topology discovery and NUMA/affinity agent for GPU servers.

Data flows one way through the core (:mod:`topoagent.core`): read -> snapshot -> topology ->
analysis -> advice -> result -> render; each feature (:mod:`topoagent.features`) is one slice
above it.  Only :mod:`topoagent.core.read` (through :class:`topoagent.core.hostfs.HostFS`) reads
the host and only :mod:`topoagent.core.write` (under :mod:`topoagent.features.act`) writes to it.

The public API, importable from here::

    import topoagent
    result = topoagent.scan("/")                  # or topoagent.run(topoagent.Inputs(...))
    result.path("gpu0", "nic0").token             # 'PIX' (None where the host has no gpu0 or nic0)
"""

from __future__ import annotations

from topoagent.core.advice.plan import Plan
from topoagent.core.analysis.paths import Path
from topoagent.core.api import read_host, read_offline, run, scan
from topoagent.core.cpuset import CpuSet
from topoagent.core.errors import InputError, TopoagentError
from topoagent.core.findings import Finding, Severity
from topoagent.core.frozen import FrozenMap
from topoagent.core.inputs import Inputs
from topoagent.core.pathclass import PathClass
from topoagent.core.pci import DeviceKind
from topoagent.core.result import ScanResult, analyse
from topoagent.core.snapshot import Snapshot
from topoagent.core.topology import Device, Topology
from topoagent.core.version import __version__

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
