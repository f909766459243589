"""What every family of checks shares: the :class:`Context` a check judges, and the one place
evidence is chosen.

Where a fact was read is spelled here only: a sysfs file on a host tree, the pasted output it
came from otherwise (:func:`evidence_path`), a NUMA node, a node's CPUs, a link, a pasted
matrix cell.  :func:`~topoagent.core.findings.catalogue.proof_of` tells an evidence line's kind
from that spelling, so the catalogue's ``proof`` of each code can be checked against what its
checks cite, and a finding is bounded by its weakest line.
"""

from __future__ import annotations

from functools import partial

from topoagent.core.analysis.guest import FlatTree, flat_tree
from topoagent.core.analysis.paths import Path, path_index
from topoagent.core.analysis.rails import Rails
from topoagent.core.findings.catalogue import HostKind, finding
from topoagent.core.findings.finding import Evidence
from topoagent.core.parse.segment import NCCL_XML
from topoagent.core.pci import DeviceKind
from topoagent.core.snapshot import ConfigSpace, host_path
from topoagent.core.topology import Device, Topology


def sysfs_attr(d: Device, attr: str) -> str:
    """The sysfs path of a device attribute, as evidence names it."""
    return host_path(f"sys/bus/pci/devices/{d.bdf}/{attr}")


#: Where a sysfs attribute's value is printed in pasted tool output.
_LSPCI_FIELDS = {
    "numa_node": "NUMA node",
    "config": "ACSCtl",
    "class": "class",
    "current_link_width": "LnkSta",
    "current_link_speed": "LnkSta",
    "max_link_width": "LnkCap",
    "max_link_speed": "LnkCap",
}
_NVSMI_FIELDS = {"numa_node": "NUMA Affinity", "local_cpulist": "CPU Affinity"}
#: Where NCCL's topology file says it: the attribute of the <pci> (its <cpu>'s for the node);
#: ACS it never holds.
_NCCL_FIELDS = {
    "numa_node": "<cpu numaid>",
    "config": "ACS",
    "max_link_width": "link_width",
    "max_link_speed": "link_speed",
    "current_link_width": "link_width",
    "current_link_speed": "link_speed",
}
#: Where ``nvidia-smi -q`` prints a link value (its GPU Link Info section).
_QUERY_FIELDS = {
    "current_link_width": "Link Width Current",
    "max_link_width": "Link Width Max",
    "current_link_speed": "PCIe Generation Current",
    "max_link_speed": "PCIe Generation Max",
}


def evidence_path(topo: Topology, d: Device, attr: str) -> str:
    """Where a device's attribute was read: its sysfs file, or the pasted output it came from
    (``lspci 0000:19:08.0: ACSCtl``, ``nvidia-smi topo -m GPU3: NUMA Affinity``)."""
    if topo.from_host_tree:
        return sysfs_attr(d, attr)
    if d.link_source is not None and attr in _QUERY_FIELDS:
        return f"{d.link_source}: {_QUERY_FIELDS[attr]}"
    if d.bdf is None:
        return f"nvidia-smi topo -m {d.label}: {_NVSMI_FIELDS.get(attr, attr)}"
    if d.label is not None and d.numa_source == "nvidia-smi" and attr in _NVSMI_FIELDS:
        return f"nvidia-smi topo -m {d.label}: {_NVSMI_FIELDS[attr]}"
    if d.numa_source == NCCL_XML.evidence:
        return f"{NCCL_XML.evidence} {d.bdf}: {_NCCL_FIELDS.get(attr, attr)}"
    return f"lspci {d.bdf}: {_LSPCI_FIELDS.get(attr, attr)}"


class Context:
    """The analysed host a check judges: topology, paths and the rail pairing."""

    def __init__(self, topo: Topology, paths: tuple[Path, ...], rails: Rails) -> None:
        self.topo = topo
        self.paths = paths
        self.idx = path_index(paths)
        self.rails = rails
        #: A guest's flat PCI tree, where the input shows or suggests one (analysis.guest).
        self.flat: FlatTree | None = flat_tree(topo, paths)
        #: :func:`~topoagent.core.findings.catalogue.finding`, with the remedy written for this
        #: host's kind (:attr:`host_kind`) where the check chooses none.
        self.finding = partial(finding, host=self.host_kind)

    @property
    def host_kind(self) -> HostKind:
        """The kind of host a remedy is written for where the check does not choose one: a
        guest (known, or suggested by a flat tree), else pasted text, else bare metal."""
        if self.topo.virtualized or self.flat is not None:
            return HostKind.GUEST
        return HostKind.PASTED if self.offline else HostKind.BARE_METAL

    def dev(self, ident: str) -> Device:
        """The device with this id (it exists: ids come from the topology)."""
        d = self.topo.by_id(ident)
        assert d is not None
        return d

    def path(self, a: str, b: str) -> Path:
        """The path between two GPUs/NICs by id; a VF's path is its PF's (as in scan_paths)."""
        pa, pb = self.topo.physical(self.dev(a)), self.topo.physical(self.dev(b))
        return self.idx[(pa.id, pb.id)]

    @property
    def rdma_nics(self) -> list[Device]:
        """Physical RDMA-capable NICs."""
        return [n for n in self.topo.nics if n.rdma_capable and not n.is_vf]

    @property
    def offline(self) -> bool:
        """Built from pasted tool output, not a host tree (:mod:`topoagent.core.paste`)."""
        return not self.topo.from_host_tree

    def attr(self, d: Device, attr: str) -> str:
        """Where a device's attribute was read (sysfs file or pasted output)."""
        return evidence_path(self.topo, d, attr)


def nic_label(n: Device) -> str:
    """A NIC as a message names it: its id and RDMA (else network) device names."""
    names = n.rdma_devices or n.netdevs
    return f"{n.id} ({', '.join(names)})" if names else n.id


def lost_error(c: Context, suffix: str) -> str | None:
    """The probe error of the file whose host path ends with ``suffix``, if it was lost."""
    return next((e.error for e in c.topo.probe_errors if e.path.endswith(suffix)), None)


def numa_evidence(c: Context, d: Device) -> list[Evidence]:
    """Where a device's NUMA node was read, and what it said."""
    if not c.offline:
        # A node the parser refused (-2, 0x1, a NUL) is a lost probe quoting the file, not -1.
        lost = None if d.numa_node is not None else lost_error(c, f"/{d.bdf}/numa_node")
        value = str(d.numa_node) if d.numa_node is not None else (lost or "-1")
        return [Evidence(sysfs_attr(d, "numa_node"), value)]
    if d.kind is DeviceKind.NIC and d.bdf is None or (d.numa_source == "nvidia-smi" and d.kind is DeviceKind.NIC):
        # nvidia-smi prints no affinity for NICs: the node, if any, follows a GPU's (topology)
        return [
            Evidence(
                f"nvidia-smi topo -m {d.label}: NUMA node via its paths to GPUs",
                str(d.numa_node) if d.numa_node is not None else "unknown",
            )
        ]
    said = d.numa_said or "unknown"  # what the paste printed where it names no one node (N/A, 0-7)
    return [Evidence(c.attr(d, "numa_node"), str(d.numa_node) if d.numa_node is not None else said)]


def given_evidence(c: Context, a: Device, b: Device) -> list[Evidence]:
    """The cell of a pasted ``nvidia-smi topo -m`` between two devices, if one was given."""
    token = c.topo.given_token(a, b)
    if token == "SYS" and c.topo.soc_legend:
        token = "SOC"  # as the old driver printed it: its legend is what names sockets
    return [Evidence(f"nvidia-smi topo -m {a.label}/{b.label}", token)] if token is not None else []


def node_cpus_evidence(c: Context, node: int) -> Evidence:
    """A node's CPUs as the file they were read from holds them (``cpulist``, or ``cpumap``
    and the CPUs' node links where the kernel or a failed read left no list)."""
    n = c.topo.node(node)
    name = n.cpus_file if n is not None and n.cpus_file else "cpulist"
    cpus = n.cpus if n is not None and n.cpus_known else None
    if n is not None and n.cpus_file == "cpu/cpu*/node*":
        return Evidence(host_path(f"sys/devices/system/cpu/cpu*/node{node}"), str(cpus))
    text = "" if cpus is None else (cpus.mask() if name == "cpumap" else str(cpus))
    return Evidence(host_path(f"sys/devices/system/node/node{node}/{name}"), text)


def node_memory_evidence(c: Context, node: int) -> Evidence:
    """What shows that a node has no CPUs: its ``cpulist`` on a host tree; the tool that listed
    its CPUs in a paste (``numactl -H``, ``lstopo``); else a matrix's ``GPU NUMA ID``."""
    if not c.offline:
        return node_cpus_evidence(c, node)
    n = c.topo.node(node)
    if n is not None and n.cpus_file in ("numactl -H", "lstopo"):
        return Evidence(f"{n.cpus_file}: node {node} cpus", str(n.cpus))
    return Evidence("nvidia-smi topo -m: GPU NUMA ID", str(node))


def link_evidence(c: Context, d: Device, *attrs: tuple[str, str]) -> list[Evidence]:
    """Evidence from ``d``'s link: per (sysfs attribute, LinkInfo field) pair, the field's value."""
    return [Evidence(c.attr(d, a), fmt(getattr(d.link, f))) for a, f in attrs]


def config_size(cfg: ConfigSpace | None) -> str:
    """How much of a config file was readable, as ACS_UNKNOWN's evidence says it."""
    return f"{cfg.size} bytes readable" if cfg is not None else "unreadable"


def fmt(v: object) -> str | None:
    """A value as evidence prints it (``16``, ``2.5``; None stays None)."""
    return None if v is None else f"{v:g}" if isinstance(v, float) else str(v)
