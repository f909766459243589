"""Parse the text of ``nvidia-smi -q`` (also ``-q -d PCI``, ``-a``): each GPU's PCI facts.

The query prints one block per GPU (``GPU 00000000:18:00.0``) of ``Key : value`` lines nested
by indentation (nvidia-smi's own layout, four spaces a level; pastes keep the nesting if not
the width).  What is read, per GPU, in the order nvidia-smi lists them (its index order, the
order of ``nvidia-smi topo -m``'s ``GPU0 …``):

* ``Product Name``, ``Minor Number``;
* ``PCI``: ``Bus Id`` (the BDF, eight-digit domain), ``Device Id`` (``0x233010DE``: device id
  above, vendor id below), ``Sub System Id`` (the same for the subsystem);
* ``GPU Link Info``: ``PCIe Generation`` ``Max`` / ``Current`` (and, from driver 550 on,
  ``Device Max`` / ``Host Max`` / ``Device Current``) and ``Link Width`` ``Max`` / ``Current``
  (``16x``).  nvidia-smi's ``Max`` is the lower of the GPU's and the slot's maximum
  (``nvidia-smi --help-query-gpu``, ``pcie.link.gen.max``);
* ``Performance State`` (``P0`` … ``P12``) and ``Utilization`` ``Gpu`` (``0 %``): whether the
  GPU was busy when the link was read (``pcie.link.gen.current``: "may be reduced when the GPU
  is not in use").

``N/A``, ``[N/A]``, ``Unknown Error`` and ``Not Supported`` values are unknown (None).

People paste parts of it: the ``PCI`` section (or its ``GPU Link Info``) without the ``GPU
00000000:…`` line above it, or the output of ``nvidia-smi -q -i 2``, one GPU of a host's
several (its header still says ``Attached GPUs : 4``).  A section pasted alone is a GPU of its
own, at the ``Bus Id`` it prints (:data:`FRAGMENT` finds it); the index of a block is its place
in the paste, which is nvidia-smi's index only where the paste holds every attached GPU
(:attr:`QueryReport.whole`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import msgspec

from topoagent.core.bdf import PRINTED_BDF, printed_bdf
from topoagent.core.digits import is_decimal
from topoagent.core.errors import InputError
from topoagent.core.parse.paste import Skipped, clean_paste, merge_skipped

__all__ = [
    "FRAGMENT",
    "GPU_HEADER",
    "fragment_starts",
    "GpuQuery",
    "QueryParseError",
    "QueryReport",
    "read_nvsmi_query",
]

#: PCIe generation -> GT/s per lane (PCIe Base Specification; REFERENCE §3).
GEN_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}

#: The line that opens one GPU's block (``GPU 00000000:18:00.0``); the segmenter finds ``-q`` output by it.
GPU_HEADER = re.compile(r"^\s*GPU\s+(" + PRINTED_BDF + r")\s*$")
#: The first line of a section pasted without its GPU line (``    PCI``, ``        GPU Link
#: Info``), when the line after it is one of the section's (the segmenter's start of a fragment).
FRAGMENT = re.compile(r"^\s*(PCI|GPU Link Info)\s*$")
_FRAGMENT_NEXT = re.compile(r"^\s*(?:Bus|Bus Id|Domain|Device|Device Id|PCIe Generation|Link Width)\s*:?")
_KEY_VALUE = re.compile(r"^(\s*)(\S[^:]*?)\s*:\s*(.*?)\s*$")
_LOG_TOP = re.compile(r"^\s*=+\s*NVSMI LOG\s*=+\s*$")
_TOP = frozenset({"Timestamp", "Driver Version", "CUDA Version", "Attached GPUs", "Attached Units"})
_SECTION = re.compile(r"^(\s*)([A-Za-z][\w /()+.-]*?)\s*$")
_UNKNOWN = frozenset({"", "N/A", "[N/A]", "Unknown Error", "Not Supported", "[Not Supported]", "Unknown"})
_NUMBER = re.compile(r"^(\d{1,3})\s*(?:x|%)?$")
_HEX32 = re.compile(r"^0x([0-9A-Fa-f]{1,8})$")


class QueryParseError(InputError):
    """Text that holds no ``nvidia-smi -q`` GPU block."""


class GpuQuery(msgspec.Struct, frozen=True):
    """One GPU as ``nvidia-smi -q`` describes it; None where the output did not say."""

    #: Its place in the paste (0 for the first block): nvidia-smi's index where the paste
    #: holds every attached GPU (:attr:`QueryReport.whole`).
    index: int
    #: ``dddd:bb:dd.f``, lower case (nvidia-smi prints an eight-digit domain); None for a
    #: section pasted without its GPU line or ``Bus Id``.
    bdf: str | None
    name: str | None = None
    minor: int | None = None
    vendor_id: int | None = None
    device_id: int | None = None
    subsystem_vendor_id: int | None = None
    subsystem_device_id: int | None = None
    gen_current: int | None = None
    gen_max: int | None = None
    gen_device_max: int | None = None
    gen_host_max: int | None = None
    width_current: int | None = None
    width_max: int | None = None
    #: ``P0`` (full performance) … ``P8`` (idle) … ``P12``.
    performance_state: str | None = None
    #: ``Utilization`` ``Gpu``, percent.
    utilization: int | None = None
    #: ``Clocks Event Reasons`` (``Clocks Throttle Reasons`` before driver 530) ``Idle``:
    #: ``Active`` is NVML's ``nvmlClocksEventReasonGpuIdle``, "nothing is running on the GPU".
    idle: bool | None = None
    #: ``GPU Virtualization Mode`` ``Virtualization Mode``: ``None`` (bare metal), ``Pass-Through``
    #: (a guest's whole GPU), ``VGPU`` (a guest's vGPU), ``Host VGPU`` (the hypervisor's).
    virtualization: str | None = None
    #: The line each fact was read on (key path -> line number): evidence names it.
    lines: dict[str, int] = msgspec.field(default_factory=dict)


class QueryReport(msgspec.Struct, frozen=True):
    """What :func:`read_nvsmi_query` read: the GPUs in output order, the driver version, and the
    lines it skipped."""

    gpus: tuple[GpuQuery, ...]
    driver_version: str | None = None
    skipped: tuple[Skipped, ...] = ()
    #: Every ``Attached GPUs`` and ``Driver Version`` of the log headers the paste holds.
    attached: tuple[int, ...] = ()
    drivers: tuple[str, ...] = ()

    @property
    def whole(self) -> bool:
        """Whether the paste holds a block for every attached GPU (so a block's place is
        nvidia-smi's index): every header's ``Attached GPUs`` is the number of blocks."""
        return all(n == len(self.gpus) for n in self.attached)


def _number(value: str) -> int | None:
    m = _NUMBER.match(value.strip())
    return int(m.group(1)) if m else None


def _split_id(value: str) -> tuple[int | None, int | None]:
    """``0x233010DE`` -> (device 0x2330, vendor 0x10de): NVML's PCI id packs the device id
    above the vendor id (``nvmlPciInfo_t.pciDeviceId``)."""
    m = _HEX32.match(value.strip())
    if not m:
        return None, None
    v = int(m.group(1), 16)
    return v >> 16, v & 0xFFFF


_FIELDS = {
    "Product Name": "name",
    "Minor Number": "minor",
    "PCI/Device Id": "device",
    "PCI/Bus Id": "bus_id",
    "PCI/Sub System Id": "subsystem",
    "PCI/GPU Link Info/PCIe Generation/Max": "gen_max",
    "PCI/GPU Link Info/PCIe Generation/Current": "gen_current",
    "PCI/GPU Link Info/PCIe Generation/Device Max": "gen_device_max",
    "PCI/GPU Link Info/PCIe Generation/Host Max": "gen_host_max",
    "PCI/GPU Link Info/Link Width/Max": "width_max",
    "PCI/GPU Link Info/Link Width/Current": "width_current",
    "Performance State": "performance_state",
    "Utilization/Gpu": "utilization",
    "Clocks Event Reasons/Idle": "idle",
    "GPU Virtualization Mode/Virtualization Mode": "virtualization",
    "GPU Virtualization Mode/Virtualization mode": "virtualization",
    "Clocks Throttle Reasons/Idle": "idle",
}


class _Block:
    """One GPU's block as it is read: the open sections by indent, and the values found.  A
    headless block (a section pasted without its GPU line) reads its keys as the ``PCI``
    section's where they are not known from the top (``GPU Link Info/Link Width/Max``)."""

    def __init__(self, index: int, bdf: str | None, indent: int, first: str | None = None) -> None:
        self.index = index
        self.bdf = bdf
        self.indent = indent
        self.first = first  # a headless block's first line: the same line again starts another
        self.stack: list[tuple[int, str]] = [(indent, "")]
        self.values: dict[str, str] = {}
        self.lines: dict[str, int] = {}
        self.opened: set[str] = set()  # the section paths opened: a block prints each once

    def path(self, indent: int, key: str) -> str:
        while len(self.stack) > 1 and self.stack[-1][0] >= indent:
            self.stack.pop()
        parents = [name for _, name in self.stack[1:]]
        return "/".join([*parents, key])

    def open(self, indent: int, name: str) -> None:
        self.path(indent, name)  # close the sections at or below this indent
        self.stack.append((indent, name))
        self.opened.add("/".join(n for _, n in self.stack[1:]))

    def read(self, indent: int, key: str, value: str, number: int) -> None:
        path = self.path(indent, key)
        field = _FIELDS.get(path) or (_FIELDS.get(f"PCI/{path}") if self.first is not None else None)
        if field is not None:
            self.values[field] = value
            self.lines[field] = number

    def finish(self) -> GpuQuery:
        v = self.values
        device, vendor = _split_id(v.get("device", ""))
        sub_device, sub_vendor = _split_id(v.get("subsystem", ""))
        name = v.get("name")
        bus = v.get("bus_id", "")
        return GpuQuery(
            index=self.index,
            bdf=self.bdf or (printed_bdf(bus) if re.fullmatch(PRINTED_BDF, bus) else None),
            name=name if name not in _UNKNOWN else None,
            minor=_number(v.get("minor", "")),
            vendor_id=vendor,
            device_id=device,
            subsystem_vendor_id=sub_vendor,
            subsystem_device_id=sub_device,
            gen_current=_gen(v.get("gen_current")),
            gen_max=_gen(v.get("gen_max")),
            gen_device_max=_gen(v.get("gen_device_max")),
            gen_host_max=_gen(v.get("gen_host_max")),
            width_current=_width(v.get("width_current")),
            width_max=_width(v.get("width_max")),
            performance_state=_pstate(v.get("performance_state")),
            utilization=_number(v.get("utilization", "")),
            idle={"Active": True, "Not Active": False}.get(v.get("idle", "")),
            virtualization=v.get("virtualization") if v.get("virtualization") not in _UNKNOWN else None,
            lines=self.lines,
        )


def _gen(value: str | None) -> int | None:
    n = _number(value or "")
    return n if n in GEN_GTS else None


def _width(value: str | None) -> int | None:
    n = _number(value or "")
    return n if n in (1, 2, 4, 8, 12, 16, 32) else None


def _pstate(value: str | None) -> str | None:
    return value if value is not None and re.fullmatch(r"P\d{1,2}", value) else None


def fragment_starts(line: str, after: Sequence[str]) -> bool:
    """Whether a section pasted without its GPU line starts at ``line`` (``after``: the next
    non-blank lines)."""
    return bool(FRAGMENT.match(line) and after and _FRAGMENT_NEXT.match(after[0]))


def read_nvsmi_query(text: str) -> QueryReport:
    """Read a pasted ``nvidia-smi -q`` leniently: every ``GPU dddddddd:bb:dd.f`` block it holds
    (and every section pasted without that line), its values by their key path, every log
    header's ``Driver Version`` and ``Attached GPUs``; lines inside a block that are no ``key :
    value`` or section line are skipped and listed.  Raises :class:`QueryParseError` when no GPU
    block is found."""
    cleaned = clean_paste(text)
    gpus: list[GpuQuery] = []
    block: _Block | None = None
    top: dict[str, list[str]] = {"Driver Version": [], "Attached GPUs": []}
    skipped: list[Skipped] = list(cleaned.skipped)
    for ln in cleaned.lines:
        line = ln.text.expandtabs(4)
        indent = len(line) - len(line.lstrip())
        header = GPU_HEADER.match(line)
        kv = _KEY_VALUE.match(line)
        fragment = FRAGMENT.match(line)
        # a section this block has already printed starts another GPU's (a second fragment)
        again = (
            block is not None
            and fragment is not None
            and (block.first == line or fragment.group(1) in block.opened or f"PCI/{fragment.group(1)}" in block.opened)
        )
        new = header is not None or again
        if new or _LOG_TOP.match(line) or (kv and kv.group(2) in _TOP and (block is None or indent <= block.indent)):
            if block is not None:
                gpus.append(block.finish())
                block = None
            if header is not None:
                block = _Block(len(gpus), printed_bdf(header.group(1)), indent)
                continue
            if not new:
                if kv and kv.group(2) in top and kv.group(3):
                    top[kv.group(2)].append(kv.group(3))
                continue  # the log's header (Timestamp, Driver Version, Attached GPUs)
        if block is None:
            if not (fragment or (kv and kv.group(2) == "Bus Id")):
                continue
            block = _Block(len(gpus), None, indent - 1, line)  # a section pasted without its GPU line
        if kv:
            block.read(indent, kv.group(2), kv.group(3), ln.number)
        elif _SECTION.match(line):
            block.open(indent, line.strip())
        else:
            skipped.append(Skipped(ln.number, ln.number, f"not nvidia-smi -q output: {line.strip()[:60]!r}"))
    if block is not None:
        gpus.append(block.finish())
    if not gpus:
        raise QueryParseError("no nvidia-smi -q GPU block (a line 'GPU 00000000:bb:dd.f') found")
    drivers = tuple(top["Driver Version"])
    attached = tuple(int(a) for a in top["Attached GPUs"] if is_decimal(a) and len(a) <= 4)
    return QueryReport(tuple(gpus), drivers[0] if drivers else None, tuple(merge_skipped(skipped)), attached, drivers)
