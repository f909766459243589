"""PCIe links judged over time, not from one reading.

A GPU at idle drops its link to 2.5 GT/s and retrains under load, many times a minute (one
report counted 1,415 speed changes in two minutes on an idle box), so one reading cannot tell
a degraded link from an idle one.  The width normally stays.  NICs and switch ports do not
downclock this way: a NIC or switch port below its maximum trained low.  So:

* every watched link (GPUs, NICs, NVSwitches, and the bridges on their paths) is sampled at
  each scan and, while a GPU link is below its maximum, between scans; the highest speed and
  width seen are kept;
* a link whose **width** is below its maximum is degraded at once, whatever its kind: the width
  does not change at idle, and the scan's ``LINK_WIDTH_DEGRADED`` says so from the same reading
  (issue 32: a GPU retrained to x8 raised the finding while the metric said 0 for up to the
  window, so the shipped alert stayed silent);
* a **GPU link's speed** below its maximum is degraded when it never reached the maximum over
  the window *and the window saw load* (NVML utilisation where NVML is present; otherwise
  traffic on the netdevs of the GPU's rail NICs, from psutil's interface counters).  An idle GPU
  that downclocks is not a fault;
* **any other link** is degraded while its speed is below its maximum.

The maximum of a link is its capability, the lower of its two ends' maxima (a Gen5 NIC in a
Gen4 slot tops out at Gen4): :func:`topoagent.core.analysis.links.capability`, the same judgement the
scan's link findings make (functions whose link registers mean nothing, :mod:`topoagent.core.quirks`,
are not watched).  The two ends of a link are an upstream-facing port (an endpoint, a switch's upstream
port) and the downstream-facing port above it (a root port, a switch's downstream port); both
report the same link, so a downstream port above a GPU follows the GPU's rules.

:class:`LinkWatch` is pure bookkeeping (samples in, judgements out); the load it needs comes
from :class:`topoagent.features.daemon.load.LoadProbe`, which asks NVML and the NIC counters.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any

import msgspec

from topoagent.core.analysis.links import (
    LinkCapability,
    capability,
    link_partner,
    meaningful,
    shortfall,
)
from topoagent.core.pci import DeviceKind
from topoagent.core.result import ScanResult
from topoagent.core.snapshot import LinkInfo
from topoagent.core.topology import BridgeRole, Device, Topology

__all__ = ["Judgement", "LinkWatch", "WatchedLink", "link_name", "watched_links"]


_DOWNSTREAM_FACING = (BridgeRole.ROOT_PORT, BridgeRole.SWITCH_DOWNSTREAM)


class WatchedLink(msgspec.Struct, frozen=True):
    """A link to watch, named by the device that reports it.

    ``gpu`` is the stable key of the GPU on the link (the device itself, or the one below a
    downstream-facing port), None for other links.  ``max_gts``/``max_width`` are the link's
    capability (:func:`topoagent.core.analysis.links.capability`): the lower of both ends' maxima
    where both are known.  ``link`` names the physical link (:func:`link_name`: the BDF of
    function 0 at its lower end), so a NIC, the switch port above it and the NIC's other
    functions, which all report one link, share it (one cause, one alert).
    """

    key: str
    bdf: str
    kind: str
    gpu: str | None
    max_gts: float | None
    max_width: int | None
    link: str = ""

    @property
    def capability(self) -> LinkCapability:
        """What the link can train to (``max_gts``/``max_width``)."""
        return LinkCapability(self.max_gts, self.max_width)


#: The devices whose links are watched, with every bridge above them.
_ENDS = (DeviceKind.GPU, DeviceKind.NIC, DeviceKind.NVSWITCH)


def watched_links(result: ScanResult) -> dict[str, WatchedLink]:
    """GPUs, NICs and NVSwitches (physical functions) and every bridge above them, by stable key
    (not those whose link registers mean nothing)."""
    topo = result.topology
    ends = [d for d in topo.devices if d.kind in _ENDS and not d.is_vf and d.bdf]
    chosen: dict[str, Device] = {}
    for d in ends:
        chosen[d.key] = d
        for bdf in d.ancestors:
            b = topo.by_bdf(bdf)
            if b is not None:
                chosen.setdefault(b.key, b)
    out: dict[str, WatchedLink] = {}
    for d in sorted(chosen.values(), key=lambda x: x.bdf or ""):
        if not meaningful(d):
            continue
        p = link_partner(topo, d)
        cap = capability(topo, d)
        gpu = (
            d
            if d.kind is DeviceKind.GPU
            else p
            if (p is not None and p.kind is DeviceKind.GPU and d.role in _DOWNSTREAM_FACING)
            else None
        )
        out[d.key] = WatchedLink(
            d.key,
            d.bdf or d.key,
            d.kind.value,
            gpu.key if gpu is not None else None,
            cap.gts,
            cap.width,
            link=link_name(topo, d),
        )
    return out


def link_name(topo: Topology, d: Device) -> str:
    """The physical link ``d`` reports, named by the first function below its downstream-facing
    port (function 0 of the device at the link's lower end): the port, and every function of a
    multi-function device below it (a dual-port NIC's .0 and .1), report one link and so share
    one name.  Without a known port above: function 0 of ``d``'s own device where it exists."""
    port = d if d.role in _DOWNSTREAM_FACING else link_partner(topo, d)
    lower = link_partner(topo, port) if port is not None and port.role in _DOWNSTREAM_FACING else None
    if lower is not None and lower.bdf:
        return lower.bdf
    if d.bdf is None:
        return d.key
    first = d.bdf.rsplit(".", 1)[0] + ".0"
    return first if topo.by_bdf(first) is not None else d.bdf


class Sample(msgspec.Struct, frozen=True):
    at: float
    gts: float | None
    width: int | None
    loaded: bool | None


class Judgement(msgspec.Struct, frozen=True):
    """What the watch says of one link now."""

    key: str
    bdf: str
    kind: str
    degraded: bool
    reason: str | None
    current_gts: float | None
    current_width: int | None
    max_gts: float | None
    max_width: int | None
    max_seen_gts: float | None
    max_seen_width: int | None
    saw_load: bool

    def as_dict(self) -> dict[str, Any]:
        """The judgement as a plain dict (for the daemon's state and events)."""
        return msgspec.structs.asdict(self)


class LinkWatch:
    """Samples per link over a sliding window; judgements on demand.  Not thread-safe: the
    daemon loop alone feeds it."""

    def __init__(self, window: float) -> None:
        self.window = window
        self.links: dict[str, WatchedLink] = {}
        self._samples: dict[str, deque[Sample]] = {}
        self._max_seen: dict[str, tuple[float | None, int | None]] = {}

    def update_plan(self, result: ScanResult) -> None:
        """Watch the links of a new result; forget links that are gone."""
        self.links = watched_links(result)
        for gone in set(self._samples) - set(self.links):
            del self._samples[gone]
            self._max_seen.pop(gone, None)

    def observe(self, at: float, links: Mapping[str, LinkInfo], load: Mapping[str, bool | None]) -> None:
        """Record one reading: ``links`` by BDF (or key), ``load`` by GPU key (None: unknown)."""
        for key, w in self.links.items():
            info = links.get(w.bdf) or links.get(key)
            if info is None:
                continue
            s = Sample(at, info.current_gts, info.current_width, load.get(w.gpu) if w.gpu else None)
            q = self._samples.setdefault(key, deque())
            q.append(s)
            while len(q) > 1 and q[0].at < at - self.window:
                q.popleft()
            g, wd = self._max_seen.get(key, (None, None))
            self._max_seen[key] = (_max(g, s.gts), _max(wd, s.width))

    def observe_result(self, at: float, result: ScanResult, load: Mapping[str, bool | None]) -> None:
        """A scan is a reading too (and may change what is watched)."""
        self.update_plan(result)
        self.observe(at, {d.key: d.link for d in result.topology.devices}, load)

    def judge(self) -> dict[str, Judgement]:
        """Every watched link with samples, judged."""
        out: dict[str, Judgement] = {}
        for key, w in self.links.items():
            q = self._samples.get(key)
            if not q:
                continue
            out[key] = self._judge(w, q)
        return out

    def _judge(self, w: WatchedLink, q: deque[Sample]) -> Judgement:
        cur = q[-1]
        saw_load = any(s.loaded for s in q)
        reasons = []
        width_low, speed_low = shortfall(cur.gts, cur.width, w.capability)
        top = w.max_gts
        reached = top is not None and any(s.gts is not None and s.gts >= top for s in q)
        if w.gpu is not None and speed_low and (not saw_load or reached):
            speed_low = False  # idle downclocking, or it reached full speed within the window
        if width_low:
            reasons.append(f"x{cur.width} of x{w.max_width}")
        if speed_low:
            reasons.append(f"{cur.gts:g} of {w.max_gts:g} GT/s" + (" under load" if w.gpu else ""))
        seen_gts, seen_width = self._max_seen.get(w.key, (None, None))
        return Judgement(
            w.key,
            w.bdf,
            w.kind,
            bool(reasons),
            ", ".join(reasons) or None,
            cur.gts,
            cur.width,
            w.max_gts,
            w.max_width,
            seen_gts,
            seen_width,
            saw_load,
        )

    def needs_sampling(self) -> bool:
        """Whether a GPU link is below its maximum now (only those need readings between scans)."""
        for key, w in self.links.items():
            q = self._samples.get(key)
            if w.gpu is None or not q:
                continue
            if any(shortfall(q[-1].gts, q[-1].width, w.capability)):
                return True
        return False


def _max(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else max(a, b)


def rail_netdevs(result: ScanResult) -> dict[str, tuple[str, ...]]:
    """Each GPU's key -> the netdevs of its rail NICs (for the traffic fallback of
    :class:`topoagent.features.daemon.load.LoadProbe`)."""
    out: dict[str, tuple[str, ...]] = {}
    topo = result.topology
    for r in result.rails.rails:
        g = topo.by_id(r.gpu)
        if g is None:
            continue
        names: list[str] = []
        for nic_id in r.nics:
            n = topo.by_id(nic_id)
            if n is not None:
                names.extend(n.netdevs)
        out[g.key] = tuple(names)
    return out
