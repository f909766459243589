"""The facts of parsed ``lspci -tv`` and/or ``lspci -vvv`` output.

``lspci -tv`` gives the tree (``sysfs_path``-like strings are built from the nesting, so the
ancestry code that reads sysfs paths works unchanged) and device names (ids with ``-tvnn``).
``lspci -vvv`` gives class, ids (``-nn``), driver, ``NUMA node``, link (``LnkCap`` = max,
``LnkSta`` = current), port type and ACS, as a :class:`~topoagent.snapshot.ConfigSpace`.
Without a tree, parents come from the bridges' ``Bus: secondary=…, subordinate=…`` lines.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from topoagent import pci
from topoagent.parsers.lspci_tree import LspciTreeNode
from topoagent.parsers.lspci_verbose import LspciFunction
from topoagent.snapshot import (
    ConfigSpace,
    LinkInfo,
    NumaNode,
    PciFunction,
    Snapshot,
    SourceStatus,
)

__all__ = ["snapshot_from_lspci"]


def _walk_tree(tree: Iterable[LspciTreeNode]) -> Iterator[tuple[LspciTreeNode, str]]:
    """Every node with its sysfs-like path (``pci0000:00/0000:00:01.0/0000:01:00.0``)."""
    def walk(node: LspciTreeNode, prefix: str) -> Iterator[tuple[LspciTreeNode, str]]:
        path = f"{prefix}/{node.bdf}"
        yield node, path
        for child in node.children:
            yield from walk(child, path)

    for root in tree:
        yield from walk(root, f"pci{root.bdf.rsplit(':', 1)[0]}")


def _split_bdf(bdf: str) -> tuple[str, int]:
    dom, bus, _ = bdf.split(":")
    return dom, int(bus, 16)


def _paths_from_bus_numbers(fns: tuple[LspciFunction, ...]) -> dict[str, str | None]:
    """Sysfs-like paths from the bridges' bus numbers (``lspci -vvv`` without a tree).

    A function's parent is the bridge whose secondary bus is the function's bus.  With no such
    bridge, it sits on a root bus -- unless a listed bridge's bus range covers its bus, which
    means its own bridge is missing from the listing (``lspci -s``): then its place is unknown
    (None), never a shortened chain that would make the path look better than it is.
    """
    bridges = [(f, f.secondary_bus, f.subordinate_bus) for f in fns
               if f.secondary_bus is not None and f.subordinate_bus is not None]
    by_secondary: dict[tuple[str, int], str | None] = {}
    for b, secondary, _ in bridges:
        key = (_split_bdf(b.bdf)[0], secondary)
        by_secondary[key] = None if key in by_secondary else b.bdf  # two claims: unknown

    def covered(dom: str, bus: int) -> bool:
        return any(_split_bdf(b.bdf)[0] == dom and secondary <= bus <= subordinate
                   for b, secondary, subordinate in bridges)

    out: dict[str, str | None] = {}

    def path(bdf: str, depth: int = 0) -> str | None:
        if bdf in out:
            return out[bdf]
        dom, bus = _split_bdf(bdf)
        key = (dom, bus)
        if depth > 64:
            return None  # a loop in corrupt bus numbers
        if key in by_secondary:
            parent = by_secondary[key]
            up = path(parent, depth + 1) if parent is not None and parent != bdf else None
            result = f"{up}/{bdf}" if up is not None else None
        elif covered(dom, bus):
            result = None
        else:
            result = f"pci{dom}:{bus:02x}/{bdf}"
        out[bdf] = result
        return result

    for f in fns:
        path(f.bdf)
    return out


def _config(v: LspciFunction, class16: int | None) -> ConfigSpace:
    readable = v.capabilities_readable is True
    bridge = v.secondary_bus is not None or class16 in (0x0604, 0x0609)
    link = LinkInfo(v.link_gts, v.link_width, v.link_max_gts, v.link_max_width)
    return ConfigSpace(
        # lspci shows the extended capabilities (ACS) only with the whole space readable
        size=4096 if readable else 64,
        header_type=1 if bridge else None,
        pcie_port_type=pci.PORT_CODES.get(v.port_type) if v.port_type else None,
        link=link if link.known else None,
        secondary_bus=v.secondary_bus,
        subordinate_bus=v.subordinate_bus,
        extended_readable=readable,
        acs=v.acs,
    )


def _virtfns(verbose: tuple[LspciFunction, ...]) -> dict[str, str]:
    """VF BDF -> PF BDF from the PFs' SR-IOV capability (routing ID + offset + n * stride)."""
    out: dict[str, str] = {}
    for pf in verbose:
        s = pf.sriov
        if s is None or not s.num_vfs or s.vf_offset is None or s.vf_stride is None:
            continue
        dom, bus, devfn = pf.bdf.split(":")
        dev, fn = devfn.split(".")
        rid = int(bus, 16) << 8 | int(dev, 16) << 3 | int(fn)
        for n in range(s.num_vfs):
            r = rid + s.vf_offset + n * s.vf_stride
            if r <= 0xFFFF:
                out[f"{dom}:{r >> 8:02x}:{(r >> 3) & 0x1F:02x}.{r & 7}"] = pf.bdf
    return out


def snapshot_from_lspci(
    tree: tuple[LspciTreeNode, ...] | None, verbose: tuple[LspciFunction, ...] | None
) -> Snapshot:
    """The facts of parsed ``lspci -tv`` and/or ``lspci -vvv`` output (either may be None)."""
    tree_nodes: dict[str, tuple[LspciTreeNode | None, str | None]] = {}
    for node, node_path in _walk_tree(tree or ()):
        tree_nodes.setdefault(node.bdf, (node, node_path))
    verbose_by = {f.bdf: f for f in verbose or ()}
    bus_paths = _paths_from_bus_numbers(tuple(verbose_by.values())) if verbose and not tree else {}
    physfn = _virtfns(tuple(verbose_by.values()))
    bdfs = list(dict.fromkeys([*tree_nodes, *verbose_by]))

    fns: list[PciFunction] = []
    named_only = not_in_tree = placed_nowhere = 0
    for bdf in bdfs:
        t, path = tree_nodes.get(bdf, (None, None))
        v = verbose_by.get(bdf)
        if tree:
            not_in_tree += path is None
        elif bdf in bus_paths:
            path = bus_paths[bdf]
            placed_nowhere += path is None
        class16 = None
        if v is not None:
            class16 = v.class_code if v.class_code is not None else pci.LSPCI_CLASSES.get(v.class_name)
        if class16 is None and t is not None and t.is_bridge:
            class16 = 0x0604  # lspci -t draws a bus range only behind a bridge
        desc = (v.description if v is not None else None) or (t.description if t is not None else None)
        vendor = (v.vendor_id if v is not None else None) or (t.vendor_id if t is not None else None) \
            or pci.vendor_from_name(desc)
        device = (v.device_id if v is not None else None) or (t.device_id if t is not None else None)
        kind = None
        if class16 is None:
            kind = pci.kind_from_name(desc, vendor, device)
            named_only += kind is not None
        driver = v.driver if v is not None else None
        rdma = pci.rdma_capable_by_ids(class16, kind, vendor, device, driver)
        known_name = vendor is not None and device is not None and (vendor, device) in pci.DEVICES
        fns.append(PciFunction(
            bdf=bdf,
            sysfs_path=path,
            class_code=class16 << 8 if class16 is not None else None,
            vendor_id=vendor,
            device_id=device,
            subsystem_vendor_id=v.subsystem_vendor_id if v is not None else None,
            subsystem_device_id=v.subsystem_device_id if v is not None else None,
            numa_node=v.numa_node if v is not None else None,
            numa_source="lspci" if v is not None and v.numa_node is not None else None,
            link=LinkInfo(v.link_gts, v.link_width, v.link_max_gts, v.link_max_width) if v is not None else LinkInfo(),
            driver=driver,
            iommu_group=v.iommu_group if v is not None else None,
            physfn=physfn.get(bdf),
            sriov_totalvfs=v.sriov.total_vfs if v is not None and v.sriov is not None else None,
            sriov_numvfs=v.sriov.num_vfs if v is not None and v.sriov is not None else None,
            config=_config(v, class16) if v is not None else None,
            # topoagent.pci's name where it has one (as a live scan names it), lspci's otherwise
            name=None if known_name else desc,
            kind=kind,
            rdma=True if rdma else None,
        ))

    warnings = []
    if verbose is None:
        warnings.append("no lspci -vvv: links, NUMA nodes and ACS unknown")
    if named_only:
        warnings.append(f"kind of {named_only} function(s) inferred from device names (no class in lspci -t)")
    if tree is None and verbose is not None:
        warnings.append("no lspci -tv: parents from the bridges' bus numbers")
    if placed_nowhere:
        warnings.append(f"{placed_nowhere} function(s) placed nowhere: their bridge is not in the listing")
    if not_in_tree:
        warnings.append(f"{not_in_tree} function(s) of lspci -vvv are not in the tree")
    denied = sum(1 for f in verbose or () if f.capabilities_readable is False)
    if denied:
        warnings.append(f"capabilities <access denied> on {denied} function(s) (lspci run without root): "
                        "links, port types and ACS unknown there")
    nodes = sorted({f.numa_node for f in fns if f.numa_node is not None})
    status = SourceStatus("lspci", "partial" if warnings else "ok", "; ".join(warnings) or None)
    return Snapshot(
        hostname=None, root=None,
        # lspci names a device's node, never the node's CPUs
        numa_nodes=tuple(NumaNode(id=n, cpus=None) for n in nodes),
        pci=tuple(fns), sources=(status,),
    )
