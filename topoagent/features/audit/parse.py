"""Pure parsers of what the audit reads from ``/proc``: a task's ``status``, a process's
``numa_maps`` and ``environ``, the NVIDIA driver's ``information`` file, an fd link's target,
and NCCL's ``NCCL_IB_HCA`` list.  None of them sees a path; each is tested on real strings.
"""

from __future__ import annotations

import re

import msgspec

from topoagent.core.cpuset import CpuSet
from topoagent.core.digits import decimal
from topoagent.core.errors import InputError

__all__ = [
    "DeviceNode",
    "HcaList",
    "MemoryPlacement",
    "TaskStatus",
    "device_node",
    "parse_environ",
    "parse_hca_list",
    "parse_minor",
    "parse_numa_maps",
    "parse_status",
]


class TaskStatus(msgspec.Struct, frozen=True):
    """What the audit uses of ``/proc/<pid>/status`` (or ``task/<tid>/status``, proc(5)); each
    None where its line is absent or does not parse."""

    name: str | None = None
    uid: int | None = None
    #: ``Cpus_allowed_list``: the CPUs the task may run on (its affinity within its cpuset).
    cpus: CpuSet | None = None


def parse_status(text: str) -> TaskStatus:
    """``Name``, the real ``Uid`` and ``Cpus_allowed_list``, each read on its own: a line that
    does not parse loses its own fact, never the others' (nothing else is read; never raises)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key] = value.strip()
    uid = fields.get("Uid", "").split()
    try:
        cpus = CpuSet.parse(fields["Cpus_allowed_list"]) if "Cpus_allowed_list" in fields else None
    except InputError:
        cpus = None
    return TaskStatus(name=fields.get("Name"), uid=decimal(uid[0]) if uid else None, cpus=cpus)


class MemoryPlacement(msgspec.Struct, frozen=True):
    """Where a process's anonymous memory lives, by NUMA node, and its memory policies."""

    #: node -> bytes of anonymous memory (heap, stacks, anonymous mappings) resident there.
    bytes_by_node: dict[int, int] = msgspec.field(default_factory=dict)
    #: The policies other than ``default`` its mappings carry (``bind:1``, ``prefer:0``), each once.
    policies: tuple[str, ...] = ()


#: numa_maps policy names (mm/mempolicy.c, ``policy_modes`` and ``mpol_to_str``): two hold a space.
_POLICY = re.compile(r"^[0-9a-f]+ (weighted interleave|prefer \(many\)|[a-z]+)(\S*)")
_NODE_PAGES = re.compile(r"^N([0-9]+)=([0-9]+)$")


def parse_numa_maps(text: str) -> MemoryPlacement:
    """``/proc/<pid>/numa_maps`` (Documentation/filesystems/proc.rst, "numa_maps"): one line per
    mapping, ``ADDRESS POLICY [file=PATH] ... N<node>=<pages> ... kernelpagesize_kB=<k>``.

    Counted: the pages of mappings without ``file=`` (anonymous memory: what the process itself
    allocated); a file's pages are the page cache's, shared with every reader.  A policy names
    its mode, ``=static``/``=relative`` flags, then ``:`` and its nodes (``bind:0-1``); mappings
    that say ``default`` follow the task's own policy, which numa_maps does not show.  Raises
    :class:`~topoagent.core.errors.InputError` for a count that is no number the kernel writes
    (a total without it would be wrong).
    """
    by_node: dict[int, int] = {}
    policies: dict[str, None] = {}
    for line in text.splitlines():
        m = _POLICY.match(line)
        if not m:
            continue
        policy = m.group(1) + m.group(2)
        if policy != "default":
            policies[policy] = None
        words = line[m.end() :].split()
        if any(w.startswith("file=") for w in words):
            continue
        sizes = (decimal(w.partition("=")[2]) for w in words if w.startswith("kernelpagesize_kB="))
        page_kb = next((v for v in sizes if v is not None), 4)
        for w in words:
            n = _NODE_PAGES.match(w)
            if n:
                node, pages = decimal(n.group(1)), decimal(n.group(2))
                if node is None or pages is None:
                    raise InputError(f"not a page count the kernel writes: {w[:40]!r}")
                by_node[node] = by_node.get(node, 0) + pages * page_kb * 1024
    return MemoryPlacement(dict(sorted(by_node.items())), tuple(policies))


def policy_nodes(policy: str) -> CpuSet | None:
    """The nodes a numa_maps policy names (``bind:0-1`` -> {0, 1}); None where it names none
    (``local``, ``default``)."""
    _, sep, nodes = policy.partition(":")
    if not sep:
        return None
    try:
        return CpuSet.parse(nodes)
    except ValueError:
        return None


def parse_environ(data: bytes, keep: tuple[str, ...]) -> dict[str, str]:
    """The ``keep`` variables of ``/proc/<pid>/environ`` (NUL-separated ``NAME=value``: the
    environment the process was started with).  Nothing else is kept: an environment holds
    secrets."""
    out: dict[str, str] = {}
    for item in data.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep:
            key = name.decode("utf-8", "replace")
            if key in keep:
                out[key] = value.decode("utf-8", "replace")
    return out


def parse_minor(text: str) -> int | None:
    """``Device Minor:`` of ``/proc/driver/nvidia/gpus/<bdf>/information`` (the NVIDIA driver's
    procfs, kernel-open/nvidia/nv-procfs.c): the N of the GPU's ``/dev/nvidiaN``."""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "Device Minor":
            return decimal(value.strip())
    return None


class DeviceNode(msgspec.Struct, frozen=True):
    """A GPU device node an fd leads to: ``nvidia`` (``/dev/nvidiaN``: minor N), ``render``
    (``/dev/dri/renderDN``) or ``card`` (``/dev/dri/cardN``)."""

    kind: str
    number: int
    path: str


_NODES = (
    ("nvidia", re.compile(r"^dev/nvidia([0-9]+)$")),
    ("render", re.compile(r"^dev/dri/renderD([0-9]+)$")),
    ("card", re.compile(r"^dev/dri/card([0-9]+)$")),
)


def device_node(target: str) -> DeviceNode | None:
    """The GPU device node an fd link's target names (root-relative: ``dev/nvidia3``); None for
    anything else -- ``nvidiactl``, ``nvidia-uvm``, files, sockets, and a number longer than
    a device number is (a minor has 20 bits: include/linux/kdev_t.h, ``MINORBITS``)."""
    for kind, pattern in _NODES:
        m = pattern.match(target)
        number = decimal(m.group(1), digits=7) if m else None
        if number is not None:
            return DeviceNode(kind, number, "/" + target)
    return None


class HcaList(msgspec.Struct, frozen=True):
    """``NCCL_IB_HCA`` as NCCL reads it (src/transport/net_ib.cc, ``ncclIbInit``; parsing and
    matching in src/misc/utils.cc, ``parseStringList``/``matchIfList``): a leading ``^``
    excludes, then ``=`` matches whole names instead of prefixes; entries are ``name[:port]``."""

    exclude: bool
    exact: bool
    entries: tuple[tuple[str, int | None], ...]

    def allows(self, device: str, port: int | None = None) -> bool:
        """Whether NCCL would use ``device`` (port ``port``; None: any) under this list."""
        if not self.entries:
            matched = True  # matchIfList: an empty list matches everything
        else:
            matched = any(
                (device == name if self.exact else device.startswith(name))
                and (want is None or port is None or want == port)
                for name, want in self.entries
            )
        return matched != self.exclude


def parse_hca_list(value: str) -> HcaList:
    """``NCCL_IB_HCA``'s value: ``^`` first, then ``=``, then comma-separated ``name[:port]``
    (a name runs up to ``:`` or ``,``; empty names are skipped, as parseStringList does).  A
    port is read as NCCL's ``atoi`` reads it, digits up to the first other character; one
    longer than a number (whose ``atoi`` C leaves undefined) names no port."""
    text = value
    exclude = text.startswith("^")
    text = text[1:] if exclude else text
    exact = text.startswith("=")
    text = text[1:] if exact else text
    entries: list[tuple[str, int | None]] = []
    for item in text.split(","):
        name, sep, port = item.partition(":")
        if not name:
            continue
        digits = re.match(r"[0-9]*", port).group(0) if sep else ""  # type: ignore[union-attr]
        entries.append((name, (decimal(digits) if digits else 0) if sep else None))
    return HcaList(exclude, exact, tuple(entries))
