"""Parse ``ibdev2netdev`` (``-v``) and ``ibv_devinfo``: RDMA devices, their ports and netdevs.

``ibdev2netdev`` (a script MLNX_OFED installs) prints one line per RDMA port::

    mlx5_0 port 1 ==> ib0 (Up)
    mlx5_bond_0 port 1 ==> bond0 (Up)

and with ``-v`` the PCI function, the part and the port's IB state first::

    0000:0c:00.0 mlx5_0 (MT4123 - MCX653105A-HDAT) ConnectX-6 VPI … fw 20.28.1002 port 1 (ACTIVE) ==> ib0 (Up)

``(Up)``/``(Down)`` is the netdev's state, ``(ACTIVE)``/``(DOWN  )``/``(INIT)`` the port's
(the script pads the state to six characters).  The part's ``MT4123`` is the HCA's vendor part
id, which for ConnectX is the PCI device id in decimal (4123 = 0x101b).  A reader's note after
a line (``# CX-7``, ``← this one``) is left out.

``ibv_devinfo`` prints a block per device (``hca_id:``) with its ``vendor_id`` (an IEEE OUI:
``0x02c9`` is Mellanox's; EFA, bnxt_re and irdma print their PCI vendor id), ``vendor_part_id``
(the PCI device id, decimal), its ports (``port:``) and each port's ``state:`` (``PORT_ACTIVE
(4)``) and ``link_layer:``, and with ``-v`` its ``active_width`` (``4X (2)``) and ``active_speed``
(``10.0 Gbps (4)``) (rdma-core libibverbs/examples/devinfo.c); it names no PCI function.  Every
line of a block is indented (``-v``'s flag lists too): an indented line is the tool's.
"""

from __future__ import annotations

import re

import msgspec

from topoagent.core.bdf import PRINTED_BDF, printed_bdf
from topoagent.core.digits import is_decimal
from topoagent.core.errors import InputError
from topoagent.core.parse.paste import Skipped, clean_paste, merge_skipped
from topoagent.core.pci import MELLANOX

__all__ = [
    "IbPort",
    "RdmaToolsParseError",
    "read_ibdev2netdev",
    "read_ibv_devinfo",
]

IBDEV2NETDEV = re.compile(
    r"^\s*(?:(?P<bdf>" + PRINTED_BDF + r")\s+)?(?P<dev>[A-Za-z][\w.-]{0,63})"
    r"(?:\s+\((?P<part>[^)]*)\)(?P<desc>.*?))?"
    r"\s+port\s+(?P<port>\d{1,3})(?:\s+\((?P<state>[A-Z_]+)\s*\))?"
    r"\s+==>\s+(?P<netdev>\S+)\s+\((?P<up>Up|Down|up|down)\)(?:\s*#.*|\s+\S.*)?$"
)
_HCA = re.compile(r"^\s*hca_id:\s*(\S+)\s*$")
_PORT = re.compile(r"^\s*port:\s*(\d{1,3})\s*$")
_ATTR = re.compile(r"^\s*([A-Za-z_][\w]*(?: [a-z]+)?(?:\[\s*\d+\])?):\s*(.*?)\s*$")  # "Device ports:" too
_PORT_STATE = re.compile(r"^PORT_([A-Z_]+)")
_PART_ID = re.compile(r"^MT(\d{4,5})\b")
_WIDTH = re.compile(r"^(\d{1,2})X\b")
_SPEED = re.compile(r"^(\d{1,4}(?:\.\d{1,3})?) Gbps\b")
#: ``vendor_id`` as ibv_devinfo prints it -> the PCI vendor: Mellanox's HCAs report the IEEE OUI.
_OUI_VENDOR = {0x02C9: MELLANOX}


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
    #: The HCA's PCI ids (``MT4123``, ``vendor_part_id``) and the port's rate (``-v``'s width x speed).
    vendor_id: int | None = None
    device_id: int | None = None
    rate_gbps: float | None = None
    #: The line it was read on (evidence), and that line's text.
    line: int = 0
    text: str = ""


def _part_id(part: str | None) -> int | None:
    """The PCI device id a ConnectX part number states (``MT4123 - MCX653105A-HDAT``: 0x101b)."""
    m = _PART_ID.match(part or "")
    return int(m.group(1)) if m and int(m.group(1)) <= 0xFFFF else None


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
        part = (m.group("part") or "").strip() or None
        device = _part_id(part)
        ports.append(
            IbPort(
                device=m.group("dev"),
                port=int(m.group("port")),
                bdf=printed_bdf(m.group("bdf")) if m.group("bdf") else None,
                netdev=m.group("netdev"),
                netdev_up=m.group("up").lower() == "up",
                state=m.group("state"),
                part=part,
                vendor_id=MELLANOX if device is not None else None,
                device_id=device,
                line=ln.number,
                text=ln.text.strip(),
            )
        )
    if not ports:
        raise RdmaToolsParseError("no ibdev2netdev line ('mlx5_0 port 1 ==> ib0 (Up)') found")
    return tuple(ports), tuple(merge_skipped(skipped))


def _number(value: str, base: int) -> int | None:
    """``0x02c9`` (base 16) or ``4123`` (base 10), at most 16 bits; None otherwise."""
    digits = value[2:] if base == 16 and value.lower().startswith("0x") else value
    ok = bool(re.fullmatch(r"[0-9a-fA-F]{1,4}", digits)) if base == 16 else is_decimal(digits) and len(digits) <= 5
    return int(digits, base) if ok and int(digits, base) <= 0xFFFF else None


def _rate(width: str | None, speed: str | None) -> float | None:
    """A port's rate in Gb/s from ``active_width`` (``4X``) and ``active_speed`` (``25.0 Gbps``)."""
    w, s = _WIDTH.match(width or ""), _SPEED.match(speed or "")
    return int(w.group(1)) * float(s.group(1)) if w and s else None


class _Hca:
    """One ``hca_id:`` block as it is read: the device's ids and its ports' values."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.ids: dict[str, int | None] = {}
        self.ports: list[dict[str, object]] = []

    def attr(self, key: str, value: str, number: int, text: str) -> None:
        port = self.ports[-1] if self.ports else None
        if port is None:
            if key == "vendor_id" and (v := _number(value, 16)) is not None:
                self.ids["vendor_id"] = _OUI_VENDOR.get(v, v)
            elif key == "vendor_part_id":
                self.ids["device_id"] = _number(value, 10)
        elif key == "state":
            s = _PORT_STATE.match(value)
            port.update(state=s.group(1) if s else None, line=number, text=text)
        elif key in ("link_layer", "active_width", "active_speed"):
            port[key] = value or None

    def finish(self) -> list[IbPort]:
        return [
            IbPort(
                device=self.name,
                port=p["port"],  # type: ignore[arg-type]
                state=p.get("state"),  # type: ignore[arg-type]
                link_layer=p.get("link_layer"),  # type: ignore[arg-type]
                rate_gbps=_rate(p.get("active_width"), p.get("active_speed")),  # type: ignore[arg-type]
                line=p["line"],  # type: ignore[arg-type]
                text=p["text"],  # type: ignore[arg-type]
                vendor_id=self.ids.get("vendor_id"),
                device_id=self.ids.get("device_id"),
            )
            for p in self.ports
        ]


def read_ibv_devinfo(text: str) -> tuple[tuple[IbPort, ...], tuple[Skipped, ...]]:
    """The ports of a pasted ``ibv_devinfo`` (``-v``) and the lines skipped.  Raises
    :class:`RdmaToolsParseError` when no ``hca_id:`` block is found."""
    cleaned = clean_paste(text)
    skipped: list[Skipped] = list(cleaned.skipped)
    hcas: list[_Hca] = []
    for ln in cleaned.lines:
        if m := _HCA.match(ln.text):
            hcas.append(_Hca(m.group(1)))
        elif not hcas:
            continue
        elif m := _PORT.match(ln.text):
            hcas[-1].ports.append({"port": int(m.group(1)), "line": ln.number, "text": ln.text.strip()})
        elif attr := _ATTR.match(ln.text):
            hcas[-1].attr(attr.group(1), attr.group(2), ln.number, ln.text.strip())
        elif not ln.text[:1].isspace():
            skipped.append(Skipped(ln.number, ln.number, f"not ibv_devinfo output: {ln.text.strip()[:60]!r}"))
    ports = [p for h in hcas for p in h.finish()]
    if not ports:
        raise RdmaToolsParseError("no ibv_devinfo block ('hca_id: mlx5_0' with a 'port:') found")
    return tuple(ports), tuple(merge_skipped(skipped))
