"""Hotplug events from udev (pyudev): a PCI function, network interface or RDMA device came
or went, so the daemon should rescan (after a short debounce: one hot-plugged GPU is a burst
of events).

The monitor's socket joins the daemon loop's ``select``: no thread, no polling.  udev describes
the machine the daemon runs on, so with ``--root`` (a fake or captured tree) there is nothing
to watch; without libudev (containers, minimal hosts) the daemon keeps its timer.  Either way
it says so once.

libudev hears udevd only where ``/run/udev/control`` exists: otherwise it disables the monitor
without an error ("The udev service seems not to be active, disabling the monitor", systemd's
src/libsystemd/sd-device/device-monitor.c), which is what a container without the host's
``/run/udev`` mounted gets.  So that case is said too, instead of a monitor that never speaks.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["SUBSYSTEMS", "UDEV_CONTROL", "UdevWatch"]

#: Subsystems whose events change the topology.
SUBSYSTEMS = ("pci", "net", "infiniband")
#: udevd's control socket: libudev's test that udevd runs (and can be heard).
UDEV_CONTROL = "/run/udev/control"


class UdevWatch:
    """A pyudev monitor filtered to :data:`SUBSYSTEMS`."""

    def __init__(self, monitor: Any) -> None:
        self._monitor = monitor

    @classmethod
    def open(cls, log: Any, *, live: bool, enabled: bool = True, control: str = UDEV_CONTROL) -> UdevWatch | None:
        """The watch, or None (logged once: why there are no hotplug rescans)."""
        if not enabled:
            log.info("udev_disabled", reason="udev = false in the configuration; rescans on the timer only")
            return None
        if not live:
            log.info(
                "udev_disabled",
                reason="--root reads another tree; udev events describe this host, so rescans are on the timer only",
            )
            return None
        if not os.path.exists(control):
            log.warning(
                "udev_unavailable",
                error=f"{control} is missing",
                reason="udevd is not running or, in a container, the host's /run/udev is not "
                "mounted (read-only is enough): no hotplug events; rescans on the timer only",
            )
            return None
        try:
            import pyudev

            monitor = pyudev.Monitor.from_netlink(pyudev.Context())
            for subsystem in SUBSYSTEMS:
                monitor.filter_by(subsystem)
            monitor.start()
        except Exception as exc:  # noqa: BLE001 - ImportError, no libudev (OSError/ImportError), no netlink permission
            log.warning(
                "udev_unavailable",
                error=f"{type(exc).__name__}: {exc}",
                reason="no hotplug events; rescans on the timer only",
            )
            return None
        return cls(monitor)

    def fileno(self) -> int:
        """The monitor's netlink descriptor, for the loop's selector."""
        return int(self._monitor.fileno())

    def drain(self) -> list[tuple[str, str, str]]:
        """The events waiting now: ``(action, subsystem, sys_name)`` each; never blocks."""
        out = []
        while True:
            try:
                device = self._monitor.poll(timeout=0)
            except Exception:  # noqa: BLE001 - a monitor failing mid-poll ends this drain; the next scan reads sysfs anyway
                break
            if device is None:
                break
            out.append((str(device.action), str(device.subsystem), str(device.sys_name)))
            if len(out) >= 1000:
                break  # a storm: enough to know a rescan is due
        return out

    def close(self) -> None:
        """Drop the monitor (pyudev then frees its netlink socket)."""
        self._monitor = None  # pyudev frees the netlink socket with the monitor (udev_monitor_unref)
