"""Read a host's PCI, NUMA, CPU, network and RDMA facts from sysfs and procfs into a snapshot.

Every read goes through :class:`~topoagent.core.hostfs.HostFS`; every value goes through a pure
parser.  A file that fails to read or parse becomes a probe error and an unknown value; the
scan carries on.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import TypeVar

import msgspec

from topoagent.core.bdf import is_bdf, vf_bdfs
from topoagent.core.cpuset import CpuSet
from topoagent.core.digits import is_decimal
from topoagent.core.hostfs import HostFS
from topoagent.core.parse import sysfs_values as sv
from topoagent.core.parse.configspace import (
    EXT_CAP_ID_AER,
    EXT_CAP_ID_SRIOV,
    ConfigSpaceError,
    parse_config_space,
)
from topoagent.core.pci import PORT_CODES
from topoagent.core.read import Collection
from topoagent.core.snapshot import (
    PEER_MEMORY_MODULES,
    AerCounts,
    ConfigSpace,
    Cpu,
    GpuMemoryNode,
    IommuGroup,
    LinkInfo,
    NetDevice,
    NumaNode,
    PciFunction,
    RdmaDevice,
    RdmaPort,
    Snapshot,
    SourceStatus,
    SriovCap,
    no_extended_reason,
)

T = TypeVar("T")

PCI_DEVICES = "sys/bus/pci/devices"
#: The attribute files read for every PCI function, in one go.
_ATTRS = ("class", "numa_node", "local_cpulist")
_LINK_FILES = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")
_SRIOV_FILES = ("sriov_totalvfs", "sriov_numvfs")
#: PCIe Device/Port Types that can be SR-IOV physical functions, and None (type unknown: the
#: capability list was not readable).  The kernel makes the SR-IOV files only for an Endpoint
#: or a Root Complex Integrated Endpoint (drivers/pci/iov.c, sriov_init), so a bridge or a
#: switch port seen without its extended capabilities (a 256-byte view) is not asked for them.
_MAY_BE_SRIOV = (None, PORT_CODES["endpoint"], PORT_CODES["rc_integrated_endpoint"])

#: A function's AER counter files: (file, severity, its last line's name).  The kernel makes
#: them for every function with an AER capability (drivers/pci/pcie/aer.c, aer_stats_attrs).
_AER = (
    ("aer_dev_fatal", "fatal", "TOTAL_ERR_FATAL"),
    ("aer_dev_nonfatal", "nonfatal", "TOTAL_ERR_NONFATAL"),
    ("aer_dev_correctable", "correctable", "TOTAL_ERR_COR"),
)
AER_FILES = tuple(name for name, _, _ in _AER)
#: A function's directory is listed before reading its optional files only when more than this
#: many are wanted: a listing costs about as much as four failed opens (measured on a DGX
#: fixture and a real capture, docs/benchmarks.md).
_LIST_ABOVE = 4
SYS_DEVICES = "sys/devices"


def numbered(name: str, prefix: str) -> int | None:
    """The number of a numbered sysfs directory (``node3`` -> 3 with prefix ``node``), as the
    kernel writes it (ASCII digits, no leading zero); None for any other name."""
    digits = name[len(prefix) :] if name.startswith(prefix) else ""
    if is_decimal(digits) and len(digits) <= 7 and (digits == "0" or digits[0] != "0"):
        return int(digits)
    return None


#: Kernel modules whose presence matters for GPUDirect RDMA: the peer-memory modules NCCL
#: checks for (NVIDIA/nccl src/transport/net_ib.cc, ncclIbGdrSupport) and their drivers.
MODULES_OF_INTEREST = (
    "nvidia",
    *PEER_MEMORY_MODULES,
    "nvidia_uvm",
    "ib_core",
    "mlx5_core",
    "efa",
    "vfio_pci",
)

#: DMI vendors/products of hypervisors (``/sys/class/dmi/id``).
_VM_DMI = (
    "qemu",
    "kvm",
    "vmware",
    "virtualbox",
    "xen",
    "microsoft corporation",
    "amazon ec2",
    "google compute engine",
    "openstack",
    "bochs",
    "parallels",
    "innotek",
)


_UNREAD = object()


class SysfsReader:
    """Turns the files below a :class:`HostFS` root into a :class:`Snapshot`."""

    def __init__(self, fs: HostFS) -> None:
        self.fs = fs
        #: A listed function's real directory (root-relative) -> its BDF; see _pci_owner().
        self._function_dirs: dict[str, str] = {}
        #: An SR-IOV PF's BDF -> its VFs' (vendor, device) ids, from its config space.
        self._vf_ids: dict[str, tuple[int, int]] = {}
        #: A VF's BDF -> its PF's, from the PF's SR-IOV capability (see _expect_vfs).
        self._vf_parent: dict[str, str] = {}
        #: How many more VFs a PF's capability may place (no more than functions are listed).
        self._vf_budget = 0
        #: CPU list text -> its set: most functions of a socket name the same CPUs.
        self._cpu_lists: dict[str, CpuSet] = {}
        #: ``cpu/online`` once read (None: the kernel does not say), and node -> CPUs from the
        #: CPUs' node links, read only where a node's own files fail.
        self._online: CpuSet | None | object = _UNREAD
        self._node_links: dict[int, CpuSet] | None = None
        #: Functions whose config header reads all ones and that are no SR-IOV VF.
        self._fell_off: set[str] = set()

    def _value(self, rel: str, parse: Callable[[str], T], *, quiet: bool = False, required: bool = False) -> T | None:
        """Read and parse one attribute file; None when absent, unreadable or unparsable.

        An absent *optional* file is normal (None, nothing recorded); an absent *required* one
        is a probe error, so the source reports itself partial instead of guessing.
        """
        return self._parsed(rel, self.fs.text(rel, quiet=quiet), parse, required=required)

    def _lost(self, rel: str) -> bool:
        """Whether a failed read of ``rel`` is recorded already."""
        path = self.fs.host_path(rel)
        return any(e.path == path for e in self.fs.errors)

    def _parsed(self, rel: str, text: str | None, parse: Callable[[str], T], *, required: bool = False) -> T | None:
        """:meth:`_value` for text already read."""
        if text is None:
            if required and not self._lost(rel):
                # A read that failed is lost whatever a later look finds: a file that is back
                # by now went away while it was read (hotplug, a driver rebinding).
                self.fs.record(
                    rel,
                    "missing (every PCI function has this file)"
                    if not self.fs.exists(rel)
                    else "missing when read, present after: changed during the scan",
                )
            return None
        try:
            return parse(text)
        except ValueError as exc:
            self.fs.record(rel, f"unparsable: {exc}")
            return None

    # -- PCI ------------------------------------------------------------------------------
    def pci_functions(self) -> tuple[PciFunction, ...]:
        """Every function listed in ``bus/pci/devices``, each once.

        A function's canonical BDF is the name of the directory its entry resolves to (lower
        case); an entry that resolves to a function already listed (an alias: upper-case hex,
        another domain's name for the same directory) is counted once and noted.
        """
        # Every entry is resolved first, then every function read: ~5 % faster on a host with
        # a thousand functions than alternating.  Each entry's resolution errors are set aside
        # and put back before its function's, so probe errors still come in reading order.
        errors = self.fs.errors
        mark = len(errors)
        staged = []
        for entry in self.listed():
            staged.append((entry, errors[mark:]))
            del errors[mark:]
        trailing = errors[mark:]
        del errors[mark:]
        functions = []
        for (bdf, link_rel, real), resolution_errors in staged:
            errors.extend(resolution_errors)
            functions.append(self.pci_function(bdf, link_rel, real))
        errors.extend(trailing)
        return tuple(functions)

    def listed(self) -> Iterator[tuple[str, str, str | None]]:
        """(canonical BDF, its ``bus/pci/devices`` entry, where the entry leads) per function,
        aliases noted and skipped."""
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
        t = texts if texts is not None else self.fs.texts(d, _LINK_FILES)
        p = self._parsed
        return LinkInfo(
            current_gts=p(f"{d}/current_link_speed", t.get("current_link_speed"), sv.parse_link_speed),
            current_width=p(f"{d}/current_link_width", t.get("current_link_width"), sv.parse_link_width),
            max_gts=p(f"{d}/max_link_speed", t.get("max_link_speed"), sv.parse_link_speed),
            max_width=p(f"{d}/max_link_width", t.get("max_link_width"), sv.parse_link_width),
        ).filled_from(cfg_link)

    def pci_function(self, bdf: str, link_rel: str, real: str | None) -> PciFunction:
        """One function: ``link_rel`` is its ``bus/pci/devices`` entry, ``real`` where it leads."""
        sysfs_path = None
        if real is not None and real.startswith(SYS_DEVICES + "/"):
            sysfs_path = real[len(SYS_DEVICES) + 1 :]
        d = real or link_rel  # some captures keep plain directories here
        # Required versus optional, as prometheus/procfs splits them (sysfs/pci_device.go): the
        # kernel creates class, vendor and device for every function (drivers/pci/pci-sysfs.c,
        # pci_dev_attrs), and without them a function cannot be classified, so their absence
        # is a probe error.  Everything else may be absent for ordinary reasons: link files on
        # conventional PCI and many virtual devices, numa_node on !CONFIG_NUMA kernels, config
        # or subsystem ids in captures that copied only some files (hwloc-gather-topology),
        # driver when unbound, iommu_group without an IOMMU, SR-IOV files on non-SR-IOV parts.
        #
        # Each fact is read once, in one batch: the files every function has, plus the ids,
        # link and SR-IOV files where config space does not already say.  The class is always
        # read from sysfs: kernel quirks correct some devices' class codes (drivers/pci/quirks.c)
        # and the file shows the corrected one; vendor, device and subsystem ids are the
        # header's; SR-IOV files only where the extended capabilities list SR-IOV (or cannot be
        # seen); the link from config space where it is complete (see link()).
        config, physfn = self._config_and_physfn(d, bdf)
        vf = physfn is not None
        sriov = (
            config is None
            or EXT_CAP_ID_SRIOV in config.extended_caps
            or (not config.extended_readable and config.pcie_port_type in _MAY_BE_SRIOV)
        )
        # AER counters where config space lists AER or cannot show it; not a VF's: a VF is never
        # a rail, and a host with 16 NICs x 250 VFs would read 12,000 more files for them.
        aer = not vf and (config is None or not config.extended_readable or EXT_CAP_ID_AER in config.extended_caps)
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
        subsystem = config.subsystem if config is not None else None
        optional = (
            (("subsystem_vendor", "subsystem_device") if subsystem is None else ())
            + (_LINK_FILES if self.needs_link_files(config, vf) else ())
            + (_SRIOV_FILES if sriov else ())
            + (AER_FILES if aer else ())
        )
        present = None
        if len(optional) > _LIST_ABOVE:
            # Config space that shows no capabilities (the 64-byte header an unprivileged
            # reader gets, or an old capture) leaves up to eight optional files to try, most
            # absent on most functions; then one listing of the directory costs less than the
            # failed opens (see _LIST_ABOVE), and says which links are there too.
            present = self.fs.names(d)
            if present is not None:
                optional = tuple(n for n in optional if n in present)
        t = self.fs.texts(d, _ATTRS + (("vendor", "device") if ids is None else ()) + optional)

        def attr(name: str, parse: Callable[[str], T], required: bool = False) -> T | None:
            return self._parsed(f"{d}/{name}", t.get(name), parse, required=required)  # not read: absent

        local = self._local_cpus(d, t["local_cpulist"])
        link = self.link(d, config, virtual_function=vf, texts=t)
        return PciFunction(
            bdf=bdf,
            sysfs_path=sysfs_path,
            class_code=attr("class", sv.parse_hex_id, required=True),
            vendor_id=ids[0] if ids is not None else attr("vendor", sv.parse_hex_id, required=True),
            device_id=ids[1] if ids is not None else attr("device", sv.parse_hex_id, required=True),
            subsystem_vendor_id=subsystem[0] if subsystem is not None else attr("subsystem_vendor", sv.parse_hex_id),
            subsystem_device_id=subsystem[1] if subsystem is not None else attr("subsystem_device", sv.parse_hex_id),
            numa_node=attr("numa_node", sv.parse_numa_node),
            local_cpus=local,
            link=link,
            driver=self.fs.link_name(f"{d}/driver") if present is None or "driver" in present else None,
            iommu_group=self._link_int(f"{d}/iommu_group") if present is None or "iommu_group" in present else None,
            physfn=physfn,
            sriov_totalvfs=attr("sriov_totalvfs", sv.parse_int) if sriov else None,
            sriov_numvfs=attr("sriov_numvfs", sv.parse_int) if sriov else None,
            config=config,
            fell_off_bus=bdf in self._fell_off,
            aer=self._aer(d, t) if aer else None,
        )

    def _aer(self, d: str, texts: Mapping[str, str | None]) -> AerCounts | None:
        """A function's AER counters from its three files, already read; None without any."""
        if all(texts.get(name) is None for name in AER_FILES):
            return None
        totals: dict[str, int | None] = {}
        errors: list[tuple[str, str, int]] = []
        for name, severity, total_name in _AER:
            parsed = self._parsed(f"{d}/{name}", texts.get(name), partial(sv.parse_aer_stats, total=total_name))
            totals[severity] = parsed[0] if parsed is not None else None
            errors.extend((severity, error, count) for error, count in (parsed[1] if parsed else ()))
        return AerCounts(
            fatal=totals["fatal"], nonfatal=totals["nonfatal"], correctable=totals["correctable"], errors=tuple(errors)
        )

    def _local_cpus(self, d: str, cpulist: str | None) -> CpuSet | None:
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
        return int(name) if name is not None and is_decimal(name) else None

    def _link_bdf(self, rel: str) -> str | None:
        name = self.fs.link_name(rel)
        return name.lower() if name is not None and is_bdf(name) else None

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
        physfn = None
        if data is None:
            physfn = self._link_bdf(f"{d}/physfn")
        elif data[:2] == b"\xff\xff":
            physfn = self._vf_parent.get(bdf or "") or self._link_bdf(f"{d}/physfn")
            if physfn is None and len(data) >= 64:
                # Not a VF: the device no longer answers config reads (a GPU after Xid 79, a
                # surprise-removed card); the kernel's pci_device_is_present() makes the same
                # test (drivers/pci/pci.c).  Its ids stay in sysfs's files: a finding, not a
                # probe error.
                self._fell_off.add(bdf or d)
                return None, None
        if data is None:
            return None, physfn
        try:
            return parse_config_space(data, virtual_function=physfn is not None), physfn
        except ConfigSpaceError as exc:
            self.fs.record(rel, str(exc))
            return None, physfn

    def _pci_owner(self, class_dir: str) -> str | None:
        """The BDF of the PCI function behind a class device (``sys/class/net/eth0``).

        The kernel puts a class device's directory below its parent device's
        (``.../0000:01:00.0/net/eth0``; a virtio NIC's below the virtio bus device, itself below
        the function: ``.../0000:00:03.0/virtio0/net/eth0``), so the nearest listed function
        on the path the class link names is the owner.  That takes one ``readlink``, where
        resolving the ``device`` link component by component takes four or five: on an
        SR-IOV host with a netdev and an RDMA device per VF, most of the scan.  hwloc reads
        the class link the same way (``hwloc_linuxfs_find_osdev_parent``, topology-linux.c).
        Only a function already resolved from ``bus/pci/devices`` counts, so the answer is the
        one resolution gives; where the link names none (a virtual interface, a capture that
        copied directories), the ``device`` link is resolved inside the root.
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

    # -- network and RDMA -------------------------------------------------------------------
    def netdevs(self, vfs: frozenset[str] = frozenset()) -> tuple[NetDevice, ...]:
        """Every network interface with a PCI function behind it; state and speed only for a
        physical function's (a VF is never a rail: its speed decides nothing)."""
        out = []
        for name in self.fs.listdir("sys/class/net"):
            base = f"sys/class/net/{name}"
            bdf = self._pci_owner(base)
            if bdf is None:
                continue  # virtual interfaces (lo, bridges, bonds) have no PCI function
            if bdf in vfs:
                out.append(NetDevice(name=name, bdf=bdf))
                continue
            out.append(
                NetDevice(
                    name=name,
                    bdf=bdf,
                    # Reading `speed` of a down link fails with EINVAL: that is "unknown".
                    speed_mbps=self._value(f"{base}/speed", sv.parse_net_speed, quiet=True),
                )
            )
        return tuple(out)

    def rdma_devices(self, vfs: frozenset[str] = frozenset()) -> tuple[RdmaDevice, ...]:
        """Every RDMA device and the PCI function behind it; ports (state, rate) only for a
        physical function's device: a VF is never a rail, so its port rate decides nothing
        (and a host with 16 NICs x 250 VFs would read 12,000 port files for it)."""
        out = []
        for name in self.fs.listdir("sys/class/infiniband"):
            base = f"sys/class/infiniband/{name}"
            owner = self._pci_owner(base)
            ports = []
            for port in self.fs.listdir(f"{base}/ports") if owner not in vfs else ():
                if not is_decimal(port):
                    continue
                p = f"{base}/ports/{port}"
                ports.append(
                    RdmaPort(
                        port=int(port),
                        state=self._value(f"{p}/state", sv.parse_rdma_state),
                        rate_gbps=self._value(f"{p}/rate", sv.parse_rdma_rate),
                        link_layer=self.fs.text(f"{p}/link_layer"),
                    )
                )
            ports.sort(key=lambda r: r.port)
            out.append(RdmaDevice(name=name, bdf=owner, ports=tuple(ports)))
        return tuple(out)

    # -- NUMA and CPUs ----------------------------------------------------------------------
    # Read as the kernel writes them (drivers/base/node.c, drivers/base/cpu.c; hwloc's
    # topology-linux.c reads the same files the same way): a node's CPUs from ``cpulist``, else
    # ``cpumap`` (kernels before 2.6.26 wrote only the mask), else the ``cpuN/nodeM`` links;
    # offline CPUs left out (``cpu/online``); packages from ``physical_package_id``, else from
    # the package sibling lists.

    def online_cpus(self) -> CpuSet | None:
        """``cpu/online``: the CPUs that run; None where the kernel does not say."""
        if self._online is _UNREAD:
            self._online = self._value("sys/devices/system/cpu/online", sv.parse_cpulist_file)
        return self._online  # type: ignore[return-value]

    def numa_nodes(self) -> tuple[NumaNode, ...]:
        """Every NUMA node; a node whose CPUs no file gives has ``cpus`` None (unknown, not
        CPU-less), and an unlistable node directory still yields the nodes the CPUs name."""
        base = "sys/devices/system/node"
        names = self.fs.listdir(base)
        if not names and self.fs.isdir(base):
            # Listed nothing but exists: unreadable (the listing recorded why).  The nodes are
            # still named by each CPU's node link; never fold them into one implied node.
            return tuple(
                NumaNode(id=i, cpus=cpus, memory_bytes=None) for i, cpus in sorted(self._cpus_by_node_link().items())
            )
        ids = sorted({i for n in names if (i := numbered(n, "node")) is not None})
        online = self.online_cpus()
        out = []
        for i in ids:
            d = f"{base}/node{i}"
            cpus, source = self._node_cpus(d, i)
            out.append(
                NumaNode(
                    id=i,
                    cpus=cpus & online if cpus is not None and online is not None else cpus,
                    memory_bytes=self._value(f"{d}/meminfo", sv.parse_node_meminfo_total),
                    distances=self._value(f"{d}/distance", sv.parse_distances) or (),
                    cpus_file=None if source == "cpulist" else source,
                )
            )
        return tuple(out)

    def _node_cpus(self, d: str, node: int) -> tuple[CpuSet | None, str | None]:
        """A node's CPUs and the file they came from (None, None where no file says)."""
        for name, parse in (("cpulist", sv.parse_cpulist_file), ("cpumap", sv.parse_cpumap_file)):
            cpus = self._value(f"{d}/{name}", parse)
            if cpus is not None:
                return cpus, name
        # No link names a CPU-less node either: where the node's files fail, none is unknown.
        cpus = self._cpus_by_node_link().get(node)
        return (cpus, "cpu/cpu*/node*") if cpus is not None else (None, None)

    def _cpus_by_node_link(self) -> dict[int, CpuSet]:
        """Node -> CPUs from the ``cpuN/nodeM`` links drivers/base/node.c makes for each online
        CPU (``register_cpu_under_node``); read only when a node's own files fail."""
        if self._node_links is None:
            base = "sys/devices/system/cpu"
            members: dict[int, set[int]] = {}
            for n in self.fs.listdir(base):
                cpu = numbered(n, "cpu")
                if cpu is None:
                    continue
                for entry in self.fs.names(f"{base}/{n}") or ():
                    node = numbered(entry, "node")
                    if node is not None:
                        members.setdefault(node, set()).add(cpu)
            self._node_links = {node: CpuSet(cpus) for node, cpus in members.items()}
        return self._node_links

    def cpus(self) -> tuple[Cpu, ...]:
        """The online CPUs (every ``cpuN`` where ``cpu/online`` is missing), with package and
        core; a package the kernel numbers -1 (s390, some POWER) is numbered by its CPU set."""
        base = "sys/devices/system/cpu"
        online = self.online_cpus()
        ids = sorted(
            {
                i
                for n in self.fs.listdir(base)
                if (i := numbered(n, "cpu")) is not None and (online is None or i in online)
            }
        )
        # One read per core and two per package, not per CPU: a CPU's thread_siblings_list names
        # its core's threads and package_cpus_list (core_siblings_list before Linux 5.3,
        # Documentation/ABI/stable/sysfs-devices-system-cpu) its package's CPUs.
        core_of: dict[int, CpuSet] = {}
        package_of: dict[int, int | None] = {}
        unnumbered: set[CpuSet] = set()  # packages whose id the kernel writes as -1
        for i in ids:
            t = f"{base}/cpu{i}/topology"
            if i not in core_of:
                siblings = self._value(f"{t}/thread_siblings_list", sv.parse_cpulist_file)
                if siblings is not None and i in siblings:
                    core_of.update(dict.fromkeys(siblings, siblings))
            if i not in package_of:
                text = self.fs.text(f"{t}/physical_package_id")
                package = self._parsed(f"{t}/physical_package_id", text, sv.parse_numa_node)  # -1: none
                members = self._package_cpus(t)
                cpus = members if members is not None and i in members else CpuSet((i,))
                package_of.update(dict.fromkeys(cpus, package))
                # Only the kernel's own -1 is numbered here: an unreadable file stays unknown
                # rather than making a socket of its own.
                if text == "-1" and members is not None and i in members:
                    unnumbered.add(members)
        if unnumbered:
            # hwloc makes these packages too (with an unknown index): number them after the
            # known ids, in the order of their first CPU, so every CPU keeps a socket.
            first = max((p for p in package_of.values() if p is not None), default=-1) + 1
            for k, members in enumerate(sorted(unnumbered, key=lambda m: m.first or 0)):
                package_of.update(dict.fromkeys(members, first + k))
        return tuple(Cpu(id=i, package=package_of.get(i), siblings=core_of.get(i)) for i in ids)

    def _package_cpus(self, topology_dir: str) -> CpuSet | None:
        for name in ("package_cpus_list", "core_siblings_list"):
            cpus = self._value(f"{topology_dir}/{name}", sv.parse_cpulist_file)
            if cpus is not None:
                return cpus
        return None

    # -- kernel ---------------------------------------------------------------------------
    def iommu_groups(self) -> tuple[IommuGroup, ...]:
        """The IOMMU groups and their types (``sys/kernel/iommu_groups``)."""
        types = self.fs.texts_below("sys/kernel/iommu_groups", "type", lambda n: numbered(n, "") is not None)
        return tuple(IommuGroup(id=int(n), type=t) for n, t in sorted(types.items(), key=lambda kv: int(kv[0])))

    def modules(self) -> tuple[str, ...]:
        """The modules of interest that are loaded (``sys/module``)."""
        return tuple(m for m in MODULES_OF_INTEREST if self.fs.isdir(f"sys/module/{m}"))

    def memory_peers(self) -> tuple[str, ...]:
        """The registered peer-memory clients (``sys/kernel/mm/memory_peers``)."""
        base = "sys/kernel/mm/memory_peers"
        return tuple(n for n in self.fs.listdir(base) if self.fs.exists(f"{base}/{n}/version"))

    def gpu_memory_nodes(self) -> tuple[GpuMemoryNode, ...]:
        """GPU memory onlined as NUMA nodes (POWER9 + V100, Grace Hopper), by owning GPU."""
        base = "proc/driver/nvidia/gpus"
        out = []
        for entry in self.fs.listdir(base):
            if not is_bdf(entry):
                continue
            node = self._value(f"{base}/{entry}/numa_status", sv.parse_nvidia_numa_status)
            if node is not None:
                out.append(GpuMemoryNode(bdf=entry.lower(), node=node))
        return tuple(out)

    @functools.cached_property
    def cpuinfo(self) -> str | None:
        """``/proc/cpuinfo``'s head: the first CPU's block holds the flags and model lines (a
        1,000-CPU cpuinfo runs to megabytes)."""
        return self.fs.text("proc/cpuinfo", truncate=True)

    @functools.cached_property
    def dmi(self) -> tuple[str | None, str | None]:
        """The DMI system vendor and product name (``/sys/class/dmi/id``), read once."""
        return self.fs.text("sys/class/dmi/id/sys_vendor"), self.fs.text("sys/class/dmi/id/product_name")

    def virtualized(self) -> bool | None:
        """Whether the host is a VM (hypervisor CPU flag, ``sys/hypervisor``, DMI vendor); None
        when unknown."""
        cpuinfo = self.cpuinfo
        if cpuinfo is not None and sv.parse_cpuinfo_hypervisor(cpuinfo):
            return True
        if self.fs.exists("sys/hypervisor/type"):
            return True
        dmi = " ".join(t.lower() for t in self.dmi if t)
        if dmi:
            return any(v in dmi for v in _VM_DMI)
        return False if cpuinfo is not None else None

    def allowed_cpus(self) -> CpuSet | None:
        """The CPUs this process may run on (``/proc/self/status``); None when unknown."""
        status = self.fs.text("proc/self/status")
        if status is None:
            return None
        try:
            return sv.parse_cpus_allowed(status)
        except ValueError as exc:
            self.fs.record("proc/self/status", f"unparsable: {exc}")
            return None

    # -- all of it ------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """Read everything; the snapshot's ``probe_errors`` holds what could not be read."""
        pci = self.pci_functions()
        vfs = frozenset(f.bdf for f in pci if f.physfn is not None and f.bdf is not None)
        configs = [f.config for f in pci if f.config is not None]
        if not configs:
            config_status = SourceStatus("configspace", "unavailable", "no config files readable")
        elif all(c.extended_readable for c in configs):
            config_status = SourceStatus("configspace", "ok")
        else:
            reasons = sorted({no_extended_reason(c) for c in configs if not c.extended_readable})
            config_status = SourceStatus(
                "configspace",
                "partial",
                f"extended config space not seen on some functions ({'; '.join(reasons)}): ACS unknown there",
            )
        snap = Snapshot(
            hostname=self.fs.text("proc/sys/kernel/hostname"),
            root=self.fs.root,
            kernel_cmdline=self.fs.text("proc/cmdline"),
            virtualized=self.virtualized(),
            allowed_cpus=self.allowed_cpus(),
            numa_nodes=self.numa_nodes(),
            cpus=self.cpus(),
            pci=pci,
            netdevs=self.netdevs(vfs),
            rdma=self.rdma_devices(vfs),
            iommu_groups=self.iommu_groups(),
            modules=self.modules(),
            memory_peers=self.memory_peers(),
            gpu_memory_nodes=self.gpu_memory_nodes(),
            dmi_vendor=self.dmi[0],
            dmi_product=self.dmi[1],
            cpu_model=sv.parse_cpuinfo_model(self.cpuinfo) if self.cpuinfo else None,
            cpu_identity=sv.parse_cpu_identity(self.cpuinfo) if self.cpuinfo else None,
        )
        status = "partial" if self.fs.errors else "ok"
        detail = f"{len(self.fs.errors)} probe(s) failed" if self.fs.errors else None
        return msgspec.structs.replace(
            snap,
            sources=(SourceStatus("sysfs", status, detail), config_status),
            probe_errors=tuple(self.fs.errors),
        )


def read_sysfs(fs: HostFS) -> Snapshot:
    """Read a snapshot of the host below ``fs``'s root (checks that it is a sysfs tree first)."""
    fs.require_sysfs()
    return SysfsReader(fs).snapshot()


def read_links(root: str) -> dict[str, LinkInfo]:
    """Every listed function's PCIe link now, by BDF, and nothing else: the daemon's cheap
    between-scan sample of links (config space, else the link files)."""
    reader = SysfsReader(HostFS(root))
    out: dict[str, LinkInfo] = {}
    for bdf, link_rel, real in reader.listed():
        d = real or link_rel
        config, physfn = reader._config_and_physfn(d, bdf)
        out[bdf] = reader.link(d, config, virtual_function=physfn is not None)
    return out


def collect(c: Collection) -> None:
    """The primary source of a host scan: the snapshot of ``inputs.root`` (whose root, in the
    snapshot, is ``inputs.shown_root`` where that is given: a capture archive's path)."""
    snap = read_sysfs(HostFS(c.inputs.root))
    if c.inputs.shown_root is not None:
        snap = msgspec.structs.replace(snap, root=c.inputs.shown_root)
    c.snapshot = snap
