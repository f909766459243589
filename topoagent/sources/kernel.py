"""Kernel and CPU facts that a plan or a fix needs beyond the scan's snapshot (reads only).

* the CPU's identity from ``/proc/cpuinfo`` (arch, vendor, family, model), as NCCL's
  topology XML names it (NCCL src/graph/xml.cc, ``ncclTopoGetXmlFromCpu``);
* the kernel release and whether the NVIDIA kernel module is the open one (DMA-BUF for
  GPUDirect RDMA needs kernel >= 5.12 and the open module);
* a PCI function's config space bytes, fresh, before a fix writes to it.
"""

from __future__ import annotations

from topoagent.digits import is_decimal, parse_decimal
from topoagent.errors import TopoagentError
from topoagent.hostfs import HostFS


def parse_cpu_identity(text: str) -> dict[str, str]:
    """``arch``, ``vendor``, ``familyid``, ``modelid`` of the first CPU in ``/proc/cpuinfo``
    text (only those it states).  Pure."""
    fields = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    out: dict[str, str] = {}
    # The field only each architecture's cpuinfo has -> the ``arch`` NCCL's XML reader knows.
    if "vendor_id" in fields:
        out["arch"] = "x86_64"
    elif "CPU implementer" in fields:
        out["arch"] = "arm64"
    elif fields.get("cpu", "").startswith("POWER"):
        out["arch"] = "ppc64"
    if fields.get("vendor_id"):
        out["vendor"] = fields["vendor_id"]
    if is_decimal(fields.get("cpu family", "")):
        out["familyid"] = fields["cpu family"]
    if is_decimal(fields.get("model", "")):
        out["modelid"] = fields["model"]
    return out


def cpu_identity(fs: HostFS) -> dict[str, str]:
    """The CPU identity of the host below ``fs`` ({} when cpuinfo cannot be read)."""
    text = fs.text("proc/cpuinfo", truncate=True)  # the first CPU's block is enough
    return parse_cpu_identity(text) if text else {}


def kernel_release(fs: HostFS) -> tuple[int, int] | None:
    """(major, minor) of ``/proc/sys/kernel/osrelease``; None when unknown."""
    text = fs.text("proc/sys/kernel/osrelease")
    if not text:
        return None
    parts = text.split(".")
    try:
        return parse_decimal(parts[0]), parse_decimal(parts[1].split("-")[0])
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


#: The largest file whose content a change saves for its undo (configuration files are a few
#: hundred bytes; a larger one is refused, never taken for absent).
MAX_SAVED_FILE = 4 * 1024 * 1024


class UnsavableFile(TopoagentError):
    """A file a change would replace that cannot be saved whole for its undo."""


def file_text(fs: HostFS, rel: str) -> str | None:
    """A host file's content as it is now (for a fix's undo record), byte for byte: bytes that
    are not UTF-8 as lone surrogates (``surrogateescape``, PEP 383); None when absent.  Raises
    :class:`UnsavableFile` for one that exists but cannot be read whole (over
    :data:`MAX_SAVED_FILE`, not a regular file, unreadable)."""
    seen = len(fs.errors)
    data = fs.bytes(rel, limit=MAX_SAVED_FILE)
    if data is None:
        if len(fs.errors) > seen:
            raise UnsavableFile(f"/{rel}: {fs.errors[-1].error}: it cannot be saved for undo, so it is not changed")
        return None
    return data.decode("utf-8", errors="surrogateescape")
