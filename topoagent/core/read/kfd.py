"""AMD GPUs as KFD and amdgpu describe them: ``/sys/class/kfd/kfd/topology/nodes`` (the HSA
topology: CPU nodes first, then one node per GPU or GPU partition; kfd_topology.c) and the
amdgpu attributes of each GPU's PCI function (``xgmi_physical_id``,
``xgmi_hive_info/xgmi_hive_id``: amdgpu_xgmi.c; ``current_compute_partition``,
``current_memory_partition``: amdgpu_gfx.c, amdgpu_gmc.c).

Required for a node: ``properties`` (every KFD node has it).  Optional: ``gpu_id`` (0 for a
CPU), ``name``, ``io_links/*/properties`` and the amdgpu files (XGMI and partitions exist only
on Instinct parts).  A KFD node whose properties name no PCI function is not a GPU here.
"""

from __future__ import annotations

from topoagent.core.digits import decimal
from topoagent.core.hostfs import HostFS
from topoagent.core.parse.kfd import bdf_of, gfx_name, parse_properties
from topoagent.core.read.attr import parsed, value
from topoagent.core.snapshot import AmdGpu, KfdLink

__all__ = ["KFD_NODES", "amd_gpus"]

KFD_NODES = "sys/class/kfd/kfd/topology/nodes"
#: amdgpu's optional attributes of an Instinct GPU's PCI function, below bus/pci/devices/BDF.
AMDGPU_FILES = (
    "xgmi_physical_id",
    "xgmi_hive_info/xgmi_hive_id",
    "current_compute_partition",
    "current_memory_partition",
)


def _decimal(text: str) -> int:
    number = decimal(text.strip())
    if number is None:
        raise ValueError(f"not a decimal number: {text.strip()[:40]!r}")
    return number


def _word(text: str) -> str:
    word = text.strip()
    if not word or len(word) > 32 or not word.isprintable():
        raise ValueError(f"not a partition mode: {text[:40]!r}")
    return word


def amd_gpus(fs: HostFS) -> tuple[AmdGpu, ...]:
    """Every GPU node of KFD's topology, in node order (the order ROCm numbers devices in),
    with its io_links and the amdgpu facts of its PCI function; () without KFD."""
    nodes: dict[int, dict[str, int]] = {}
    for name in fs.listdir(KFD_NODES):
        node = decimal(name, digits=6)
        if node is not None:
            base = f"{KFD_NODES}/{name}"
            props = parsed(
                fs, f"{base}/properties", fs.text(f"{base}/properties"), parse_properties, required_by="KFD node"
            )
            if props is not None:
                nodes[node] = props
    bdf = {
        n: bdf_of(p.get("domain", 0), p["location_id"])
        for n, p in nodes.items()
        if p.get("location_id") and p.get("simd_count", 0) > 0
    }
    out = []
    for n in sorted(bdf):
        base = f"{KFD_NODES}/{n}"
        props = nodes[n]
        dev = f"sys/bus/pci/devices/{bdf[n]}"
        hive = props.get("hive_id") or value(fs, f"{dev}/xgmi_hive_info/xgmi_hive_id", _decimal)
        out.append(
            AmdGpu(
                bdf=bdf[n],
                kfd_node=n,
                gpu_id=value(fs, f"{base}/gpu_id", _decimal),
                name=gfx_name(props.get("gfx_target_version", 0)),
                drm_render_minor=props.get("drm_render_minor"),
                hive_id=hive or None,
                xgmi_physical_id=value(fs, f"{dev}/xgmi_physical_id", _decimal),
                compute_partition=value(fs, f"{dev}/current_compute_partition", _word),
                memory_partition=value(fs, f"{dev}/current_memory_partition", _word),
                unique_id=props.get("unique_id") or None,
                links=_links(fs, base, bdf),
            )
        )
    return tuple(out)


def _links(fs: HostFS, base: str, bdf: dict[int, str]) -> tuple[KfdLink, ...]:
    """A node's io_links, in their order (``io_links/0``, ``1`` ...)."""
    links = []
    names = sorted(n for m in fs.listdir(f"{base}/io_links") if (n := decimal(m, digits=6)) is not None)
    for m in names:
        rel = f"{base}/io_links/{m}/properties"
        props = value(fs, rel, parse_properties)
        if props is None or "type" not in props or "node_to" not in props:
            continue
        to = props["node_to"]
        links.append(
            KfdLink(
                type=props["type"],
                peer_node=to,
                peer_bdf=bdf.get(to),
                weight=props.get("weight"),
                min_bandwidth=props.get("min_bandwidth"),
                max_bandwidth=props.get("max_bandwidth"),
            )
        )
    return tuple(links)
