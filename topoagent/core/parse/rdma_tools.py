"""Parse ``ibdev2netdev`` (``-v``) and ``ibv_devinfo``: RDMA devices, their ports and netdevs.

``ibdev2netdev`` (a script MLNX_OFED installs) prints one line per RDMA port::

    mlx5_0 port 1 ==> ib0 (Up)
    mlx5_bond_0 port 1 ==> bond0 (Up)

and with ``-v`` the PCI function, the part and the port's IB state first::

    0000:0c:00.0 mlx5_0 (MT4123 - MCX653105A-HDAT) ConnectX-6 VPI … fw 20.28.1002 port 1 (ACTIVE) ==> ib0 (Up)

``(Up)``/``(Down)`` is the netdev's state, ``(ACTIVE)``/``(DOWN)``/``(INIT)`` the port's.
``ibv_devinfo`` prints a block per device (``hca_id:``) with its ports (``port:``) and each
port's ``state:`` (``PORT_ACTIVE (4)``) and ``link_layer:``; it names no PCI function.
"""

from __future__ import annotations

import re

import msgspec

from topoagent.core.bdf import PRINTED_BDF, printed_bdf
from topoagent.core.errors import InputError
from topoagent.core.parse.paste import Skipped, clean_paste, merge_skipped

__all__ = [
    "IbPort",
    "RdmaToolsParseError",
    "read_ibdev2netdev",
    "read_ibv_devinfo",
]

IBDEV2NETDEV = re.compile(
    r"^\s*(?:(?P<bdf>" + PRINTED_BDF + r")\s+)?(?P<dev>[A-Za-z][\w.-]{0,63})"
    r"(?:\s+\((?P<part>[^)]*)\)(?P<desc>.*?))?"
    r"\s+port\s+(?P<port>\d{1,3})(?:\s+\((?P<state>[A-Z_]+)\))?"
    r"\s+==>\s+(?P<netdev>\S+)\s+\((?P<up>Up|Down|up|down)\)\s*(?:#.*)?$"
)
_HCA = re.compile(r"^\s*hca_id:\s*(\S+)\s*$")
_PORT = re.compile(r"^\s*port:\s*(\d{1,3})\s*$")
_ATTR = re.compile(r"^\s*([A-Za-z_][\w]*(?: [a-z]+)?(?:\[\s*\d+\])?):\s*(.*?)\s*$")  # "Device ports:" too
_PORT_STATE = re.compile(r"^PORT_([A-Z_]+)")


class RdmaToolsParseError(InputError):
    """Text that holds no ``ibdev2netdev`` / ``ibv_devinfo`` output."""


class IbPort(msgspec.Struct, frozen=True):
    """One port of an RDMA device as a tool prints it.

    ``state`` is the IB port state in sysfs's words (``ACTIVE``, ``DOWN``, ``INIT``, ``ARMED``,
    ``POLLING``); ``netdev_up`` the netdev's ``(Up)``/``(Down)`` from ``ibdev2netdev``."""

    device: str
    port: int
    bdf: str | None = None
    netdev: str | None = None
    netdev_up: bool | None = None
    state: str | None = None
    link_layer: str | None = None
    part: str | None = None
    #: The line it was read on (evidence), and that line's text.
    line: int = 0
    text: str = ""


def read_ibdev2netdev(text: str) -> tuple[tuple[IbPort, ...], tuple[Skipped, ...]]:
    """The ports of a pasted ``ibdev2netdev`` (``-v``) and the lines skipped.  Raises
    :class:`RdmaToolsParseError` when no line is one of its."""
    cleaned = clean_paste(text)
    ports: list[IbPort] = []
    skipped: list[Skipped] = list(cleaned.skipped)
    for ln in cleaned.lines:
        m = IBDEV2NETDEV.match(ln.text)
        if not m:
            skipped.append(Skipped(ln.number, ln.number, f"not ibdev2netdev output: {ln.text.strip()[:60]!r}"))
            continue
        ports.append(
            IbPort(
                device=m.group("dev"),
                port=int(m.group("port")),
                bdf=printed_bdf(m.group("bdf")) if m.group("bdf") else None,
                netdev=m.group("netdev"),
                netdev_up=m.group("up").lower() == "up",
                state=m.group("state"),
                part=(m.group("part") or "").strip() or None,
                line=ln.number,
                text=ln.text.strip(),
            )
        )
    if not ports:
        raise RdmaToolsParseError("no ibdev2netdev line ('mlx5_0 port 1 ==> ib0 (Up)') found")
    return tuple(ports), tuple(merge_skipped(skipped))


def read_ibv_devinfo(text: str) -> tuple[tuple[IbPort, ...], tuple[Skipped, ...]]:
    """The ports of a pasted ``ibv_devinfo`` (``-v``) and the lines skipped.  Raises
    :class:`RdmaToolsParseError` when no ``hca_id:`` block is found."""
    cleaned = clean_paste(text)
    ports: list[IbPort] = []
    skipped: list[Skipped] = list(cleaned.skipped)
    device: str | None = None
    port: dict[str, object] | None = None

    def close() -> None:
        if device is not None and port is not None:
            ports.append(IbPort(device=device, **port))  # type: ignore[arg-type]

    for ln in cleaned.lines:
        if m := _HCA.match(ln.text):
            close()
            device, port = m.group(1), None
            continue
        if device is None:
            continue
        if m := _PORT.match(ln.text):
            close()
            port = {"port": int(m.group(1)), "line": ln.number, "text": ln.text.strip()}
            continue
        attr = _ATTR.match(ln.text)
        if attr is None:
            skipped.append(Skipped(ln.number, ln.number, f"not ibv_devinfo output: {ln.text.strip()[:60]!r}"))
            continue
        if port is not None and attr.group(1) == "state":
            s = _PORT_STATE.match(attr.group(2))
            port["state"] = s.group(1) if s else None
            port["line"], port["text"] = ln.number, ln.text.strip()
        elif port is not None and attr.group(1) == "link_layer":
            port["link_layer"] = attr.group(2) or None
    close()
    if not ports:
        raise RdmaToolsParseError("no ibv_devinfo block ('hca_id: mlx5_0' with a 'port:') found")
    return tuple(ports), tuple(merge_skipped(skipped))
