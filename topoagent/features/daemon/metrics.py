"""Prometheus metrics: a custom ``prometheus_client`` collector over the daemon's :class:`Status`.

Nothing here writes the exposition format by hand: :func:`families` builds metric families and
``prometheus_client`` renders them (``generate_latest`` for ``/metrics`` and the textfile).
Names follow Prometheus conventions (``topoagent_`` prefix, ``_seconds``, ``_total`` for
counters, ``*_info`` = 1 for metadata).  Labels are per device (stable key = BDF), per kind,
per finding code or per source: never per CPU or IRQ.

The series budget (docs/daemon.md): a DGX-class node exports at most ~150 series, so that a
100,000-node fleet stays within what Prometheus-compatible stores hold.  Per-link series exist
only for the links of GPUs, NICs and NVSwitches and the bridges on their paths, one series per
physical link rather than per function; a link's capability and the widest it was seen at only
while it is degraded; AER counters per function only where one has counted (every function's
summed per severity always, so the first error is an increase).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import msgspec
from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from topoagent.core.findings import Finding, Severity
from topoagent.core.findings.catalogue import Output, codes_for
from topoagent.core.pci import DeviceKind
from topoagent.core.render.escape import encodable
from topoagent.core.result import ScanResult
from topoagent.core.snapshot import FABRIC_STATES, AerCounts
from topoagent.core.topology import Device
from topoagent.core.version import __version__
from topoagent.features.daemon.changes import finding_keys
from topoagent.features.daemon.linkwatch import watched_links
from topoagent.features.daemon.status import Status

__all__ = ["METRICS", "Metric", "StatusCollector", "families", "make_registry", "render_text", "table", "with_table"]

#: Transfers per second in one GT/s: link speeds are exported in the base unit (Prometheus naming).
TRANSFERS_PER_GT = 1e9

#: Source statuses that mean the source gave evidence.
_UP = ("ok", "partial")

#: When a metric has samples: from start-up, or once a scan has succeeded; any other
#: :attr:`Metric.when` is a condition some hosts never meet.
ALWAYS = "always"
SCANNED = "after a good scan"


class Metric(msgspec.Struct, frozen=True):
    """One metric family the daemon serves: what ``/metrics`` says of it (``# HELP``, ``# TYPE``)
    and the row of docs/daemon.md's table (``python -m topoagent.features.daemon.metrics``)."""

    #: The family's name (a counter's samples add ``_total``).
    name: str
    help: str
    labels: tuple[str, ...] = ()
    #: :data:`ALWAYS`, :data:`SCANNED`, or the condition under which it has samples.
    when: str = SCANNED
    counter: bool = False

    @property
    def served(self) -> str:
        """The name its samples carry."""
        return self.name + "_total" if self.counter else self.name


#: Every family the collector serves, in docs/daemon.md's order, and the process collector's.
METRICS = (
    Metric("topoagent_build_info", "topoagent's version (always 1).", ("version",), when=ALWAYS),
    Metric(
        "topoagent_scan_success",
        "Whether the last scan succeeded (1) or failed or timed out (0); 0 before the first scan ends (a first scan "
        "that never ends alerts).",
        when=ALWAYS,
    ),
    Metric(
        "topoagent_scan_duration_seconds",
        "How long the last scan took (the timeout, if it hung).",
        when="after the first scan ends",
    ),
    Metric(
        "topoagent_last_scan_timestamp_seconds",
        "When the last successful scan started, in seconds since the epoch.",
    ),
    Metric(
        "topoagent_scan_interval_seconds",
        "The configured seconds between timer scans (alerts on stale scans scale with it).",
        when=ALWAYS,
    ),
    Metric("topoagent_scans", "Scans attempted since the daemon started.", when=ALWAYS, counter=True),
    Metric("topoagent_scan_failures", "Scans that raised or timed out.", when=ALWAYS, counter=True),
    Metric("topoagent_changes", "Changes (events) seen between scans.", when=ALWAYS, counter=True),
    Metric(
        "topoagent_source_up",
        "Whether each source (sysfs, configspace, nvml ...) gave evidence in the last good scan.",
        ("source",),
    ),
    Metric(
        "topoagent_source_duration_seconds",
        'Seconds each source took in the last good scan (source="analyse": building and analysing the tree), as '
        "node_exporter's node_scrape_collector_duration_seconds.",
        ("source",),
    ),
    Metric("topoagent_probe_errors", "Probes (files, calls) that failed in the last good scan."),
    Metric(
        "topoagent_devices",
        f"PCI functions of each kind ({', '.join(k.value for k in DeviceKind)}) in the last good scan, zeros "
        'included (an NVSwitch that falls off the bus lowers kind="nvswitch").',
        ("kind",),
    ),
    Metric("topoagent_gpus", "Physical GPUs (no virtual functions) in the last good scan."),
    Metric(
        "topoagent_gpus_expected",
        "Physical GPUs this node should have: expected_gpus from the configuration, else the most the daemon has seen "
        "(kept across restarts).",
    ),
    Metric("topoagent_gpu_numa_nodes", "NUMA nodes that have at least one GPU."),
    Metric(
        "topoagent_finding",
        "1 for each active finding at warning or above (subject: the BDFs of the devices it names, comma-separated); "
        "info findings, which page nothing, are counted in topoagent_findings only.",
        ("code", "severity", "subject"),
        when="while a finding at warning or above is active",
    ),
    Metric("topoagent_findings", "Active findings of each severity.", ("severity",)),
    Metric(
        "topoagent_rail_info",
        "1 for each GPU -> rail NIC pair, with its path class; gpu and nic are display names pinned to the devices' "
        "BDFs (labels never renumber).",
        ("gpu", "gpu_bdf", "nic", "nic_bdf", "path_class"),
        when="on hosts with GPUs and rail NICs",
    ),
    Metric(
        "topoagent_host_pcie_aer_errors",
        "PCIe AER errors the kernel counted since boot, all functions together, per severity (aer_dev_fatal, "
        "aer_dev_nonfatal, aer_dev_correctable summed), 0 included, so the first error anywhere is an increase(); "
        "the scale records sum it (TopoagentPcieUncorrectableErrors pages on the PCIE_AER_ERRORS finding).",
        ("severity",),
        SCANNED,
        counter=True,
    ),
    Metric(
        "topoagent_pcie_aer_errors",
        "PCIe AER errors the kernel counted on each function since boot, where it has counted any (the host's sum is "
        "topoagent_host_pcie_aer_errors_total).",
        ("bdf", "kind", "severity"),
        when="once a function has counted an AER error",
        counter=True,
    ),
    Metric(
        "topoagent_topology_info",
        "1, labelled with the host's hardware class and topology fingerprint (docs/fleet.md), and the facts its scan "
        "could not read (unknown: none, or acs, iommu, nvlinks, peer_memory, shape): hosts of one class scanned alike "
        "with another fingerprint differ from their siblings (the rule TopoagentTopologyOutlier).",
        ("hw_class", "fingerprint", "unknown"),
    ),
    Metric(
        "topoagent_pcie_link_width",
        "PCIe link width in lanes of the links of GPUs, NICs and NVSwitches, by the function at the link's lower end "
        "(state: current; while the link is degraded also capability = the lower of both ends' maxima, and max_seen = "
        "the widest it was seen at).",
        ("bdf", "kind", "state"),
        when="on hosts with GPUs, NICs or NVSwitches",
    ),
    Metric(
        "topoagent_pcie_link_speed_transfers_per_second",
        "PCIe link speed per lane in transfers per second (32e9 = 32 GT/s, Gen5; states as for the width).",
        ("bdf", "kind", "state"),
        when="on hosts with GPUs, NICs or NVSwitches",
    ),
    Metric(
        "topoagent_pcie_link_degraded",
        "1 when the link runs below its capability, judged over time (a GPU's speed only if it stayed below under "
        "load; a width below it at once, as the scan's LINK_WIDTH_DEGRADED); one series per physical link of a GPU, "
        "NIC or NVSwitch and of the bridges on their paths, named by the BDF of function 0 at its lower end (link) "
        "and that function's kind.",
        ("link", "kind"),
        when="on hosts with GPUs, NICs or NVSwitches",
    ),
    Metric(
        "topoagent_gpu_processes",
        "Processes using each GPU at the last scan (NVML's running processes, else open device nodes; docs/audit.md).",
        ("gpu", "gpu_bdf"),
        when="with the audit on",
    ),
    Metric(
        "topoagent_gpu_processes_misplaced",
        f"Processes using each GPU that an audit finding names (code: {', '.join(codes_for(Output.PROCESS_SERIES))}; "
        "topoagent audit names the pids).",
        ("gpu", "gpu_bdf", "code"),
        when="where an audit finding names a process",
    ),
    Metric(
        "topoagent_audit_unreadable_processes",
        "Processes the last audit could not read (other users' without CAP_SYS_PTRACE, or gone).",
        when="with the audit on",
    ),
    Metric(
        "topoagent_platform_info",
        "1, labelled with the host's NVIDIA platform kind (data_direct, inline, numa) and whether an Inline host is "
        "set up for virtual machines (true, false; empty for the other kinds).",
        ("kind", "virtualized"),
        when="on hosts of one of NVIDIA's platform kinds",
    ),
    Metric(
        "topoagent_platform_acs_ok",
        "Per role of platform port (root_port, gpu_port, nic_port, dma_port, other): 1 when every such port's ACS "
        "control register holds the mask its platform requires, 0 when one does not (ACS_PLATFORM_MISMATCH names the "
        "ports and their masks).",
        ("role",),
        when="on platform ports whose ACS is readable",
    ),
    Metric(
        "topoagent_gpu_fabric_state",
        "Each GPU's NVLink fabric registration (NVML nvmlDeviceGetGpuFabricInfoV): 1 not started, 2 in progress, 3 "
        "completed; status is the completed registration's outcome (success, or an NVML error).",
        ("gpu", "gpu_bdf", "status"),
        when="for GPUs NVML gives fabric information for",
    ),
    Metric(
        "topoagent_gpu_fabric_clique",
        "Each registered GPU's NVLink fabric clique id (its NVLink partition); cluster_uuid names the rack's NVLink "
        "domain.",
        ("gpu", "gpu_bdf", "cluster_uuid"),
        when="for GPUs registered in an NVLink fabric",
    ),
    Metric(
        "topoagent_export_ok",
        "Whether the last write of each export file (state, nfd, textfile) worked.",
        ("export",),
        when="once an export file was written",
    ),
    Metric(
        "process_*",
        "The daemon's own CPU, memory and file descriptors (prometheus_client's process collector).",
        when="on /metrics, not the textfile",
    ),
)
_BY_NAME = {m.name: m for m in METRICS}


def _family(name: str) -> Any:
    """An empty family of the metric ``name`` as :data:`METRICS` describes it."""
    m = _BY_NAME[name]
    return (CounterMetricFamily if m.counter else GaugeMetricFamily)(name, m.help, labels=list(m.labels))


def families(status: Status) -> list[Any]:
    """The metric families of one status (the last good result plus the daemon's counters)."""
    out: list[Any] = []

    def add(name: str, rows: Iterable[tuple[Iterable[str], float]]) -> None:
        g = _family(name)
        for values, value in rows:
            g.add_metric([encodable(v) for v in values], value)  # a name may hold bytes that are not UTF-8
        out.append(g)

    add("topoagent_build_info", [([__version__], 1)])
    last = status.last
    # 0 until the first scan ends: /metrics answers from the start, and a first scan that never
    # ends is a failing scan (TopoagentScanFailing), not a missing series.
    add("topoagent_scan_success", [((), 1 if last is not None and last.success else 0)])
    if last is not None:
        add("topoagent_scan_duration_seconds", [((), last.duration)])
    if status.interval is not None:
        add("topoagent_scan_interval_seconds", [((), status.interval)])
    if status.good_at is not None:
        add("topoagent_last_scan_timestamp_seconds", [((), status.good_at)])
    add("topoagent_scans", [((), status.scans_total)])
    add("topoagent_scan_failures", [((), status.failures_total)])
    add("topoagent_changes", [((), status.changes_total)])
    add("topoagent_export_ok", [((name,), 1 if ok else 0) for name, ok in sorted(status.exports.items())])
    r = status.result
    if r is not None:
        for part in (_host_families, _finding_families, _rail_families, _link_families, _platform_families):
            part(status, r, add)
        _aer_families(r, add)
        if status.audit is not None:
            _audit_families(status, r, add)
    return out


def _audit_families(status: Status, r: ScanResult, add: Callable[..., None]) -> None:
    """Per GPU, the processes using it and those each audit finding names (``topoagent audit``;
    only where a finding names any: a gauge, whose alert needs no earlier 0, and 24 series of
    zeros on an 8-GPU node were most of the series budget's margin), and the processes that
    could not be read."""
    audit = status.audit
    assert audit is not None
    used, misplaced, codes = [], [], codes_for(Output.PROCESS_SERIES)
    for g in audit.gpus:
        d = r.topology.by_id(g.gpu)
        if d is None:
            continue
        name = status.names.get(d.key, d.id)
        used.append(((name, d.key), len(g.processes)))
        for code in codes:
            count = len(g.by_code.get(code, ()))
            if count:
                misplaced.append(((name, d.key, code), count))
    add("topoagent_gpu_processes", used)
    add("topoagent_gpu_processes_misplaced", misplaced)
    add("topoagent_audit_unreadable_processes", [((), len(audit.unreadable))])


def _platform_families(status: Status, r: ScanResult, add: Callable[..., None]) -> None:
    """NVIDIA's platform (Data Direct, Inline, NUMA complexes: core/platform.py) and each GPU's
    NVLink fabric registration (NVML), from the last good result."""
    topo = r.topology
    p = topo.platform
    if p.kind is not None:
        add("topoagent_platform_info", [((p.kind.value, {True: "true", False: "false", None: ""}[p.virt]), 1)])
    held: dict[str, bool] = {}  # one series per role, not per port (the series budget)
    for rule in p.acs:
        port = topo.by_bdf(rule.bdf)
        acs = port.config.acs if port is not None and port.config is not None else None
        if acs is not None:
            held[rule.role.value] = held.get(rule.role.value, True) and rule.holds(acs.control)
    add("topoagent_platform_acs_ok", [((role,), 1 if ok else 0) for role, ok in sorted(held.items())])
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
    add("topoagent_gpu_fabric_state", state)
    add("topoagent_gpu_fabric_clique", clique)


def _aer_families(r: ScanResult, add: Callable[..., None]) -> None:
    """``topoagent_host_pcie_aer_errors_total{severity}``: every function's AER counts summed
    (from the first scan on, 0 included, so the first error anywhere is an ``increase()``), and
    ``topoagent_pcie_aer_errors_total{bdf,kind,severity}`` for each function and severity that
    has counted (counters since boot; a DGX has ~100 functions with AER files, 3 series each
    where all are 0)."""
    totals = dict.fromkeys(AerCounts.SEVERITIES, 0)
    counted = []
    for d in r.topology.devices:
        for severity in AerCounts.SEVERITIES if d.aer is not None else ():
            value = getattr(d.aer, severity)
            if value:
                totals[severity] += value
                counted.append(((d.key, d.kind.value, severity), value))
    add("topoagent_host_pcie_aer_errors", [((severity,), total) for severity, total in totals.items()])
    add("topoagent_pcie_aer_errors", counted)


def _host_families(status: Status, r: ScanResult, add: Callable[..., None]) -> None:
    """Sources, probe errors, device counts, GPUs expected, the topology's identity."""
    topo = r.topology
    add("topoagent_source_up", [((s.name,), 1 if s.status in _UP else 0) for s in topo.sources])
    # One series per source, as node_exporter's node_scrape_collector_duration_seconds{collector}.
    add("topoagent_source_duration_seconds", [((name,), seconds) for name, seconds in r.timings.items()])
    add("topoagent_probe_errors", [((), len(topo.probe_errors))])
    counts = {k.value: 0 for k in DeviceKind}
    for d in topo.devices:
        counts[d.kind.value] += 1
    add("topoagent_devices", [((k,), n) for k, n in counts.items()])
    add("topoagent_gpus", [((), sum(1 for g in topo.gpus if not g.is_vf))])
    if status.expected_gpus is not None:
        add("topoagent_gpus_expected", [((), status.expected_gpus)])
    facts = r.baseline
    add("topoagent_topology_info", [((facts.hw_class, facts.fingerprint, unknown_label(r)), 1)])
    numa = {g.numa_node for g in topo.gpus if g.numa_node is not None}
    add("topoagent_gpu_numa_nodes", [((), len(numa))])


def _finding_families(status: Status, r: ScanResult, add: Callable[..., None]) -> None:
    """One series per finding at warning or above, and the count of each severity.  Per finding,
    not per device it names: a host-wide finding (an IOMMU that translates for every GPU and NIC)
    is one cause, and was one series per device.  No info finding: it pages nothing, one was
    raised per bridge without root (ACS_UNKNOWN), and one comes and goes with load (a GPU's link
    at idle, which the link watch judges under load: ``topoagent_pcie_link_degraded``)."""
    rows = {(f.code, f.severity.label, _subject(r, f)): 1 for f in r.findings if f.severity >= Severity.WARNING}
    add("topoagent_finding", [(k, v) for k, v in sorted(rows.items())])
    add("topoagent_findings", [((s,), n) for s, n in r.counts().items()])


def _subject(r: ScanResult, f: Finding) -> str:
    """A finding's ``subject`` label: the BDFs of the devices it names, comma-separated -- its
    devices only, where it names something else too (a process: one series per process would
    follow), else what it names (a slot the host lacks)."""
    keys = finding_keys(r, f)
    devices = [k for s, k in zip(f.subjects, keys, strict=True) if r.topology.by_id(s) is not None]
    return ",".join(devices or keys)


def _rail_families(status: Status, r: ScanResult, add: Callable[..., None]) -> None:
    topo = r.topology
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
    add("topoagent_rail_info", rails)


#: Kinds whose own link is exported (the lower end of a watched link; bridges' links only
#: through ``topoagent_pcie_link_degraded``).
_ENDPOINTS = ("gpu", "nic", "nvswitch")


def _link_families(status: Status, r: ScanResult, add: Callable[..., None]) -> None:
    """One series per physical link: degraded or not for every watched link; the current width
    and speed of GPUs', NICs' and NVSwitches' own links; a link's capability and the most it was
    seen at only while it is degraded (what the alert's reader compares)."""
    topo = r.topology
    width: list[tuple[tuple[str, str, str], float]] = []
    speed: list[tuple[tuple[str, str, str], float]] = []
    degraded: dict[str, tuple[str, bool]] = {}
    for key, w in watched_links(r).items():
        dev = topo.by_key(key)
        if dev is None:
            continue
        j = status.judgements.get(key)
        bad = j is not None and j.degraded
        kind, was = degraded.get(w.link, (w.kind, False))
        # the link's kind: its lower end's (the function the link is named by)
        degraded[w.link] = (w.kind if w.bdf == w.link else kind, was or bad)
        if w.bdf != w.link or w.kind not in _ENDPOINTS and not bad:
            continue
        states = [
            ("current", j.current_width if j else dev.link.current_width, j.current_gts if j else dev.link.current_gts)
        ]
        if bad and j is not None:
            states += [("capability", w.max_width, w.max_gts), ("max_seen", j.max_seen_width, j.max_seen_gts)]
        for state, wv, sv in states:
            if wv is not None:
                width.append(((w.bdf, w.kind, state), wv))
            if sv is not None:
                speed.append(((w.bdf, w.kind, state), sv * TRANSFERS_PER_GT))
    add("topoagent_pcie_link_width", width)
    add("topoagent_pcie_link_speed_transfers_per_second", speed)
    add(
        "topoagent_pcie_link_degraded",
        [((link, kind), 1 if bad else 0) for link, (kind, bad) in sorted(degraded.items())],
    )


def unknown_label(result: ScanResult) -> str:
    """The kinds of fact the host's scan could not read, comma-separated (``none``: it read
    them all), from the one list every output says (:attr:`ScanResult.unknown`): ``acs`` (no
    root: the extended config space of a bridge GPU traffic crosses), ``iommu``, ``nvlinks`` (no
    NVML), ``peer_memory``, ``shape`` (pasted output).  Hosts scanned alike carry the same value,
    so the fleet rules compare them with each other (a scan without root is never an outlier
    for what it cannot read)."""
    return ",".join(u.fact for u in result.unknown) or "none"


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


#: The lines around docs/daemon.md's generated table.
TABLE_START = (
    "<!-- Generated from METRICS in topoagent/features/daemon/metrics.py by "
    "`python -m topoagent.features.daemon.metrics`: edit it there. -->\n"
)
TABLE_END = "<!-- End of the generated metric table. -->\n"


def table() -> str:
    """docs/daemon.md's metric table: one row per :data:`METRICS` entry."""
    rows = ["| metric | labels | served | meaning |", "|---|---|---|---|"]
    for m in METRICS:
        labels = f"`{', '.join(m.labels)}`" if m.labels else ""
        rows.append(f"| `{m.served}` | {labels} | {m.when} | {m.help} |")
    return "\n".join(rows) + "\n"


def with_table(page: str) -> str:
    """``page`` (docs/daemon.md's text) with its generated table made afresh."""
    head, start, rest = page.partition(TABLE_START)
    _, end, tail = rest.partition(TABLE_END)
    if not (start and end):
        raise ValueError("docs/daemon.md has lost the marks around its metric table")
    return head + start + table() + end + tail


if __name__ == "__main__":  # python -m topoagent.features.daemon.metrics: rewrite docs/daemon.md's table
    _page = Path(__file__).resolve().parents[3] / "docs" / "daemon.md"
    _page.write_text(with_table(_page.read_text()))
    print(_page)
