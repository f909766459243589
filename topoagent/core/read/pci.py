"""PCI functions: ``/sys/bus/pci/devices`` and the function directories its entries lead to.

Each entry is a link into ``/sys/devices/pci*`` (some captures keep plain directories there).
A function's config space (``config``) gives its ids, its link, its SR-IOV capability and its
extended capabilities where it can be read; the attribute files give the rest.  Each fact is
read once: vendor, device and subsystem ids from the config header where it says them, a VF's
from its PF's SR-IOV capability (as the kernel sets them), link files only where config space
lacks the PCIe Link registers, SR-IOV and AER files only where the extended capabilities list
them (or cannot be seen).  The class is always the file's: kernel quirks correct some devices'
class codes (drivers/pci/quirks.c) and the file shows the corrected one.

The files are named below, required and optional apart, as prometheus/procfs's
``sysfs/pci_device.go`` names them; each :class:`~topoagent.core.snapshot.PciFunction` field
says which file it comes from.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import TypeVar

from topoagent.core.bdf import is_bdf, vf_bdfs
from topoagent.core.cpuset import CpuSet
from topoagent.core.digits import decimal
from topoagent.core.hostfs import HostFS
from topoagent.core.parse import sysfs_values as sv
from topoagent.core.parse.configspace import (
    EXT_CAP_ID_AER,
    EXT_CAP_ID_SRIOV,
    ConfigSpaceError,
    parse_config_space,
)
from topoagent.core.parse.vpd import MAX_VPD_BYTES, parse_vpd
from topoagent.core.pci import PORT_CODES, VPD_READ
from topoagent.core.read.attr import parsed
from topoagent.core.snapshot import AerCounts, ConfigSpace, LinkInfo, PciFunction, SriovCap, VpdInfo
from topoagent.core.tree import Root

__all__ = [
    "AER_FILES",
    "FUNCTION_FILES",
    "LINKS",
    "LINK_FILES",
    "OPTIONAL",
    "PCI_DEVICES",
    "REQUIRED",
    "SRIOV_FILES",
    "SUBSYSTEM_FILES",
    "VPD_FILE",
    "PciReader",
    "read_links",
]

T = TypeVar("T")

PCI_DEVICES = "sys/bus/pci/devices"
SYS_DEVICES = "sys/devices"

# -- the files of a function's directory (drivers/pci/pci-sysfs.c makes them) -------------------

#: Required: the kernel creates them for every function (``pci_dev_attrs``), and without them a
#: function cannot be classified, so a missing one is a probe error and the source is partial.
#: ``vendor`` and ``device`` are read only where the config header does not say them.
REQUIRED = ("class", "vendor", "device")
#: Optional, read from every function: ``numa_node`` (absent on !CONFIG_NUMA kernels) and
#: ``local_cpulist`` (``local_cpus``, the same CPUs as a mask, is read where the list is absent).
OPTIONAL = ("numa_node", "local_cpulist")
#: Optional, read where the config header cannot be read (captures that copied only some
#: files: hwloc-gather-topology).
SUBSYSTEM_FILES = ("subsystem_vendor", "subsystem_device")
#: Optional (absent on conventional PCI and many virtual devices), read where config space
#: lacks the PCIe Link registers (:meth:`PciReader.needs_link_files`).
LINK_FILES = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")
#: Optional (SR-IOV physical functions only), read where the extended capabilities list SR-IOV
#: or cannot be seen.
SRIOV_FILES = ("sriov_totalvfs", "sriov_numvfs")
#: Optional AER counters (:attr:`AerCounts.FILES`): read where config space lists AER or
#: cannot show it, and never for a VF.
AER_FILES = tuple(name for name, _, _ in AerCounts.FILES)
#: Optional links: ``driver`` (an unbound function has none), ``iommu_group`` (no IOMMU),
#: ``physfn`` (SR-IOV VFs only; read where the PF's capability does not place the VF).
LINKS = ("driver", "iommu_group", "physfn")
#: Optional binary file: the function's Vital Product Data (drivers/pci/vpd.c makes it for a
#: function with a VPD capability; mode 0600).  Read only for the NVIDIA NIC functions whose
#: ``V3`` keyword pairs a NIC with its Data Direct DMA function (:data:`~topoagent.core.pci.VPD_READ`),
#: and only where config space lists the capability: reading VPD makes the device answer a
#: slow, serial protocol, and other devices' VPD is of no use here.
VPD_FILE = "vpd"
#: Every attribute file a scan may read in a function's directory, besides ``config`` and ``vpd``.
FUNCTION_FILES = (*REQUIRED, *SUBSYSTEM_FILES, *OPTIONAL, "local_cpus", *LINK_FILES, *SRIOV_FILES, *AER_FILES)

#: PCIe Device/Port Types that can be SR-IOV physical functions, and None (type unknown: the
#: capability list was not readable).  The kernel makes the SR-IOV files only for an Endpoint
#: or a Root Complex Integrated Endpoint (drivers/pci/iov.c, sriov_init), so a bridge or a
#: switch port seen without its extended capabilities (a 256-byte view) is not asked for them.
_MAY_BE_SRIOV = (None, PORT_CODES["endpoint"], PORT_CODES["rc_integrated_endpoint"])
#: A function's directory is listed before its optional files are read only when more than
#: this many are wanted: then one listing costs less than the failed opens of the absent ones
#: (measured: docs/benchmarks.md).
_LIST_ABOVE = 4
_REQUIRED_BY = "PCI function"


class PciReader:
    """Reads the PCI functions below a :class:`HostFS` root, then names the function behind a
    class device (:meth:`owner`)."""

    def __init__(self, fs: HostFS) -> None:
        self.fs = fs
        #: A listed function's real directory (root-relative) -> its BDF; see owner().
        self._function_dirs: dict[str, str] = {}
        #: An SR-IOV PF's BDF -> its VFs' (vendor, device) ids, from its config space.
        self._vf_ids: dict[str, tuple[int, int]] = {}
        #: A VF's BDF -> its PF's, from the PF's SR-IOV capability (see _expect_vfs).
        self._vf_parent: dict[str, str] = {}
        #: How many more VFs a PF's capability may place (no more than functions are listed).
        self._vf_budget = 0
        #: CPU list text -> its set: most functions of a socket name the same CPUs.
        self._cpu_lists: dict[str, CpuSet] = {}
        #: Functions whose config header reads all ones and that are no SR-IOV VF.
        self._fell_off: set[str] = set()

    # -- the listing ----------------------------------------------------------------------
    def functions(self) -> tuple[PciFunction, ...]:
        """Every function listed in ``bus/pci/devices``, each once, each entry resolved then
        read (probe errors come function by function)."""
        return tuple(self.function(bdf, link_rel, real) for bdf, link_rel, real in self.listed())

    def listed(self) -> Iterator[tuple[str, str, str | None]]:
        """(canonical BDF, its ``bus/pci/devices`` entry, where the entry leads) per function.

        A function's canonical BDF is the name of the directory its entry resolves to (lower
        case); an entry that resolves to a function already listed (an alias: upper-case hex,
        another domain's name for the same directory) is counted once and noted.
        """
        seen: dict[str, str] = {}  # canonical BDF -> the entry that named it first
        entries = self.fs.listdir(PCI_DEVICES)
        self._vf_budget = len(entries)  # no more VFs can be expected than there are functions
        for entry in entries:
            if not is_bdf(entry):
                continue
            link_rel = f"{PCI_DEVICES}/{entry}"
            real = self.fs.resolve(link_rel)
            name = real.rsplit("/", 1)[-1] if real is not None else entry
            bdf = (name if is_bdf(name) else entry).lower()
            if bdf in seen:
                self.fs.record(link_rel, f"alias of {seen[bdf]} ({bdf}): counted once")
                continue
            seen[bdf] = entry
            if real is not None:
                self._function_dirs[real] = bdf
            yield bdf, link_rel, real

    # -- one function ---------------------------------------------------------------------
    def function(self, bdf: str, link_rel: str, real: str | None) -> PciFunction:
        """One function: ``link_rel`` is its ``bus/pci/devices`` entry, ``real`` where it leads.

        Its files are read in one batch: the class and :data:`OPTIONAL` always, the ids where
        config space does not say them, and the optional files it may have (:meth:`wanted`).
        """
        d = real or link_rel  # some captures keep plain directories here
        config, physfn = self._config_and_physfn(d, bdf)
        vf = physfn is not None
        ids = self._ids(bdf, config, physfn)
        present, optional = self._present(d, self.wanted(config, vf))
        t = self.fs.texts(d, ("class", *OPTIONAL, *(REQUIRED[1:] if ids is None else ()), *optional))
        attr = partial(self._attr, d, t)
        local_cpus = self._local_cpus(d, t["local_cpulist"])
        link = self.link(d, config, virtual_function=vf, texts=t)
        class_code = attr("class", sv.parse_hex_id, True)
        vendor_id, device_id = _ids_or_files(attr, ids, REQUIRED[1:], required=True)
        subsystem = _ids_or_files(attr, config.subsystem if config is not None else None, SUBSYSTEM_FILES)
        return PciFunction(
            bdf=bdf,
            sysfs_path=_below_sys_devices(real),
            class_code=class_code,
            vendor_id=vendor_id,
            device_id=device_id,
            subsystem_vendor_id=subsystem[0],
            subsystem_device_id=subsystem[1],
            numa_node=attr("numa_node", sv.parse_numa_node),
            local_cpus=local_cpus,
            link=link,
            driver=self.fs.link_name(f"{d}/driver") if _listed(present, "driver") else None,
            iommu_group=self._link_int(f"{d}/iommu_group") if _listed(present, "iommu_group") else None,
            physfn=physfn,
            sriov_totalvfs=attr("sriov_totalvfs", sv.parse_int),  # None where not read
            sriov_numvfs=attr("sriov_numvfs", sv.parse_int),
            config=config,
            fell_off_bus=bdf in self._fell_off,
            aer=self._aer(d, t),
            vpd=self._vpd(d, config, (vendor_id, device_id)) if not vf else None,
        )

    @classmethod
    def wanted(cls, config: ConfigSpace | None, virtual_function: bool) -> tuple[str, ...]:
        """The optional files a function may have that config space does not already answer."""
        return (
            (SUBSYSTEM_FILES if config is None or config.subsystem is None else ())
            + (LINK_FILES if cls.needs_link_files(config, virtual_function) else ())
            + (SRIOV_FILES if _may_have_sriov(config) else ())
            + (AER_FILES if _may_have_aer(config, virtual_function) else ())
        )

    def _present(self, d: str, optional: tuple[str, ...]) -> tuple[frozenset[str] | None, tuple[str, ...]]:
        """The directory's entries (None: not listed) and the optional files to read.

        Config space that shows no capabilities (the 64-byte header an unprivileged reader
        gets, or an old capture) leaves up to eight optional files to try, most absent on most
        functions; then one listing of the directory costs less than the failed opens (see
        :data:`_LIST_ABOVE`), and says which links are there too.
        """
        if len(optional) <= _LIST_ABOVE:
            return None, optional
        present = self.fs.names(d)
        if present is None:
            return None, optional
        return present, tuple(n for n in optional if n in present)

    def _attr(
        self, d: str, texts: Mapping[str, str | None], name: str, parse: Callable[[str], T], required: bool = False
    ) -> T | None:
        """A file of the batch (absent from it: not read, None)."""
        return parsed(self.fs, f"{d}/{name}", texts.get(name), parse, required_by=_REQUIRED_BY if required else None)

    def _ids(self, bdf: str, config: ConfigSpace | None, physfn: str | None) -> tuple[int, int] | None:
        """The function's (vendor, device) ids where config space says them, and notes a PF's
        VFs; None: read the files."""
        ids = config.vendor_device if config is not None else None
        if ids is None and physfn is not None:
            # A VF's id registers read 0xffff; the kernel gives it its PF's vendor and the PF's
            # VF Device ID (drivers/pci/iov.c, pci_iov_add_virtfn), so the files say nothing
            # the PF's config space did not.  The PF sorts first: a VF's routing ID is the
            # PF's plus a non-zero First VF Offset (SR-IOV spec 1.1, 3.3.9).
            ids = self._vf_ids.get(physfn)
        if config is not None and config.sriov is not None and config.vendor_device is not None:
            self._vf_ids[bdf] = (config.vendor_device[0], config.sriov.vf_device)
            self._expect_vfs(bdf, config.sriov)
        return ids

    # -- the link -------------------------------------------------------------------------
    @staticmethod
    def needs_link_files(config: ConfigSpace | None, virtual_function: bool) -> bool:
        """Whether the sysfs link files must be read: only where config space lacks the PCIe
        Link registers (the kernel reads those very registers for the files,
        drivers/pci/pci-sysfs.c).  An SR-IOV VF's Link registers are reserved (SR-IOV spec
        3.5.6): its link is its PF's, and its files say nothing more."""
        cfg_link = config.link if config is not None else None
        return not virtual_function and not (cfg_link is not None and cfg_link.complete)

    def link(
        self,
        d: str,
        config: ConfigSpace | None,
        *,
        virtual_function: bool = False,
        texts: Mapping[str, str | None] | None = None,
    ) -> LinkInfo:
        """A function's link: config space's Link registers, holes filled from the sysfs link
        files where they are needed (``texts``: those files, already read)."""
        cfg_link = config.link if config is not None else None
        if not self.needs_link_files(config, virtual_function):
            return cfg_link if cfg_link is not None else LinkInfo()
        t = texts if texts is not None else self.fs.texts(d, LINK_FILES)
        attr = partial(self._attr, d, t)
        return LinkInfo(
            current_gts=attr("current_link_speed", sv.parse_link_speed),
            current_width=attr("current_link_width", sv.parse_link_width),
            max_gts=attr("max_link_speed", sv.parse_link_speed),
            max_width=attr("max_link_width", sv.parse_link_width),
        ).filled_from(cfg_link)

    # -- the other facts of a function ----------------------------------------------------
    def _aer(self, d: str, texts: Mapping[str, str | None]) -> AerCounts | None:
        """A function's AER counters from its three files, already read; None without any."""
        if all(texts.get(name) is None for name in AER_FILES):
            return None
        totals: dict[str, int | None] = {}
        errors: list[tuple[str, str, int]] = []
        for name, severity, total_name in AerCounts.FILES:
            counts = self._attr(d, texts, name, partial(sv.parse_aer_stats, total=total_name))
            totals[severity] = counts[0] if counts is not None else None
            errors.extend((severity, error, count) for error, count in (counts[1] if counts else ()))
        return AerCounts(
            fatal=totals["fatal"], nonfatal=totals["nonfatal"], correctable=totals["correctable"], errors=tuple(errors)
        )

    def _vpd(self, d: str, config: ConfigSpace | None, ids: tuple[int | None, int | None]) -> VpdInfo | None:
        """The function's VPD, for the functions :data:`VPD_FILE` says are read."""
        if ids not in VPD_READ or config is None or not config.has_vpd:
            return None
        data = self.fs.bytes(f"{d}/{VPD_FILE}", limit=MAX_VPD_BYTES)
        return parse_vpd(data) if data is not None else None

    def _local_cpus(self, d: str, cpulist: str | None) -> CpuSet | None:
        """``local_cpulist``'s CPUs (read already), else ``local_cpus``'s mask."""
        if cpulist is not None and cpulist in self._cpu_lists:
            return self._cpu_lists[cpulist]
        cpumask = None if cpulist is not None else self.fs.text(f"{d}/local_cpus")
        try:
            cpus = sv.parse_local_cpus(cpulist, cpumask)
        except ValueError as exc:
            self.fs.record(f"{d}/local_cpulist", f"unparsable: {exc}")
            return None
        if cpulist is not None and cpus is not None:
            self._cpu_lists[cpulist] = cpus  # a CpuSet is immutable: one serves them all
        return cpus

    def _link_int(self, rel: str) -> int | None:
        name = self.fs.link_name(rel)
        return decimal(name) if name is not None else None

    def _link_bdf(self, rel: str) -> str | None:
        name = self.fs.link_name(rel)
        return name.lower() if name is not None and is_bdf(name) else None

    # -- config space and SR-IOV ----------------------------------------------------------
    def _expect_vfs(self, pf: str, cap: SriovCap) -> None:
        """Note where the PF's enabled VFs sit, as the kernel places them (drivers/pci/iov.c,
        pci_iov_virtfn_bus/_devfn: routing ID = PF's + First VF Offset + i * VF Stride), so
        a VF's ``physfn`` link need not be read.  Bounded by the functions listed."""
        count = min(cap.num_vfs, self._vf_budget)
        self._vf_budget -= count
        for vf in vf_bdfs(pf, cap.first_offset, cap.stride, count):
            self._vf_parent[vf] = pf

    def _config_and_physfn(self, d: str, bdf: str | None = None) -> tuple[ConfigSpace | None, str | None]:
        """A function's config space and, for an SR-IOV VF, its physical function's BDF.

        A VF's Vendor ID register reads 0xffff (SR-IOV spec 3.4.1.1), so only a function whose
        header says so, or cannot be read, has a PF.  For one whose header says so, that is the
        PF whose SR-IOV capability places a VF at ``bdf``, else the one its ``physfn`` link
        names; one whose config cannot be read (perhaps not there at all) has only its link.
        """
        rel = f"{d}/config"
        data = self.fs.bytes(rel, limit=4096)
        if data is None:
            return None, self._link_bdf(f"{d}/physfn")
        physfn = None
        if data[:2] == b"\xff\xff":
            physfn = self._vf_parent.get(bdf or "") or self._link_bdf(f"{d}/physfn")
            if physfn is None and len(data) >= 64:
                # Not a VF: the device no longer answers config reads (a GPU after Xid 79, a
                # surprise-removed card); the kernel's pci_device_is_present() makes the same
                # test (drivers/pci/pci.c).  Its ids stay in sysfs's files: a finding, not a
                # probe error.
                self._fell_off.add(bdf or d)
                return None, None
        try:
            return parse_config_space(data, virtual_function=physfn is not None), physfn
        except ConfigSpaceError as exc:
            self.fs.record(rel, str(exc))
            return None, physfn

    # -- class devices --------------------------------------------------------------------
    def owner(self, class_dir: str) -> str | None:
        """The BDF of the PCI function behind a class device (``sys/class/net/eth0``).

        The kernel puts a class device's directory below its parent device's
        (``.../0000:01:00.0/net/eth0``; a virtio NIC's below the virtio bus device, itself below
        the function: ``.../0000:00:03.0/virtio0/net/eth0``), so the nearest listed function
        on the path the class link names is the owner.  That takes one ``readlink``, where
        resolving the ``device`` link component by component takes four or five: on an
        SR-IOV host with a netdev and an RDMA device per VF, most of the scan.  hwloc reads
        the class link the same way (``hwloc_linuxfs_find_osdev_parent``, topology-linux.c).
        Only a function already resolved from ``bus/pci/devices`` counts (:meth:`functions`
        first), so the answer is the one resolution gives; where the link names none (a
        virtual interface, a capture that copied directories), the ``device`` link is resolved
        inside the root.
        """
        path = self.fs.link_target(class_dir)
        while path:
            bdf = self._function_dirs.get(path)
            if bdf is not None:
                return bdf
            path = path.rpartition("/")[0]
        return self._device_owner(f"{class_dir}/device")

    def _device_owner(self, rel: str) -> str | None:
        """The BDF of the PCI function a class device's ``device`` link leads to, resolved
        inside the root: the nearest BDF on the path (a virtio NIC's link names the virtio
        bus device, ``.../0000:00:03.0/virtio0``)."""
        real = self.fs.resolve(rel)
        if real is None:
            parent = rel.rsplit("/", 1)[0]
            if self.fs.exists(rel) or (self.fs.exists(parent) and self.fs.resolve(parent) is None):
                self.fs.record(rel, "dangling symlink")  # a link is there but leads nowhere
            return None
        if not real.startswith(SYS_DEVICES + "/"):
            return None
        for name in reversed(real.split("/")):
            if is_bdf(name):
                return name.lower()
        return None


def _below_sys_devices(real: str | None) -> str | None:
    """A function's directory below ``/sys/devices``; None where it is not there."""
    if real is not None and real.startswith(SYS_DEVICES + "/"):
        return real[len(SYS_DEVICES) + 1 :]
    return None


def _listed(present: frozenset[str] | None, name: str) -> bool:
    """Whether ``name`` may be in the directory (None: the directory was not listed)."""
    return present is None or name in present


def _ids_or_files(
    attr: Callable[..., int | None], given: tuple[int, int] | None, names: tuple[str, ...], *, required: bool = False
) -> tuple[int | None, int | None]:
    """A pair of ids as config space gives them, else from the pair of files ``names``."""
    if given is not None:
        return given
    return attr(names[0], sv.parse_hex_id, required), attr(names[1], sv.parse_hex_id, required)


def _may_have_sriov(config: ConfigSpace | None) -> bool:
    """Whether the function may have SR-IOV files: its extended capabilities list SR-IOV, or
    cannot be seen on a function type that can be a PF."""
    return (
        config is None
        or EXT_CAP_ID_SRIOV in config.extended_caps
        or (not config.extended_readable and config.pcie_port_type in _MAY_BE_SRIOV)
    )


def _may_have_aer(config: ConfigSpace | None, virtual_function: bool) -> bool:
    """Whether AER counters are read: where config space lists AER or cannot show it; never a
    VF's (a VF is never a rail, and a host with 16 NICs x 250 VFs would read 12,000 more files)."""
    return not virtual_function and (
        config is None or not config.extended_readable or EXT_CAP_ID_AER in config.extended_caps
    )


def read_links(root: Root) -> dict[str, LinkInfo]:
    """Every listed function's PCIe link now, by BDF, and nothing else: the daemon's cheap
    between-scan sample of links (config space, else the link files)."""
    reader = PciReader(HostFS(root))
    out: dict[str, LinkInfo] = {}
    for bdf, link_rel, real in reader.listed():
        d = real or link_rel
        config, physfn = reader._config_and_physfn(d, bdf)
        out[bdf] = reader.link(d, config, virtual_function=physfn is not None)
    return out
