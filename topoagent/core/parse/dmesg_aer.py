"""Parse PCIe AER reports from ``dmesg`` / ``journalctl -k`` text.

The kernel logs an AER event in a few lines (drivers/pci/pcie/aer.c, ``aer_print_error``,
``aer_print_port_info``)::

    pcieport 0000:00:01.1: AER: Corrected error received: 0000:01:00.0
    nvidia 0000:01:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)
    nvidia 0000:01:00.0:   device [10de:2684] error status/mask=00000001/0000a000
    nvidia 0000:01:00.0:    [ 0] RxErr                  (First)

``severity=`` is ``Corrected``, ``Uncorrected (Non-Fatal)`` or ``Uncorrected (Fatal)``; the
bracketed lines name the error bits.  A timestamp (``[  123.456789]``, ``[Mon Aug 17 04:12:33
2026]``) or a journal prefix (``Aug 17 04:12:33 host kernel:``) may lead each line.  An event
is counted once per ``PCIe Bus Error`` line (the device that reported it); the port's ``error
received`` line (``Corrected error received: <src>``, since Linux 6.x ``Correctable error message
received from <src>``) counts for its source only when no ``PCIe Bus Error`` line follows it: the
kernel prints one detail line per function whose status it found set (``aer_print_error``),
so with details the header adds nothing, and its source may be the requester ID 0000:00:00.0.

A mail client wraps long lines at a space (RFC 5322 2.1.1 asks for 78 characters): a line that
is only what follows such a break in an AER line (:data:`WRAPPED`: the source after
``received:``, ``severity=…``, ``type=…``, ``status/mask=…``, ``(Receiver ID)``) is joined to
the line before it.
"""

from __future__ import annotations

import re

import msgspec

from topoagent.core.bdf import PRINTED_BDF, printed_bdf
from topoagent.core.errors import InputError
from topoagent.core.parse.paste import Line, Skipped, clean_paste, merge_skipped

__all__ = ["AER_LINE", "WRAPPED", "AerEvent", "AerParseError", "read_dmesg_aer"]

_PREFIX = re.compile(
    r"^\s*(?:\[\s*\d+\.\d+\]\s*|\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d [\d:]{8} \d{4}\]\s*|"
    r"[A-Z][a-z]{2} [ \d]\d [\d:]{8} \S+ kernel:\s*(?:\[\s*\d+\.\d+\]\s*)?)?"
)
_DEVICE = re.compile(r"^(?P<driver>[\w-]{1,32})\s+(?P<bdf>" + PRINTED_BDF + r"):\s*(?P<rest>.*)$")
_BUS_ERROR = re.compile(r"PCIe Bus Error:\s*severity=(?P<sev>[^,]+),\s*type=(?P<type>[^,]+)")
_RECEIVED = re.compile(
    r"AER:\s*(?:Multiple\s+)?(?P<sev>Correct(?:ed|able)|Uncorrect(?:ed|able) \((?:Non-Fatal|Fatal)\)) error "
    r"(?:message\s+)?received(?::|\s+from)\s*(?:id=)?(?P<src>" + PRINTED_BDF + r"|[0-9a-fA-F]{4})"
)
_IDS = re.compile(r"device\s*\[(?P<ven>[0-9a-fA-F]{4}):(?P<dev>[0-9a-fA-F]{4})\]")
_BIT = re.compile(r"^\[\s*\d{1,2}\]\s+(?P<name>\S+)")
#: What a mail client leaves on a line of its own when it wraps an AER line (see the module).
WRAPPED = re.compile(
    r"^\s*(?:(?:id=)?" + PRINTED_BDF + r"\s*$|severity=|type=|(?:error\s+)?status/mask=|"
    r"\((?:Receiver|Transmitter|Requester|Completer) ID\)\s*$)"
)
#: A line that can only be the kernel's AER report (the segmenter finds them by it).
AER_LINE = re.compile(r"(?:AER:|PCIe Bus Error:|error status/mask=|^\s*\[\s*\d{1,2}\]\s+\w+\s*(?:\(First\))?$)")


class AerParseError(InputError):
    """Text that holds no AER report."""


class AerEvent(msgspec.Struct, frozen=True):
    """One logged AER event of a function: its severity (``correctable``, ``nonfatal``,
    ``fatal``), type (``Physical Layer``, ``Data Link Layer``, ``Transaction Layer``), the
    error bits named, and the line (number and text) that reported it."""

    bdf: str
    severity: str
    type: str | None = None
    errors: tuple[str, ...] = ()
    driver: str | None = None
    vendor_id: int | None = None
    device_id: int | None = None
    line: int = 0
    text: str = ""


def _severity(text: str) -> str:
    text = text.lower()
    if "fatal" in text and "non" not in text:
        return "fatal"
    return "nonfatal" if "uncorrect" in text else "correctable"


def _unwrapped(lines: tuple[Line, ...]) -> list[Line]:
    """``lines`` with each :data:`WRAPPED` line joined to the line before it (its number kept)."""
    out: list[Line] = []
    for ln in lines:
        if out and WRAPPED.match(ln.text):
            out[-1] = Line(out[-1].number, f"{out[-1].text.rstrip()} {ln.text.strip()}")
        else:
            out.append(ln)
    return out


def read_dmesg_aer(text: str) -> tuple[tuple[AerEvent, ...], tuple[Skipped, ...]]:
    """The AER events of a pasted kernel log, and its lines that are no AER report (other
    kernel messages are skipped and listed).  Raises :class:`AerParseError` when none is."""
    cleaned = clean_paste(text)
    events: list[dict[str, object]] = []
    pending: list[dict[str, object]] = []  # a port's "error received", until a detail line follows
    skipped: list[Skipped] = list(cleaned.skipped)
    for ln in _unwrapped(cleaned.lines):
        line = _PREFIX.sub("", ln.text, count=1).rstrip()
        m = _DEVICE.match(line)
        if m is None:
            skipped.append(Skipped(ln.number, ln.number, f"no AER report: {line.strip()[:60]!r}"))
            continue
        bdf, rest = printed_bdf(m.group("bdf")), m.group("rest").strip()
        if r := _RECEIVED.search(rest):
            src = r.group("src")
            header: dict[str, object] = {
                "bdf": printed_bdf(src) if ":" in src else bdf,
                "severity": _severity(r.group("sev")),
                "line": ln.number,
                "text": ln.text.strip(),
            }
            pending = [header]
            events.append(header)
            continue
        if b := _BUS_ERROR.search(rest):
            event = {
                "bdf": bdf,
                "severity": _severity(b.group("sev")),
                "type": b.group("type").strip(),
                "driver": m.group("driver"),
                "errors": (),
                "line": ln.number,
                "text": ln.text.strip(),
            }
            for header in pending:
                events.remove(header)  # the port's header and its details are one report
            pending = []
            events.append(event)
            continue
        last = events[-1] if events and events[-1]["bdf"] == bdf else None
        if last is not None and (ids := _IDS.search(rest)):
            last["vendor_id"], last["device_id"] = int(ids.group("ven"), 16), int(ids.group("dev"), 16)
        elif last is not None and (bit := _BIT.match(re.sub(r"^AER:\s*", "", rest))):  # Linux 5.8+ "AER: [ 0] RxErr"
            last["errors"] = (*last.get("errors", ()), bit.group("name"))  # type: ignore[misc]
        elif not AER_LINE.search(rest):
            skipped.append(Skipped(ln.number, ln.number, f"no AER report: {line.strip()[:60]!r}"))
    if not events:
        raise AerParseError("no PCIe AER report ('AER: … error received', 'PCIe Bus Error: severity=…') found")
    return tuple(AerEvent(**e) for e in events), tuple(merge_skipped(skipped))  # type: ignore[arg-type]
