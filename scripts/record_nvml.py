#!/usr/bin/env python3
"""Record what NVML says about this host's GPUs, as a test fixture for topoagent.

Run on a host with the NVIDIA driver and nvidia-ml-py (``pip install nvidia-ml-py``)::

    python3 scripts/record_nvml.py "DGX H100, driver 550" > tests/fixtures/nvml/my_host.json

The output is the recording format that ``tests/fakenvml.py`` replays (see its docstring).
Only the calls topoagent makes are recorded; a failing call is recorded as its error.  UUIDs
identify boards: edit them before publishing a recording if that matters to you.
"""

from __future__ import annotations

import ctypes
import json
import sys
import uuid
from collections.abc import Callable
from typing import Any

import pynvml

FORMAT = "topoagent-nvml-recording/1"
ERRORS = {getattr(pynvml, n): n for n in sorted(dir(pynvml), reverse=True) if n.startswith("NVML_ERROR_")}
P2P = {  # status value -> name, skipping the misspelt alias CHIPSET_NOT_SUPPORED
    getattr(pynvml, n): n[len("NVML_P2P_STATUS_") :]
    for n in sorted(dir(pynvml), reverse=True)
    if n.startswith("NVML_P2P_STATUS_") and not n.endswith("SUPPORED")
}


def _str(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _call(fn: Callable[..., Any], *args: Any, convert: Callable[[Any], Any] = lambda v: v) -> Any:
    """The converted value, ``None`` for Not Supported, ``{"error": name}`` for other errors."""
    try:
        return convert(fn(*args))
    except pynvml.NVMLError_NotSupported:
        return None
    except pynvml.NVMLError as exc:
        return {"error": ERRORS.get(exc.value, f"NVML_ERROR_{exc.value}")}


def _cpus(words: Any) -> str:
    cpus = [i * 64 + b for i, w in enumerate(words) for b in range(64) if int(w) >> b & 1]
    out, start = [], None
    for k, cpu in enumerate(cpus):
        if start is None:
            start = cpu
        if k + 1 == len(cpus) or cpus[k + 1] != cpu + 1:
            out.append(str(start) if start == cpu else f"{start}-{cpu}")
            start = None
    return ",".join(out)


def _nvlinks(handle: Any) -> Any:
    links: list[Any] = []
    for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
        try:
            state = pynvml.nvmlDeviceGetNvLinkState(handle, link)
        except pynvml.NVMLError_InvalidArgument:
            break  # past this GPU's last link
        except pynvml.NVMLError as exc:
            links.append({"error": ERRORS.get(exc.value, f"NVML_ERROR_{exc.value}")})
            continue
        if state != pynvml.NVML_FEATURE_ENABLED:
            links.append(None)
            continue
        remote = _call(pynvml.nvmlDeviceGetNvLinkRemotePciInfo, handle, link)
        if remote is None:
            links.append({"remote_error": "NVML_ERROR_NOT_SUPPORTED"})
        elif isinstance(remote, dict):
            links.append({"remote_error": remote["error"]})
        else:
            links.append(_str(remote.busId))
    unsupported = {"error": "NVML_ERROR_NOT_SUPPORTED"}
    if links and all(item == unsupported for item in links):
        return unsupported  # no NVLink on this GPU
    while links and links[-1] in (None, unsupported):
        links.pop()  # trailing disabled/unsupported links replay as absent ones: both are silent
    return links


FABRIC_STATES = {
    getattr(pynvml, n): n[len("NVML_GPU_FABRIC_STATE_") :]
    for n in dir(pynvml)
    if n.startswith("NVML_GPU_FABRIC_STATE_")
}


def _fabric(handle: Any) -> Any:
    """The GPU's NVLink fabric registration (nvmlDeviceGetGpuFabricInfoV, else the older call),
    ``None`` for Not Supported, ``{"error": name}`` for another error."""
    for fn, struct in (
        ("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfoV_t"),
        ("nvmlDeviceGetGpuFabricInfo", "c_nvmlGpuFabricInfo_t"),
    ):
        if not hasattr(pynvml, fn) or not hasattr(pynvml, struct):
            continue
        info = getattr(pynvml, struct)()
        got = _call(getattr(pynvml, fn), handle, ctypes.byref(info))
        if got is None or isinstance(got, dict):
            return got
        raw = bytes(info.clusterUuid)
        return {
            "state": FABRIC_STATES.get(info.state, str(info.state)),
            "status": "SUCCESS" if info.status == pynvml.NVML_SUCCESS else ERRORS.get(info.status, str(info.status)),
            "clique_id": int(info.cliqueId),
            "cluster_uuid": str(uuid.UUID(bytes=raw)) if any(raw) else None,
            "health_mask": int(getattr(info, "healthMask", 0)),
        }
    return None


def record(description: str) -> dict[str, Any]:
    rec: dict[str, Any] = {"format": FORMAT, "description": description, "init_error": None}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        rec.update(init_error=ERRORS.get(exc.value), driver_version=None, gpus=[])
        return rec
    try:
        rec["driver_version"] = _call(pynvml.nvmlSystemGetDriverVersion, convert=_str)
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        read = pynvml.NVML_P2P_CAPS_INDEX_READ
        read = read[0] if isinstance(read, tuple) else read  # spelt "= 0," in nvidia-ml-py
        gpus = []
        for i, h in enumerate(handles):
            pci = pynvml.nvmlDeviceGetPciInfo(h)
            p2p = {}
            for j, other in enumerate(handles):
                if j != i:
                    status = _call(
                        pynvml.nvmlDeviceGetP2PStatus,
                        h,
                        other,
                        read,
                        convert=lambda s: P2P.get(s, "UNKNOWN"),
                    )
                    if status != "OK":  # None (Not Supported) is kept: it replays as such
                        p2p[str(j)] = status
            gpus.append(
                {
                    "name": _call(pynvml.nvmlDeviceGetName, h, convert=_str),
                    "uuid": _call(pynvml.nvmlDeviceGetUUID, h, convert=_str),
                    "minor": _call(pynvml.nvmlDeviceGetMinorNumber, h),
                    "bus_id": _str(pci.busId),
                    "pci_device_id": f"0x{pci.pciDeviceId:08X}",
                    "numa_node": _call(pynvml.nvmlDeviceGetNumaNodeId, h),
                    "cpu_affinity": _call(pynvml.nvmlDeviceGetCpuAffinity, h, 64, convert=_cpus),
                    "nvlinks": _nvlinks(h),
                    "p2p_read": p2p,
                    "fabric": _fabric(h),
                }
            )
        rec["p2p_read_default"] = "OK"
        rec["gpus"] = gpus
    finally:
        pynvml.nvmlShutdown()
    return rec


def main(argv: list[str]) -> int:
    description = argv[1] if len(argv) > 1 else "recorded by scripts/record_nvml.py"
    json.dump(record(description), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
