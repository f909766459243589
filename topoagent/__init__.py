"""topoagent: host topology discovery and NUMA/affinity agent for GPU servers.

Data flows one way: sources -> snapshot -> topology -> analysis -> advice -> outputs.
Only :mod:`topoagent.sources` (through :class:`topoagent.hostfs.HostFS`) touches the host.
"""

__version__ = "0.1.0"
