"""Kernel and CPU facts that a plan or a fix needs beyond the scan's snapshot (reads only).

* the CPU's identity from ``/proc/cpuinfo`` (arch, vendor, family, model), as NCCL's
  topology XML names it (NCCL src/graph/xml.cc, ``ncclTopoGetXmlFromCpu``);
* the kernel release and whether the NVIDIA kernel module is the open one (DMA-BUF for
  GPUDirect RDMA needs kernel >= 5.12 and the open module);
* a PCI function's config space bytes, fresh, before a fix writes to it.
"""

from __future__ import annotations

from topoagent.digits import is_decimal
from topoagent.hostfs import HostFS

#: uname machine / cpuinfo hints -> the ``arch`` NCCL's XML reader knows.
_ARCH = (("vendor_id", "x86_64"), ("CPU implementer", "arm64"), ("cpu\t\t: POWER", "ppc64"),
         ("cpu             : POWER", "ppc64"))


def parse_cpu_identity(text: str) -> dict[str, str]:
    """``arch``, ``vendor``, ``familyid``, ``modelid`` of the first CPU in ``/proc/cpuinfo``
    text (only those it states).  Pure."""
    first = text.split("\n\n", 1)[0]
    out: dict[str, str] = {}
    for hint, arch in _ARCH:
        if hint in first:
            out["arch"] = arch
            break
    fields = {}
    for line in first.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    if fields.get("vendor_id"):
        out["vendor"] = fields["vendor_id"]
    if is_decimal(fields.get("cpu family", "")):
        out["familyid"] = fields["cpu family"]
    if is_decimal(fields.get("model", "")):
        out["modelid"] = fields["model"]
    return out


def cpu_identity(fs: HostFS) -> dict[str, str]:
    """The CPU identity of the host below ``fs`` ({} when cpuinfo cannot be read)."""
    data = fs.bytes("proc/cpuinfo", limit=16384, truncate=True)  # the first CPU's block is enough
    return parse_cpu_identity(data.decode("utf-8", errors="replace")) if data else {}


def kernel_release(fs: HostFS) -> tuple[int, int] | None:
    """(major, minor) of ``/proc/sys/kernel/osrelease``; None when unknown."""
    text = fs.text("proc/sys/kernel/osrelease")
    if not text:
        return None
    parts = text.split(".")
    try:
        return int(parts[0]), int(parts[1].split("-")[0])
    except (IndexError, ValueError):
        return None


def nvidia_open_module(fs: HostFS) -> bool | None:
    """Whether the loaded NVIDIA kernel module is the open one (its version line says
    "Open Kernel Module"); None when no NVIDIA driver version is readable."""
    text = fs.text("proc/driver/nvidia/version")
    if text is None:
        return None
    return "open kernel module" in text.lower()


def config_bytes(fs: HostFS, bdf: str) -> bytes | None:
    """A function's config space as readable now (4096 bytes as root, 64 otherwise)."""
    return fs.bytes(f"sys/bus/pci/devices/{bdf}/config", limit=4096)


def file_text(fs: HostFS, rel: str) -> str | None:
    """A host file's text as it is now (for a fix's undo record); None when absent."""
    data = fs.bytes(rel, limit=1 << 20)
    return None if data is None else data.decode("utf-8", errors="replace")
