"""Collect a capture: record what a scan reads on this host, scrubbed.

:func:`collect_capture` walks the allow-list below (the files the readers of
:mod:`topoagent.core.read` name in their tables, and a few a person reading the capture wants)
through :class:`~topoagent.core.hostfs.HostFS`, runs ``lspci -tv``, ``lspci -vvv``,
``nvidia-smi topo -m`` and, where nvidia-ml-py and ``scripts/record_nvml.py`` are at hand, an
NVML recording, and returns the entries of a capture with identifying values scrubbed
(:mod:`.scrub`).  Writing them into a tarball is :mod:`.archive`'s job.

The allow-list (host paths, relative to ``/``):

* ``sys/bus/pci/devices/*`` (as relative links) and each function's directory under
  ``sys/devices/pci*`` -- the tree structure itself -- with ``class vendor device
  subsystem_vendor subsystem_device numa_node local_cpulist local_cpus current_link_speed
  current_link_width max_link_speed max_link_width sriov_totalvfs sriov_numvfs aer_dev_fatal
  aer_dev_nonfatal aer_dev_correctable config`` and the
  ``driver``, ``iommu_group`` and ``physfn`` links;
* ``sys/class/net/*``: ``speed`` (``operstate`` and ``address`` for a person) and the ``device`` link;
  ``sys/class/infiniband/*``: ``node_guid``, ``ports/*/{state,rate,link_layer}`` and the
  ``device`` link;
* ``sys/devices/system/node/node*/{cpulist,cpumap,meminfo,distance}``, ``sys/devices/system/cpu/online``,
  ``sys/devices/system/cpu/cpu*/topology/{thread_siblings_list,physical_package_id,package_cpus_list,core_siblings_list}``,
  ``sys/devices/system/cpu/cpu*/cache/index3/{level,shared_cpu_list}`` and the ``cpu*/node*`` links;
* ``sys/kernel/iommu_groups/*/type``, ``sys/module/<m>`` for the modules a scan asks about,
  ``sys/kernel/mm/memory_peers/*/version``, ``sys/hypervisor/type``;
* ``sys/class/kfd/kfd/topology/nodes/*/{properties,gpu_id,name}`` and ``io_links/*/properties``
  (AMD GPUs; ``unique_id`` replaced by the node number), and each GPU's amdgpu files
  (``xgmi_physical_id``, ``xgmi_hive_info/xgmi_hive_id``, ``current_*_partition``);
* ``proc/cmdline``, the first CPU's ``flags``, identity and model lines of ``proc/cpuinfo``
  (:data:`CPUINFO_FIELDS`), the ``Cpus_allowed_list`` line of ``proc/self/status``,
  ``proc/driver/nvidia/gpus/*/numa_status``, ``proc/sys/kernel/hostname``,
  ``proc/sys/kernel/osrelease``, ``proc/driver/nvidia/version``,
  ``sys/class/dmi/id/{sys_vendor,product_name}`` and ``sys/firmware/devicetree/base/model``.

What is scrubbed is listed in :mod:`.scrub`.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import posixpath
import sys
from collections.abc import Callable
from pathlib import Path

import msgspec

from topoagent.core.bdf import is_bdf
from topoagent.core.digits import decimal
from topoagent.core.hostfs import ATTR_LIMIT, HostFS
from topoagent.core.parse.kfd import bdf_of, parse_properties
from topoagent.core.parse.vpd import MAX_VPD_BYTES
from topoagent.core.pci import VPD_READ
from topoagent.core.read import NVML_RECORDING, dmi, kfd, pci
from topoagent.core.read.attr import numbered
from topoagent.core.read.cpu import TOPOLOGY_FILES
from topoagent.core.read.infiniband import PORT_FILES
from topoagent.core.read.modules import MODULES_OF_INTEREST
from topoagent.core.read.node import NODE_FILES
from topoagent.core.read.tools import run_tool
from topoagent.core.version import __version__
from topoagent.features.capture.scrub import Scrubber, scrub_config

__all__ = ["CAPTURE_FORMAT", "CPUINFO_FIELDS", "MANIFEST", "Capture", "Entry", "collect_capture", "cpuinfo_kept"]

CAPTURE_FORMAT = "topoagent-capture/1"
#: The manifest at the top of a capture: what was recorded, by which version, what was scrubbed.
MANIFEST = "topoagent-capture.json"


class Entry(msgspec.Struct, frozen=True):
    """One member of a capture: a regular file (``data``), a directory, or a relative link."""

    path: str  # relative, no leading slash
    kind: str  # "file", "dir" or "link"
    data: bytes = b""
    target: str = ""


class Capture(msgspec.Struct):
    """Entries of a capture, in the order they were found, and the tools it recorded."""

    entries: dict[str, Entry] = msgspec.field(default_factory=dict)
    tools: dict[str, str] = msgspec.field(default_factory=dict)

    def add(self, entry: Entry) -> None:
        """Add an entry, and a directory entry for each parent not in the capture yet."""
        parent = posixpath.dirname(entry.path)
        while parent and parent not in self.entries:
            self.entries[parent] = Entry(parent, "dir")
            parent = posixpath.dirname(parent)
        self.entries.setdefault(entry.path, entry)

    def ordered(self) -> list[Entry]:
        """Directories and files first (parents before children), links last."""
        return sorted(self.entries.values(), key=lambda e: (e.kind == "link", e.path.count("/"), e.path))


# -- collecting (reads through HostFS) ------------------------------------------------------------


def _relative(link: str, target: str) -> str:
    """The relative link text from ``link`` to ``target`` (both root-relative paths)."""
    return posixpath.relpath(target, posixpath.dirname(link) or ".")


def _copy_file(
    fs: HostFS, cap: Capture, rel: str, *, limit: int = ATTR_LIMIT, transform: Callable[[bytes], bytes] | None = None
) -> bytes | None:
    data = fs.bytes(rel, limit=limit, quiet=True)
    if data is None:
        return None
    if transform is not None:
        data = transform(data)
    cap.add(Entry(rel, "file", data))
    return data


def _copy_link(fs: HostFS, cap: Capture, rel: str) -> None:
    """``rel`` as a relative link to where it resolves; a dangling link keeps its last name."""
    real = fs.resolve(rel)
    if real is not None and real != rel:
        cap.add(Entry(real, "dir"))  # the target exists on the host: keep it so, empty
        cap.add(Entry(rel, "link", target=_relative(rel, real)))
        return
    name = fs.link_name(rel)
    if name is not None:
        cap.add(Entry(rel, "link", target=name))


def _vpd(fs: HostFS, cap: Capture, real: str, scrub: Scrubber) -> None:
    """A function's VPD, for the functions a scan reads it of (``core.pci.VPD_READ``: reading
    VPD is a slow serial exchange with the device), scrubbed."""
    ids = (fs.text(f"{real}/vendor"), fs.text(f"{real}/device"))
    try:
        vendor, device = (int(v.strip(), 16) if v is not None else None for v in ids)
    except ValueError:
        return
    if (vendor, device) in VPD_READ:
        _copy_file(fs, cap, f"{real}/{pci.VPD_FILE}", limit=MAX_VPD_BYTES, transform=scrub.vpd)


def _pci(fs: HostFS, cap: Capture, scrub: Scrubber) -> None:
    for entry in fs.listdir("sys/bus/pci/devices"):
        if not is_bdf(entry):
            continue
        link = f"sys/bus/pci/devices/{entry}"
        real = fs.resolve(link)
        if real is None:
            continue
        if real != link:
            cap.add(Entry(link, "link", target=_relative(link, real)))
        cap.add(Entry(real, "dir"))
        for attr in pci.FUNCTION_FILES:
            _copy_file(fs, cap, f"{real}/{attr}", limit=4096)
        _copy_file(fs, cap, f"{real}/config", limit=4096, transform=scrub_config)
        _vpd(fs, cap, real, scrub)
        for name in pci.LINKS:
            _copy_link(fs, cap, f"{real}/{name}")


def _class_devices(fs: HostFS, cap: Capture, scrub: Scrubber) -> None:
    for name in fs.listdir("sys/class/net"):
        base = f"sys/class/net/{name}"
        cap.add(Entry(base, "dir"))
        _copy_file(fs, cap, f"{base}/operstate", limit=256)
        _copy_file(fs, cap, f"{base}/speed", limit=256)
        _copy_file(
            fs,
            cap,
            f"{base}/address",
            limit=256,
            transform=lambda b: scrub.hw_address(b.decode("ascii", "replace")).encode(),
        )
        _copy_link(fs, cap, f"{base}/device")
    for name in fs.listdir("sys/class/infiniband"):
        base = f"sys/class/infiniband/{name}"
        cap.add(Entry(base, "dir"))
        _copy_file(
            fs,
            cap,
            f"{base}/node_guid",
            limit=256,
            transform=lambda b: scrub.guid(b.decode("ascii", "replace")).encode(),
        )
        _copy_link(fs, cap, f"{base}/device")
        for port in fs.listdir(f"{base}/ports"):
            for attr in PORT_FILES:
                _copy_file(fs, cap, f"{base}/ports/{port}/{attr}", limit=256)


def _cpus_and_nodes(fs: HostFS, cap: Capture) -> None:
    """The NUMA nodes' files, and each CPU's topology, L3 and node link."""
    base = "sys/devices/system/node"
    for name in fs.listdir(base):
        if numbered(name, "node") is not None:
            for attr in NODE_FILES:
                _copy_file(fs, cap, f"{base}/{name}/{attr}")
    base = "sys/devices/system/cpu"
    _copy_file(fs, cap, f"{base}/online", limit=4096)
    for name in fs.listdir(base):
        if numbered(name, "cpu") is None:
            continue
        for attr in TOPOLOGY_FILES:
            _copy_file(fs, cap, f"{base}/{name}/topology/{attr}", limit=4096)
        # the L3 the CPU shares (core complexes: topoagent.core.read.cache)
        for attr in ("level", "shared_cpu_list"):
            _copy_file(fs, cap, f"{base}/{name}/cache/index3/{attr}", limit=4096)
        # the CPU's node link: the scan's fallback where a node's own CPU files fail
        for entry in fs.names(f"{base}/{name}") or ():
            if numbered(entry, "node") is not None:
                _copy_link(fs, cap, f"{base}/{name}/{entry}")


def _kernel(fs: HostFS, cap: Capture) -> None:
    """IOMMU group types, the modules a scan asks about, memory peers, the NVIDIA driver's GPU
    memory nodes, the hypervisor, the kernel release and NVIDIA driver version (DMA-BUF), and what
    names the board (DMI, the device tree's model)."""
    for group in fs.listdir("sys/kernel/iommu_groups"):
        _copy_file(fs, cap, f"sys/kernel/iommu_groups/{group}/type", limit=256)
    for module in MODULES_OF_INTEREST:
        if fs.isdir(f"sys/module/{module}"):
            cap.add(Entry(f"sys/module/{module}", "dir"))
    for peer in fs.listdir("sys/kernel/mm/memory_peers"):
        _copy_file(fs, cap, f"sys/kernel/mm/memory_peers/{peer}/version", limit=256)
    for gpu in fs.listdir("proc/driver/nvidia/gpus"):
        _copy_file(fs, cap, f"proc/driver/nvidia/gpus/{gpu}/numa_status", limit=4096)
    _copy_file(fs, cap, "sys/hypervisor/type", limit=256)
    # DMA-BUF for GPUDirect RDMA: the kernel release and whether the NVIDIA module is the open one
    _copy_file(fs, cap, "proc/sys/kernel/osrelease", limit=256)
    _copy_file(fs, cap, "proc/driver/nvidia/version", limit=4096)
    for attr in dmi.FILES:
        _copy_file(fs, cap, f"{dmi.DMI}/{attr}", limit=256)
    _copy_file(fs, cap, dmi.DEVICE_TREE_MODEL, limit=4096)


#: The ``/proc/cpuinfo`` fields a scan reads: the hypervisor flag (sources.sysfs), the first CPU's
#: identity (sources.kernel, for plan --format nccl-topo) and model as each architecture names
#: it (x86 ``model name``; POWER ``cpu``; arm64 ``CPU implementer``/``CPU part``; s390/ia64
#: ``vendor_id``/``vendor`` and ``family``), and POWER's ``machine`` (the board, where there is
#: no DMI): nothing else of the host.
CPUINFO_FIELDS = (
    "flags",
    "vendor_id",
    "vendor",
    "cpu family",
    "family",
    "model",
    "model name",
    "CPU implementer",
    "CPU part",
    "cpu",
    "machine",
)


def cpuinfo_kept(text: str) -> str:
    """The lines of ``/proc/cpuinfo`` text (as the scan reads it: its head) a capture keeps:
    :data:`CPUINFO_FIELDS` of the first CPU's block, and of the block some architectures print
    once after every CPU's (POWER's ``machine``), each field once."""
    blocks = text.split("\n\n")
    tail = blocks[-1] if len(blocks) > 1 and not blocks[-1].lstrip().startswith("processor") else ""
    kept: dict[str, str] = {}
    for line in (blocks[0] + "\n" + tail).splitlines():
        key, sep, _ = line.partition(":")
        if sep and key.strip() in CPUINFO_FIELDS:
            kept.setdefault(key.strip(), line)
    return "".join(line + "\n" for line in kept.values())


def _proc(fs: HostFS, cap: Capture, scrub: Scrubber) -> None:
    """The command line (scrubbed), a placeholder host name, what cpuinfo names, and this
    process's allowed CPUs."""
    _copy_file(
        fs, cap, "proc/cmdline", limit=8192, transform=lambda b: scrub.cmdline(b.decode("utf-8", "replace")).encode()
    )
    if fs.text("proc/sys/kernel/hostname") is not None:
        cap.add(Entry("proc/sys/kernel/hostname", "file", b"captured-host\n"))
    cpuinfo = fs.text("proc/cpuinfo", truncate=True)  # as the scan reads it
    if cpuinfo is not None:
        cap.add(Entry("proc/cpuinfo", "file", cpuinfo_kept(cpuinfo).encode()))
    status = fs.text("proc/self/status", limit=ATTR_LIMIT)
    if status is not None:
        line = next((ln for ln in status.splitlines() if ln.startswith("Cpus_allowed_list:")), None)
        cap.add(Entry("proc/self/status", "file", (line + "\n").encode() if line else b""))


def _system(fs: HostFS, cap: Capture, scrub: Scrubber) -> None:
    _cpus_and_nodes(fs, cap)
    _kernel(fs, cap)
    _proc(fs, cap, scrub)


def _kfd(fs: HostFS, cap: Capture) -> None:
    """KFD's topology (AMD GPUs) and amdgpu's XGMI and partition files of each GPU, as
    :mod:`topoagent.core.read.kfd` reads them; each GPU's ``unique_id`` (what ROCm's GPU UUID is
    made from) replaced by its node number."""
    if not fs.isdir(kfd.KFD_NODES):
        return
    _copy_link(fs, cap, "sys/class/kfd/kfd")
    real = fs.resolve("sys/class/kfd/kfd") or "sys/class/kfd/kfd"
    base = kfd.KFD_NODES.replace("sys/class/kfd/kfd", real, 1)  # files under the link's target
    for node in fs.listdir(base):
        number = decimal(node, digits=6)
        if number is None:
            continue
        nb = f"{base}/{node}"
        for attr in ("gpu_id", "name"):
            _copy_file(fs, cap, f"{nb}/{attr}", limit=256)
        scrub_id = functools.partial(_no_unique_id, node=number)
        props = _copy_file(fs, cap, f"{nb}/properties", limit=8192, transform=scrub_id)
        for link in fs.listdir(f"{nb}/io_links"):
            _copy_file(fs, cap, f"{nb}/io_links/{link}/properties", limit=4096)
        if props is None:
            continue
        try:
            values = parse_properties(props.decode("ascii", "replace"))
        except ValueError:  # the scan cannot read this node either: nothing of its GPU to copy
            continue
        if values.get("location_id"):
            bdf = bdf_of(values.get("domain", 0), values["location_id"])
            dev = fs.resolve(f"sys/bus/pci/devices/{bdf}")  # the function's real directory
            for attr in kfd.AMDGPU_FILES if dev is not None else ():
                _copy_file(fs, cap, f"{dev}/{attr}", limit=256)


def _no_unique_id(data: bytes, *, node: int) -> bytes:
    """A KFD node's ``properties`` with a non-zero ``unique_id`` (the GPU's serial) replaced."""
    lines = data.decode("ascii", "replace").splitlines()
    return "".join(
        (f"unique_id {node + 1}" if ln.startswith("unique_id ") and ln[10:].strip() != "0" else ln) + "\n"
        for ln in lines
    ).encode()


_TOOLS = (
    ("tools/lspci-tv.txt", ("lspci", "-tv")),
    ("tools/lspci-vvv.txt", ("lspci", "-vvv")),
    ("tools/nvidia-smi-topo-m.txt", ("nvidia-smi", "topo", "-m")),
)


def _tools(cap: Capture, scrub: Scrubber, timeout: float, step: Callable[[str], None]) -> None:
    for path, argv in _TOOLS:
        step(f"running {' '.join(argv)}")
        result = run_tool(list(argv), timeout=timeout)
        if result.ok:
            cap.add(Entry(path, "file", scrub.text(result.stdout).encode()))
            cap.tools[" ".join(argv)] = path
        else:
            cap.tools[" ".join(argv)] = f"not recorded: {result.error}"
    script = Path(__file__).resolve().parents[3] / "scripts" / "record_nvml.py"
    if importlib.util.find_spec("pynvml") is None:
        cap.tools["nvml"] = "not recorded: nvidia-ml-py (pynvml) is not installed"
    elif not script.is_file():
        cap.tools["nvml"] = "not recorded: scripts/record_nvml.py is not in this installation"
    else:
        step("recording NVML")
        result = run_tool([sys.executable, str(script), "recorded by topoagent capture"], timeout=timeout)
        if result.ok:
            cap.add(Entry(NVML_RECORDING, "file", scrub.text(result.stdout).encode()))
            cap.tools["nvml"] = NVML_RECORDING
        else:
            cap.tools["nvml"] = f"not recorded: {result.error}"


def collect_capture(
    root: str = "/", *, tools: bool = True, tool_timeout: float = 30.0, step: Callable[[str], None] | None = None
) -> Capture:
    """The scrubbed entries of a capture of the host below ``root`` (tools run only for ``/``).
    ``step`` is told the phase now running (the CLI's progress line)."""
    say = step or (lambda _: None)
    fs = HostFS(root)
    fs.require_sysfs()
    cap = Capture()
    scrub = Scrubber()
    say("reading /sys and /proc")
    _pci(fs, cap, scrub)
    _class_devices(fs, cap, scrub)
    _system(fs, cap, scrub)
    _kfd(fs, cap)
    if tools:
        _tools(cap, scrub, tool_timeout, say)
    manifest = {
        "format": CAPTURE_FORMAT,
        "topoagent": __version__,
        "files": sum(1 for e in cap.entries.values() if e.kind == "file"),
        "tools": cap.tools,
        "scrubbed": dict(sorted(scrub.counts.items())),
        "scrubbing": "host name -> captured-host; MAC -> 00:00:00:00:00:NN; GUIDs -> zeros; device serial numbers "
        "(config space DSN, lspci) -> zeros; NVML UUIDs -> GPU-00000000-...-NN; UUID= on the kernel "
        "command line -> zeros, init's arguments after -- dropped; DMI serials not read",
        "unreadable": [f"{e.path}: {e.error}" for e in fs.errors],
    }
    cap.add(Entry(MANIFEST, "file", (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()))
    return cap
