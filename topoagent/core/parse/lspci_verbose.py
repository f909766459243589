"""Parse ``lspci -v``/``-vv``/``-vvv`` (with or without ``-nn`` and ``-D``): one record per
function with its class, ids, driver, NUMA node, link, port type, ACS and SR-IOV."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import msgspec

from topoagent.core.digits import decimal
from topoagent.core.parse.lspci_common import LineError, LspciParseError, split_ids
from topoagent.core.parse.paste import Skipped, clean_paste, merge_skipped
from topoagent.core.pci import ACS_FLAGS, ACS_P2P_REDIRECT_MASK, CLASSES, LSPCI_PORT_NAMES
from topoagent.core.snapshot import AcsInfo

__all__ = ["LspciFunction", "LspciListing", "SriovInfo", "decode_acs", "parse_lspci_verbose", "read_lspci_verbose"]


def decode_acs(register: int) -> dict[str, bool]:
    """ACS capability or control register as ``{"SrcValid": True, …}`` (bit 0 first)."""
    return {name: bool(register >> bit & 1) for bit, name in enumerate(ACS_FLAGS)}


class SriovInfo(msgspec.Struct, frozen=True):
    """The SR-IOV capability of a physical function (``Initial VFs: 16, Total VFs: 16, …``)."""

    initial_vfs: int | None = None
    total_vfs: int | None = None
    num_vfs: int | None = None
    vf_offset: int | None = None
    vf_stride: int | None = None
    vf_device_id: int | None = None


class LspciFunction(msgspec.Struct, frozen=True):
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


_HEADER = re.compile(
    r"(?:(?P<dom>[0-9a-fA-F]{4,8}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-9a-fA-F]{2})"
    r"\.(?P<fn>[0-7])"
    r"\s+(?P<rest>\S.*)$"
)
# The name is greedy (stripped by the reader): a lazy name followed by ``\s*`` would be
# quadratic in a run of spaces.
_CLASS = re.compile(r"^(?P<name>[^:\[]+)(?:\[(?P<code>[0-9a-fA-F]{4})\])?:\s*(?P<desc>.*)$")
# Trailing "(prog-if 00 [Normal decode])" and "(rev a1)"; the spaces before them are stripped
# apart (a leading ``\s*`` would make the search quadratic in a run of spaces).
_PROG_IF = re.compile(r"\(prog-if [^()]*(?:\([^()]*\)[^()]*)*\)\s*$")
_REV = re.compile(r"\(rev ([0-9a-fA-F]{2})\)")
_EXPRESS = re.compile(r"\[[0-9a-fA-F]+(?: v[0-9]+)?\]\s+Express\s+(?:\(v[0-9]+\)\s+)?(?P<type>.*)$")
# "Speed 16GT/s (downgraded)", "Speed 8GT/s (ok)", "Speed 2.5GT/s", "Speed unknown".
_SPEED = re.compile(r"Speed\s+(?:(?P<gts>[0-9.]{1,8})GT/s|(?P<unknown>unknown))(?:\s*\((?P<flag>[^)]*)\))?")
_WIDTH = re.compile(r"Width\s+x(?P<w>[0-9]{1,4})\b(?:\s*\((?P<flag>[^)]*)\))?")


def _flag(text: str | None) -> bool | None:
    if text == "downgraded":
        return True
    if text == "ok":
        return False
    return None


def _link(text: str) -> tuple[float | None, bool | None, int | None, bool | None]:
    s = _SPEED.search(text)
    w = _WIDTH.search(text)
    if not s and not w:
        raise LineError("link line without Speed or Width")
    gts = flag_s = width = flag_w = None
    if s:
        if s.group("gts"):
            try:
                gts = float(s.group("gts"))
            except ValueError:
                raise LineError("bad link speed") from None
        flag_s = _flag(s.group("flag"))
    if w:
        width = int(w.group("w")) or None  # x0: link down or width unknown
        flag_w = _flag(w.group("flag"))
    return gts, flag_s, width, flag_w


def _acs(text: str) -> int | None:
    flags = dict(re.findall(r"\b(\w+)([+-])", text))  # \b: linear in a long word
    if not all(name in flags for name in ACS_FLAGS):
        return None  # a flag missing: do not guess its bit
    return sum(1 << bit for bit, name in enumerate(ACS_FLAGS) if flags[name] == "+")


class LspciListing(msgspec.Struct, frozen=True):
    """What :func:`read_lspci_verbose` read: the functions, the line ranges it skipped (with
    why) and notes (fields found with no device line to place them on, repeated records)."""

    functions: tuple[LspciFunction, ...]
    skipped: tuple[Skipped, ...] = ()
    notes: tuple[str, ...] = ()


# ``lspci -x``/``-xxx``/``-xxxx`` hex dump lines: "00: de 10 b0 20 06 04 10 00 …".
_HEX_DUMP = re.compile(r"^[0-9a-fA-F]{2,3}:(?: [0-9a-fA-F]{2}){1,16}\s*$")
# Fields lspci prints one tab in, which pastes sometimes lose (``Kernel driver in use:`` at
# column 0): an unindented line starting with one of these is still a field.
_FIELD_KEYS = frozenset(
    (
        "Subsystem",
        "Physical Slot",
        "Flags",
        "Control",
        "Status",
        "Latency",
        "Interrupt",
        "NUMA node",
        "IOMMU group",
        "Region",
        "Expansion ROM at",
        "Bus",
        "Capabilities",
        "Kernel driver in use",
        "Kernel modules",
        "DevCap",
        "DevCtl",
        "DevSta",
        "LnkCap",
        "LnkCtl",
        "LnkSta",
        "LnkCap2",
        "LnkCtl2",
        "LnkSta2",
        "SltCap",
        "SltCtl",
        "SltSta",
        "ACSCap",
        "ACSCtl",
        "DevCap2",
        "DevCtl2",
    )
)
# What a person puts before a device line: indentation (a markdown code block, a quote) or a
# list item's marker ("- 00:01.0 …", "* …", "1. …").  No field line lspci prints goes on with
# "bb:dd.f " after these, so such a line is a device line at any indentation.
_LIST_ITEM = re.compile(r"[ \t]*(?:(?:[-*+]|[0-9]{1,3}[.)])[ \t]+)?")
# ``lspci -n``: "01:00.0 0302: 10de:2330 (rev a1)" -- class and ids, no names.
_NUMERIC = re.compile(r"^(?P<cls>[0-9a-fA-F]{4}): (?P<v>[0-9a-fA-F]{4}):(?P<d>[0-9a-fA-F]{4})\b(?P<rest>.*)$")


def parse_lspci_verbose(text: str) -> tuple[LspciFunction, ...]:
    """Parse ``lspci -v``/``-vv``/``-vvv`` output, with or without ``-nn`` and ``-D``.

    Lines before the first device line (a shell prompt, a ``sudo`` banner) are skipped, as
    are ``pcilib:`` warnings and ``-xxx`` hex dumps; any other unindented line that is not a
    device line or a known field raises :class:`LspciParseError`.  Blank input gives ``()``.
    """
    return _read(text, lenient=False).functions


def read_lspci_verbose(text: str) -> LspciListing:
    """Read pasted ``lspci -v…`` output leniently: lines that cannot be read are skipped and
    reported, several commands' outputs are read as one (a function listed twice is merged),
    and fields without any device line (``lspci -vvv | grep ACSCtl``) are counted in a note.

    Raises :class:`LspciParseError` only when nothing in the text is lspci output.
    """
    return _read(text, lenient=True)


def _read(text: str, lenient: bool) -> LspciListing:
    if not isinstance(text, str):
        raise LspciParseError(f"expected text, got {type(text).__name__}")
    out: dict[str, LspciFunction] = {}
    repeated: list[str] = []
    skipped: list[Skipped] = []
    orphan_fields: dict[str, int] = {}
    orphan_redirect = 0
    cur: dict[str, Any] | None = None
    cap: str | None = None  # the capability whose body we are in
    acs: list[int | None] = [None, None]  # ACSCap, ACSCtl
    sriov: dict[str, int] = {}

    cleaned = clean_paste(text)
    if lenient:
        skipped.extend(cleaned.skipped)
    for ln in cleaned.lines:
        lineno, line = ln.number, ln.text

        if _HEX_DUMP.match(line):
            continue  # -x/-xxx config dump: lspci's own output, read from sysfs config elsewhere
        try:
            item = _LIST_ITEM.match(line)
            m = _HEADER.match(line, item.end() if item else 0)
            if m or not line[0].isspace():
                if m:
                    _finish(cur, acs, sriov, out, repeated)
                    cur, acs, sriov = None, [None, None], {}  # a bad device line leaves none open
                    cur = _function_header(m)
                    cap = None
                    continue
                key = line.partition(":")[0].strip()
                if key not in _FIELD_KEYS:
                    if cur is None:
                        continue  # text before any device: a prompt, a banner, the author's words
                    raise LineError("expected a device line (bb:dd.f …) or an indented field")
            if cur is None:
                orphan_redirect += _orphan_field(line, orphan_fields)
                continue
            cap = _field(line.strip(), cur, cap, sriov, acs)
        except LineError as exc:
            if not lenient:
                raise LspciParseError(f"lspci line {lineno}: {exc.why}: {line.strip()[:80]!r}") from None
            skipped.append(Skipped(lineno, lineno, f"not lspci -v output ({exc.why}): {line.strip()[:60]!r}"))
    _finish(cur, acs, sriov, out, repeated)
    notes = _listing_notes(repeated, orphan_fields, orphan_redirect, bool(out))
    if not out and not orphan_fields and text.strip() and (lenient or cleaned.lines):
        raise LspciParseError("no lspci device line (bb:dd.f class: name) found")
    return LspciListing(tuple(out.values()), tuple(merge_skipped(skipped)), tuple(notes))


def _finish(
    cur: dict[str, Any] | None,
    acs: list[int | None],
    sriov: dict[str, int],
    out: dict[str, LspciFunction],
    repeated: list[str],
) -> None:
    """The function read so far into ``out``: merged with an earlier record of the same BDF
    (outputs concatenated), which ``repeated`` counts."""
    if cur is None:
        return
    if acs[1] is not None:
        # Without the ACSCap line, the control bits set are what is known to be implemented:
        # a control bit of an unimplemented feature is hardwired to 0 (PCIe Base Spec 7.7.8.3).
        cur["acs"] = AcsInfo(capability=acs[1] if acs[0] is None else acs[0], control=acs[1])
    if sriov:
        cur["sriov"] = SriovInfo(**sriov)
    fn = LspciFunction(**cur)
    if fn.bdf in out:
        repeated.append(fn.bdf)
        fn = _merge(out[fn.bdf], fn)
    out[fn.bdf] = fn


def _orphan_field(line: str, orphan_fields: dict[str, int]) -> int:
    """Indented text before any device: a banner -- or the lines grep kept, counted per field
    in ``orphan_fields``.  Returns 1 for an ``ACSCtl`` line with P2P redirect bits set."""
    key = line.strip().partition(":")[0]
    if key in _FIELD_KEYS or key.rstrip("0123456789") in ("LnkCap", "LnkSta", "DevCap"):
        orphan_fields[key] = orphan_fields.get(key, 0) + 1
        if key == "ACSCtl":
            ctl = _acs(line.partition(":")[2])
            return int(ctl is not None and bool(ctl & ACS_P2P_REDIRECT_MASK))
    return 0


def _listing_notes(
    repeated: list[str], orphan_fields: dict[str, int], orphan_redirect: int, any_function: bool
) -> list[str]:
    """Notes on functions listed twice and on fields no device line introduces."""
    notes: list[str] = []
    if repeated:
        notes.append(
            f"{len(repeated)} function(s) listed more than once (outputs concatenated): "
            f"records merged (first: {repeated[0]})"
        )
    if orphan_fields and not any_function:
        counts = ", ".join(f"{n} {k}" for k, n in sorted(orphan_fields.items()))
        extra = ""
        if "ACSCtl" in orphan_fields:
            extra = f" ({orphan_redirect} of them with P2P redirect bits set: ReqRedir+, CmpltRedir+ or EgressCtrl+)"
        notes.append(
            f"no device line: {counts} line(s){extra} cannot be placed on any function "
            "(filtered output, such as lspci -vvv | grep ACSCtl)"
        )
    return notes


def _merge(first: LspciFunction, again: LspciFunction) -> LspciFunction:
    """One record of a function listed twice: the fields the first lacks from the second."""
    updates = {
        name: getattr(again, name)
        for name in first.__struct_fields__
        if getattr(first, name) in (None, ()) and getattr(again, name) not in (None, ())
    }
    return msgspec.structs.replace(first, **updates) if updates else first


def _field(body: str, cur: dict[str, Any], cap: str | None, sriov: dict[str, int], acs: list[int | None]) -> str | None:
    """Read one field line into ``cur``; the capability whose body follows."""
    # Depth 1 fields (one tab; pastes turn it into spaces) and capability headers.
    key, sep, value = body.partition(":")
    value = value.strip()
    if key == "Capabilities" and sep:
        return _capability_header(value, cur)
    if sep and key in _DEVICE_FIELDS:
        return _device_field(key, value, cur, cap)
    _capability_field(key, sep, value, body, cur, cap, sriov, acs)
    return cap


def _capability_header(value: str, cur: dict[str, Any]) -> str | None:
    """A ``Capabilities: [40] Express (v2) Root Port (Slot+)`` line: the port type where it is
    the PCIe capability; returns which capability's body follows (None: access denied)."""
    if value.startswith("<access denied>"):
        cur["capabilities_readable"] = False
        return None
    if cur.get("capabilities_readable") is None:
        cur["capabilities_readable"] = True
    m = _EXPRESS.match(value)
    cap = (
        "pcie" if m else ("acs" if "Access Control Services" in value else "sriov" if "(SR-IOV)" in value else "other")
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
    return cap


#: The fields of the function itself (outside any capability's body).
_DEVICE_FIELDS = frozenset(
    ("Subsystem", "Physical Slot", "NUMA node", "IOMMU group", "Bus", "Kernel driver in use", "Kernel modules")
)


def _device_field(key: str, value: str, cur: dict[str, Any], cap: str | None) -> str | None:
    """One of :data:`_DEVICE_FIELDS` into ``cur``; the driver lines end a capability's body."""
    if key == "Subsystem" and cap is None and "subsystem" not in cur:
        vend, dev, name = split_ids(value)
        cur["subsystem"] = name.strip()
        cur["subsystem_vendor_id"], cur["subsystem_device_id"] = vend, dev
    elif key == "Physical Slot":
        cur["physical_slot"] = value
    elif key == "NUMA node":
        cur["numa_node"] = _int(value)
    elif key == "IOMMU group":
        cur["iommu_group"] = _int(value)
    elif key == "Bus" and cap is None:
        _bus_line(value, cur)
    elif key == "Kernel driver in use":
        cur["driver"] = value
        cap = None
    elif key == "Kernel modules":
        cur["kernel_modules"] = tuple(p.strip() for p in value.split(",") if p.strip())
        cap = None
    return cap


def _capability_field(
    key: str,
    sep: str,
    value: str,
    body: str,
    cur: dict[str, Any],
    cap: str | None,
    sriov: dict[str, int],
    acs: list[int | None],
) -> None:
    """A line of a capability's body: the PCIe link, the ACS registers, the SR-IOV counts."""
    if key == "LnkCap" and sep and cap == "pcie":
        gts, _, width, _ = _link(value)
        port = re.search(r"Port #([0-9]{1,5})\b", value)
        cur["link_max_gts"], cur["link_max_width"] = gts, width
        cur["link_port"] = int(port.group(1)) if port else None
    elif key == "LnkSta" and sep and cap == "pcie":
        gts, fs, width, fw = _link(value)
        cur["link_gts"], cur["link_width"] = gts, width
        cur["link_speed_downgraded"], cur["link_width_downgraded"] = fs, fw
    elif key in ("ACSCap", "ACSCtl") and sep:
        # Only the ACS capability prints these keys: read them also where a grep kept them
        # without their "Capabilities: [148 v1] Access Control Services" line
        # (lspci -vvv | grep -E '^[0-9a-f]|ACSCtl'), which is how people paste ACS state.
        acs[key == "ACSCtl"] = _acs(value)
        if cur.get("capabilities_readable") is None:
            cur["capabilities_readable"] = True  # lspci showed an extended capability
    elif cap == "sriov":
        _sriov_line(body, sriov)


_BUS_FIELD = re.compile(r"\b(primary|secondary|subordinate)=([0-9a-fA-F]{1,8})\b")


def _bus_line(value: str, cur: dict[str, Any]) -> None:
    """``primary=15, secondary=16, subordinate=1e, sec-latency=0`` (bus numbers in hex)."""
    found = dict(_BUS_FIELD.findall(value))
    if not found:
        raise LineError("Bus line without primary/secondary/subordinate")
    numbers = {}
    for name, text in found.items():
        number = int(text, 16)
        if number > 0xFF:
            raise LineError(f"bus number {text} out of range")
        numbers[f"{name}_bus"] = number
    sec = numbers.get("secondary_bus", cur.get("secondary_bus"))
    sub = numbers.get("subordinate_bus", cur.get("subordinate_bus"))
    if sec is not None and sub is not None and sub < sec:
        raise LineError("bridge bus range runs backwards")
    cur.update(numbers)


_HEX_ID = re.compile(r"[0-9a-fA-F]{1,8}")


def _decimal(word: str) -> int | None:
    """A number lspci prints in decimal (at most 10 ASCII digits)."""
    return decimal(word, digits=10)


def _hex(word: str) -> int | None:
    """An id lspci prints in hex (at most 8 digits)."""
    return int(word, 16) if _HEX_ID.fullmatch(word) else None


def _int(text: str) -> int:
    """The decimal number that ``text`` starts with (``NUMA node: 1``, ``IOMMU group: 38``)."""
    words = text.split()
    value = _decimal(words[0]) if words else None
    if value is None:
        raise LineError("expected a number")
    return value


def _function_header(m: re.Match[str]) -> dict[str, Any]:
    dom = int(m.group("dom"), 16) if m.group("dom") else 0
    bdf = f"{dom:04x}:{m.group('bus').lower()}:{m.group('dev').lower()}.{m.group('fn')}"
    rest = m.group("rest")
    n = _NUMERIC.match(rest)
    if n:  # lspci -n: "0302: 10de:2330 (rev a1)"
        r = _REV.search(n.group("rest"))
        code = int(n.group("cls"), 16)
        return {
            "bdf": bdf,
            "class_name": CLASSES.get(code, f"Class {code:04x}"),
            "class_code": code,
            "description": "",
            "vendor_id": int(n.group("v"), 16),
            "device_id": int(n.group("d"), 16),
            "revision": int(r.group(1), 16) if r else None,
        }
    c = _CLASS.match(rest)
    if not c:
        raise LineError("device line without 'class: name'")
    desc = c.group("desc")
    # Trailing "(prog-if 00 [Normal decode])" then "(rev a1)", in that order from the end.
    p = _PROG_IF.search(desc)
    if p:
        desc = desc[: p.start()].rstrip()
    revision = None
    tail = desc.rstrip()
    r = _REV.fullmatch(tail, len(tail) - len("(rev xx)")) if len(tail) >= len("(rev xx)") else None
    if r:
        revision = int(r.group(1), 16)
        desc = tail[: r.start()].rstrip()
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


# "Initial VFs: 16, Total VFs: 16, Number of VFs: 0, Function Dependency Link: 00"
# "VF offset: 2, stride: 1, Device ID: 101e"
_SRIOV_FIELDS: dict[str, tuple[str, Callable[[str], int | None]]] = {
    "Initial VFs": ("initial_vfs", _decimal),
    "Total VFs": ("total_vfs", _decimal),
    "Number of VFs": ("num_vfs", _decimal),
    "VF offset": ("vf_offset", _decimal),
    "stride": ("vf_stride", _decimal),
    "Device ID": ("vf_device_id", _hex),
}


def _sriov_line(body: str, sriov: dict[str, int]) -> None:
    if not (body.startswith(("Initial VFs", "VF offset"))):
        return
    for part in body.split(","):
        key, sep, value = part.partition(":")
        key = key.strip()
        if sep and key in _SRIOV_FIELDS:
            attr, parse = _SRIOV_FIELDS[key]
            number = parse(value.strip())
            if number is None:
                raise LineError(f"bad SR-IOV {key}")
            sriov[attr] = number
