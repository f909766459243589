"""The daemon's files: ``state.json``, the textfile-collector ``topoagent.prom`` and the
node-feature-discovery feature file.

Every file is written atomically: the bytes go to a dotfile in the same directory, which is
then renamed over the target (rename(2) is atomic within one filesystem), so a reader sees
the old file or the new one, never half of one.  A dotfile because node-feature-discovery
ignores dotfiles in ``features.d`` ("write into a temporary file ... NFD ignores dot files",
its customization guide) and node_exporter's textfile collector reads only ``*.prom``.  A file
whose content did not change is not rewritten.  A path that cannot be written is reported and
counted, never fatal.
"""

from __future__ import annotations

import errno
import os
import re
import time
from collections.abc import Mapping
from typing import Any

import msgspec

from topoagent.core.analysis.fingerprint import class_hash
from topoagent.core.digits import decimal
from topoagent.core.errors import InputError, TopoagentError
from topoagent.core.findings.catalogue import CATALOGUE, Output, carries
from topoagent.core.pci import DeviceKind
from topoagent.core.read.textinput import read_regular
from topoagent.core.render.json_report import encode, report
from topoagent.core.result import ScanResult
from topoagent.core.snapshot import enc_hook
from topoagent.core.write.files import write_atomically

__all__ = [
    "EXPECTED_FILE",
    "NFD_EXPIRY_INTERVALS",
    "NFD_FILE",
    "NFD_LIMIT",
    "STATE_FILE",
    "TEXTFILE",
    "ExportError",
    "Exporter",
    "atomic_write",
    "iso_time",
    "nfd_expiry",
    "nfd_features",
    "read_count",
    "render_nfd",
    "state_document",
    "valid_nfd_name",
    "valid_nfd_value",
]

STATE_FILE = "state.json"
#: The most physical GPUs seen, one decimal line (delete it to accept fewer GPUs for good).
EXPECTED_FILE = "gpus-expected"
TEXTFILE = "topoagent.prom"
NFD_FILE = "topoagent"
#: NFD ignores a feature file larger than this (customization guide, "Input format").
NFD_LIMIT = 64 * 1024
#: The feature file expires this many scan intervals (plus the scan timeout) after the last
#: good scan: a stopped daemon's labels go away, and so do those of one whose scans keep failing.
NFD_EXPIRY_INTERVALS = 3

# NFD label values: at most 63 characters of [A-Za-z0-9_.-], alphanumeric at both ends
# (the Kubernetes label-value rule); names (after the "namespace/") the same, non-empty.
_NFD_TOKEN = re.compile(r"[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?")  # fullmatch only


def valid_nfd_value(value: str) -> bool:
    """Whether ``value`` is a valid NFD label value (the Kubernetes label-value rule)."""
    return bool(_NFD_TOKEN.fullmatch(value))


def valid_nfd_name(name: str) -> bool:
    """``namespace/name`` with a label-valid name."""
    namespace, sep, local = name.rpartition("/")
    return bool(sep and namespace and _NFD_TOKEN.fullmatch(local))


def atomic_write(path: str, data: bytes, mode: int = 0o644) -> bool:
    """Write ``data`` to ``path`` atomically; False when the file already held exactly that.

    Raises :class:`OSError` when the directory cannot be written -- checked on every call, also
    when nothing needs writing, so an export whose directory became unwritable (read-only
    remount, permissions) is reported at once and not only when its content next changes.
    """
    if _holds(path, data):
        _check_writable(os.path.dirname(os.path.abspath(path)))
        return False
    write_atomically(path, data, mode=mode)
    return True


def _check_writable(directory: str) -> None:
    """Raise :class:`OSError` unless a file could be created in ``directory`` now (access(2)
    with W_OK|X_OK: it reports a read-only file system, EROFS, even for root)."""
    if not os.access(directory, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, "directory not writable", directory)


def _holds(path: str, data: bytes) -> bool:
    """Whether ``path`` is a regular file holding exactly ``data`` (absent, unreadable, a FIFO
    or anything else: False, so it is replaced; opened non-blocking, so nothing stalls)."""
    try:
        return read_regular(path, len(data)) == data
    except (OSError, InputError):
        return False


def read_count(path: str) -> int | None:
    """The non-negative integer a small file holds (:data:`EXPECTED_FILE`); None when it is
    absent, unreadable or holds anything else."""
    try:
        text = read_regular(path, 64).decode("ascii").strip()
    except (OSError, InputError, UnicodeDecodeError):
        return None
    return decimal(text, digits=5)


def iso_time(t: float) -> str:
    """Seconds since the epoch as RFC 3339 UTC (``2024-05-01T12:00:00Z``)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def state_document(
    result: ScanResult, *, scanned_at: float, duration: float, changes: list[dict[str, Any]], daemon: Mapping[str, Any]
) -> dict[str, Any]:
    """The state file: the ``scan --format json`` contract plus ``scanned_at``,
    ``scan_duration_seconds``, ``changes`` (recent events, oldest first) and ``daemon``
    (the last attempt, counters, link judgements)."""
    doc: dict[str, Any] = msgspec.to_builtins(report(result), enc_hook=enc_hook)
    doc["scanned_at"] = iso_time(scanned_at)
    doc["scan_duration_seconds"] = round(duration, 6)
    doc["changes"] = changes
    doc["daemon"] = dict(daemon)
    return doc


# -- node-feature-discovery ---------------------------------------------------------------


def _gdr_ready(result: ScanResult) -> bool:
    """Ready means proven: a pod that selects ``gdr.ready=true`` must land where GPUDirect RDMA
    works.  Every GPU has a rail NCCL uses with GDR on, peer memory is known to be there (not
    merely not known to be missing), and nothing that denies it or leaves it unproven was found
    (:attr:`~topoagent.core.findings.catalogue.Output.GDR_BLOCKER`: ACS unread, a redirect may be on)."""
    gpus = [g for g in result.topology.gpus if not g.is_vf]
    if not gpus or result.topology.peer_memory is not True:
        return False
    for g in gpus:
        rail = result.rails.rail(g.id)
        # NCCL's default GDR distance: PXB (GPU and NIC share a switch), or P2C for a Grace
        # GPU's NIC on its own CPU (analysis.paths.gdr_by_default).
        if rail is None or rail.nic is None or not rail.gdr:
            return False
    return not any(carries(f, Output.GDR_BLOCKER) for f in result.findings)


def _platform_features(result: ScanResult) -> dict[str, str]:
    """``platform.kind`` (``data_direct``, ``inline``, ``numa``, ``none``), ``platform.acs-ok``
    (every platform port holds its mask: ``true``, ``false``, ``unknown``), and, where NVML shows
    an NVLink fabric, ``nvlink.fabric-state`` (``completed``, ``in-progress``, ``not-started``,
    ``failed``, ``mixed``) and ``nvlink.clique`` (the GPUs' one clique id, else ``mixed``)."""
    topo = result.topology
    p = topo.platform
    out = {"topoagent.platform.kind": p.kind.value.replace("_", "-") if p.kind is not None else "none"}
    if p.kind is not None:
        held = []
        for rule in p.acs:
            port = topo.by_bdf(rule.bdf)
            acs = port.config.acs if port is not None and port.config is not None else None
            held.append(None if acs is None else rule.holds(acs.control))
        out["topoagent.platform.acs-ok"] = "false" if False in held else "unknown" if None in held else "true"
    fabrics = [g.nvml.fabric for g in topo.gpus if g.nvml is not None and g.nvml.fabric is not None]
    if fabrics:
        states = {"failed" if f.state == "completed" and not f.ready else f.state.replace("_", "-") for f in fabrics}
        out["topoagent.nvlink.fabric-state"] = states.pop() if len(states) == 1 else "mixed"
        cliques = {f.clique_id for f in fabrics}
        one = cliques.pop() if len(cliques) == 1 else None
        out["topoagent.nvlink.clique"] = str(one) if one is not None else "mixed"
    return out


def nfd_features(result: ScanResult, *, degraded_links: bool, scan_ok: bool = True) -> dict[str, str]:
    """The node features, name (without namespace) -> value, every value valid for NFD.

    ``gpu.numa-nodes`` lists nodes joined by ``_`` (``0_1``): commas are not allowed in a
    label value.  ``rail.worst-path`` is the worst GPU-to-rail-NIC class (``none``: no GPU
    has a rail NIC), NCCL's ``P2C`` where nvidia-smi's ``SYS`` is a Grace GPU's own-CPU path.
    ``acs.blocking`` is ``unknown`` when ACS could not be read.  ``gpu.usable-count`` leaves out
    the GPUs a finding makes unusable (FELL_OFF_BUS); ``unknown`` lists what the scan could not
    read joined by ``.`` (``acs.nvlinks``; ``none``), as ``topoagent_topology_info{unknown}``.
    ``findings.worst`` is over every finding of the result, the daemon's audit's included.
    ``scan-ok`` is ``false`` while the latest scan failed: the other labels are then the last
    good scan's, until the file expires (:data:`NFD_EXPIRY_INTERVALS`).
    """
    topo = result.topology
    gpus = [g for g in topo.gpus if not g.is_vf]
    nodes = sorted({g.numa_node for g in gpus if g.numa_node is not None})
    classes = [c for r in result.rails.rails if r.nic is not None and (c := r.nccl_class) is not None]
    carried = {o for f in result.findings for o in CATALOGUE[f.code].outputs}
    acs = "true" if Output.ACS_BLOCKING in carried else "unknown" if Output.ACS_UNREAD in carried else "false"
    worst = result.worst()
    features = {
        "topoagent.gpu.count": str(len(gpus)),
        "topoagent.gpu.usable-count": str(sum(1 for g in gpus if g.id not in result.unusable)),
        "topoagent.gpu.numa-nodes": "_".join(map(str, nodes)) if nodes else "none",
        "topoagent.nvswitch.count": str(len(topo.of_kind(DeviceKind.NVSWITCH))),
        "topoagent.nic.rdma-count": str(sum(1 for n in topo.nics if n.rdma_capable and not n.is_vf)),
        "topoagent.rail.worst-path": max(classes).name if classes else "none",
        "topoagent.gdr.ready": "true" if _gdr_ready(result) else "false",
        "topoagent.acs.blocking": acs,
        "topoagent.pcie.degraded-links": "true" if degraded_links else "false",
        "topoagent.findings.worst": worst.label if worst is not None else "none",
        "topoagent.unknown": ".".join(u.fact for u in result.unknown) or "none",
        "topoagent.scan-ok": "true" if scan_ok else "false",
        # A label value is at most 63 characters of [A-Za-z0-9._-]: the class as a hash of its
        # readable string (topoagent_topology_info carries the string; docs/fleet.md).
        "topoagent.hw-class": class_hash(result.baseline.hw_class),
        "topoagent.fingerprint": result.baseline.fingerprint,
        **_platform_features(result),
    }
    return {k: v for k, v in features.items() if valid_nfd_value(v) and _NFD_TOKEN.fullmatch(k)}


class ExportError(TopoagentError):
    """An export that cannot be written as its consumer requires (an NFD file over 64 kB)."""


def nfd_expiry(good_at: float, interval: float, scan_timeout: float) -> float:
    """When the feature file of a scan made at ``good_at`` stops counting (seconds since the epoch)."""
    return good_at + NFD_EXPIRY_INTERVALS * interval + scan_timeout


def render_nfd(features: Mapping[str, str], namespace: str, expires_at: float | None = None) -> str:
    """The feature file: one ``namespace/name=value`` per line (checked: valid and < 64 kB).

    ``expires_at`` writes NFD's ``# +expiry-time=<RFC 3339>`` directive first: NFD's local
    source drops every label below it once that time has passed (source/local/local.go,
    ``parseDirectives``; a directive applies to the lines after it).
    """
    lines = []
    if expires_at is not None:
        lines.append(f"# +expiry-time={iso_time(expires_at)}")
    lines.append("# node-feature-discovery features written by topoagent daemon; do not edit")
    for name, value in features.items():
        label = f"{namespace}/{name}"
        if valid_nfd_name(label) and valid_nfd_value(value):
            lines.append(f"{label}={value}")
    text = "\n".join(lines) + "\n"
    if len(text.encode()) >= NFD_LIMIT:
        raise ExportError("NFD feature file would exceed 64 kB")
    return text


# -- writing, with failures reported once ---------------------------------------------------


class ExportStatus(msgspec.Struct):
    path: str
    ok: bool = True
    error: str | None = None


class Exporter:
    """Writes the exports and remembers, per export, whether the last write worked.

    A failure is logged when it starts (or its message changes) and a recovery when it ends,
    not on every scan.
    """

    def __init__(self, log: Any) -> None:
        self.log = log
        self.status: dict[str, ExportStatus] = {}

    def _status(self, export: str, path: str) -> ExportStatus:
        st = self.status.get(export)
        if st is None or st.path != path:
            st = self.status[export] = ExportStatus(path)
        return st

    def fail(self, export: str, path: str, error: str) -> None:
        """Record that an export could not be written (logged when the failure starts or changes)."""
        st = self._status(export, path)
        if st.ok or st.error != error:
            self.log.error("export_failed", export=export, path=path, error=error)
        st.ok, st.error = False, error

    def write(self, export: str, path: str, data: bytes) -> bool:
        """Write one export; True when the file changed."""
        st = self._status(export, path)
        try:
            changed = atomic_write(path, data)
        except OSError as exc:
            self.fail(export, path, f"{exc.strerror or exc}")
            return False
        if not st.ok:
            self.log.info("export_recovered", export=export, path=path)
        st.ok, st.error = True, None
        return changed

    def write_json(self, export: str, path: str, doc: Mapping[str, Any]) -> bool:
        """Write ``doc`` as indented JSON, as :meth:`write` does; True when the file changed."""
        return self.write(export, path, encode(doc, pretty=True).encode())
