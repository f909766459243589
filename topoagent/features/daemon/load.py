"""Whether GPUs are busy now: NVML utilisation, else the traffic of their rail NICs.

A live-host read for the daemon's link judgement (a GPU below its maximum link speed is
degraded only if it stays there under load).  NVML calls live in :mod:`topoagent.core.read.nvml`
and psutil's counters in :mod:`topoagent.core.read.process`, each library in one adapter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from topoagent.core.read.nvml import GpuUtilization
from topoagent.core.read.process import interface_bytes

__all__ = ["GPU_BUSY_PERCENT", "NIC_BUSY_BYTES_PER_SECOND", "LoadProbe"]

#: A GPU at or above this utilisation is under load.
GPU_BUSY_PERCENT = 20
#: A rail NIC moving this many bytes per second (both directions) puts its GPU under load.
NIC_BUSY_BYTES_PER_SECOND = 100e6


class LoadProbe:
    """Whether each GPU is busy now: NVML utilisation, else its rail NICs' traffic (psutil).

    Only meaningful on the live host; every failure means "unknown" (None), never an error.
    """

    def __init__(self, use_nvml: bool, log: Any) -> None:
        self.log = log
        self._nvml: GpuUtilization | None = None
        self._nvml_tried = not use_nvml
        self._last_bytes: dict[str, int] = {}
        self._last_at: float | None = None

    def _nvml_module(self) -> GpuUtilization | None:
        if not self._nvml_tried:
            self._nvml_tried = True
            util = GpuUtilization()
            if util.why_not is None:
                self._nvml = util
            else:  # no library, no driver: utilisation is unknown
                self.log.info("nvml_load_unavailable", error=util.why_not)
        return self._nvml

    def _nic_rates(self, at: float) -> dict[str, float]:
        totals = interface_bytes()
        if not totals:
            return {}
        rates: dict[str, float] = {}
        if self._last_at is not None and at > self._last_at:
            dt = at - self._last_at
            rates = {n: max(0, v - self._last_bytes[n]) / dt for n, v in totals.items() if n in self._last_bytes}
        self._last_bytes, self._last_at = totals, at
        return rates

    def sample(self, at: float, gpu_netdevs: Mapping[str, tuple[str, ...]]) -> dict[str, bool | None]:
        """GPU key (BDF) -> busy now (None: cannot tell).  ``gpu_netdevs``: each GPU's rail NICs' netdevs."""
        nvml = self._nvml_module()
        rates = self._nic_rates(at)
        out: dict[str, bool | None] = {}
        for gpu, netdevs in gpu_netdevs.items():
            percent = nvml.percent(gpu) if nvml is not None else None
            busy = None if percent is None else percent >= GPU_BUSY_PERCENT
            if busy is None and rates and netdevs:
                seen = [rates[n] for n in netdevs if n in rates]
                busy = (sum(seen) >= NIC_BUSY_BYTES_PER_SECOND) if seen else None
            out[gpu] = busy
        return out

    def close(self) -> None:
        """Shut NVML down if the probe opened it."""
        if self._nvml is not None:
            self._nvml.close()
            self._nvml = None
