"""Parse ``lspci -v``/``-vv``/``-vvv`` (with or without ``-nn`` and ``-D``): one record per
function with its class, ids, driver, NUMA node, link, port type, ACS and SR-IOV."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from topoagent.parsers.lspci_common import LspciParseError, split_ids
from topoagent.pci import ACS_FLAGS, LSPCI_PORT_NAMES
from topoagent.snapshot import AcsInfo

__all__ = ["LspciFunction", "SriovInfo", "decode_acs", "parse_lspci_verbose"]

_Fail = Callable[[str], LspciParseError]


def decode_acs(register: int) -> dict[str, bool]:
    """ACS capability or control register as ``{"SrcValid": True, …}`` (bit 0 first)."""
    return {name: bool(register >> bit & 1) for bit, name in enumerate(ACS_FLAGS)}




@dataclass(frozen=True)
class SriovInfo:
    """The SR-IOV capability of a physical function (``Initial VFs: 16, Total VFs: 16, …``)."""

    initial_vfs: int | None = None
    total_vfs: int | None = None
    num_vfs: int | None = None
    vf_offset: int | None = None
    vf_stride: int | None = None
    vf_device_id: int | None = None


@dataclass(frozen=True)
class LspciFunction:
    """One function of ``lspci -vvv`` output.

    ``bdf`` is the full ``dddd:bb:dd.f`` (domain ``0000`` when the output had none).
    ``class_name`` is lspci's text (``3D controller``); ``class_code`` (``0x0302``), the ids
    and ``revision`` are present with ``-nn`` (revision also without).  ``description`` is the
    device name without the trailing ids, revision and prog-if.

    ``capabilities_readable`` is False when lspci printed ``Capabilities: <access denied>``
    (run without root): the PCIe port type, link fields, ACS and SR-IOV are then *unknown*, not
    absent.  It is True when at least one capability was listed and None when none was (plain
    ``-v``, or a device without capabilities).

    Link fields come from ``LnkCap`` (``link_max_*``) and ``LnkSta`` (``link_*``); speeds are
    GT/s per lane, ``None`` for ``Speed unknown`` and widths of ``x0``.  ``link_*_downgraded``
    is True for ``(downgraded)``, False for ``(ok)`` and None where lspci printed neither
    (versions before 3.8 never do).  ``acs`` holds the ACS capability and control registers
    rebuilt from the ``ACSCap``/``ACSCtl`` flags (bit 0 SrcValid … bit 6 DirectTrans).
    """

    bdf: str
    class_name: str
    description: str
    class_code: int | None = None
    vendor_id: int | None = None
    device_id: int | None = None
    revision: int | None = None
    subsystem: str | None = None
    subsystem_vendor_id: int | None = None
    subsystem_device_id: int | None = None
    physical_slot: str | None = None
    numa_node: int | None = None
    iommu_group: int | None = None
    driver: str | None = None
    kernel_modules: tuple[str, ...] = ()
    capabilities_readable: bool | None = None
    port_type: str | None = None
    slot_implemented: bool | None = None
    link_max_gts: float | None = None
    link_max_width: int | None = None
    link_port: int | None = None
    link_gts: float | None = None
    link_width: int | None = None
    link_speed_downgraded: bool | None = None
    link_width_downgraded: bool | None = None
    acs: AcsInfo | None = None
    sriov: SriovInfo | None = None
    #: A bridge's bus numbers from ``Bus: primary=00, secondary=01, subordinate=05`` (``-vv``
    #: and up); None for endpoints and where lspci printed no such line.
    primary_bus: int | None = None
    secondary_bus: int | None = None
    subordinate_bus: int | None = None

    @property
    def acs_ctl_flags(self) -> dict[str, bool] | None:
        """The ACSCtl flags by name, or None when there is no (readable) ACS capability."""
        return decode_acs(self.acs.control) if self.acs else None

    @property
    def acs_cap_flags(self) -> dict[str, bool] | None:
        """The ACSCap flags by name, or None when there is no (readable) ACS capability."""
        return decode_acs(self.acs.capability) if self.acs else None


_HEADER = re.compile(
    r"^(?:(?P<dom>[0-9a-fA-F]{4,8}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-9a-fA-F]{2})"
    r"\.(?P<fn>[0-7])"
    r"\s+(?P<rest>\S.*)$"
)
_CLASS = re.compile(r"^(?P<name>[^:\[]+?)(?:\s*\[(?P<code>[0-9a-fA-F]{4})\])?:\s*(?P<desc>.*)$")
_EXPRESS = re.compile(r"\[[0-9a-fA-F]+(?: v[0-9]+)?\]\s+Express\s+(?:\(v[0-9]+\)\s+)?(?P<type>.*)$")
# "Speed 16GT/s (downgraded)", "Speed 8GT/s (ok)", "Speed 2.5GT/s", "Speed unknown".
_SPEED = re.compile(
    r"Speed\s+(?:(?P<gts>[0-9.]{1,8})GT/s|(?P<unknown>unknown))(?:\s*\((?P<flag>[^)]*)\))?"
)
_WIDTH = re.compile(r"Width\s+x(?P<w>[0-9]{1,4})\b(?:\s*\((?P<flag>[^)]*)\))?")


def _flag(text: str | None) -> bool | None:
    if text == "downgraded":
        return True
    if text == "ok":
        return False
    return None


def _link(text: str, fail: _Fail) -> tuple[float | None, bool | None, int | None, bool | None]:
    s = _SPEED.search(text)
    w = _WIDTH.search(text)
    if not s and not w:
        raise fail("link line without Speed or Width")
    gts = flag_s = width = flag_w = None
    if s:
        if s.group("gts"):
            try:
                gts = float(s.group("gts"))
            except ValueError:
                raise fail("bad link speed") from None
        flag_s = _flag(s.group("flag"))
    if w:
        width = int(w.group("w")) or None  # x0: link down or width unknown
        flag_w = _flag(w.group("flag"))
    return gts, flag_s, width, flag_w


def _acs(text: str) -> int | None:
    flags = dict(re.findall(r"(\w+)([+-])", text))
    if not all(name in flags for name in ACS_FLAGS):
        return None  # a flag missing: do not guess its bit
    return sum(1 << bit for bit, name in enumerate(ACS_FLAGS) if flags[name] == "+")


def parse_lspci_verbose(text: str) -> tuple[LspciFunction, ...]:
    """Parse ``lspci -v``/``-vv``/``-vvv`` output, with or without ``-nn`` and ``-D``.

    Lines before the first device line (a shell prompt, a ``sudo`` banner) are skipped, as
    are ``pcilib:`` warnings; any other unindented line that is not a device line raises
    :class:`LspciParseError`.  Blank input gives ``()``.
    """
    if not isinstance(text, str):
        raise LspciParseError(f"expected text, got {type(text).__name__}")
    out: list[LspciFunction] = []
    cur: dict[str, Any] | None = None
    cap: str | None = None  # the capability whose body we are in
    acs_cap = acs_ctl = None
    sriov: dict[str, int] = {}

    def finish() -> None:
        nonlocal cur, acs_cap, acs_ctl, sriov
        if cur is not None:
            if acs_cap is not None and acs_ctl is not None:
                cur["acs"] = AcsInfo(capability=acs_cap, control=acs_ctl)
            if sriov:
                cur["sriov"] = SriovInfo(**sriov)
            out.append(LspciFunction(**cur))
        cur, acs_cap, acs_ctl, sriov = None, None, None, {}

    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()

        def fail(why: str, lineno: int = lineno, line: str = line) -> LspciParseError:
            return LspciParseError(f"lspci line {lineno}: {why}: {line.strip()[:80]!r}")

        if not line.strip():
            continue
        if not line[0].isspace():
            m = _HEADER.match(line)
            if m:
                finish()
                cur = _function_header(m, fail)
                cap = None
                continue
            if cur is None or line.startswith(("pcilib:", "lspci:")):
                continue
            raise fail("expected a device line (bb:dd.f …) or an indented field")
        if cur is None:
            continue  # indented text before any device: part of a prompt or banner
        body = line.strip()
        # Depth 1 fields (one tab; pastes turn it into spaces) and capability headers.
        key, sep, value = body.partition(":")
        value = value.strip()
        if key == "Capabilities" and sep:
            if value.startswith("<access denied>"):
                cur["capabilities_readable"] = False
                cap = None
                continue
            if cur.get("capabilities_readable") is None:
                cur["capabilities_readable"] = True
            m = _EXPRESS.match(value)
            cap = "pcie" if m else (
                "acs" if "Access Control Services" in value
                else "sriov" if "(SR-IOV)" in value else "other"
            )
            if m:
                kind = m.group("type")
                for prefix, name in LSPCI_PORT_NAMES:
                    if kind.startswith(prefix):
                        cur["port_type"] = name
                        slot = re.match(r"\(Slot([+-])\)", kind[len(prefix) :].strip())
                        if slot:
                            cur["slot_implemented"] = slot.group(1) == "+"
                        break
                else:
                    cur["port_type"] = "unknown"
            continue
        if key == "Subsystem" and sep and cap is None and "subsystem" not in cur:
            vend, dev, name = split_ids(value)
            cur["subsystem"] = name.strip()
            cur["subsystem_vendor_id"], cur["subsystem_device_id"] = vend, dev
        elif key == "Physical Slot" and sep:
            cur["physical_slot"] = value
        elif key == "NUMA node" and sep:
            cur["numa_node"] = _int(value, fail)
        elif key == "IOMMU group" and sep:
            cur["iommu_group"] = _int(value, fail)
        elif key == "Bus" and sep and cap is None:
            _bus_line(value, cur, fail)
        elif key == "Kernel driver in use" and sep:
            cur["driver"] = value
            cap = None
        elif key == "Kernel modules" and sep:
            cur["kernel_modules"] = tuple(p.strip() for p in value.split(",") if p.strip())
            cap = None
        elif key == "LnkCap" and sep and cap == "pcie":
            gts, _, width, _ = _link(value, fail)
            port = re.search(r"Port #([0-9]{1,5})\b", value)
            cur["link_max_gts"], cur["link_max_width"] = gts, width
            cur["link_port"] = int(port.group(1)) if port else None
        elif key == "LnkSta" and sep and cap == "pcie":
            gts, fs, width, fw = _link(value, fail)
            cur["link_gts"], cur["link_width"] = gts, width
            cur["link_speed_downgraded"], cur["link_width_downgraded"] = fs, fw
        elif key == "ACSCap" and sep and cap == "acs":
            acs_cap = _acs(value)
        elif key == "ACSCtl" and sep and cap == "acs":
            acs_ctl = _acs(value)
        elif cap == "sriov":
            _sriov_line(body, sriov, fail)
    finish()
    if not out and text.strip():
        raise LspciParseError("no lspci device line (bb:dd.f class: name) found")
    return tuple(out)


_BUS_FIELD = re.compile(r"\b(primary|secondary|subordinate)=([0-9a-fA-F]{1,8})\b")


def _bus_line(value: str, cur: dict[str, Any], fail: _Fail) -> None:
    """``primary=15, secondary=16, subordinate=1e, sec-latency=0`` (bus numbers in hex)."""
    found = dict(_BUS_FIELD.findall(value))
    if not found:
        raise fail("Bus line without primary/secondary/subordinate")
    for name, text in found.items():
        number = int(text, 16)
        if number > 0xFF:
            raise fail(f"bus number {text} out of range")
        cur[f"{name}_bus"] = number
    sec, sub = cur.get("secondary_bus"), cur.get("subordinate_bus")
    if sec is not None and sub is not None and sub < sec:
        raise fail("bridge bus range runs backwards")


def _int(text: str, fail: _Fail) -> int:
    try:
        return int(text.split()[0])
    except (ValueError, IndexError):
        raise fail("expected a number") from None


def _function_header(m: re.Match[str], fail: _Fail) -> dict[str, Any]:
    dom = int(m.group("dom"), 16) if m.group("dom") else 0
    bdf = f"{dom:04x}:{m.group('bus').lower()}:{m.group('dev').lower()}.{m.group('fn')}"
    rest = m.group("rest")
    c = _CLASS.match(rest)
    if not c:
        raise fail("device line without 'class: name'")
    desc = c.group("desc")
    # Trailing "(prog-if 00 [Normal decode])" then "(rev a1)", in that order from the end.
    desc = re.sub(r"\s*\(prog-if [^()]*(?:\([^()]*\)[^()]*)*\)\s*$", "", desc)
    revision = None
    r = re.search(r"\s*\(rev ([0-9a-fA-F]{2})\)\s*$", desc)
    if r:
        revision = int(r.group(1), 16)
        desc = desc[: r.start()]
    vendor, device, desc = split_ids(desc)
    return {
        "bdf": bdf,
        "class_name": c.group("name").strip(),
        "class_code": int(c.group("code"), 16) if c.group("code") else None,
        "description": desc.strip(),
        "vendor_id": vendor,
        "device_id": device,
        "revision": revision,
    }


def _sriov_line(body: str, sriov: dict[str, int], fail: _Fail) -> None:
    # "Initial VFs: 16, Total VFs: 16, Number of VFs: 0, Function Dependency Link: 00"
    # "VF offset: 2, stride: 1, Device ID: 101e"
    names = {
        "Initial VFs": ("initial_vfs", 10),
        "Total VFs": ("total_vfs", 10),
        "Number of VFs": ("num_vfs", 10),
        "VF offset": ("vf_offset", 10),
        "stride": ("vf_stride", 10),
        "Device ID": ("vf_device_id", 16),
    }
    if not (body.startswith("Initial VFs") or body.startswith("VF offset")):
        return
    for part in body.split(","):
        key, sep, value = part.partition(":")
        key = key.strip()
        if sep and key in names:
            attr, base = names[key]
            try:
                sriov[attr] = int(value.strip(), base)
            except ValueError:
                raise fail(f"bad SR-IOV {key}") from None
