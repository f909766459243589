"""Judge what the audit read against the scan: each process's threads, memory and NICs
against its GPUs' NUMA node, CPUs and rail NICs.  Pure: facts and a scan result in, a report
with findings out: the catalogue's family ``audit``
(:mod:`topoagent.core.findings.catalogue`), raised here.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from topoagent.core.advice.plan import gpu_cpus
from topoagent.core.cpuset import CpuSet
from topoagent.core.findings import Evidence, Finding, Severity, sort_findings
from topoagent.core.findings.catalogue import finding
from topoagent.core.pci import DeviceKind
from topoagent.core.result import ScanResult
from topoagent.core.snapshot import host_path
from topoagent.core.topology import Device, Topology
from topoagent.features.audit.facts import AuditFacts, ProcessFacts, Unreadable
from topoagent.features.audit.parse import parse_hca_list, policy_nodes

__all__ = ["MEMORY_MIN_BYTES", "AuditReport", "GpuUse", "ProcessReport", "advise", "gib"]

#: Below this much anonymous memory off the GPU's node a process is not flagged for it: the
#: pages a small process touches cost little wherever they are.
MEMORY_MIN_BYTES = 256 << 20


class ProcessReport(msgspec.Struct, frozen=True):
    """One process as the audit judged it.

    ``placement``: ``gpu-node`` (every thread on its GPUs' node), ``unbound`` (threads may run
    there and elsewhere), ``off-node`` (some thread may run only elsewhere) or ``unknown``.
    """

    pid: int
    name: str | None
    uid: int | None
    gpus: tuple[str, ...]
    devices: tuple[str, ...]
    unknown_devices: tuple[str, ...]
    numa_nodes: tuple[int, ...]
    threads: int | None
    threads_off_node: int | None
    cpus: CpuSet | None
    placement: str
    memory_bytes: dict[int, int] | None
    memory_off_node_bytes: int | None
    memory_truncated: bool
    policies: tuple[str, ...]
    env: dict[str, str] | None
    unread: tuple[str, ...]
    codes: tuple[str, ...] = ()


class GpuUse(msgspec.Struct, frozen=True):
    """One GPU: how many processes use it and how many of those a finding names."""

    gpu: str
    bdf: str | None
    numa_node: int | None
    cpus: CpuSet | None
    processes: tuple[int, ...]
    misplaced: tuple[int, ...]
    #: code -> the processes it names on this GPU.
    by_code: dict[str, tuple[int, ...]] = msgspec.field(default_factory=dict)


class AuditReport(msgspec.Struct, frozen=True):
    """The whole audit: every process using a GPU, every GPU, the findings, what was not read."""

    source: str
    processes: tuple[ProcessReport, ...]
    gpus: tuple[GpuUse, ...]
    findings: tuple[Finding, ...]
    unreadable: tuple[Unreadable, ...]
    examined: int
    why_fd: str | None
    as_root: bool


def gib(n: int) -> str:
    """Bytes as a person reads them (``12.3 GiB``, ``512 MiB``, ``12 KiB``)."""
    if n >= 1 << 30:
        return f"{n / (1 << 30):.1f} GiB"
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


class _Place(msgspec.Struct, frozen=True):
    """Where a process's GPUs are: the CPUs and nodes near them, their sockets."""

    gpus: tuple[Device, ...]
    cpus: CpuSet | None
    nodes: frozenset[int]
    sockets: frozenset[int]


def _place(topo: Topology, gpus: tuple[Device, ...]) -> _Place:
    cpus: CpuSet | None = None
    for g in gpus:
        near = gpu_cpus(topo, g)
        if near is not None:
            cpus = near if cpus is None else cpus | near
    ids = {g.id for g in gpus}
    nodes = {g.numa_node for g in gpus if g.numa_node is not None}
    nodes |= {n.id for n in topo.nodes if n.gpu in ids}  # a Grace GPU's own memory node
    return _Place(gpus, cpus, frozenset(nodes), frozenset(g.socket for g in gpus if g.socket is not None))


def _sockets_of(topo: Topology, cpus: Iterable[int]) -> set[int]:
    wanted = CpuSet(cpus)
    return {s.id for s in topo.sockets if s.cpus & wanted}


def _severity(place: _Place, sockets: set[int]) -> Severity:
    """Warning where the process reaches across sockets; info where it stays on its GPUs'
    socket (another node of it: AMD NPS, Intel SNC) or the sockets are unknown."""
    return Severity.WARNING if place.sockets and sockets - place.sockets else Severity.INFO


def _who(p: ProcessFacts) -> str:
    return f"pid {p.pid}" + (f" ({p.name})" if p.name else "")


def _apply_hint(result: ScanResult, p: ProcessFacts, place: _Place) -> str:
    """``topoagent apply --pid`` for this process's GPU (or its GPUs' node)."""
    index = {g.gpu: g.cuda_index for g in result.plan.gpus}
    if len(place.gpus) == 1 and place.gpus[0].id in index:
        target = f"--gpu {index[place.gpus[0].id]}"
    elif len(place.nodes) >= 1:
        target = f"--node {min(place.nodes)}"
    else:
        return "bind it to its GPU's CPUs (taskset -a -p)"
    return f"topoagent apply --pid {p.pid} {target} --yes (every thread; undo: topoagent apply --undo --yes)"


def _exec_hint(result: ScanResult, place: _Place, extra: str = "") -> str:
    index = {g.gpu: g.cuda_index for g in result.plan.gpus}
    which = f"--gpu {index[place.gpus[0].id]}" if len(place.gpus) == 1 and place.gpus[0].id in index else "--auto"
    return f"topoagent exec {which}{extra} -- CMD"


def _cpu_finding(result: ScanResult, p: ProcessFacts, place: _Place) -> tuple[Finding | None, int | None]:
    """PROCESS_CPUS_OFF_GPU_NODE, and how many threads may run on none of the GPUs' CPUs."""
    if p.threads is None or place.cpus is None:
        return None, None
    off = [t for t in p.threads if not t.cpus & place.cpus]
    if not off:
        return None, 0
    topo = result.topology
    where = CpuSet().union(*(t.cpus for t in off))
    gpus = ", ".join(f"{g.id} (NUMA node {g.numa_node})" for g in place.gpus)
    evidence = tuple(
        Evidence(host_path(f"proc/{p.pid}/task/{t.tid}/status"), f"Cpus_allowed_list: {t.cpus}") for t in off[:3]
    )
    evidence += tuple(
        Evidence(host_path(f"sys/bus/pci/devices/{g.bdf}/numa_node"), str(g.numa_node)) for g in place.gpus if g.bdf
    )
    found = finding(
        "PROCESS_CPUS_OFF_GPU_NODE",
        (*(g.id for g in place.gpus), f"pid:{p.pid}"),
        evidence,
        severity=_severity(place, _sockets_of(topo, where)),
        who=_who(p),
        gpus=gpus,
        off=len(off),
        threads=len(p.threads),
        where=where,
        cpus=place.cpus,
        apply=_apply_hint(result, p, place),
        exec=_exec_hint(result, place),
    )
    return found, len(off)


def _memory_finding(result: ScanResult, p: ProcessFacts, place: _Place) -> tuple[Finding | None, int | None]:
    """PROCESS_MEMORY_OFF_GPU_NODE, and the anonymous bytes off the GPUs' nodes."""
    if p.memory is None or not place.nodes:
        return None, None
    topo = result.topology
    total = sum(p.memory.bytes_by_node.values())
    off_nodes = {n: b for n, b in p.memory.bytes_by_node.items() if n not in place.nodes and b}
    off = sum(off_nodes.values())
    wrong = [pol for pol in p.memory.policies if (ns := policy_nodes(pol)) is not None and ns and not ns & place.nodes]
    heavy = off >= MEMORY_MIN_BYTES and off * 2 > total
    if not heavy and not wrong:
        return None, off
    spots = set(off_nodes) | {n for pol in wrong for n in (policy_nodes(pol) or ())}
    node_sockets = {n.socket for n in topo.nodes if n.id in spots and n.socket is not None}
    home = min(place.nodes)
    said = []
    if heavy:
        said.append(
            f"{gib(off)} of its {gib(total)} of anonymous memory lives on NUMA node(s) "
            f"{', '.join(map(str, sorted(off_nodes)))}"
        )
    if wrong:
        others = sorted({n for pol in wrong for n in (policy_nodes(pol) or ())})
        said.append(
            f"its memory policy ({', '.join(wrong)}) puts new pages on node(s) {', '.join(map(str, others))} only"
        )
    where = ", ".join(f"{g.id}'s node {g.numa_node}" for g in place.gpus)
    shown = " ".join(f"N{n}={gib(b)}" for n, b in p.memory.bytes_by_node.items())
    evidence = (
        Evidence(
            host_path(f"proc/{p.pid}/numa_maps"),
            f"anonymous: {shown}" + (f"; policies: {' '.join(p.memory.policies)}" if p.memory.policies else ""),
        ),
    )
    found = finding(
        "PROCESS_MEMORY_OFF_GPU_NODE",
        (*(g.id for g in place.gpus), f"pid:{p.pid}"),
        evidence,
        severity=Severity.WARNING if node_sockets - place.sockets and place.sockets else Severity.INFO,
        who=_who(p),
        where=where,
        said=" and ".join(said),
        pid=p.pid,
        from_nodes=",".join(map(str, sorted(off_nodes) or sorted(spots))),
        home=home,
        exec=_exec_hint(result, place, " --mem bind"),
        policy=" -- its policy stays until it restarts." if wrong else ".",
    )
    return found, off


def _hca_finding(result: ScanResult, p: ProcessFacts, place: _Place) -> Finding | None:
    """PROCESS_HCA_NOT_RAIL: NCCL_IB_HCA leaves out every RDMA device of the rail NICs of every
    GPU the process uses.  A process holding several GPUs' device nodes (CUDA opens every GPU
    it sees) is flagged only when none of them keeps a rail: which one it computes on is not
    known."""
    value = (p.env or {}).get("NCCL_IB_HCA")
    if value is None:
        return None
    topo = result.topology
    hca = parse_hca_list(value)
    nics = []
    for g in place.gpus:
        rail = result.rails.rail(g.id)
        nics += [n for nid in (rail.nics if rail else ()) if (n := topo.by_id(nid)) is not None and n.rdma_devices]
    nics = list({n.id: n for n in nics}.values())
    names = [r for n in nics for r in n.rdma_devices]
    if not names or any(hca.allows(r) for r in names):
        return None
    first = next((x for x in result.plan.gpus if x.gpu == place.gpus[0].id), None)
    node_env = dict(first.env).get("NCCL_IB_HCA") if first is not None else None
    gpus = ", ".join(g.id for g in place.gpus)
    rails = ", ".join(f"{n.id} ({' '.join(n.rdma_devices)})" for n in nics)
    return finding(
        "PROCESS_HCA_NOT_RAIL",
        (*(g.id for g in place.gpus), *(n.id for n in nics), f"pid:{p.pid}"),
        (
            Evidence(host_path(f"proc/{p.pid}/environ"), f"NCCL_IB_HCA={value}"),
            *(Evidence(host_path(f"sys/class/infiniband/{r}/device"), n.bdf) for n in nics for r in n.rdma_devices),
        ),
        who=_who(p),
        gpus=gpus,
        rails=rails,
        value=repr(value),
        names=", ".join(names),
        node_env=f" ({node_env})" if node_env else "",
        index=first.cuda_index if first is not None else 0,
    )


def _placement(p: ProcessFacts, place: _Place, off: int | None) -> str:
    if p.threads is None or place.cpus is None or off is None:
        return "unknown"
    if off:
        return "off-node"
    return "gpu-node" if all(t.cpus <= place.cpus for t in p.threads) else "unbound"


def _judge(result: ScanResult, p: ProcessFacts) -> tuple[ProcessReport, list[Finding]]:
    topo = result.topology
    gpus = tuple(d for b in p.gpus if (d := topo.by_bdf(b)) is not None and d.kind is DeviceKind.GPU)
    place = _place(topo, gpus)
    findings: list[Finding] = []
    cpu, off_threads = _cpu_finding(result, p, place) if gpus else (None, None)
    mem, off_bytes = _memory_finding(result, p, place) if gpus else (None, None)
    hca = _hca_finding(result, p, place) if gpus else None
    findings = [f for f in (cpu, mem, hca) if f is not None]
    report = ProcessReport(
        pid=p.pid,
        name=p.name,
        uid=p.uid,
        gpus=tuple(g.id for g in gpus),
        devices=p.devices,
        unknown_devices=p.unknown + tuple(b for b in p.gpus if not any(g.bdf == b for g in gpus)),
        numa_nodes=tuple(sorted(place.nodes)),
        threads=len(p.threads) if p.threads is not None else None,
        threads_off_node=off_threads,
        cpus=CpuSet().union(*(t.cpus for t in p.threads)) if p.threads else None,
        placement=_placement(p, place, off_threads) if gpus else "unknown",
        memory_bytes=dict(p.memory.bytes_by_node) if p.memory is not None else None,
        memory_off_node_bytes=off_bytes,
        memory_truncated=p.memory_truncated,
        policies=p.memory.policies if p.memory is not None else (),
        env=p.env,
        unread=p.unread,
        codes=tuple(f.code for f in findings),
    )
    return report, findings


def advise(result: ScanResult, facts: AuditFacts) -> AuditReport:
    """The audit of ``facts`` on the scanned host: per process, per GPU, and the findings."""
    topo = result.topology
    processes: list[ProcessReport] = []
    findings: list[Finding] = []
    for p in facts.processes:
        report, found = _judge(result, p)
        processes.append(report)
        findings += found
    gpus = []
    for g in topo.gpus:
        users = tuple(r.pid for r in processes if g.id in r.gpus)
        by_code: dict[str, list[int]] = {}
        for f in findings:
            if g.id in f.subjects:
                pid = int(f.subjects[-1].removeprefix("pid:"))
                by_code.setdefault(f.code, []).append(pid)
        bad = tuple(sorted({pid for pids in by_code.values() for pid in pids}))
        gpus.append(
            GpuUse(
                g.id,
                g.bdf,
                g.numa_node,
                gpu_cpus(topo, g),
                users,
                bad,
                {c: tuple(v) for c, v in sorted(by_code.items())},
            )
        )
    return AuditReport(
        source=facts.source,
        processes=tuple(processes),
        gpus=tuple(gpus),
        findings=sort_findings(findings),
        unreadable=facts.unreadable,
        examined=facts.examined,
        why_fd=facts.why_fd,
        as_root=facts.as_root,
    )
