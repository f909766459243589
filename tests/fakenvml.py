"""A stand-in for the ``pynvml`` module, driven by a JSON recording.

:func:`make_fake` returns a real module object carrying the subset of the nvidia-ml-py API
that :mod:`topoagent.core.read.nvml` uses.  Constants and exception classes are the installed
``pynvml``'s own (so ``NVML_P2P_CAPS_INDEX_READ`` keeps its real ``(0,)`` spelling and the
adapter's ``except`` clauses meet real ``NVMLError_*`` classes); return values are the real
ctypes types (``nvmlPciInfo_t``, arrays of ``c_ulonglong``).

Recording format (``tests/fixtures/nvml/*.json``, also written by ``scripts/record_nvml.py``)::

    {
      "format": "topoagent-nvml-recording/1",
      "description": "...",                     free text
      "init_error": null | "NVML_ERROR_...",     nvmlInit raises this
      "driver_version": "550.90.07",
      "p2p_read_default": "OK",                  P2P status for pairs missing from p2p_read
      "gpus": [                                  in NVML index order
        {
          "name": "...", "uuid": "GPU-...", "minor": 0,
          "bus_id": "00000000:1B:00.0",           as nvmlDeviceGetPciInfo().busId spells it
          "pci_device_id": "0x233010DE",         optional
          "numa_node": null,                     null/absent: Not Supported (x86 hosts)
          "cpu_affinity": "0-55,112-167",        CPU list; served as 64-bit words
          "nvlinks": [ ... ] | {"error": E},     one item per link index:
                                                   "00000000:05:00.0"  active, remote bus id
                                                   null                 link disabled
                                                   {"error": E}         state call raises E
                                                   {"remote_error": E}  active; remote call raises E
                                                 indexes past the list: Invalid Argument;
                                                 absent: every link is Not Supported
          "p2p_read": {"3": "CHIPSET_NOT_SUPPORTED", "4": {"error": E}},  by peer index;
                                                 statuses are NVML_P2P_STATUS_<name>;
                                                 null: Not Supported; absent: the default
          "fabric": {"state": "COMPLETED", "status": "SUCCESS" | E, "clique_id": 32766,
                     "cluster_uuid": "8-4-4-4-12 hex", "health_mask": 0} | null | {"error": E},
                                                 nvmlDeviceGetGpuFabricInfo(V); state is
                                                 NVML_GPU_FABRIC_STATE_<name>; null/absent: Not Supported
          "processes": {"compute": [4242], "graphics": [], "mps": []},   pids with a context;
                                                 absent: none
          "errors": {"nvmlDeviceGetUUID": E}     any per-GPU call raises E
        }
      ]
    }

``E`` is the name of an NVML error constant (``NVML_ERROR_NOT_SUPPORTED``).  Any value that is
``null`` or absent makes its call raise Not Supported.
"""

from __future__ import annotations

import ctypes
import json
import types
import uuid
from pathlib import Path
from typing import Any

import pynvml

from topoagent.core.cpuset import parse_cpulist

FIXTURES = Path(__file__).parent / "fixtures" / "nvml"
FORMAT = "topoagent-nvml-recording/1"

#: The functions the fake provides (and the adapter may call).
API = (
    "nvmlInit",
    "nvmlShutdown",
    "nvmlSystemGetDriverVersion",
    "nvmlDeviceGetCount",
    "nvmlDeviceGetHandleByIndex",
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetMinorNumber",
    "nvmlDeviceGetPciInfo",
    "nvmlDeviceGetNumaNodeId",
    "nvmlDeviceGetCpuAffinity",
    "nvmlDeviceGetNvLinkState",
    "nvmlDeviceGetNvLinkRemotePciInfo",
    "nvmlDeviceGetP2PStatus",
    "nvmlDeviceGetGpuFabricInfoV",
    "nvmlDeviceGetGpuFabricInfo",
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetGraphicsRunningProcesses",
    "nvmlDeviceGetMPSComputeRunningProcesses",
)


def load_recording(name: str) -> dict[str, Any]:
    """A recording from ``tests/fixtures/nvml`` by file stem (``hgx_h100_8gpu``)."""
    data = json.loads((FIXTURES / f"{name}.json").read_text())
    assert data.get("format") == FORMAT, f"{name}: unknown recording format {data.get('format')!r}"
    return data


def nvml_error(name: str) -> pynvml.NVMLError:
    """The real exception pynvml raises for the error constant ``name``."""
    return pynvml.NVMLError(getattr(pynvml, name))


def _pci_info(bus_id: str, device_id: str | None = None) -> pynvml.nvmlPciInfo_t:
    info = pynvml.nvmlPciInfo_t()
    info.busId = bus_id.encode()
    try:
        domain, bus, rest = bus_id.split(":")
        info.domain, info.bus = int(domain, 16), int(bus, 16)
        info.device = int(rest.split(".")[0], 16)
        info.busIdLegacy = f"{info.domain:04X}:{bus}:{rest}".encode()
    except ValueError:
        pass  # a recorded oddity: serve busId as it is, numeric fields zero
    if device_id:
        info.pciDeviceId = int(device_id, 16)
    return info


class _Handle:
    """An opaque device handle (the real one is a ``c_nvmlDevice_t`` pointer)."""

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"<fake nvmlDevice {self.index}>"


class FakeNvml:
    """The state behind a fake module: the recording, and what was called."""

    def __init__(self, recording: dict[str, Any], *, bytes_strings: bool = False) -> None:
        self.rec = recording
        self.gpus: list[dict[str, Any]] = list(recording.get("gpus", []))
        self.bytes_strings = bytes_strings
        self.initialised = 0
        self.init_calls = 0
        self.shutdown_calls = 0
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    # -- helpers ----------------------------------------------------------------------------

    def _log(self, fn: str, *args: Any) -> None:
        self.calls.append((fn, args))
        if fn != "nvmlInit" and not self.initialised:
            raise nvml_error("NVML_ERROR_UNINITIALIZED")

    def _gpu(self, fn: str, handle: Any) -> dict[str, Any]:
        if not isinstance(handle, _Handle) or not 0 <= handle.index < len(self.gpus):
            raise nvml_error("NVML_ERROR_INVALID_ARGUMENT")
        gpu = self.gpus[handle.index]
        err = gpu.get("errors", {}).get(fn)
        if err:
            raise nvml_error(err)
        return gpu

    @staticmethod
    def _value(value: Any) -> Any:
        if value is None:
            raise nvml_error("NVML_ERROR_NOT_SUPPORTED")
        if isinstance(value, dict) and "error" in value:
            raise nvml_error(value["error"])
        return value

    def _str(self, value: str) -> str | bytes:
        return value.encode() if self.bytes_strings else value

    # -- the API ----------------------------------------------------------------------------

    def nvmlInit(self) -> None:
        self._log("nvmlInit")
        self.init_calls += 1
        if self.rec.get("init_error"):
            raise nvml_error(self.rec["init_error"])
        self.initialised += 1

    def nvmlShutdown(self) -> None:
        self._log("nvmlShutdown")
        self.shutdown_calls += 1
        self.initialised -= 1

    def nvmlSystemGetDriverVersion(self) -> str | bytes:
        self._log("nvmlSystemGetDriverVersion")
        return self._str(self._value(self.rec.get("driver_version")))

    def nvmlDeviceGetCount(self) -> int:
        self._log("nvmlDeviceGetCount")
        if self.rec.get("count_error"):
            raise nvml_error(self.rec["count_error"])
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        self._log("nvmlDeviceGetHandleByIndex", index)
        if not 0 <= index < len(self.gpus):
            raise nvml_error("NVML_ERROR_INVALID_ARGUMENT")
        err = self.gpus[index].get("errors", {}).get("nvmlDeviceGetHandleByIndex")
        if err:
            raise nvml_error(err)
        return _Handle(index)

    def nvmlDeviceGetName(self, handle: Any) -> str | bytes:
        self._log("nvmlDeviceGetName", handle)
        return self._str(self._value(self._gpu("nvmlDeviceGetName", handle).get("name")))

    def nvmlDeviceGetUUID(self, handle: Any) -> str | bytes:
        self._log("nvmlDeviceGetUUID", handle)
        return self._str(self._value(self._gpu("nvmlDeviceGetUUID", handle).get("uuid")))

    def nvmlDeviceGetMinorNumber(self, handle: Any) -> int:
        self._log("nvmlDeviceGetMinorNumber", handle)
        return self._value(self._gpu("nvmlDeviceGetMinorNumber", handle).get("minor"))

    def nvmlDeviceGetPciInfo(self, handle: Any) -> pynvml.nvmlPciInfo_t:
        self._log("nvmlDeviceGetPciInfo", handle)
        gpu = self._gpu("nvmlDeviceGetPciInfo", handle)
        return _pci_info(self._value(gpu.get("bus_id")), gpu.get("pci_device_id"))

    def nvmlDeviceGetNumaNodeId(self, handle: Any) -> int:
        self._log("nvmlDeviceGetNumaNodeId", handle)
        return int(self._value(self._gpu("nvmlDeviceGetNumaNodeId", handle).get("numa_node")))

    def nvmlDeviceGetCpuAffinity(self, handle: Any, cpuSetSize: int) -> ctypes.Array:
        self._log("nvmlDeviceGetCpuAffinity", handle, cpuSetSize)
        text = self._value(self._gpu("nvmlDeviceGetCpuAffinity", handle).get("cpu_affinity"))
        words = (ctypes.c_ulonglong * cpuSetSize)()  # what pynvml returns
        for cpu in parse_cpulist(text):
            if cpu // 64 < cpuSetSize:  # NVML fills only the words it was given
                words[cpu // 64] |= 1 << (cpu % 64)
        return words

    def _link(self, fn: str, handle: Any, link: int) -> Any:
        gpu = self._gpu(fn, handle)
        links = self._value(gpu.get("nvlinks"))
        if not isinstance(link, int) or not 0 <= link < len(links):
            raise nvml_error("NVML_ERROR_INVALID_ARGUMENT")
        return links[link]

    def nvmlDeviceGetNvLinkState(self, handle: Any, link: int) -> int:
        self._log("nvmlDeviceGetNvLinkState", handle, link)
        item = self._link("nvmlDeviceGetNvLinkState", handle, link)
        if item is None:
            return pynvml.NVML_FEATURE_DISABLED
        if isinstance(item, dict) and "error" in item:
            raise nvml_error(item["error"])
        return pynvml.NVML_FEATURE_ENABLED

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: Any, link: int) -> pynvml.nvmlPciInfo_t:
        self._log("nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
        item = self._link("nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
        if isinstance(item, dict):
            raise nvml_error(item.get("remote_error") or item.get("error"))
        if item is None:
            raise nvml_error("NVML_ERROR_NOT_SUPPORTED")
        return _pci_info(item)

    def nvmlDeviceGetP2PStatus(self, device1: Any, device2: Any, p2pIndex: Any) -> int:
        self._log("nvmlDeviceGetP2PStatus", device1, device2, p2pIndex)
        if not isinstance(p2pIndex, int):
            # What ctypes says when the real binding is handed a non-integer (such as the
            # tuple that NVML_P2P_CAPS_INDEX_READ is in nvidia-ml-py).
            raise ctypes.ArgumentError("argument 3: TypeError: Don't know how to convert parameter 3")
        gpu = self._gpu("nvmlDeviceGetP2PStatus", device1)
        if not isinstance(device2, _Handle) or device2.index == device1.index:
            raise nvml_error("NVML_ERROR_INVALID_ARGUMENT")
        recorded = gpu.get("p2p_read", {})
        key = str(device2.index)
        status = self._value(recorded[key] if key in recorded else self.rec.get("p2p_read_default", "OK"))
        return int(getattr(pynvml, f"NVML_P2P_STATUS_{status}"))


def _fill_fabric(fake: FakeNvml, fn: str, handle: Any, ref: Any) -> int:
    """Fill the structure ``ref`` points at (``ctypes.byref``) from the GPU's ``fabric`` record."""
    fake._log(fn, handle, ref)
    rec = fake._value(fake._gpu(fn, handle).get("fabric"))
    info = ref._obj  # what ctypes.byref points at
    info.state = int(getattr(pynvml, f"NVML_GPU_FABRIC_STATE_{rec.get('state', 'NOT_SUPPORTED')}"))
    status = rec.get("status", "SUCCESS")
    info.status = pynvml.NVML_SUCCESS if status == "SUCCESS" else int(getattr(pynvml, status))
    info.cliqueId = int(rec.get("clique_id", 0))
    if rec.get("cluster_uuid"):
        raw = uuid.UUID(rec["cluster_uuid"]).bytes
        for i, b in enumerate(raw):
            info.clusterUuid[i] = b
    if hasattr(info, "healthMask"):
        info.healthMask = int(rec.get("health_mask", 0))
    return int(pynvml.NVML_SUCCESS)


def _add_fabric_calls() -> None:
    for name in ("nvmlDeviceGetGpuFabricInfoV", "nvmlDeviceGetGpuFabricInfo"):

        def call(self: FakeNvml, handle: Any, ref: Any, _name: str = name) -> int:
            return _fill_fabric(self, _name, handle, ref)

        setattr(FakeNvml, name, call)


_add_fabric_calls()


def _process_infos(pids: list[int]) -> list[Any]:
    """What the process getters return: structs with a ``pid`` (and the memory used)."""
    return [types.SimpleNamespace(pid=pid, usedGpuMemory=None) for pid in pids]


def _add_process_calls() -> None:
    for name, kind in (
        ("nvmlDeviceGetComputeRunningProcesses", "compute"),
        ("nvmlDeviceGetGraphicsRunningProcesses", "graphics"),
        ("nvmlDeviceGetMPSComputeRunningProcesses", "mps"),
    ):

        def call(self: FakeNvml, handle: Any, _name: str = name, _kind: str = kind) -> list[Any]:
            self._log(_name, handle)
            return _process_infos(self._gpu(_name, handle).get("processes", {}).get(_kind, []))

        setattr(FakeNvml, name, call)


_add_process_calls()


def make_fake(
    recording: dict[str, Any] | str,
    *,
    omit: tuple[str, ...] = (),
    bytes_strings: bool = False,
) -> types.ModuleType:
    """A module that looks like ``pynvml`` and answers from ``recording`` (dict or stem).

    ``omit`` leaves functions out (an older binding); ``bytes_strings`` returns ``bytes`` from
    the string getters, as older nvidia-ml-py releases did.  The state is at ``module.fake``.
    """
    if isinstance(recording, str):
        recording = load_recording(recording)
    fake = FakeNvml(recording, bytes_strings=bytes_strings)
    module = types.ModuleType("fakenvml_module", "pynvml stand-in for tests")
    for name in dir(pynvml):
        if name.startswith(("NVML_", "NVMLError", "c_nvmlGpuFabricInfo")):
            setattr(module, name, getattr(pynvml, name))
    for name in API:
        if name not in omit:
            setattr(module, name, getattr(fake, name))
    module.fake = fake  # type: ignore[attr-defined]
    return module
