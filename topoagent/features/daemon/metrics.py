"""Prometheus metrics: a custom ``prometheus_client`` collector over the daemon's :class:`Status`.

Nothing here writes the exposition format by hand: :func:`families` builds metric families and
``prometheus_client`` renders them (``generate_latest`` for ``/metrics`` and the textfile).
Names follow Prometheus conventions (``topoagent_`` prefix, ``_seconds``, ``_total`` for
counters, ``*_info`` = 1 for metadata).  Labels are per device (stable key = BDF), per kind,
per finding code or per source: never per CPU or IRQ, so a host has a few hundred series.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from topoagent.core.findings import Severity
from topoagent.core.pci import DeviceKind
from topoagent.core.render.escape import encodable
from topoagent.core.snapshot import FABRIC_STATES
from topoagent.core.topology import Device
from topoagent.core.version import __version__
from topoagent.features.audit.codes import CODES
from topoagent.features.daemon.changes import finding_keys
from topoagent.features.daemon.linkwatch import watched_links
from topoagent.features.daemon.status import Status

__all__ = ["StatusCollector", "families", "make_registry", "render_text"]

#: Transfers per second in one GT/s: link speeds are exported in the base unit (Prometheus naming).
TRANSFERS_PER_GT = 1e9

#: Source statuses that mean the source gave evidence.
_UP = ("ok", "partial")


def families(status: Status) -> list[Any]:
    """The metric families of one status (the last good result plus the daemon's counters)."""
    out: list[Any] = []

    def gauge(
        name: str, doc: str, labels: Iterable[str] = (), rows: Iterable[tuple[Iterable[str], float]] = ()
    ) -> None:
        g = GaugeMetricFamily(name, doc, labels=list(labels))
        for values, value in rows:
            g.add_metric([encodable(v) for v in values], value)  # a name may hold bytes that are not UTF-8
        out.append(g)

    gauge("topoagent_build_info", "topoagent's version (always 1).", ["version"], [([__version__], 1)])
    last = status.last
    if last is not None:
        gauge(
            "topoagent_scan_success",
            "Whether the last scan succeeded (1) or failed or timed out (0).",
            rows=[((), 1 if last.success else 0)],
        )
        gauge(
            "topoagent_scan_duration_seconds",
            "How long the last scan took (the timeout, if it hung).",
            rows=[((), last.duration)],
        )
    if status.interval is not None:
        gauge(
            "topoagent_scan_interval_seconds",
            "The configured seconds between timer scans (alerts on stale scans scale with it).",
            rows=[((), status.interval)],
        )
    if status.good_at is not None:
        gauge(
            "topoagent_last_scan_timestamp_seconds",
            "When the last successful scan started, in seconds since the epoch.",
            rows=[((), status.good_at)],
        )
    scans = CounterMetricFamily("topoagent_scans", "Scans attempted since the daemon started.")
    scans.add_metric([], status.scans_total)
    failures = CounterMetricFamily("topoagent_scan_failures", "Scans that raised or timed out.")
    failures.add_metric([], status.failures_total)
    changes = CounterMetricFamily("topoagent_changes", "Changes (events) seen between scans.")
    changes.add_metric([], status.changes_total)
    out += [scans, failures, changes]
    gauge(
        "topoagent_export_ok",
        "Whether the last write of each export file worked.",
        ["export"],
        [((name,), 1 if ok else 0) for name, ok in sorted(status.exports.items())],
    )
    if status.result is not None:
        _result_families(status, gauge)
        _platform_families(status, gauge)
        out.append(_aer_family(status))
        if status.audit is not None:
            _audit_families(status, gauge)
    return out


def _audit_families(status: Status, gauge: Callable[..., None]) -> None:
    """Per GPU, the processes using it and those each audit finding names (``topoagent audit``;
    every GPU and code, 0 included, so a series never first appears at 1), and the processes
    that could not be read."""
    r, audit = status.result, status.audit
    assert r is not None and audit is not None
    used, misplaced = [], []
    for g in audit.gpus:
        d = r.topology.by_id(g.gpu)
        if d is None:
            continue
        name = status.names.get(d.key, d.id)
        used.append(((name, d.key), len(g.processes)))
        for code in CODES:
            misplaced.append(((name, d.key, code), len(g.by_code.get(code, ()))))
    gauge(
        "topoagent_gpu_processes",
        "Processes using each GPU at the last scan (NVML's running processes, else open device nodes).",
        ["gpu", "gpu_bdf"],
        used,
    )
    gauge(
        "topoagent_gpu_processes_misplaced",
        "Processes using each GPU that an audit finding names (code: PROCESS_CPUS_OFF_GPU_NODE, "
        "PROCESS_MEMORY_OFF_GPU_NODE, PROCESS_HCA_NOT_RAIL; `topoagent audit` names the pids).",
        ["gpu", "gpu_bdf", "code"],
        misplaced,
    )
    gauge(
        "topoagent_audit_unreadable_processes",
        "Processes the last audit could not read (other users' without CAP_SYS_PTRACE, or gone).",
        rows=[((), len(audit.unreadable))],
    )


def _platform_families(status: Status, gauge: Callable[..., None]) -> None:
    """NVIDIA's platform (Data Direct, Inline, NUMA complexes: core/platform.py) and each GPU's
    NVLink fabric registration (NVML), from the last good result."""
    r = status.result
    assert r is not None
    topo = r.topology
    p = topo.platform
    if p.kind is not None:
        gauge(
            "topoagent_platform_info",
            "1, labelled with the host's NVIDIA platform kind (data_direct, inline, numa) and whether an "
            "Inline host is set up for virtual machines.",
            ["kind", "virtualized"],
            [((p.kind.value, {True: "true", False: "false", None: ""}[p.virt]), 1)],
        )
    rows = []
    for rule in p.acs:
        port = topo.by_bdf(rule.bdf)
        acs = port.config.acs if port is not None and port.config is not None else None
        if acs is not None:
            rows.append(
                ((rule.bdf, rule.role.value, rule.complex or "", rule.mask), 1 if rule.holds(acs.control) else 0)
            )
    gauge(
        "topoagent_platform_acs_ok",
        "1 when a platform port's ACS control register holds the mask its platform requires, 0 when not "
        "(ACS_PLATFORM_MISMATCH); required is rdma_topo's mask, bit 6 first.",
        ["bdf", "role", "complex", "required"],
        rows,
    )
    state, clique = [], []
    for g in topo.gpus:
        fabric = g.nvml.fabric if g.nvml is not None else None
        if fabric is None:
            continue
        labels = (status.names.get(g.key, g.id), g.key)
        code = next(k for k, v in FABRIC_STATES.items() if v == fabric.state)
        state.append(((*labels, fabric.status or ""), code))
        if fabric.clique_id is not None:
            clique.append(((*labels, fabric.cluster_uuid or ""), fabric.clique_id))
    gauge(
        "topoagent_gpu_fabric_state",
        "Each GPU's NVLink fabric registration (NVML): 1 not started, 2 in progress, 3 completed; status "
        "is the completed registration's outcome (success, or an NVML error).",
        ["gpu", "gpu_bdf", "status"],
        state,
    )
    gauge(
        "topoagent_gpu_fabric_clique",
        "Each registered GPU's NVLink fabric clique id (its NVLink partition); cluster_uuid names the rack's "
        "NVLink domain.",
        ["gpu", "gpu_bdf", "cluster_uuid"],
        clique,
    )


def _aer_family(status: Status) -> Any:
    """``topoagent_pcie_aer_errors_total``: the kernel's AER totals per function and severity
    (counters since boot, so ``rate()`` and ``increase()`` work; correctable errors matter
    only as a rate, see docs/daemon.md), for every function with AER files."""
    r = status.result
    assert r is not None
    fam = CounterMetricFamily(
        "topoagent_pcie_aer_errors",
        "PCIe AER errors the kernel counted on each "
        "function since boot (aer_dev_fatal, aer_dev_nonfatal, aer_dev_correctable).",
        labels=["bdf", "kind", "severity"],
    )
    # Every function whose AER files exist, from the first scan on, at its current value (0
    # included).  A series that first appears at 1 is no increase: increase() and rate() need
    # two samples of one series, so the first error of a counter exported only once it has
    # counted is never seen.  Prometheus's instrumentation practices, "Avoid missing metrics":
    # export 0 for any series known to exist in advance
    # (https://prometheus.io/docs/practices/instrumentation/#avoid-missing-metrics).
    for d in r.topology.devices:
        if d.aer is None:
            continue
        for severity in ("fatal", "nonfatal", "correctable"):
            value = getattr(d.aer, severity)
            if value is not None:
                fam.add_metric([d.key, d.kind.value, severity], value)
    return fam


def _result_families(status: Status, gauge: Callable[..., None]) -> None:
    """The families of the last good result, added through ``gauge``."""
    r = status.result
    assert r is not None
    topo = r.topology
    gauge(
        "topoagent_source_up",
        "Whether each source gave evidence in the last good scan.",
        ["source"],
        [((s.name,), 1 if s.status in _UP else 0) for s in topo.sources],
    )
    # One series per source, as node_exporter's node_scrape_collector_duration_seconds{collector}.
    gauge(
        "topoagent_source_duration_seconds",
        'Seconds each source took in the last good scan (source="analyse": building and analysing the tree).',
        ["source"],
        [((name,), seconds) for name, seconds in r.timings.items()],
    )
    gauge(
        "topoagent_probe_errors",
        "Probes (files, calls) that failed in the last good scan.",
        rows=[((), len(topo.probe_errors))],
    )
    counts = {k.value: 0 for k in DeviceKind}
    for d in topo.devices:
        counts[d.kind.value] += 1
    gauge(
        "topoagent_devices",
        "PCI functions of each kind in the last good scan.",
        ["kind"],
        [((k,), n) for k, n in counts.items()],
    )
    gauge(
        "topoagent_gpus",
        "Physical GPUs (no virtual functions) in the last good scan.",
        rows=[((), sum(1 for g in topo.gpus if not g.is_vf))],
    )
    if status.expected_gpus is not None:
        gauge(
            "topoagent_gpus_expected",
            "Physical GPUs this node should have: expected_gpus from the "
            "configuration, else the most the daemon has seen (kept across restarts).",
            rows=[((), status.expected_gpus)],
        )
    facts = r.baseline
    gauge(
        "topoagent_topology_info",
        "1, labelled with the host's hardware class and topology fingerprint "
        "(docs/fleet.md): hosts of one class with another fingerprint differ from their siblings.",
        ["hw_class", "fingerprint"],
        [((facts.hw_class, facts.fingerprint), 1)],
    )
    numa = {g.numa_node for g in topo.gpus if g.numa_node is not None}
    gauge("topoagent_gpu_numa_nodes", "NUMA nodes that have at least one GPU.", rows=[((), len(numa))])

    rows: dict[tuple[str, str, str], int] = {}
    for f in r.findings:
        for subject in finding_keys(r, f) or ("",):
            rows[(f.code, f.severity.label, subject)] = 1
    gauge(
        "topoagent_finding",
        "1 for each active finding and each device it names (subject = BDF).",
        ["code", "severity", "subject"],
        [(k, v) for k, v in sorted(rows.items())],
    )
    per_sev = {s.label: 0 for s in sorted(Severity, reverse=True)}
    for f in r.findings:
        per_sev[f.severity.label] += 1
    gauge(
        "topoagent_findings", "Active findings of each severity.", ["severity"], [((s,), n) for s, n in per_sev.items()]
    )

    rails = []

    def name(d: Device) -> str:
        return status.names.get(d.key, d.id)  # bound to the key: never renumbers

    for rail in r.rails.rails:
        g = topo.by_id(rail.gpu)
        for nic_id in rail.nics:
            n = topo.by_id(nic_id)
            if g is None or n is None:
                continue
            p = r.path(rail.gpu, nic_id)
            cls = p.token if p is not None and p.shown else "unknown"  # no source shows it: no placeholder
            rails.append(((name(g), g.key, name(n), n.key, cls), 1))
    gauge(
        "topoagent_rail_info",
        "1 for each GPU -> rail NIC pair, with its path class.",
        ["gpu", "gpu_bdf", "nic", "nic_bdf", "path_class"],
        rails,
    )

    width, speed, degraded = [], [], []
    for key, w in watched_links(r).items():
        dev = topo.by_key(key)
        if dev is None:
            continue
        j = status.judgements.get(key)
        cur_w = j.current_width if j is not None else dev.link.current_width
        cur_s = j.current_gts if j is not None else dev.link.current_gts
        for state, wv, sv in (
            ("current", cur_w, cur_s),
            ("max", dev.link.max_width, dev.link.max_gts),
            ("capability", w.max_width, w.max_gts),
            ("max_seen", j.max_seen_width if j else None, j.max_seen_gts if j else None),
        ):
            if wv is not None:
                width.append(((w.bdf, w.kind, state), wv))
            if sv is not None:
                speed.append(((w.bdf, w.kind, state), sv * TRANSFERS_PER_GT))
        if j is not None:
            degraded.append(((w.bdf, w.kind, w.link), 1 if j.degraded else 0))
    gauge(
        "topoagent_pcie_link_width",
        "PCIe link width in lanes of GPUs, NICs and the bridges on their "
        "paths (state: current; max = this end's own maximum; capability = what the link can train "
        "to, the lower of both ends' maxima, to compare current with; max_seen = the widest seen).",
        ["bdf", "kind", "state"],
        width,
    )
    gauge(
        "topoagent_pcie_link_speed_transfers_per_second",
        "PCIe link speed per lane in transfers per second (32e9 = 32 GT/s, Gen5; states as for the width).",
        ["bdf", "kind", "state"],
        speed,
    )
    gauge(
        "topoagent_pcie_link_degraded",
        "1 when the link runs below its capability, judged over time (a "
        "GPU only if it stayed below under load); link = the BDF of function 0 at the link's lower "
        "end, shared by every function that reports the link (both ends; each function of a multi-function device).",
        ["bdf", "kind", "link"],
        degraded,
    )


class StatusCollector:
    """A prometheus_client collector that reads the current :class:`Status` on each scrape."""

    def __init__(self, current: Callable[[], Status]) -> None:
        self._current = current

    def collect(self) -> Iterator[Any]:
        """The metric families of the current status (on each scrape)."""
        yield from families(self._current())

    def describe(self) -> list[Any]:
        """No families up front, so registering does not collect."""
        return []  # so registering does not collect (and no name is checked twice)


def make_registry(current: Callable[[], Status], *, process: bool = False) -> Any:
    """A registry holding only the daemon's collector (and the process collector if asked:
    CPU, memory and file descriptors of the daemon itself, for /metrics, not the textfile)."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(StatusCollector(current))
    if process:
        ProcessCollector(registry=reg)
    return reg


def render_text(status: Status) -> bytes:
    """The text exposition of one status (for the textfile collector; no timestamps)."""
    data: bytes = generate_latest(make_registry(lambda: status))
    return data
