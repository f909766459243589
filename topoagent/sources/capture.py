"""``topoagent capture``: record exactly what a scan reads on this host, scrubbed; and replay it.

:func:`collect_capture` walks the allow-list below (the files :mod:`topoagent.sources.sysfs`
reads, nothing else) through :class:`~topoagent.hostfs.HostFS`, runs ``lspci -tv``,
``lspci -vvv``, ``nvidia-smi topo -m`` and, where nvidia-ml-py and ``scripts/record_nvml.py``
are at hand, an NVML recording, and returns the entries of a capture with identifying values
scrubbed.  Writing them into a tarball is the ``capture`` command's job.

:func:`unpack_capture` and :func:`resolve_root` are the other direction: ``--root`` accepts a
capture tarball (or its unpacked directory); the tarball is untrusted input and is unpacked
with every member checked (no absolute names, no ``..``, no devices, FIFOs or hard links, no
link that resolves outside the capture, size caps).

The allow-list (host paths, relative to ``/``):

* ``sys/bus/pci/devices/*`` (as relative links) and each function's directory under
  ``sys/devices/pci*`` -- the tree structure itself -- with ``class vendor device
  subsystem_vendor subsystem_device numa_node local_cpulist local_cpus current_link_speed
  current_link_width max_link_speed max_link_width sriov_totalvfs sriov_numvfs config`` and the
  ``driver``, ``iommu_group`` and ``physfn`` links;
* ``sys/class/net/*``: ``operstate speed address`` and the ``device`` link;
  ``sys/class/infiniband/*``: ``node_guid``, ``ports/*/{state,rate,link_layer}`` and the
  ``device`` link;
* ``sys/devices/system/node/node*/{cpulist,meminfo,distance}``,
  ``sys/devices/system/cpu/cpu*/topology/{thread_siblings_list,physical_package_id,package_cpus_list,core_siblings_list}``;
* ``sys/kernel/iommu_groups/*/type``, ``sys/module/<m>`` for the modules a scan asks about,
  ``sys/kernel/mm/memory_peers/*/version``, ``sys/hypervisor/type``;
* ``proc/cmdline``, the first CPU's ``flags`` and identity lines (vendor, family, model) of ``proc/cpuinfo``, the ``Cpus_allowed_list`` line of
  ``proc/self/status``, ``proc/driver/nvidia/gpus/*/numa_status``,
  ``proc/sys/kernel/hostname``, ``sys/class/dmi/id/{sys_vendor,product_name}``.

Scrubbed (see ``docs/capture.md``): the host name becomes ``captured-host``; each MAC address
becomes ``00:00:00:00:00:NN`` (NN numbered per address, the same in every file); InfiniBand
GUIDs become zeros; the PCIe Device Serial Number capability in ``config`` and lspci's
``Device Serial Number`` and VPD ``[SN]`` lines are zeroed; NVML UUIDs become
``GPU-00000000-…-0000000000NN``; ``UUID=`` values on the kernel command line become zeros and
init's arguments after ``--`` are dropped.
DMI serial numbers are not read at all.
"""

from __future__ import annotations

import io
import json
import os
import posixpath
import re
import stat
import tarfile
from collections.abc import Callable, Iterable
from typing import BinaryIO

from topoagent.bdf import is_bdf
from topoagent.errors import InputError
from topoagent.hostfs import ATTR_LIMIT, HostFS
from topoagent.records import field, record
from topoagent.sources import NVML_RECORDING

__all__ = [
    "CAPTURE_FORMAT",
    "Capture",
    "Entry",
    "CaptureError",
    "Scrubber",
    "collect_capture",
    "entries_to_tar",
    "resolve_root",
    "scrub_config",
    "unpack_capture",
]

CAPTURE_FORMAT = "topoagent-capture/1"
#: The manifest at the top of a capture: what was recorded, by which version, what was scrubbed.
MANIFEST = "topoagent-capture.json"

_PCI_ATTRS = ("class", "vendor", "device", "subsystem_vendor", "subsystem_device", "numa_node",
              "local_cpulist", "local_cpus", "current_link_speed", "current_link_width", "max_link_speed",
              "max_link_width", "sriov_totalvfs", "sriov_numvfs")
_PCI_LINKS = ("driver", "iommu_group", "physfn")
# A link-layer address: colon-separated hex pairs (6 for Ethernet, 20 for IPoIB).
_HW_ADDRESS = re.compile(r"\b[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2})+\b")
# Six hex pairs, and not part of a longer run (an 8-byte serial number or an EUI-64).
_MAC = re.compile(r"(?<![0-9a-fA-F][:-])\b(?:[0-9a-fA-F]{2}[:-]){5}[0-9a-fA-F]{2}\b(?![:-][0-9a-fA-F])")
_GUID = re.compile(r"\b[0-9a-fA-F]{4}(?::[0-9a-fA-F]{4}){3}\b")

# Unpacking limits: a capture of the largest host is a few MB.
MAX_MEMBERS = 200_000
MAX_MEMBER_BYTES = 16 * 1024 * 1024
MAX_TOTAL_BYTES = 256 * 1024 * 1024


@record
class Entry:
    """One member of a capture: a regular file (``data``), a directory, or a relative link."""

    path: str  # relative, no leading slash
    kind: str  # "file", "dir" or "link"
    data: bytes = b""
    target: str = ""


@record(frozen=False)
class Capture:
    """Entries of a capture, in the order they were found, and the tools it recorded."""

    entries: dict[str, Entry] = field(default_factory=dict)
    tools: dict[str, str] = field(default_factory=dict)

    def add(self, entry: Entry) -> None:
        parent = posixpath.dirname(entry.path)
        while parent and parent not in self.entries:
            self.entries[parent] = Entry(parent, "dir")
            parent = posixpath.dirname(parent)
        self.entries.setdefault(entry.path, entry)

    def ordered(self) -> list[Entry]:
        """Directories and files first (parents before children), links last."""
        return sorted(self.entries.values(), key=lambda e: (e.kind == "link", e.path.count("/"), e.path))


# -- scrubbing (pure) ---------------------------------------------------------------------------


class Scrubber:
    """Replaces identifying values consistently: one MAC maps to the same stand-in everywhere."""

    def __init__(self) -> None:
        self.macs: dict[str, str] = {}
        self.uuids: dict[str, str] = {}
        self.counts: dict[str, int] = {}

    def _count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def mac(self, value: str) -> str:
        key = value.lower().replace("-", ":")
        if key in ("00:00:00:00:00:00", "ff:ff:ff:ff:ff:ff"):
            return value
        if key not in self.macs:
            n = len(self.macs) + 1
            self.macs[key] = f"00:00:00:00:{n >> 8 & 0xFF:02x}:{n & 0xFF:02x}"
        self._count("MAC address")
        return self.macs[key] if ":" in value else self.macs[key].replace(":", "-")

    def text(self, text: str) -> str:
        """MAC addresses, GUIDs, serial numbers and UUIDs in free text (tool output)."""
        text = re.sub(r"(Device Serial Number )\S+", lambda m: self._zero(m.group(1) + "00-00-00-00-00-00-00-00", "serial number"), text)
        text = re.sub(r"(\[SN\] Serial number: ).*", lambda m: self._zero(m.group(1) + "0", "serial number"), text)
        text = _MAC.sub(lambda m: self.mac(m.group()), text)
        text = re.sub(r"(GPU-)[0-9a-fA-F-]{36}", lambda m: self.uuid(m.group()), text)
        return text

    def _zero(self, replacement: str, what: str) -> str:
        self._count(what)
        return replacement

    def hw_address(self, text: str) -> str:
        """A link-layer address (``sys/class/net/*/address``): a 6-byte MAC becomes its stand-in;
        a 20-byte IPoIB address keeps its flags, QPN and subnet prefix and has its last 8 bytes
        -- the port GUID (RFC 4391, section 9.1.1) -- zeroed; any other length is zeroed whole."""

        def one(m: re.Match[str]) -> str:
            pairs = m.group().split(":")
            if len(pairs) == 6:
                return self.mac(m.group())
            self._count("GUID")
            keep = 12 if len(pairs) == 20 else 0
            return ":".join(pairs[:keep] + ["00"] * (len(pairs) - keep))

        return _HW_ADDRESS.sub(one, text)

    def guid(self, text: str) -> str:
        self._count("GUID")
        return _GUID.sub("0000:0000:0000:0000", text)

    def uuid(self, value: str) -> str:
        if value not in self.uuids:
            self.uuids[value] = f"GPU-00000000-0000-0000-0000-{len(self.uuids):012x}"
        self._count("GPU UUID")
        return self.uuids[value]

    def cmdline(self, text: str) -> str:
        """The kernel's parameters with ``UUID=`` values zeroed; the arguments after a lone
        ``--`` are init's, not the kernel's (Documentation/admin-guide/kernel-parameters.rst),
        may hold anything, and are dropped."""
        words = text.split()
        if "--" in words:
            words = words[: words.index("--")]
            self._count("init arguments")
        out = " ".join(words)
        out = re.sub(r"(UUID=)[0-9a-fA-F-]+", lambda m: self._zero(m.group(1) + "00000000-0000-0000-0000-000000000000", "UUID"), out)
        return out + "\n"


def scrub_config(data: bytes) -> bytes:
    """Config space with the PCIe Device Serial Number capability's serial zeroed.

    Extended capabilities start at 0x100, each with a header ``ID (16 bits) | version (4) |
    next (12)``; the DSN capability (ID 0x0003, PCIe Base Spec 7.9.3) holds the serial in the
    8 bytes after its header.  The walk is bounded (one visit per offset).
    """
    if len(data) <= 0x100:
        return data
    out = bytearray(data)
    offset, seen = 0x100, set()
    while 0x100 <= offset <= len(out) - 12 and offset not in seen:
        seen.add(offset)
        header = int.from_bytes(out[offset:offset + 4], "little")
        if header in (0, 0xFFFFFFFF):
            break
        if header & 0xFFFF == 0x0003:
            out[offset + 4:offset + 12] = bytes(8)
        offset = (header >> 20) & 0xFFC
    return bytes(out)


# -- collecting (reads through HostFS) ------------------------------------------------------------


def _relative(link: str, target: str) -> str:
    """The relative link text from ``link`` to ``target`` (both root-relative paths)."""
    return posixpath.relpath(target, posixpath.dirname(link) or ".")


def _copy_file(fs: HostFS, cap: Capture, rel: str, *, limit: int = ATTR_LIMIT,
               transform: Callable[[bytes], bytes] | None = None) -> bytes | None:
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


def _pci(fs: HostFS, cap: Capture) -> None:
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
        for attr in _PCI_ATTRS:
            _copy_file(fs, cap, f"{real}/{attr}", limit=4096)
        _copy_file(fs, cap, f"{real}/config", limit=4096, transform=scrub_config)
        for name in _PCI_LINKS:
            _copy_link(fs, cap, f"{real}/{name}")


def _class_devices(fs: HostFS, cap: Capture, scrub: Scrubber) -> None:
    for name in fs.listdir("sys/class/net"):
        base = f"sys/class/net/{name}"
        cap.add(Entry(base, "dir"))
        _copy_file(fs, cap, f"{base}/operstate", limit=256)
        _copy_file(fs, cap, f"{base}/speed", limit=256)
        _copy_file(fs, cap, f"{base}/address", limit=256,
                   transform=lambda b: scrub.hw_address(b.decode("ascii", "replace")).encode())
        _copy_link(fs, cap, f"{base}/device")
    for name in fs.listdir("sys/class/infiniband"):
        base = f"sys/class/infiniband/{name}"
        cap.add(Entry(base, "dir"))
        _copy_file(fs, cap, f"{base}/node_guid", limit=256,
                   transform=lambda b: scrub.guid(b.decode("ascii", "replace")).encode())
        _copy_link(fs, cap, f"{base}/device")
        for port in fs.listdir(f"{base}/ports"):
            for attr in ("state", "rate", "link_layer"):
                _copy_file(fs, cap, f"{base}/ports/{port}/{attr}", limit=256)


def _system(fs: HostFS, cap: Capture, scrub: Scrubber) -> None:
    from topoagent.sources.sysfs import MODULES_OF_INTEREST, numbered

    base = "sys/devices/system/node"
    for name in fs.listdir(base):
        if numbered(name, "node") is not None:
            for attr in ("cpulist", "meminfo", "distance"):
                _copy_file(fs, cap, f"{base}/{name}/{attr}")
    base = "sys/devices/system/cpu"
    for name in fs.listdir(base):
        if numbered(name, "cpu") is not None:
            for attr in ("thread_siblings_list", "physical_package_id", "package_cpus_list", "core_siblings_list"):
                _copy_file(fs, cap, f"{base}/{name}/topology/{attr}", limit=4096)
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
    for attr in ("sys_vendor", "product_name"):
        _copy_file(fs, cap, f"sys/class/dmi/id/{attr}", limit=256)
    _copy_file(fs, cap, "proc/cmdline", limit=8192,
               transform=lambda b: scrub.cmdline(b.decode("utf-8", "replace")).encode())
    if fs.text("proc/sys/kernel/hostname") is not None:
        cap.add(Entry("proc/sys/kernel/hostname", "file", b"captured-host\n"))
    cpuinfo = fs.text("proc/cpuinfo", truncate=True)  # as the scan reads it: the first CPU's block
    if cpuinfo is not None:
        # What is read from it: the hypervisor flag (sources.sysfs) and the first CPU's identity
        # fields (sources.kernel, for plan --format nccl-topo); nothing else of the host.
        keep = ("flags", "vendor_id", "cpu family", "model", "CPU implementer", "cpu")
        first = cpuinfo.split("\n\n", 1)[0].splitlines()
        lines = [ln for ln in first if ln.partition(":")[0].strip() in keep and ":" in ln]
        cap.add(Entry("proc/cpuinfo", "file", "".join(ln + "\n" for ln in lines).encode()))
    status = fs.text("proc/self/status", limit=ATTR_LIMIT)
    if status is not None:
        line = next((ln for ln in status.splitlines() if ln.startswith("Cpus_allowed_list:")), None)
        cap.add(Entry("proc/self/status", "file", (line + "\n").encode() if line else b""))


_TOOLS = (
    ("tools/lspci-tv.txt", ("lspci", "-tv")),
    ("tools/lspci-vvv.txt", ("lspci", "-vvv")),
    ("tools/nvidia-smi-topo-m.txt", ("nvidia-smi", "topo", "-m")),
)


def _tools(cap: Capture, scrub: Scrubber, timeout: float) -> None:
    import importlib.util
    import sys
    from pathlib import Path

    from topoagent.sources.tools import run_tool

    for path, argv in _TOOLS:
        result = run_tool(list(argv), timeout=timeout)
        if result.ok:
            cap.add(Entry(path, "file", scrub.text(result.stdout).encode()))
            cap.tools[" ".join(argv)] = path
        else:
            cap.tools[" ".join(argv)] = f"not recorded: {result.error}"
    script = Path(__file__).resolve().parents[2] / "scripts" / "record_nvml.py"
    if importlib.util.find_spec("pynvml") is None:
        cap.tools["nvml"] = "not recorded: nvidia-ml-py (pynvml) is not installed"
    elif not script.is_file():
        cap.tools["nvml"] = "not recorded: scripts/record_nvml.py is not in this installation"
    else:
        result = run_tool([sys.executable, str(script), "recorded by topoagent capture"], timeout=timeout)
        if result.ok:
            cap.add(Entry(NVML_RECORDING, "file", scrub.text(result.stdout).encode()))
            cap.tools["nvml"] = NVML_RECORDING
        else:
            cap.tools["nvml"] = f"not recorded: {result.error}"


def collect_capture(root: str = "/", *, tools: bool = True, tool_timeout: float = 30.0) -> Capture:
    """The scrubbed entries of a capture of the host below ``root`` (tools run only for ``/``)."""
    from topoagent import __version__

    fs = HostFS(root)
    fs.require_sysfs()
    cap = Capture()
    scrub = Scrubber()
    _pci(fs, cap)
    _class_devices(fs, cap, scrub)
    _system(fs, cap, scrub)
    if tools:
        _tools(cap, scrub, tool_timeout)
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


# -- replaying -------------------------------------------------------------------------------------


class CaptureError(InputError):
    """A capture tarball that cannot be (safely) unpacked."""


def _inside(base: str, path: str) -> bool:
    return path == base or path.startswith(base.rstrip(os.sep) + os.sep)


def _member_name(name: str) -> str:
    if "\x00" in name or name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        raise CaptureError(f"member {name!r}: absolute name")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise CaptureError(f"member {name!r}: '..' in the name")
    return "/".join(parts)


class _CappedStream(io.RawIOBase):
    """A tarball's bytes, decompressed where it is gzip, bzip2 or xz (what tarfile's ``r:*``
    reads), with a cap on what tarfile may read.

    tarfile reads a PAX or GNU long-name header whole, at whatever size the header declares,
    and follows a chain of them by recursion, all before it yields a member that
    :func:`unpack_capture` could check: without the cap a 500 KB gzip of zeros declaring one
    such header takes 500 MB of memory.  So no read may exceed what one member may hold, and
    nothing is read or skipped past the members' bytes plus their headers.
    """

    def __init__(self, path: str) -> None:
        import bz2
        import gzip
        import lzma

        super().__init__()
        with open(path, "rb") as fh:
            magic = fh.read(6)
        self.stream: io.BufferedIOBase
        if magic.startswith(b"\x1f\x8b"):
            self.stream = gzip.GzipFile(path, "rb")
        elif magic.startswith(b"BZh"):
            self.stream = bz2.BZ2File(path, "rb")
        elif magic.startswith(b"\xfd7zXZ\x00"):
            self.stream = lzma.LZMAFile(path, "rb")
        else:
            self.stream = open(path, "rb")  # closed by close()
        self.path = path
        # Each member: its header, a PAX header for a long name, its data's padding.
        self.limit = MAX_TOTAL_BYTES + (MAX_MEMBERS + 1) * 4 * tarfile.BLOCKSIZE

    def _check(self, end: int) -> None:
        if end > self.limit:
            raise CaptureError(f"{self.path}: more than {self.limit} bytes of members and headers")

    def read(self, size: int = -1, /) -> bytes:
        if size < 0 or size > MAX_MEMBER_BYTES + tarfile.BLOCKSIZE:
            raise CaptureError(f"{self.path}: a header or member larger than {MAX_MEMBER_BYTES} bytes")
        self._check(self.stream.tell() + size)
        return self.stream.read(size)

    def seek(self, pos: int, whence: int = io.SEEK_SET, /) -> int:
        self._check(pos if whence == io.SEEK_SET else self.stream.tell() + pos)
        return self.stream.seek(pos, whence)

    def tell(self) -> int:
        return self.stream.tell()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def close(self) -> None:
        self.stream.close()
        super().close()


#: What reading a hostile or broken tarball can raise besides :class:`CaptureError`: decompressor
#: errors, and the recursion of tarfile's header chains.
_UNPACK_ERRORS = (OSError, EOFError, tarfile.TarError, RecursionError)


def unpack_capture(path: str, dest: str | None = None) -> str:
    """Unpack a capture tarball into ``dest`` (a new temporary directory when None) and return
    the directory to use as ``--root``.

    Refuses (with :class:`CaptureError`, nothing left behind): absolute names, ``..``,
    device files, FIFOs, hard links, links whose target is absolute or resolves outside the
    capture, members under a link, more than :data:`MAX_MEMBERS` members, a member over
    :data:`MAX_MEMBER_BYTES` or a total over :data:`MAX_TOTAL_BYTES`.  Links are created last, so
    nothing is ever written through one.
    """
    import lzma
    import shutil
    import tempfile
    import zlib

    stream = None
    try:
        stream = _CappedStream(path)
        tar = tarfile.open(fileobj=stream, mode="r:")
    except (CaptureError, *_UNPACK_ERRORS, zlib.error, lzma.LZMAError) as exc:
        if stream is not None:
            stream.close()
        if isinstance(exc, CaptureError):
            raise
        raise CaptureError(f"{path}: not a capture tarball ({exc})") from None
    created = dest is None
    out = os.path.realpath(dest or tempfile.mkdtemp(prefix="topoagent-capture-"))
    try:
        with stream, tar:
            files, dirs, links = [], [], []
            total = count = 0
            for member in tar:
                count += 1
                if count > MAX_MEMBERS:
                    raise CaptureError(f"{path}: more than {MAX_MEMBERS} members")
                name = _member_name(member.name)
                if not name:
                    continue
                if member.isreg():
                    if member.size > MAX_MEMBER_BYTES:
                        raise CaptureError(f"member {name!r}: larger than {MAX_MEMBER_BYTES} bytes")
                    total += member.size
                    if total > MAX_TOTAL_BYTES:
                        raise CaptureError(f"{path}: more than {MAX_TOTAL_BYTES} bytes unpacked")
                    files.append((name, member))
                elif member.isdir():
                    dirs.append(name)
                elif member.issym():
                    target = member.linkname
                    if not target or target.startswith("/") or "\x00" in target:
                        raise CaptureError(f"member {name!r}: link to an absolute path")
                    if posixpath.normpath(posixpath.join(posixpath.dirname(name), target)).startswith(".."):
                        raise CaptureError(f"member {name!r}: link leads outside the capture")
                    links.append((name, target))
                else:
                    raise CaptureError(f"member {name!r}: not a regular file, directory or symbolic link")
            link_names = {n for n, _ in links}
            for name in [*dirs, *(n for n, _ in files), *link_names]:
                parent = posixpath.dirname(name)
                while parent:
                    if parent in link_names:
                        raise CaptureError(f"member {name!r}: lies under the link {parent!r}")
                    parent = posixpath.dirname(parent)
            for name in dirs:
                os.makedirs(os.path.join(out, name), mode=0o755, exist_ok=True)
            for name, member in files:
                full = os.path.join(out, name)
                os.makedirs(os.path.dirname(full), mode=0o755, exist_ok=True)
                src = tar.extractfile(member)
                if src is None:
                    raise CaptureError(f"member {name!r}: unreadable")
                data = src.read(MAX_MEMBER_BYTES + 1)
                fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
            for name, target in links:
                full = os.path.join(out, name)
                os.makedirs(os.path.dirname(full), mode=0o755, exist_ok=True)
                if os.path.lexists(full):
                    raise CaptureError(f"member {name!r}: listed twice")
                os.symlink(target, full)
            for name, _ in links:  # chains of links checked on the real tree
                if not _inside(out, os.path.realpath(os.path.join(out, name))):
                    raise CaptureError(f"member {name!r}: link leads outside the capture")
    except (CaptureError, *_UNPACK_ERRORS, zlib.error, lzma.LZMAError) as exc:
        if created:
            shutil.rmtree(out, ignore_errors=True)
        if isinstance(exc, CaptureError):
            raise
        raise CaptureError(f"{path}: cannot unpack: {exc}") from None
    return _capture_root(out)


def _capture_root(directory: str) -> str:
    """The directory holding ``sys/``: ``directory`` itself or its one subdirectory."""
    if os.path.isdir(os.path.join(directory, "sys")):
        return directory
    subs = [e.path for e in os.scandir(directory) if e.is_dir(follow_symlinks=False)]
    if len(subs) == 1 and os.path.isdir(os.path.join(subs[0], "sys")):
        return subs[0]
    return directory


_UNPACKED: dict[tuple[str, int, int], str] = {}


def resolve_root(root: str) -> str:
    """``--root`` as a directory: a capture tarball is unpacked (once per process, into a
    temporary directory removed at exit); a directory is returned as is, or its one
    subdirectory holding ``sys/`` (a tarball unpacked by hand).  Anything else is returned
    unchanged for the scan to judge.  Raises :class:`CaptureError` for a tarball that cannot be
    unpacked safely."""
    import atexit
    import shutil
    import tempfile

    try:
        st = os.stat(root)
    except OSError:
        return root
    if stat.S_ISDIR(st.st_mode):
        return _capture_root(root)
    if not stat.S_ISREG(st.st_mode):
        return root
    key = (os.path.realpath(root), st.st_size, st.st_mtime_ns)
    if key not in _UNPACKED:
        tmp = tempfile.mkdtemp(prefix="topoagent-capture-")
        atexit.register(shutil.rmtree, tmp, True)
        _UNPACKED[key] = unpack_capture(root, tmp)
    return _UNPACKED[key]


def entries_to_tar(entries: Iterable[Entry], fileobj: BinaryIO, *, mtime: int = 0) -> None:
    """Write capture entries as a gzip tarball to a binary file object (deterministic: fixed
    mtime, owner and mode, so the same host gives the same bytes)."""
    import gzip

    with gzip.GzipFile(fileobj=fileobj, mode="wb", mtime=mtime) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for e in entries:
                info = tarfile.TarInfo(e.path)
                info.mtime, info.uid, info.gid, info.uname, info.gname = mtime, 0, 0, "", ""
                if e.kind == "dir":
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
                elif e.kind == "link":
                    info.type, info.linkname, info.mode = tarfile.SYMTYPE, e.target, 0o777
                    tar.addfile(info)
                else:
                    info.size, info.mode = len(e.data), 0o644
                    tar.addfile(info, io.BytesIO(e.data))
