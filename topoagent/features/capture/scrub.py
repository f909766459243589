"""Scrub identifying values out of a capture (pure: bytes and text in, bytes and text out).

The host name becomes ``captured-host``; each MAC address becomes ``00:00:00:00:00:NN`` (NN
numbered per address, the same in every file); InfiniBand GUIDs become zeros; the PCIe Device
Serial Number capability in ``config`` and lspci's ``Device Serial Number`` and VPD ``[SN]``
lines are zeroed; in a NIC's VPD the ``V3`` keyword (the board's UUID, which pairs a
ConnectX-8 with its Data Direct DMA function) becomes a stand-in numbered per value, ``PN`` and
``EC`` are kept and every other keyword's value (``SN``, vendor keywords) is zeroed; NVML UUIDs
become ``GPU-00000000-…-0000000000NN``; ``UUID=`` values on the kernel command line become
zeros and init's arguments after ``--`` are dropped.  DMI serial numbers are not read at all
(see ``docs/capture.md``).
"""

from __future__ import annotations

import re

from topoagent.core.parse.vpd import vpd_keyword_spans

__all__ = ["Scrubber", "scrub_config"]

# A link-layer address: colon-separated hex pairs (6 for Ethernet, 20 for IPoIB).
_HW_ADDRESS = re.compile(r"\b[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2})+\b")
# Six hex pairs, and not part of a longer run (an 8-byte serial number or an EUI-64).
_MAC = re.compile(r"(?<![0-9a-fA-F][:-])\b(?:[0-9a-fA-F]{2}[:-]){5}[0-9a-fA-F]{2}\b(?![:-][0-9a-fA-F])")
_GUID = re.compile(r"\b[0-9a-fA-F]{4}(?::[0-9a-fA-F]{4}){3}\b")


class Scrubber:
    """Replaces identifying values consistently: one MAC maps to the same stand-in everywhere."""

    def __init__(self) -> None:
        self.macs: dict[str, str] = {}
        self.uuids: dict[str, str] = {}
        self.v3s: dict[bytes, bytes] = {}
        self.counts: dict[str, int] = {}

    def _count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def mac(self, value: str) -> str:
        """A stand-in for a MAC address, the same for the same address (all-zero and broadcast kept)."""
        key = value.lower().replace("-", ":")
        if key in ("00:00:00:00:00:00", "ff:ff:ff:ff:ff:ff"):
            return value
        if key not in self.macs:
            n = len(self.macs) + 1
            self.macs[key] = f"00:00:00:00:{n >> 8 & 0xFF:02x}:{n & 0xFF:02x}"
        self._count("MAC address")
        return self.macs[key] if ":" in value else self.macs[key].replace(":", "-")

    def text(self, text: str) -> str:
        """MAC addresses, GUIDs, serial numbers and UUIDs in free text (tool output)."""
        text = re.sub(
            r"(Device Serial Number )\S+",
            lambda m: self._zero(m.group(1) + "00-00-00-00-00-00-00-00", "serial number"),
            text,
        )
        text = re.sub(r"(\[SN\] Serial number: ).*", lambda m: self._zero(m.group(1) + "0", "serial number"), text)
        text = _MAC.sub(lambda m: self.mac(m.group()), text)
        return re.sub(r"(GPU-)[0-9a-fA-F-]{36}", lambda m: self.uuid(m.group()), text)

    def _zero(self, replacement: str, what: str) -> str:
        self._count(what)
        return replacement

    def hw_address(self, text: str) -> str:
        """A link-layer address (``sys/class/net/*/address``): a 6-byte MAC becomes its stand-in;
        a 20-byte IPoIB address keeps its flags, QPN and subnet prefix and has its last 8 bytes
        -- the port GUID (RFC 4391, section 9.1.1) -- zeroed; any other length is zeroed whole."""

        def one(m: re.Match[str]) -> str:
            pairs = m.group().split(":")
            if len(pairs) == 6:
                return self.mac(m.group())
            self._count("GUID")
            keep = 12 if len(pairs) == 20 else 0
            return ":".join(pairs[:keep] + ["00"] * (len(pairs) - keep))

        return _HW_ADDRESS.sub(one, text)

    def guid(self, text: str) -> str:
        """``text`` with every GUID zeroed."""
        self._count("GUID")
        return _GUID.sub("0000:0000:0000:0000", text)

    def uuid(self, value: str) -> str:
        """A stand-in for a GPU UUID, the same for the same UUID."""
        if value not in self.uuids:
            self.uuids[value] = f"GPU-00000000-0000-0000-0000-{len(self.uuids):012x}"
        self._count("GPU UUID")
        return self.uuids[value]

    def vpd(self, data: bytes) -> bytes:
        """VPD bytes with every VPD-R value but the part number (``PN``), engineering change
        (``EC``) and checksum (``RV``) replaced, in place: ``V3`` by a stand-in of its length, the
        same for the same value (so a NIC and its DMA function still pair), the others by zeros."""
        out = bytearray(data)
        for key, start, end in vpd_keyword_spans(data):
            if key in ("PN", "EC", "RV"):
                continue
            if key == "V3":
                value = bytes(out[start:end])
                if value not in self.v3s:
                    self.v3s[value] = f"{len(self.v3s) + 1:0{end - start}x}"[-(end - start) :].encode("ascii")
                out[start:end] = self.v3s[value]
                self._count("VPD V3")
            else:
                out[start:end] = b"0" * (end - start)
                self._count("VPD keyword")
        return bytes(out)

    def cmdline(self, text: str) -> str:
        """The kernel's parameters with ``UUID=`` values zeroed; the arguments after a lone
        ``--`` are init's, not the kernel's (Documentation/admin-guide/kernel-parameters.rst),
        may hold anything, and are dropped."""
        words = text.split()
        if "--" in words:
            words = words[: words.index("--")]
            self._count("init arguments")
        out = " ".join(words)
        out = re.sub(
            r"(UUID=)[0-9a-fA-F-]+",
            lambda m: self._zero(m.group(1) + "00000000-0000-0000-0000-000000000000", "UUID"),
            out,
        )
        return out + "\n"


def scrub_config(data: bytes) -> bytes:
    """Config space with the PCIe Device Serial Number capability's serial zeroed.

    Extended capabilities start at 0x100, each with a header ``ID (16 bits) | version (4) |
    next (12)``; the DSN capability (ID 0x0003, PCIe Base Spec 7.9.3) holds the serial in the
    8 bytes after its header.  The walk is bounded (one visit per offset).
    """
    if len(data) <= 0x100:
        return data
    out = bytearray(data)
    offset, seen = 0x100, set()
    while 0x100 <= offset <= len(out) - 12 and offset not in seen:
        seen.add(offset)
        header = int.from_bytes(out[offset : offset + 4], "little")
        if header in (0, 0xFFFFFFFF):
            break
        if header & 0xFFFF == 0x0003:
            out[offset + 4 : offset + 12] = bytes(8)
        offset = (header >> 20) & 0xFFC
    return bytes(out)
