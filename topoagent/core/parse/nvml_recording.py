"""Read an NVML recording (``scripts/record_nvml.py``, kept in a capture as
``tools/nvml.json``) into the records a live NVML probe would give, so that a capture replays
its NVLinks and P2P status through ``--root`` as the live host showed them.

Pure: JSON text in, :class:`~topoagent.core.snapshot.NvmlGpu` records out.  The format
(``topoagent-nvml-recording/1``) records each call's value, ``null`` for Not Supported and
``{"error": NAME}`` for a failed call; a failed or unsupported value reads as unknown here,
exactly as the live probe treats it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import msgspec

from topoagent.core.bdf import normalize_bus_id
from topoagent.core.cpuset import CpuSet, CpuSetError
from topoagent.core.errors import InputError
from topoagent.core.snapshot import FABRIC_STATES, FabricInfo, NvLink, NvmlGpu

__all__ = ["FORMAT", "MAX_GPUS", "NvmlRecordingError", "parse_nvml_recording"]

FORMAT = "topoagent-nvml-recording/1"
#: A recording's size bound: a 72-GPU NVL72 tray set records in well under a megabyte.
MAX_RECORDING_BYTES = 8 * 1024 * 1024
#: The most GPUs a recording may list: each GPU's P2P row is read against every other GPU, so
#: the count bounds the work (quadratic); one host has at most a few dozen.
MAX_GPUS = 1024


class NvmlRecordingError(InputError):
    """Text that is not an NVML recording this version reads."""


class Recording(msgspec.Struct, frozen=True):
    """The top of a recording.  Each GPU's values stay loose (``Any``): a value NVML failed to
    give (``{"error": NAME}``) or did not support (``null``) reads as unknown, as live."""

    format: str | None = None
    init_error: Any = None
    gpus: Any = None
    driver_version: Any = None
    p2p_read_default: Any = "OK"


_RECORDING = msgspec.json.Decoder(Recording)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _peers(g: dict[str, Any]) -> tuple[NvLink, ...]:
    """A GPU's active NVLinks by peer (one item per link index, as recorded)."""
    links = g.get("nvlinks")
    peers: Counter[str] = Counter()
    for link in links if isinstance(links, list) else ():
        peer = normalize_bus_id(link) if isinstance(link, str) else None
        if peer is not None:
            peers[peer] += 1
    return tuple(NvLink(peer, count) for peer, count in sorted(peers.items()))


def _p2p(g: dict[str, Any], index: int, bdfs: list[str | None], default_ok: bool) -> tuple[list[str], list[str]]:
    """The peers whose P2P read status is OK, and those it is not (a recorded status name)."""
    recorded = g.get("p2p_read")
    p2p: dict[str, Any] = recorded if isinstance(recorded, dict) else {}
    ok, not_ok = [], []
    for j, other in enumerate(bdfs):
        if j == index or other is None:
            continue
        status = p2p.get(str(j), "OK" if default_ok else None)
        if status == "OK":
            ok.append(other)
        elif isinstance(status, str):
            not_ok.append(other)  # a recorded NVML_P2P_STATUS_<name> other than OK
    return sorted(ok), sorted(not_ok)


def _fabric(value: Any) -> FabricInfo | None:
    """A recorded ``fabric`` object (``{"state": "COMPLETED", "status": "SUCCESS", "clique_id": 1,
    "cluster_uuid": "..."}``); None for null (Not Supported), an error or the state NOT_SUPPORTED."""
    if not isinstance(value, dict) or not isinstance(value.get("state"), str):
        return None
    state = value["state"].lower()
    if state not in FABRIC_STATES.values() or state == "not_supported":
        return None
    status = _text(value.get("status"))
    return FabricInfo(
        state=state,
        status=None if state != "completed" or status is None else "success" if status == "SUCCESS" else status,
        clique_id=_int(value.get("clique_id")) if state == "completed" else None,
        cluster_uuid=_text(value.get("cluster_uuid")),
        health_mask=_int(value.get("health_mask")),
    )


def _gpu(g: dict[str, Any], index: int, bdfs: list[str | None], default_ok: bool) -> NvmlGpu:
    """One recorded GPU as the live probe would give it."""
    ok, not_ok = _p2p(g, index, bdfs, default_ok)
    try:
        affinity = CpuSet.parse(g["cpu_affinity"]) if isinstance(g.get("cpu_affinity"), str) else None
    except CpuSetError:
        affinity = None
    bdf = bdfs[index]
    assert bdf is not None
    return NvmlGpu(
        index=index,
        bdf=bdf,
        name=_text(g.get("name")),
        uuid=_text(g.get("uuid")),
        minor=_int(g.get("minor")),
        numa_node=_int(g.get("numa_node")),
        cpu_affinity=affinity or None,
        nvlinks=_peers(g),
        p2p_ok=tuple(ok),
        p2p_not_ok=tuple(not_ok),
        fabric=_fabric(g.get("fabric")),
    )


def parse_nvml_recording(text: str) -> tuple[tuple[NvmlGpu, ...], str | None, str | None]:
    """(GPUs, driver version, why NVML was unavailable) of a recording.

    ``why`` is the recorded ``nvmlInit`` error when the recorded host had no working NVML
    (then there are no GPUs).  Raises :class:`NvmlRecordingError` for anything else.
    """
    if len(text) > MAX_RECORDING_BYTES:
        raise NvmlRecordingError("larger than 8 MiB: not an NVML recording")
    try:
        doc = _RECORDING.decode(text)
    except msgspec.ValidationError:  # JSON, but no recording: not an object, a wrong format type
        raise NvmlRecordingError(f"not an NVML recording (format {FORMAT!r} expected)") from None
    except (msgspec.DecodeError, RecursionError) as exc:
        raise NvmlRecordingError(f"not JSON ({exc})") from None
    if doc.format != FORMAT:
        raise NvmlRecordingError(f"not an NVML recording (format {FORMAT!r} expected)")
    if doc.init_error:
        return (), None, f"nvmlInit failed on the recorded host: {doc.init_error}"
    raw = doc.gpus
    if not isinstance(raw, list):
        raise NvmlRecordingError("no 'gpus' list")
    if len(raw) > MAX_GPUS:
        raise NvmlRecordingError(f"{len(raw)} GPUs: more than {MAX_GPUS}, not one host's recording")
    bdfs = [normalize_bus_id(g.get("bus_id")) if isinstance(g, dict) else None for g in raw]
    default_ok = doc.p2p_read_default == "OK"
    # a GPU without an address cannot be joined to anything, as live
    gpus = [_gpu(g, i, bdfs, default_ok) for i, g in enumerate(raw) if bdfs[i] is not None]
    return tuple(gpus), _text(doc.driver_version), None
