"""Parse ``nvidia-smi nvlink -s`` (``--status``) and ``-R`` (``--remotelinkinfo``): each GPU's
NVLinks, active (with their speed, or the device and link they reach) or ``<inactive>``::

    GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-4c2d…)
         Link 0: 26.562 GB/s
         Link 1: <inactive>

    GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-257d…)
         Link 0: Remote Device 00000000:07:00.0: Link 46

``-s`` names no peer; ``-R`` names the PCI function at the other end (an NVSwitch or a GPU), which
nothing here uses to place a link between two devices yet: it proves the link active.
"""

from __future__ import annotations

import re

import msgspec

from topoagent.core.bdf import PRINTED_BDF, printed_bdf
from topoagent.core.errors import InputError
from topoagent.core.parse.paste import Skipped, clean_paste, merge_skipped

__all__ = ["GPU_LINE", "NvlinkGpu", "NvlinkParseError", "read_nvlink_status"]

GPU_LINE = re.compile(r"^\s*GPU\s+(\d{1,4}):\s*(.*?)\s*(?:\(UUID:\s*([^)]*)\))?\s*$")
_REMOTE = re.compile(r"^Remote Device\s+(" + PRINTED_BDF + r")\b")
LINK_LINE = re.compile(r"^\s*Link\s+(\d{1,3}):\s*(?:(\d+(?:\.\d+)?)\s*GB/s|<inactive>|(\S.*?))\s*$")


class NvlinkParseError(InputError):
    """Text that holds no ``nvidia-smi nvlink -s`` / ``-R`` output."""


class NvlinkGpu(msgspec.Struct, frozen=True):
    """One GPU's links: ``speeds`` by link number for active links (GB/s, ``-s``), ``remote``
    by link number for active links ``-R`` shows the far end of (its BDF), ``inactive`` the
    numbers of ``<inactive>`` links."""

    index: int
    name: str | None
    speeds: tuple[tuple[int, float], ...] = ()
    inactive: tuple[int, ...] = ()
    line: int = 0
    remote: tuple[tuple[int, str], ...] = ()


def read_nvlink_status(text: str) -> tuple[tuple[NvlinkGpu, ...], tuple[Skipped, ...]]:
    """The GPUs of a pasted ``nvidia-smi nvlink -s`` or ``-R`` that list links, and the lines skipped.
    Raises :class:`NvlinkParseError` when no GPU lists a link."""
    cleaned = clean_paste(text)
    gpus: list[NvlinkGpu] = []
    skipped: list[Skipped] = list(cleaned.skipped)
    current: dict[str, object] | None = None

    def close() -> None:
        if current is not None and (current["speeds"] or current["inactive"] or current["remote"]):
            gpus.append(NvlinkGpu(**current))  # type: ignore[arg-type]

    for ln in cleaned.lines:
        if m := GPU_LINE.match(ln.text):
            close()
            current = {
                "index": int(m.group(1)),
                "name": m.group(2) or None,
                "speeds": (),
                "inactive": (),
                "remote": (),
                "line": ln.number,
            }
            continue
        link = LINK_LINE.match(ln.text)
        if current is None or link is None:
            skipped.append(Skipped(ln.number, ln.number, f"not nvidia-smi nvlink -s output: {ln.text.strip()[:60]!r}"))
            continue
        number = int(link.group(1))
        if link.group(2) is not None:
            current["speeds"] = (*current["speeds"], (number, float(link.group(2))))  # type: ignore[misc]
        elif r := _REMOTE.match(link.group(3) or ""):
            current["remote"] = (*current["remote"], (number, printed_bdf(r.group(1))))  # type: ignore[misc]
        else:
            current["inactive"] = (*current["inactive"], number)  # type: ignore[misc]
    close()
    if not gpus:
        raise NvlinkParseError("no nvidia-smi nvlink -s GPU with links ('GPU 0: …' then 'Link 0: …') found")
    return tuple(gpus), tuple(merge_skipped(skipped))
