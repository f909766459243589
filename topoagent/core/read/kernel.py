"""Kernel facts that a fix needs beyond the scan's snapshot (reads only).

* the kernel release and whether the NVIDIA kernel module is the open one (DMA-BUF for
  GPUDirect RDMA needs kernel >= 5.12 and the open module);
* a PCI function's config space bytes, fresh, before a fix writes to it;
* whether a tree is this machine's running boot (a command that acts here needs that).
"""

from __future__ import annotations

from topoagent.core.errors import TopoagentError
from topoagent.core.hostfs import HostFS
from topoagent.core.parse.sysfs_values import parse_kernel_release
from topoagent.core.tree import Root, is_this_host


def kernel_release(fs: HostFS) -> tuple[int, int] | None:
    """(major, minor) of ``/proc/sys/kernel/osrelease``; None when unknown."""
    text = fs.text("proc/sys/kernel/osrelease")
    return parse_kernel_release(text) if text else None


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


#: The kernel's random id of the running boot (proc(5), ``/proc/sys/kernel/random/boot_id``):
#: the same in every container of the machine (the file is not namespaced), new at each boot.
BOOT_ID = "proc/sys/kernel/random/boot_id"


def same_boot(root: Root) -> bool:
    """Whether the tree at ``root`` is this machine as it runs now: ``/``, or a tree whose
    ``proc/sys/kernel/random/boot_id`` is this kernel's (the host's /proc mounted elsewhere, as a
    container does with ``/host/proc``).  A capture, a fake tree or another host's tree is not."""
    if is_this_host(root):
        return True
    if not isinstance(root, str):
        return False
    theirs, ours = HostFS(root).text(BOOT_ID, quiet=True), HostFS("/").text(BOOT_ID, quiet=True)
    return theirs is not None and theirs.strip() != "" and theirs == ours
