"""The audit as people and programs read it: a table with the findings (``text``), or one JSON
object whose ``findings`` have the scan contract's shape (``json``)."""

from __future__ import annotations

from typing import Literal

import msgspec

from topoagent.core.render.escape import shown
from topoagent.core.render.json_report import FindingEntry, Tool, encode, finding_entry
from topoagent.core.render.verdict import unknown_line, unusable_line
from topoagent.core.result import ScanResult
from topoagent.core.version import __version__
from topoagent.features.audit.advise import AuditReport, GpuUse, ProcessReport, gib

__all__ = ["AUDIT_SCHEMA_VERSION", "render_json", "render_text"]

AUDIT_SCHEMA_VERSION: Literal[1] = 1
#: Processes not read that a report names one by one; the rest are counted.
_SHOWN_PIDS = 20


class ProcessEntry(msgspec.Struct, frozen=True):
    """One process using GPUs (``processes[]``)."""

    pid: int
    name: str | None
    uid: int | None
    gpus: list[str]
    devices: list[str]
    unknown_devices: list[str]
    numa_nodes: list[int]
    placement: str
    threads: int | None
    threads_off_node: int | None
    cpus: str | None
    memory_bytes: dict[str, int] | None
    memory_off_node_bytes: int | None
    memory_truncated: bool
    policies: list[str]
    env: dict[str, str] | None
    unread: list[str]
    codes: list[str]


class GpuEntry(msgspec.Struct, frozen=True):
    """One GPU (``gpus[]``): its node and CPUs, the processes using it, those a finding names."""

    gpu: str
    bdf: str | None
    numa_node: int | None
    cpus: str | None
    processes: list[int]
    misplaced: list[int]
    by_code: dict[str, list[int]]
    usable: bool = True


class UnreadEntry(msgspec.Struct, frozen=True):
    """A process that could not be read (``unreadable[]``)."""

    pid: int
    why: str


class AuditDoc(msgspec.Struct, frozen=True):
    """``topoagent audit --format json``."""

    schema_version: Literal[1]
    tool: Tool
    hostname: str | None
    root: str | None
    source: str
    why_fd: str | None
    as_root: bool
    examined: int
    processes: list[ProcessEntry]
    gpus: list[GpuEntry]
    unreadable: list[UnreadEntry]
    findings: list[FindingEntry]


def _process(p: ProcessReport) -> ProcessEntry:
    return ProcessEntry(
        p.pid,
        p.name,
        p.uid,
        list(p.gpus),
        list(p.devices),
        list(p.unknown_devices),
        list(p.numa_nodes),
        p.placement,
        p.threads,
        p.threads_off_node,
        str(p.cpus) if p.cpus is not None else None,
        {str(n): b for n, b in p.memory_bytes.items()} if p.memory_bytes is not None else None,
        p.memory_off_node_bytes,
        p.memory_truncated,
        list(p.policies),
        p.env,
        list(p.unread),
        list(p.codes),
    )


def _gpu(g: GpuUse, usable: bool) -> GpuEntry:
    return GpuEntry(
        g.gpu,
        g.bdf,
        g.numa_node,
        str(g.cpus) if g.cpus is not None else None,
        list(g.processes),
        list(g.misplaced),
        {c: list(v) for c, v in g.by_code.items()},
        usable,
    )


def render_json(result: ScanResult, report: AuditReport, *, pretty: bool = False) -> str:
    """The audit as one JSON object; ``findings`` are the result's (the host's: the scan's and
    the audit's, :func:`~topoagent.core.result.with_findings`)."""
    topo = result.topology
    doc = AuditDoc(
        schema_version=AUDIT_SCHEMA_VERSION,
        tool=Tool("topoagent", __version__),
        hostname=topo.hostname,
        root=topo.root,
        source=report.source,
        why_fd=report.why_fd,
        as_root=report.as_root,
        examined=report.examined,
        processes=[_process(p) for p in report.processes],
        gpus=[_gpu(g, g.gpu not in result.unusable) for g in report.gpus],
        unreadable=[UnreadEntry(u.pid, u.why) for u in report.unreadable],
        findings=[finding_entry(f) for f in result.findings],
    )
    return encode(doc, pretty=pretty)


def _memory(p: ProcessReport) -> str:
    if p.memory_bytes is None:
        return "?"
    total = sum(p.memory_bytes.values())
    if not total:
        return "0"
    off = p.memory_off_node_bytes
    where = f", {100 * off // total}% off" if off else ""
    return gib(total) + where + ("+" if p.memory_truncated else "")


def _row(p: ProcessReport) -> list[str]:
    threads = (
        "?"
        if p.threads is None
        else (f"{p.threads_off_node}/{p.threads} off" if p.threads_off_node else str(p.threads))
    )
    return [
        str(p.pid),
        shown(p.name or "?")[:16],
        ",".join(p.gpus) or "?",
        ",".join(map(str, p.numa_nodes)) or "?",
        p.placement,
        threads,
        str(p.cpus) if p.cpus is not None else "?",
        _memory(p),
        shown((p.env or {}).get("NCCL_IB_HCA", "-")) if p.env is not None else "?",
    ]


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def _unread_lines(report: AuditReport) -> list[str]:
    lines = []
    if report.unreadable:
        pids = " ".join(str(u.pid) for u in report.unreadable[:_SHOWN_PIDS])
        more = f" (and {len(report.unreadable) - _SHOWN_PIDS} more)" if len(report.unreadable) > _SHOWN_PIDS else ""
        why = sorted({u.why for u in report.unreadable})
        lines.append(f"Not read: {len(report.unreadable)} process(es): {pids}{more}")
        lines += [f"  {shown(w)}" for w in why[:5]]
        if not report.as_root:
            lines.append(
                "  Other users' processes can be read only by root (with CAP_SYS_PTRACE): run it as root to audit them."
            )
    for p in report.processes:
        for what in p.unread:
            lines.append(f"pid {p.pid}: not read: {shown(what)}")
        for dev in p.unknown_devices:
            lines.append(f"pid {p.pid}: holds {shown(dev)}, which no GPU of this host answers to")
    return lines


def render_text(result: ScanResult, report: AuditReport) -> str:
    """The audit as a person reads it: a table of the processes, the findings, what was not read."""
    host = shown(result.topology.hostname or "this host")
    how = (
        "NVML's running processes"
        if report.source == "nvml"
        else "open GPU device nodes" + (f" (NVML: {shown(report.why_fd)})" if report.why_fd else "")
    )
    lines = [f"{host}: {len(report.processes)} process(es) using GPUs, found by {how}; {report.examined} examined."]
    if report.processes:
        head = ["PID", "NAME", "GPUS", "NODES", "PLACEMENT", "THREADS", "CPUS", "MEMORY", "NCCL_IB_HCA"]
        lines += _table([head, *(_row(p) for p in report.processes)])
    for f in report.findings:
        lines.append(f"{f.severity.label.upper()} {f.code}: {shown(f.message)}")
        lines += [f"    {shown(e.path)}: {shown(e.value or '')}" for e in f.evidence]
        lines.append(f"    remedy: {shown(f.remedy)}")
    if not report.findings:
        lines.append("No misplaced process found.")
    lines += _unread_lines(report)
    lines += _host_lines(result, report)
    return "\n".join(lines) + "\n"


def _host_lines(result: ScanResult, report: AuditReport) -> list[str]:
    """The rest of the host's verdict (``result``: the scan's findings with the audit's): the
    unusable GPUs, what is unknown, and the scan's own findings, counted, worst first."""
    lines = [x for x in (unusable_line(result), unknown_line(result)) if x is not None]
    own = [f for f in result.findings if f not in report.findings]
    if own:
        worst = own[0]  # most severe first: the one order
        named = f"{worst.code} {', '.join(worst.subjects[:3])}"
        lines.append(
            f"Scan: {len(own)} finding(s), worst {worst.severity.label}: {shown(named)} (topoagent scan lists them)"
        )
    return lines
