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
"""

from __future__ import annotations

import re

import msgspec

from topoagent.core.bdf import PRINTED_BDF, printed_bdf
from topoagent.core.errors import InputError
from topoagent.core.parse.paste import Skipped, clean_paste, merge_skipped

__all__ = ["GPU_HEADER", "GpuQuery", "QueryParseError", "QueryReport", "read_nvsmi_query"]

#: PCIe generation -> GT/s per lane (PCIe Base Specification; REFERENCE §3).
GEN_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}

#: The line that opens one GPU's block (``GPU 00000000:18:00.0``); the segmenter finds ``-q`` output by it.
GPU_HEADER = re.compile(r"^\s*GPU\s+(" + PRINTED_BDF + r")\s*$")
_KEY_VALUE = re.compile(r"^(\s*)(\S[^:]*?)\s*:\s*(.*?)\s*$")
_SECTION = re.compile(r"^(\s*)([A-Za-z][\w /()+.-]*?)\s*$")
_UNKNOWN = frozenset({"", "N/A", "[N/A]", "Unknown Error", "Not Supported", "[Not Supported]", "Unknown"})
_NUMBER = re.compile(r"^(\d{1,3})\s*(?:x|%)?$")
_HEX32 = re.compile(r"^0x([0-9A-Fa-f]{1,8})$")


class QueryParseError(InputError):
    """Text that holds no ``nvidia-smi -q`` GPU block."""


class GpuQuery(msgspec.Struct, frozen=True):
    """One GPU as ``nvidia-smi -q`` describes it; None where the output did not say."""

    #: Its place in the output: nvidia-smi's index (0 for the first block).
    index: int
    #: ``dddd:bb:dd.f``, lower case (nvidia-smi prints an eight-digit domain).
    bdf: str
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
    """One GPU's block as it is read: the open sections by indent, and the values found."""

    def __init__(self, index: int, bdf: str, indent: int) -> None:
        self.index = index
        self.bdf = bdf
        self.stack: list[tuple[int, str]] = [(indent, "")]
        self.values: dict[str, str] = {}
        self.lines: dict[str, int] = {}

    def path(self, indent: int, key: str) -> str:
        while len(self.stack) > 1 and self.stack[-1][0] >= indent:
            self.stack.pop()
        parents = [name for _, name in self.stack[1:]]
        return "/".join([*parents, key])

    def open(self, indent: int, name: str) -> None:
        self.path(indent, name)  # close the sections at or below this indent
        self.stack.append((indent, name))

    def finish(self) -> GpuQuery:
        v = self.values
        device, vendor = _split_id(v.get("device", ""))
        sub_device, sub_vendor = _split_id(v.get("subsystem", ""))
        name = v.get("name")
        return GpuQuery(
            index=self.index,
            bdf=self.bdf,
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


def read_nvsmi_query(text: str) -> QueryReport:
    """Read a pasted ``nvidia-smi -q`` leniently: every ``GPU dddddddd:bb:dd.f`` block it holds,
    its values by their key path; lines inside a block that are no ``key : value`` or section
    line are skipped and listed.  Raises :class:`QueryParseError` when no GPU block is found."""
    cleaned = clean_paste(text)
    gpus: list[GpuQuery] = []
    block: _Block | None = None
    driver = None
    skipped: list[Skipped] = list(cleaned.skipped)
    for ln in cleaned.lines:
        line = ln.text.expandtabs(4)
        header = GPU_HEADER.match(line)
        if header:
            if block is not None:
                gpus.append(block.finish())
            block = _Block(len(gpus), printed_bdf(header.group(1)), len(line) - len(line.lstrip()))
            continue
        kv = _KEY_VALUE.match(line)
        if block is None:
            if kv and kv.group(2) == "Driver Version":
                driver = kv.group(3) or None
            continue  # the log's header (Timestamp, Driver Version, Attached GPUs)
        indent = len(line) - len(line.lstrip())
        if kv:
            key = block.path(indent, kv.group(2))
            field = _FIELDS.get(key)
            if field is not None:
                block.values[field] = kv.group(3)
                block.lines[field] = ln.number
        elif _SECTION.match(line):
            block.open(indent, line.strip())
        else:
            skipped.append(Skipped(ln.number, ln.number, f"not nvidia-smi -q output: {line.strip()[:60]!r}"))
    if block is not None:
        gpus.append(block.finish())
    if not gpus:
        raise QueryParseError("no nvidia-smi -q GPU block (a line 'GPU 00000000:bb:dd.f') found")
    return QueryReport(tuple(gpus), driver, tuple(merge_skipped(skipped)))
