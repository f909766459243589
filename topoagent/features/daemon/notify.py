"""systemd's notify protocol (``Type=notify``), in a few lines of stdlib socket code.

Each message is one ``AF_UNIX`` datagram of newline-separated ``KEY=value`` pairs sent to
``$NOTIFY_SOCKET``; a leading ``@`` there names a socket in the abstract namespace (a NUL byte
in the address).  See sd_notify(3) and systemd.service(5) (``WatchdogSec=``: the service must
send ``WATCHDOG=1`` before ``$WATCHDOG_USEC`` runs out; ``$WATCHDOG_PID``, when set, names the
process meant).  Without ``$NOTIFY_SOCKET`` (not under systemd) every call does nothing.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

from topoagent.core.digits import decimal

__all__ = ["Notifier"]


class Notifier:
    """Sends sd_notify messages; never raises (a lost notification must not stop the agent)."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        addr = env.get("NOTIFY_SOCKET") or None
        self._address: str | bytes | None = None
        if addr is not None:
            # '@name' is the abstract namespace: the kernel wants a leading NUL instead.
            self._address = b"\0" + addr[1:].encode() if addr.startswith("@") else addr
        self._sock: socket.socket | None = None
        self.last_error: str | None = None
        usec, pid = env.get("WATCHDOG_USEC", ""), env.get("WATCHDOG_PID", "")
        self._watchdog_usec = decimal(usec) or None
        if decimal(pid) not in (None, os.getpid()):
            self._watchdog_usec = None  # the watchdog is meant for another process

    @property
    def enabled(self) -> bool:
        """Whether systemd gave a notification socket (``$NOTIFY_SOCKET``)."""
        return self._address is not None

    def watchdog_interval(self) -> float | None:
        """Seconds between ``WATCHDOG=1`` pings: a third of ``$WATCHDOG_USEC`` (sd_watchdog_enabled(3)
        advises under half), or None when no watchdog is asked for."""
        if self._watchdog_usec is None or not self.enabled:
            return None
        return self._watchdog_usec / 1e6 / 3

    def send(self, **fields: str) -> bool:
        """Send ``KEY=value`` fields as one datagram; False (and ``last_error``) when it failed."""
        if self._address is None:
            return False
        message = "\n".join(f"{k}={' '.join(v.split())}" for k, v in fields.items()).encode("utf-8", "replace")
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._sock.sendto(message, self._address)
        except OSError as exc:
            self.last_error = f"{self._describe()}: {exc.strerror or exc}"
            return False
        self.last_error = None
        return True

    def _describe(self) -> str:
        a = self._address
        return "@" + a[1:].decode("utf-8", "replace") if isinstance(a, bytes) else str(a)

    def ready(self, status: str) -> bool:
        """Send ``READY=1`` with a status line; True when sent."""
        return self.send(READY="1", STATUS=status)

    def status(self, status: str) -> bool:
        """Send a status line; True when sent."""
        return self.send(STATUS=status)

    def watchdog(self) -> bool:
        """Send a watchdog keep-alive (``WATCHDOG=1``); True when sent."""
        return self.send(WATCHDOG="1")

    def stopping(self, status: str = "stopping") -> bool:
        """Send ``STOPPING=1`` with a status line; True when sent."""
        return self.send(STOPPING="1", STATUS=status)

    def close(self) -> None:
        """Close the notification socket."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
