"""The facts of parsed ``lspci -tv`` and/or ``lspci -vvv`` output.

``lspci -tv`` gives the tree (``sysfs_path``-like strings are built from the nesting, so the
ancestry code that reads sysfs paths works unchanged) and device names (ids with ``-tvnn``).
``lspci -vvv`` gives class, ids (``-nn``), driver, ``NUMA node``, link (``LnkCap`` = max,
``LnkSta`` = current), port type and ACS, as a :class:`~topoagent.core.snapshot.ConfigSpace`.
Without a tree, parents come from the bridges' ``Bus: secondary=…, subordinate=…`` lines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from topoagent.core import pci
from topoagent.core.bdf import bdf_key, vf_bdfs
from topoagent.core.parse.lspci_tree import LspciTree, LspciTreeNode
from topoagent.core.parse.lspci_verbose import LspciFunction, LspciListing
from topoagent.core.parse.paste import Skipped
from topoagent.core.snapshot import (
    ConfigSpace,
    LinkInfo,
    NumaNode,
    PciFunction,
    ProbeError,
    Snapshot,
    SourceStatus,
)

__all__ = ["MAX_VFS", "MAX_VF_IDS", "snapshot_from_lspci"]

#: The SR-IOV capability's TotalVFs and NumVFs are 16-bit registers (PCIe Base Spec, SR-IOV
#: Extended Capability): no function has more VFs than this, whatever a paste says.
MAX_VFS = 65535
#: Routing IDs expanded from all SR-IOV capabilities of one paste together: 16 domains' worth of
#: the 16-bit space, far more than any host has VFs, and a bound on the work a paste can ask for.
MAX_VF_IDS = 1 << 20


def _walk_tree(
    tree: Iterable[LspciTreeNode], orphans: Iterable[LspciTreeNode] = ()
) -> Iterator[tuple[LspciTreeNode, str | None]]:
    """Every node with its sysfs-like path (``pci0000:00/0000:00:01.0/0000:01:00.0``).

    Iterative (any depth).  Orphans -- subtrees whose parent the paste shows on an unnamed bus
    -- have no path of their own (their place is unknown); their descendants get ``?/…``
    paths, which keep the parent chain inside the subtree and name no root bus.
    """
    stack: list[tuple[LspciTreeNode, str | None, str]] = []
    for root in reversed(tuple(tree)):
        stack.append((root, f"pci{root.bdf.rsplit(':', 1)[0]}/{root.bdf}", ""))
    for orphan in reversed(tuple(orphans)):
        stack.append((orphan, None, f"?/{orphan.bdf}"))
    while stack:
        node, path, chain = stack.pop()
        yield node, path
        base = path if path is not None else chain
        for child in reversed(node.children):
            stack.append((child, f"{base}/{child.bdf}", ""))


def _split_bdf(bdf: str) -> tuple[str, int]:
    dom, bus, _ = bdf.split(":")
    return dom, int(bus, 16)


def _paths_from_bus_numbers(fns: tuple[LspciFunction, ...]) -> dict[str, str | None]:
    """Sysfs-like paths from the bridges' bus numbers (``lspci -vvv`` without a tree).

    A function's parent is the bridge whose secondary bus is the function's bus.  With no such
    bridge, it sits on a root bus -- unless a listed bridge's bus range covers its bus, which
    means its own bridge is missing from the listing (``lspci -s``): then its place is unknown
    (None), never a shortened chain that would make the path look better than it is -- as is
    every such function's when a listed bridge has no bus numbers (plain ``lspci``, ``-v``).
    Iterative; a loop in corrupt bus numbers leaves the functions on it unplaced.
    """
    bridges = [
        (f, f.secondary_bus, f.subordinate_bus)
        for f in fns
        if f.secondary_bus is not None and f.subordinate_bus is not None
    ]
    # A bridge listed without its bus numbers (plain ``lspci``, ``-v``: no ``Bus:`` line) may
    # be the parent of any function: then no function is known to sit on a root bus.
    blind = any(f.secondary_bus is None and _is_bridge(f) for f in fns)
    by_secondary: dict[tuple[str, int], str | None] = {}
    for b, secondary, _ in bridges:
        key = (_split_bdf(b.bdf)[0], secondary)
        by_secondary[key] = None if key in by_secondary else b.bdf  # two claims: unknown
    covered: dict[str, list[tuple[int, int]]] = {}
    for b, secondary, subordinate in bridges:
        covered.setdefault(_split_bdf(b.bdf)[0], []).append((secondary, subordinate))

    out: dict[str, str | None] = {}
    for f in fns:
        chain: list[str] = []
        on_chain: set[str] = set()
        cursor: str | None = f.bdf
        result: str | None = None
        while cursor is not None:
            if cursor in out:
                result = out[cursor]
                break
            if cursor in on_chain:  # a loop in corrupt bus numbers: every function on it unplaced
                result = None
                break
            chain.append(cursor)
            on_chain.add(cursor)
            dom, bus = _split_bdf(cursor)
            if (dom, bus) in by_secondary:
                cursor = by_secondary[(dom, bus)]
                if cursor is None:
                    result = None
                    break
                continue
            if blind or any(lo <= bus <= hi for lo, hi in covered.get(dom, ())):
                result = None
            else:
                result = f"pci{dom}:{bus:02x}"
            break
        # Unwind: each function's path is its parent's plus itself (None stays None).
        for member in reversed(chain):
            result = f"{result}/{member}" if result is not None else None
            out[member] = result
    return out


def _is_bridge(f: LspciFunction) -> bool:
    """A PCI-to-PCI bridge by its class (``-nn``'s code, or lspci's class name)."""
    class16 = f.class_code if f.class_code is not None else pci.LSPCI_CLASSES.get(f.class_name)
    return class16 is not None and pci.is_p2p_bridge_class(class16 << 8)


def _link(v: LspciFunction) -> LinkInfo:
    return LinkInfo(v.link_gts, v.link_width, v.link_max_gts, v.link_max_width)


def _config(v: LspciFunction, class16: int | None) -> ConfigSpace:
    readable = v.capabilities_readable is True
    bridge = v.secondary_bus is not None or (class16 is not None and pci.is_p2p_bridge_class(class16 << 8))
    link = _link(v)
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


def _virtfns(verbose: tuple[LspciFunction, ...]) -> tuple[dict[str, str], list[str]]:
    """VF BDF -> PF BDF from the PFs' SR-IOV capability (routing ID + offset + n * stride),
    and notes on VF counts past the SR-IOV maximum (clamped to :data:`MAX_VFS`).

    At most :data:`MAX_VF_IDS` routing IDs in all: a paste's PFs may each claim 65535 VFs.
    """
    out: dict[str, str] = {}
    notes: list[str] = []
    budget = MAX_VF_IDS
    cut: str | None = None  # the first PF whose VFs ran past the budget
    for pf in verbose:
        s = pf.sriov
        if s is None or not s.num_vfs or s.vf_offset is None or s.vf_stride is None:
            continue
        count = s.num_vfs
        if count > MAX_VFS:
            notes.append(f"{pf.bdf}: Number of VFs {count} is more than the SR-IOV maximum; read as {MAX_VFS}")
            count = MAX_VFS
        _, bus, dev, fn = bdf_key(pf.bdf)
        first = (bus << 8 | dev << 3 | fn) + s.vf_offset
        # Routing IDs past 0xFFFF are past the last bus; a stride of 0 names one VF many times.
        reachable = 0 if first > 0xFFFF else 1 if s.vf_stride == 0 else (0xFFFF - first) // s.vf_stride + 1
        count = min(count, reachable)
        if count > budget:
            cut, count = cut or pf.bdf, budget
        budget -= count
        for vf in vf_bdfs(pf.bdf, s.vf_offset, s.vf_stride, count):
            out[vf] = pf.bdf
    if cut is not None:
        notes.append(f"more than {MAX_VF_IDS} VFs in the paste's SR-IOV capabilities: those from {cut}'s on not placed")
    return out, notes


def _probe_errors(tool: str, skipped: Iterable[Skipped]) -> tuple[ProbeError, ...]:
    return tuple(ProbeError(path=f"{tool} {s.where}", error=s.why) for s in skipped)


def snapshot_from_lspci(
    tree: tuple[LspciTreeNode, ...] | LspciTree | None,
    verbose: tuple[LspciFunction, ...] | LspciListing | None,
    *,
    names: Callable[[int, int], str | None] | None = None,
) -> Snapshot:
    """The facts of parsed ``lspci -tv`` and/or ``lspci -vvv`` output (either may be None).

    Either may be what the lenient readers return; then the lines they skipped become probe
    errors (``lspci -tv lines 12-14``) and their notes join the source's detail.  ``names``
    gives a name for a device lspci printed only as ``Device XXXX`` (the analysing machine's
    pci.ids), after topoagent's own table.
    """
    warnings: list[str] = []
    errors: tuple[ProbeError, ...] = ()
    orphans: tuple[LspciTreeNode, ...] = ()
    partial: tuple[str, ...] = ()
    if isinstance(tree, LspciTree):
        if tree.filtered:
            partial = ("lspci -tv: a filtered tree (lspci -t -d): only the functions the filter kept",)
        errors += _probe_errors("lspci -tv", tree.skipped)
        warnings += [f"lspci -tv {n}" if n.startswith("line") else n for n in tree.notes]
        orphans = tree.orphans
        tree = tree.roots
    if isinstance(verbose, LspciListing):
        errors += _probe_errors("lspci -vvv", verbose.skipped)
        warnings += list(verbose.notes)
        verbose = verbose.functions
    tree_nodes: dict[str, tuple[LspciTreeNode | None, str | None]] = {}
    for node, node_path in _walk_tree(tree or (), orphans):
        tree_nodes.setdefault(node.bdf, (node, node_path))
    verbose_by = {f.bdf: f for f in verbose or ()}
    has_tree = bool(tree) or bool(orphans)
    bus_paths = _paths_from_bus_numbers(tuple(verbose_by.values())) if verbose and not has_tree else {}
    physfn, vf_notes = _virtfns(tuple(verbose_by.values()))
    bdfs = list(dict.fromkeys([*tree_nodes, *verbose_by]))

    fns: list[PciFunction] = []
    tally: dict[str, list[str]] = {what: [] for what in _TALLIES}
    for bdf in bdfs:
        t, path = tree_nodes.get(bdf, (None, None))
        if has_tree:
            if t is None:
                tally["not_in_tree"].append(bdf)
        elif bdf in bus_paths:
            path = bus_paths[bdf]
            if path is None:
                tally["placed_nowhere"].append(bdf)
        fns.append(_function(bdf, path, t, verbose_by.get(bdf), physfn.get(bdf), names, tally))

    warnings += _notes(tree is None, verbose, tally, orphans)
    warnings += vf_notes
    warnings += _access_notes(verbose, errors)
    nodes = sorted({f.numa_node for f in fns if f.numa_node is not None})
    status = SourceStatus("lspci", "partial" if warnings else "ok", "; ".join(warnings) or None)
    whole = _whole_listing(fns, warnings, errors, bool(orphans))
    return Snapshot(
        hostname=None,
        root=None,
        # A function only a hypervisor presents (q35's 82G33/ICH9, i440FX, Hyper-V's VGA) proves
        # a guest; nothing in lspci proves bare metal, so it is otherwise unknown.
        virtualized=True if any(pci.emulated_platform(f.vendor_id, f.device_id, f.name) for f in fns) else None,
        lists_every_nic=whole,
        # lspci names a device's node, never the node's CPUs
        numa_nodes=tuple(NumaNode(id=n, cpus=None) for n in nodes),
        pci=tuple(fns),
        sources=(status,),
        probe_errors=errors,
        partial_inputs=partial,
    )


#: What :func:`snapshot_from_lspci` counts for its notes, each a list of BDFs.
_TALLIES = ("named_only", "from_name", "from_pciids", "inferred", "not_in_tree", "placed_nowhere")


def _whole_listing(fns: list[PciFunction], warnings: list[str], errors: tuple[ProbeError, ...], orphans: bool) -> bool:
    """Whether the paste lists every function of the host, so that what it lacks is absent:
    it shows the first function lspci prints (``dddd:00:00.0``, the host bridge or root port
    of the first bus; ``lspci | grep``, ``-s`` and ``-d 10de:`` leave it out), nothing in it
    was elided (``...``, ``+-...``), no tree starts below or after its first root bus, and its
    functions are of more than one vendor: ``lspci | grep -i nvidia`` on Grace starts at
    ``0000:00:00.0`` too (Grace's root ports are NVIDIA's), but no whole host is one vendor's
    (its CPU's root ports and its GPUs are, never its NICs, drives and BMC besides)."""
    if orphans or any("elided" in e.error for e in errors) or any("excerpt" in w for w in warnings):
        return False
    if len({f.vendor_id for f in fns if f.vendor_id is not None}) < 2:
        return False
    return any(f.bdf is not None and f.bdf.endswith(":00:00.0") for f in fns)


def _function(
    bdf: str,
    path: str | None,
    t: LspciTreeNode | None,
    v: LspciFunction | None,
    physfn: str | None,
    names: Callable[[int, int], str | None] | None,
    tally: dict[str, list[str]],
) -> PciFunction:
    """One function from its ``lspci -tv`` node and/or ``lspci -vvv`` block; ``tally`` counts
    what was inferred rather than read."""
    class16 = None
    if v is not None:
        class16 = v.class_code if v.class_code is not None else pci.LSPCI_CLASSES.get(v.class_name)
    if class16 is None and t is not None and t.is_bridge:
        class16 = 0x0604  # lspci -t draws a bus range only behind a bridge
    desc, vendor, device, id_from_name = _ids(bdf, t, v, tally)
    known_name = pci.known_device(vendor, device)
    name = _name(bdf, desc, vendor, device, id_from_name, known_name, names, tally)
    kind = None
    if class16 is None:
        kind = _kind(bdf, name, desc, vendor, device, known_name, tally)
    driver = v.driver if v is not None else None
    rdma = pci.rdma_capable_by_ids(class16, kind, vendor, device, driver, name)
    num_vfs = v.sriov.num_vfs if v is not None and v.sriov is not None else None
    total_vfs = v.sriov.total_vfs if v is not None and v.sriov is not None else None
    return PciFunction(
        bdf=bdf,
        sysfs_path=path,
        class_code=class16 << 8 if class16 is not None else None,
        vendor_id=vendor,
        device_id=device,
        subsystem_vendor_id=v.subsystem_vendor_id if v is not None else None,
        subsystem_device_id=v.subsystem_device_id if v is not None else None,
        numa_node=v.numa_node if v is not None else None,
        numa_source="lspci" if v is not None and v.numa_node is not None else None,
        link=_link(v) if v is not None else LinkInfo(),
        driver=driver,
        iommu_group=v.iommu_group if v is not None else None,
        physfn=physfn,
        sriov_totalvfs=min(total_vfs, MAX_VFS) if total_vfs is not None else None,
        sriov_numvfs=min(num_vfs, MAX_VFS) if num_vfs is not None else None,
        config=_config(v, class16) if v is not None else None,
        # topoagent.core.pci's name where it has one (as a live scan names it), lspci's otherwise
        name=name,
        kind=kind,
        rdma=True if rdma else None,
    )


def _ids(
    bdf: str, t: LspciTreeNode | None, v: LspciFunction | None, tally: dict[str, list[str]]
) -> tuple[str | None, int | None, int | None, str | None]:
    """Description, vendor and device id of a function: lspci's ids where printed, else read
    from the description (``Device 2330``, a part number); the last value says what of the
    description the ids came from, None when they were printed."""
    desc = (v.description if v is not None else None) or (t.description if t is not None else None)
    vendor = (
        (v.vendor_id if v is not None else None)
        or (t.vendor_id if t is not None else None)
        or pci.vendor_from_name(desc)
    )
    device = (v.device_id if v is not None else None) or (t.device_id if t is not None else None)
    id_from_name = None
    if device is None:
        vendor, device, id_from_name = pci.ids_from_name(desc, vendor)
        if id_from_name is not None:
            tally["from_name"].append(bdf)
    return desc, vendor, device, id_from_name


def _name(
    bdf: str,
    desc: str | None,
    vendor: int | None,
    device: int | None,
    id_from_name: str | None,
    known_name: bool,
    names: Callable[[int, int], str | None] | None,
    tally: dict[str, list[str]],
) -> str | None:
    """The function's name: None where topoagent's table knows the device (it names it),
    this machine's pci.ids for a device lspci printed only by its ids, lspci's otherwise."""
    if known_name:
        return None
    if names is not None and vendor is not None and device is not None and (id_from_name or not desc):
        looked_up = names(vendor, device)
        if looked_up:
            tally["from_pciids"].append(bdf)
            return looked_up
    return desc


def _kind(
    bdf: str,
    name: str | None,
    desc: str | None,
    vendor: int | None,
    device: int | None,
    known_name: bool,
    tally: dict[str, list[str]],
) -> str | None:
    """The kind of a function without a class code: from its name, else (counted as
    inferred) from its vendor alone."""
    kind = pci.kind_from_name(name or desc, vendor, device)
    if kind is not None:
        tally["named_only"].append(bdf)
    if kind is None and not known_name and name == desc:
        # Only the vendor is known: NVIDIA's function 0 is a GPU, Mellanox makes NICs.
        guess = pci.kind_from_vendor(desc, vendor)
        if guess == "nic" or (guess == "gpu" and bdf.endswith(".0")):
            kind = guess
            tally["inferred"].append(bdf)
    return kind


def _notes(
    no_tree: bool,
    verbose: tuple[LspciFunction, ...] | None,
    tally: dict[str, list[str]],
    orphans: tuple[LspciTreeNode, ...],
) -> list[str]:
    """The source's notes on what the pastes lack and what was inferred."""
    warnings: list[str] = []
    named_only, from_name, from_pciids = tally["named_only"], tally["from_name"], tally["from_pciids"]
    inferred = tally["inferred"]
    if verbose is None:
        warnings.append("no lspci -vvv: links, NUMA nodes and ACS unknown")
    if named_only:
        warnings.append(f"kind of {len(named_only)} function(s) inferred from device names (no class in lspci -t)")
    if from_name:
        warnings.append(
            f"ids of {len(from_name)} function(s) read from their names (lspci printed 'Device XXXX' "
            f"or a part number; first: {from_name[0]})"
        )
    if from_pciids:
        warnings.append(
            f"names of {len(from_pciids)} function(s) from this machine's pci.ids (first: {from_pciids[0]})"
        )
    if inferred:
        warnings.append(
            f"kind of {len(inferred)} function(s) INFERRED from the vendor alone (NVIDIA function 0 -> GPU, "
            f"Mellanox -> NIC; the device id is not in topoagent's table): {', '.join(inferred[:4])}"
            + (f" … {len(inferred) - 4} more" if len(inferred) > 4 else "")
        )
    if no_tree and verbose is not None:
        warnings.append("no lspci -tv: parents from the bridges' bus numbers")
    if tally["placed_nowhere"]:
        warnings.append(
            f"{len(tally['placed_nowhere'])} function(s) placed nowhere: their bridge is not in the listing "
            "or shows no bus numbers (plain lspci, -v)"
        )
    orphan_bdfs = {n.bdf for o in orphans for n in o.walk()}
    if orphan_bdfs:
        warnings.append(
            f"{len(orphan_bdfs)} function(s) of a tree excerpt hang below a function whose bus the paste "
            "does not name: their place above it is unknown"
        )
    if tally["not_in_tree"]:
        warnings.append(f"{len(tally['not_in_tree'])} function(s) of lspci -vvv are not in the tree")
    return warnings


def _access_notes(verbose: tuple[LspciFunction, ...] | None, errors: tuple[ProbeError, ...]) -> list[str]:
    """Notes on what lspci could not read (no root) and on line ranges of the paste not read."""
    warnings: list[str] = []
    denied = sum(1 for f in verbose or () if f.capabilities_readable is False)
    if denied:
        warnings.append(
            f"capabilities <access denied> on {denied} function(s) (lspci run without root): "
            "links, port types and ACS unknown there"
        )
    if errors:
        warnings.append(f"{len(errors)} line range(s) of the paste not read (listed among the lost probes)")
    return warnings
