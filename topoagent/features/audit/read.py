"""Read which processes use the GPUs and how they are placed, from ``/proc`` below the root.

Every read goes through :class:`~topoagent.core.hostfs.HostFS` relative to the root, so the
audit runs the same on this host, a fake tree and a capture.  The GPU users come from NVML's
running processes where a driver answers (the live host), else from each process's open
files: ``/proc/<pid>/fd/*`` are read as links (``readlink``), never opened, and a target
``/dev/nvidiaN`` is the GPU whose ``/proc/driver/nvidia/gpus/<bdf>/information`` says
``Device Minor: N`` (NVML's minor numbers where that file is missing), ``/dev/dri/renderD*``
and ``card*`` the PCI function ``/sys/class/drm/<name>/device`` leads to.

Per process: its threads' ``task/<tid>/status`` (``Cpus_allowed_list``), ``numa_maps`` and the
few ``environ`` variables :data:`~topoagent.features.audit.facts.ENV_KEYS` names.  ``status``
files are world-readable; ``fd``, ``numa_maps`` and ``environ`` need the right to ptrace the
process (proc(5): ``PTRACE_MODE_READ_FSCREDS``) -- the same user, or root with
``CAP_SYS_PTRACE``.  What could not be read is recorded per process, never an error.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from topoagent.core.bdf import is_bdf
from topoagent.core.digits import decimal
from topoagent.core.errors import InputError
from topoagent.core.hostfs import HostFS
from topoagent.core.read.nvml import running_processes
from topoagent.core.result import ScanResult
from topoagent.core.snapshot import NvmlGpu, ThreadAffinity
from topoagent.core.tree import Root
from topoagent.features.audit.advise import AuditReport, advise
from topoagent.features.audit.facts import ENV_KEYS, AuditFacts, ProcessFacts, Unreadable
from topoagent.features.audit.parse import (
    DeviceNode,
    device_node,
    parse_environ,
    parse_minor,
    parse_numa_maps,
    parse_status,
)

__all__ = ["NUMA_MAPS_LIMIT", "audit_host", "drm_functions", "gpu_minors", "read_audit"]

T = TypeVar("T")

#: The most of a process's ``numa_maps`` read (one line per mapping, ~100 bytes: 160,000
#: mappings); a larger one is counted from its first part, and the report says so.
NUMA_MAPS_LIMIT = 16 << 20
#: The most of an ``environ`` read (Linux caps argv + envp at a quarter of the stack limit).
ENVIRON_LIMIT = 4 << 20
NVIDIA_GPUS = "proc/driver/nvidia/gpus"


def _attempt(fs: HostFS, read: Callable[[], T]) -> tuple[T, str | None]:
    """Run one read; its value and why it failed (the probe error it recorded, taken back:
    a process's unreadable file is a fact of the audit, not a failed probe of the scan)."""
    mark = len(fs.errors)
    value = read()
    new = fs.errors[mark:]
    del fs.errors[mark:]
    return value, (new[0].error if new else None)


def gpu_minors(fs: HostFS, nvml_gpus: tuple[NvmlGpu, ...] = ()) -> dict[int, str]:
    """``/dev/nvidiaN`` minor -> GPU BDF: the driver's ``information`` files, then NVML's minor
    numbers for GPUs those do not name.  Nothing is guessed from PCI order."""
    out: dict[int, str] = {}
    for entry in fs.listdir(NVIDIA_GPUS):
        if not is_bdf(entry):
            continue
        text = fs.text(f"{NVIDIA_GPUS}/{entry}/information", quiet=True)
        minor = parse_minor(text) if text else None
        if minor is not None:
            out[minor] = entry.lower()
    for g in nvml_gpus:
        if g.minor is not None and g.minor not in out and g.bdf not in out.values():
            out[g.minor] = g.bdf
    return out


def drm_functions(fs: HostFS) -> dict[str, str]:
    """DRM node name (``renderD128``, ``card1``) -> the PCI function behind it
    (``/sys/class/drm/<name>/device``)."""
    out: dict[str, str] = {}
    for name in fs.listdir("sys/class/drm"):
        if not name.startswith(("renderD", "card")) or "-" in name:  # card1-DP-1: a connector
            continue
        real = fs.resolve(f"sys/class/drm/{name}/device")
        last = real.rsplit("/", 1)[-1] if real else ""
        if is_bdf(last):
            out[name] = last.lower()
    return out


def _pids(fs: HostFS) -> list[int]:
    return sorted(pid for n in (fs.names("proc") or ()) if (pid := decimal(n)) is not None)


def _nodes_held(fs: HostFS, pid: int) -> tuple[list[DeviceNode] | None, str | None]:
    """The GPU device nodes a process holds open (each once); None and why, where its fd
    directory cannot be listed."""
    fds, why = _attempt(fs, lambda: fs.listdir(f"proc/{pid}/fd"))
    if why is not None:
        return None, why
    held: dict[str, DeviceNode] = {}
    for fd in fds:
        target = fs.link_target(f"proc/{pid}/fd/{fd}")
        node = device_node(target) if target else None
        if node is not None:
            held.setdefault(node.path, node)
    return list(held.values()), None


def _gpu_of(node: DeviceNode, minors: Mapping[int, str], drm: Mapping[str, str]) -> str | None:
    if node.kind == "nvidia":
        return minors.get(node.number)
    name = f"renderD{node.number}" if node.kind == "render" else f"card{node.number}"
    return drm.get(name)


def _threads(fs: HostFS, pid: int) -> tuple[tuple[ThreadAffinity, ...] | None, str | None]:
    tids, why = _attempt(fs, lambda: fs.listdir(f"proc/{pid}/task"))
    if why is not None or not tids:
        return None, why or "no threads listed (the process ended?)"
    out = []
    for tid in (n for t in tids if (n := decimal(t)) is not None):
        text = fs.text(f"proc/{pid}/task/{tid}/status", quiet=True)
        cpus = parse_status(text).cpus if text else None
        if cpus is not None:
            out.append(ThreadAffinity(tid, cpus))
    return (tuple(out), None) if out else (None, "no thread's status could be read")


def process_facts(
    fs: HostFS, pid: int, gpus: tuple[str, ...], devices: tuple[str, ...], unknown: tuple[str, ...]
) -> ProcessFacts | Unreadable:
    """Everything the audit reads of one process using ``gpus``; Unreadable where even its
    ``status`` is gone (it ended, or lives in another PID namespace).  A file that does not
    parse loses its own facts, named in ``unread``, never the process."""
    text, why = _attempt(fs, lambda: fs.text(f"proc/{pid}/status"))
    if not text:
        return Unreadable(pid, why or "not in /proc (it ended, or runs in another PID namespace)")
    status = parse_status(text)
    unread: list[str] = []
    threads, why = _threads(fs, pid)
    if why is not None:
        unread.append(f"task/*/status: {why}")
    raw, why = _attempt(fs, lambda: fs.bytes(f"proc/{pid}/numa_maps", limit=NUMA_MAPS_LIMIT, truncate=True))
    memory = None
    truncated = False
    if raw is None:
        unread.append(f"numa_maps: {why or 'absent (a kernel without NUMA)'}")
    else:
        truncated = len(raw) >= NUMA_MAPS_LIMIT
        try:
            memory = parse_numa_maps(raw.decode("utf-8", "replace"))
        except InputError as exc:
            unread.append(f"numa_maps: unparsable ({exc})")
    env_raw, why = _attempt(fs, lambda: fs.bytes(f"proc/{pid}/environ", limit=ENVIRON_LIMIT, truncate=True))
    env = None
    if env_raw is None:
        unread.append(f"environ: {why or 'absent'}")
    else:
        env = parse_environ(env_raw, ENV_KEYS)
    return ProcessFacts(
        pid=pid,
        name=status.name,
        uid=status.uid,
        gpus=gpus,
        devices=devices,
        unknown=unknown,
        threads=threads,
        memory=memory,
        memory_truncated=truncated,
        env=env,
        unread=tuple(unread),
    )


def _from_fds(fs: HostFS, minors: Mapping[int, str], drm: Mapping[str, str]) -> tuple[list[Any], list[Unreadable], int]:
    """(pid, gpus, devices, unknown) of every process holding a GPU device node; the processes
    whose fd directory could not be listed; how many were looked at."""
    users: list[Any] = []
    unreadable: list[Unreadable] = []
    pids = _pids(fs)
    for pid in pids:
        nodes, why = _nodes_held(fs, pid)
        if nodes is None:
            # A kernel thread (or a zombie) has an empty cmdline and no open files: not worth naming.
            if why is not None and fs.text(f"proc/{pid}/cmdline", quiet=True):
                unreadable.append(Unreadable(pid, f"fd: {why}"))
            continue
        if not nodes:
            continue
        gpus = {g: None for n in nodes if (g := _gpu_of(n, minors, drm)) is not None}
        unknown = tuple(n.path for n in nodes if _gpu_of(n, minors, drm) is None)
        users.append((pid, tuple(gpus), tuple(n.path for n in nodes), unknown))
    return users, unreadable, len(pids)


def read_audit(
    fs: HostFS,
    *,
    nvml_pids: Mapping[str, tuple[int, ...]] | None = None,
    why_fd: str | None = None,
    nvml_gpus: tuple[NvmlGpu, ...] = (),
) -> AuditFacts:
    """Read the GPU users below ``fs``'s root and their placement.  ``nvml_pids``: NVML's
    running processes by GPU BDF (None: NVML was not asked or could not say -- ``why_fd``
    says why -- so open device nodes decide)."""
    as_root = os.geteuid() == 0
    if nvml_pids is not None:
        by_pid: dict[int, list[str]] = {}
        for bdf, pids in nvml_pids.items():
            for pid in pids:
                by_pid.setdefault(pid, []).append(bdf)
        users = [(pid, tuple(gpus), ("nvml",), ()) for pid, gpus in sorted(by_pid.items())]
        unreadable: list[Unreadable] = []
        examined = len(users)
        source = "nvml"
    else:
        users, unreadable, examined = _from_fds(fs, gpu_minors(fs, nvml_gpus), drm_functions(fs))
        source = "fd"
    processes: list[ProcessFacts] = []
    for pid, gpus, devices, unknown in users:
        got = process_facts(fs, pid, gpus, devices, unknown)
        if isinstance(got, Unreadable):
            unreadable.append(got)
        else:
            processes.append(got)
    return AuditFacts(
        source=source,
        processes=tuple(processes),
        unreadable=tuple(sorted(unreadable, key=lambda u: u.pid)),
        examined=examined,
        why_fd=why_fd if source == "fd" else None,
        as_root=as_root,
    )


def audit_host(result: ScanResult, root: Root, *, ask_nvml: bool, why_not: str | None = None) -> AuditReport:
    """Audit the processes below ``root`` against its scan ``result``: NVML's running processes
    where ``ask_nvml`` (the live host) and a driver answers, else open device nodes (``why_not``:
    why NVML is not asked).  What ``topoagent audit`` prints and the daemon exports."""
    nvml_pids = None
    why_fd = why_not
    if ask_nvml:
        running = running_processes()
        if running.why_not is None:
            nvml_pids = running.by_bdf
        why_fd = running.why_not
    facts = read_audit(HostFS(root), nvml_pids=nvml_pids, why_fd=why_fd, nvml_gpus=result.topology.nvml_gpus)
    return advise(result, facts)
