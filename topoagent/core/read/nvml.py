"""What NVML (``nvidia-ml-py``, imported as ``pynvml``) says about the host's GPUs.

The only module that talks to NVML.  ``pynvml`` is imported lazily inside :func:`probe_nvml`,
never at import time, so ``topoagent scan`` starts fast and runs where it is missing.  Every
failure is data: a host without the library or driver gives an ``unavailable`` source status;
a call that fails for one GPU, link or pair becomes a :class:`ProbeError` whose path names the
call (``nvml:nvmlDeviceGetNvLinkState(gpu0,link3)``) and the scan goes on.

Facts worth knowing about the API (checked against nvidia-ml-py 13.615):

* ``nvmlDeviceGetPciInfo(h).busId`` is ``b"00000000:1B:00.0"``: an 8-hex-digit domain, upper
  case.  ``busIdLegacy`` has a 4-digit domain.  Both are normalised to sysfs's spelling,
  ``0000:1b:00.0`` (domain printed ``%04x``, so a VMD domain ``10000`` survives).
* ``nvmlDeviceGetNvLinkRemotePciInfo`` names whatever is at the far end of the link: a peer GPU
  on NVLink-bridged / hybrid-cube-mesh boxes, the NVSwitch's own PCI function (class
  ``0x068000``, e.g. ``00000000:05:00.0``-``08:00.0`` on HGX H100) on NVSwitch systems.  Both
  are kept; the analysis decides what the peer is by joining the BDF with sysfs, as NCCL does.
* ``nvmlDeviceGetNumaNodeId`` is the GPU's *own* NUMA node and only exists where GPU memory is
  a NUMA node (Grace Hopper/Blackwell: the "GPU NUMA ID" column of ``nvidia-smi topo -m``).
  On x86 hosts it answers Not Supported, so ``NvmlGpu.numa_node`` is None there; the GPU's
  CPU-side locality is ``cpu_affinity`` (and sysfs's ``numa_node``).
* ``NVML_P2P_CAPS_INDEX_READ`` is spelled ``= 0,`` in nvidia-ml-py, i.e. the tuple ``(0,)``,
  which ctypes cannot pass.  :func:`_const_int` unwraps it.
* ``NVML_NVLINK_MAX_LINKS`` grows with the library (36 in 13.x; an H100 has 18, a V100 6);
  links past what a GPU has answer Invalid Argument, a GPU without NVLink answers Not
  Supported: both are silent.
* ``nvmlDeviceGetGpuFabricInfoV`` (driver 550+; ``nvmlDeviceGetGpuFabricInfo`` before) fills a
  structure the caller passes by reference (``ctypes.byref``: the binding declares no argument
  types) with the GPU's NVLink fabric state, registration status, clique id and cluster UUID;
  a GPU on no NVLink fabric answers Not Supported, or the state NOT_SUPPORTED: silent.
"""

from __future__ import annotations

import ctypes
import os
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import msgspec

from topoagent.core.bdf import normalize_bus_id
from topoagent.core.cpuset import CpuSet
from topoagent.core.hostfs import HostFS
from topoagent.core.inputs import NVML_AUTO, NVML_OFF, Inputs
from topoagent.core.parse.nvml_recording import MAX_RECORDING_BYTES, NvmlRecordingError, parse_nvml_recording
from topoagent.core.read import NVML_RECORDING, Collection, is_live
from topoagent.core.snapshot import FABRIC_STATES, FabricInfo, NvLink, NvmlGpu, ProbeError, SourceStatus

SOURCE = "nvml"
T = TypeVar("T")


# Error classes that mean "this GPU/driver has no such thing" rather than "the call broke".
_ABSENT = ("NVMLError_NotSupported", "NVMLError_FunctionNotFound")
# For the per-link loop only: the link index is past the GPU's last link.
_NO_SUCH_LINK = _ABSENT + ("NVMLError_InvalidArgument",)


class NvmlProbe(msgspec.Struct, frozen=True):
    """The result of one NVML probe."""

    gpus: tuple[NvmlGpu, ...]
    driver_version: str | None
    source: SourceStatus
    errors: tuple[ProbeError, ...]


class _Skip(Exception):
    """Internal: the call had nothing to say (absent feature) or failed and was recorded."""


def cpus_from_words(words: Iterable[int], bits: int = 64) -> CpuSet:
    """CPUs set in an NVML CPU set: an array of ``bits``-bit words, word 0 holding CPUs 0..63."""
    cpus: set[int] = set()
    for i, word in enumerate(words):
        word = int(word)
        base = i * bits
        while word:
            low = word & -word
            cpus.add(base + low.bit_length() - 1)
            word ^= low
    return CpuSet(cpus)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).split(b"\0", 1)[0].decode("utf-8", "replace")
    text = str(value).strip()
    return text or None


def _const_int(nvml: Any, name: str, default: int) -> int:
    """An integer constant of the binding; unwraps ``NVML_P2P_CAPS_INDEX_READ = 0,``."""
    value = getattr(nvml, name, default)
    if isinstance(value, tuple):
        value = value[0] if value else default
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _path(fn_name: str, where: str) -> str:
    """A probe-error path: ``nvml:nvmlDeviceGetNvLinkState(gpu0,link3)``."""
    return f"{SOURCE}:{fn_name}({where})" if where else f"{SOURCE}:{fn_name}"


def _describe(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - NVMLError.__str__ may call into the library
        text = ""
    text = " ".join(text.split())
    name = type(exc).__name__
    return f"{name}: {text}" if text else name


def _cpuset_words() -> int:
    """Words of 64 CPUs to ask NVML for: enough for every CPU id this host can have."""
    ncpu = os.cpu_count() or 1
    return max(16, -(-ncpu // 64) + 1)


class _Prober:
    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self.errors: list[ProbeError] = []

    def _classes(self, names: tuple[str, ...]) -> tuple[type[BaseException], ...]:
        found = (getattr(self.nvml, n, None) for n in names)
        return tuple(c for c in found if isinstance(c, type) and issubclass(c, BaseException))

    def call(
        self,
        where: str,
        fn_name: str,
        *args: Any,
        silent: tuple[str, ...] = _ABSENT,
    ) -> Any:
        """Call ``nvml.<fn_name>(*args)``; raise :class:`_Skip` when it gives no value.

        Silent classes (feature absent) are not errors; anything else is recorded with the path
        ``nvml:<fn_name>(<where>)``.
        """
        fn = getattr(self.nvml, fn_name, None)
        if fn is None:
            raise _Skip  # an older binding without this function: nothing to say
        try:
            return fn(*args)
        except self._classes(silent):
            raise _Skip from None
        except Exception as exc:  # noqa: BLE001 - any other failure is data, never the end of the scan
            self.errors.append(ProbeError(_path(fn_name, where), _describe(exc)))
            raise _Skip from None

    def value(self, where: str, fn_name: str, *args: Any, convert: Callable[[Any], T]) -> T | None:
        """:meth:`call`, then ``convert``; None when either gives nothing."""
        try:
            raw = self.call(where, fn_name, *args)
        except _Skip:
            return None
        try:
            return convert(raw)
        except (TypeError, ValueError) as exc:
            self.errors.append(ProbeError(_path(fn_name, where), f"unexpected value {raw!r}: {_describe(exc)}"))
            return None

    # -- per GPU ----------------------------------------------------------------------------

    def bdf(self, where: str, handle: Any) -> str | None:
        try:
            info = self.call(where, "nvmlDeviceGetPciInfo", handle)
        except _Skip:
            return None
        for field in ("busId", "busIdLegacy"):
            bdf = normalize_bus_id(getattr(info, field, None))
            if bdf:
                return bdf
        try:  # the numeric fields; the function number is not among them
            return f"{int(info.domain):04x}:{int(info.bus):02x}:{int(info.device):02x}.0"
        except (AttributeError, TypeError, ValueError):
            self.errors.append(ProbeError(_path("nvmlDeviceGetPciInfo", where), "no usable PCI bus id"))
            return None

    def numa_node(self, where: str, handle: Any) -> int | None:
        node = self.value(where, "nvmlDeviceGetNumaNodeId", handle, convert=int)
        # A negative node (c_int -1) is NVML's "none"; keep None like sysfs's numa_node = -1.
        return node if node is not None and node >= 0 else None

    def cpu_affinity(self, where: str, handle: Any) -> CpuSet | None:
        words = self.value(where, "nvmlDeviceGetCpuAffinity", handle, _cpuset_words(), convert=list)
        if words is None:
            return None
        # All-zero words: NVML does not know (no CPU is never a real affinity).
        return cpus_from_words(words) or None

    def nvlinks(self, where: str, handle: Any) -> tuple[NvLink, ...]:
        nvml = self.nvml
        max_links = _const_int(nvml, "NVML_NVLINK_MAX_LINKS", 18)
        enabled = _const_int(nvml, "NVML_FEATURE_ENABLED", 1)
        peers: Counter[str] = Counter()
        for link in range(max_links):
            at = f"{where},link{link}"
            try:
                state = self.call(at, "nvmlDeviceGetNvLinkState", handle, link, silent=_NO_SUCH_LINK)
            except _Skip:
                continue
            if _const_int_value(state) != enabled:
                continue
            try:
                remote = self.call(at, "nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
            except _Skip:
                continue
            raw = getattr(remote, "busId", None)
            peer = normalize_bus_id(raw) or normalize_bus_id(getattr(remote, "busIdLegacy", None))
            if peer is None:
                self.errors.append(
                    ProbeError(
                        _path("nvmlDeviceGetNvLinkRemotePciInfo", at),
                        f"unparseable remote PCI bus id {_text(raw)!r}",
                    )
                )
                continue
            peers[peer] += 1
        return tuple(NvLink(peer, count) for peer, count in sorted(peers.items()))

    def fabric(self, where: str, handle: Any) -> FabricInfo | None:
        """The GPU's NVLink fabric registration; None where it has none (not supported)."""
        nvml = self.nvml
        for fn, struct in (
            ("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfoV_t"),
            ("nvmlDeviceGetGpuFabricInfo", "c_nvmlGpuFabricInfo_t"),
        ):
            cls = getattr(nvml, struct, None)
            if cls is None or getattr(nvml, fn, None) is None:
                continue
            info = cls()
            try:
                self.call(where, fn, handle, ctypes.byref(info))
            except _Skip:
                return None
            return fabric_info(nvml, info)
        return None


def fabric_info(nvml: Any, info: Any) -> FabricInfo | None:
    """A filled ``nvmlGpuFabricInfo(V)_t`` as a record; None for the state NOT_SUPPORTED."""
    state = FABRIC_STATES.get(_const_int_value(getattr(info, "state", None)) or 0, "not_supported")
    if state == "not_supported":
        return None
    status = _const_int_value(getattr(info, "status", None))
    raw = bytes(getattr(info, "clusterUuid", b""))
    return FabricInfo(
        state=state,
        status=None if state != "completed" or status is None else _status_name(nvml, status),
        clique_id=_const_int_value(getattr(info, "cliqueId", None)) if state == "completed" else None,
        cluster_uuid=str(uuid.UUID(bytes=raw)) if len(raw) == 16 and any(raw) else None,
        health_mask=_const_int_value(getattr(info, "healthMask", None)),
    )


def _status_name(nvml: Any, status: int) -> str:
    """``success`` for NVML_SUCCESS, else the NVML_ERROR_* name of a return code."""
    if status == _const_int(nvml, "NVML_SUCCESS", 0):
        return "success"
    names = sorted(n for n in dir(nvml) if n.startswith("NVML_ERROR_") and getattr(nvml, n, None) == status)
    return names[0] if names else f"NVML_ERROR_{status}"


def _const_int_value(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _import_pynvml() -> tuple[Any, str | None]:
    try:
        import pynvml  # lazily: a scan starts fast, and runs where NVML is missing
    except ImportError as exc:
        return None, f"nvidia-ml-py (pynvml) is not installed: {exc}"
    return pynvml, None


def probe_nvml(nvml: Any = None) -> NvmlProbe:
    """Ask NVML about every GPU.  ``nvml`` is the ``pynvml`` module or a stand-in for it.

    Never raises for host reasons: no library, no driver or a failed init give an
    ``unavailable`` status; per-call failures are probe errors and a ``partial`` status.
    """
    if nvml is None:
        nvml, why = _import_pynvml()
        if nvml is None:
            return NvmlProbe((), None, SourceStatus(SOURCE, "unavailable", why), ())

    try:
        nvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - LibraryNotFound, DriverNotLoaded, any NVMLError, OSError...
        why = f"nvmlInit failed: {_describe(exc)}"
        return NvmlProbe((), None, SourceStatus(SOURCE, "unavailable", why), ())

    p = _Prober(nvml)
    gpus: list[NvmlGpu] = []
    driver: str | None = None
    count: int | None = None
    try:
        driver = p.value("", "nvmlSystemGetDriverVersion", convert=_text)
        count = p.value("", "nvmlDeviceGetCount", convert=int)
        if count is not None:
            gpus = _probe_gpus(p, count)
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception as exc:  # noqa: BLE001 - a failed shutdown is a probe error, never the end of the scan
            p.errors.append(ProbeError(f"{SOURCE}:nvmlShutdown", _describe(exc)))

    errors = tuple(p.errors)
    if count is None:
        status = SourceStatus(SOURCE, "unavailable", "could not count GPUs")
    elif errors:
        status = SourceStatus(SOURCE, "partial", f"{len(errors)} NVML call(s) failed")
    else:
        status = SourceStatus(SOURCE, "ok", f"{len(gpus)} GPU(s)")
    return NvmlProbe(tuple(gpus), driver, status, errors)


def replay_recording(fs: HostFS) -> NvmlProbe | None:
    """NVML's view as a capture recorded it (``tools/nvml.json`` below the root), or None
    where the root holds no recording.  A recording that cannot be read is an ``error``
    source status, never a guess."""
    if not fs.exists(NVML_RECORDING):
        return None

    text = fs.text(NVML_RECORDING, limit=MAX_RECORDING_BYTES)
    errors = tuple(fs.errors)
    if text is None:
        return NvmlProbe((), None, SourceStatus(SOURCE, "error", "the capture's NVML recording is unreadable"), errors)
    try:
        gpus, driver, why_not = parse_nvml_recording(text)
    except NvmlRecordingError as exc:
        return NvmlProbe((), None, SourceStatus(SOURCE, "error", f"{NVML_RECORDING}: {exc}"), errors)
    if why_not is not None:
        return NvmlProbe((), None, SourceStatus(SOURCE, "unavailable", why_not), errors)
    return NvmlProbe(
        gpus, driver, SourceStatus(SOURCE, "ok", f"{len(gpus)} GPU(s), replayed from the capture's recording"), errors
    )


def wanted(inputs: Inputs) -> bool:
    """Whether a scan asks NVML: the live host unless ``--no-nvml``; under another root, a
    capture's recording where it holds one (without one the source would add nothing)."""
    if inputs.offline or inputs.nvml in (NVML_OFF, None, False):
        return False
    if inputs.nvml == NVML_AUTO and not is_live(inputs):
        return HostFS(inputs.root).exists(NVML_RECORDING)
    return True


def collect(c: Collection) -> None:
    """Join NVML's view of the GPUs to the snapshot (NVLinks, P2P status, driver version):
    NVML itself on the live host, the capture's recording under another root."""
    snap = c.require_snapshot()
    wanted = c.inputs.nvml
    if wanted == NVML_AUTO and not is_live(c.inputs):
        probe = replay_recording(HostFS(c.inputs.root))
        if probe is None:
            return  # a fake or captured root without a recording: NVML has nothing to say
    else:
        probe = probe_nvml(None if wanted in (True, NVML_AUTO) else wanted)
    c.snapshot = msgspec.structs.replace(
        snap,
        nvml_gpus=probe.gpus,
        driver_version=probe.driver_version,
        sources=snap.sources + (probe.source,),
        probe_errors=snap.probe_errors + probe.errors,
    )


def _probe_gpus(p: _Prober, count: int) -> list[NvmlGpu]:
    handles: list[tuple[int, Any, str]] = []  # (index, handle, bdf)
    for index in range(count):
        where = f"gpu{index}"
        try:
            handle = p.call(where, "nvmlDeviceGetHandleByIndex", index)
        except _Skip:
            continue
        bdf = p.bdf(where, handle)
        if bdf is None:
            continue  # a GPU without an address cannot be joined to anything
        handles.append((index, handle, bdf))

    p2p_index = _const_int(p.nvml, "NVML_P2P_CAPS_INDEX_READ", 0)
    p2p_okay = _const_int(p.nvml, "NVML_P2P_STATUS_OK", 0)
    has_p2p = getattr(p.nvml, "nvmlDeviceGetP2PStatus", None) is not None

    gpus: list[NvmlGpu] = []
    for index, handle, bdf in handles:
        where = f"gpu{index}"
        name = p.value(where, "nvmlDeviceGetName", handle, convert=_text)
        uuid = p.value(where, "nvmlDeviceGetUUID", handle, convert=_text)
        minor = p.value(where, "nvmlDeviceGetMinorNumber", handle, convert=int)
        numa_node = p.numa_node(where, handle)
        cpu_affinity = p.cpu_affinity(where, handle)
        nvlinks = p.nvlinks(where, handle)
        fabric = p.fabric(where, handle)
        ok: list[str] = []
        not_ok: list[str] = []
        if has_p2p:
            for other, other_handle, other_bdf in handles:
                if other == index:
                    continue
                status = p.value(
                    f"{where},gpu{other}",
                    "nvmlDeviceGetP2PStatus",
                    handle,
                    other_handle,
                    p2p_index,
                    convert=_const_int_value,
                )
                if status is None:
                    continue
                (ok if status == p2p_okay else not_ok).append(other_bdf)
        gpus.append(
            NvmlGpu(
                index=index,
                bdf=bdf,
                name=name,
                uuid=uuid,
                minor=minor,
                numa_node=numa_node,
                cpu_affinity=cpu_affinity,
                nvlinks=nvlinks,
                p2p_ok=tuple(sorted(ok)),
                p2p_not_ok=tuple(sorted(not_ok)),
                fabric=fabric,
            )
        )
    return gpus


class GpuUtilization:
    """GPU utilisation by BDF, for the daemon's load probe: NVML initialised once, handles kept.

    ``why_not`` says why NVML is unavailable (None when it answered ``nvmlInit``); every
    per-GPU failure is "unknown" (None), never an error.
    """

    def __init__(self, nvml: Any = None) -> None:
        self.why_not: str | None = None
        self._handles: dict[str, Any] = {}
        self._nvml = nvml
        if nvml is None:
            self._nvml, self.why_not = _import_pynvml()
        if self._nvml is not None:
            try:
                self._nvml.nvmlInit()
            except Exception as exc:  # noqa: BLE001 - no driver: utilisation is unknown
                self.why_not, self._nvml = f"nvmlInit failed: {_describe(exc)}", None

    def percent(self, bdf: str) -> int | None:
        """The GPU's utilisation (0-100) now, or None when NVML cannot say."""
        if self._nvml is None:
            return None
        try:
            handle = self._handles.get(bdf)
            if handle is None:
                handle = self._handles[bdf] = self._nvml.nvmlDeviceGetHandleByPciBusId(bdf.upper())
            return int(self._nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
        except Exception:  # noqa: BLE001 - a GPU gone or a call unsupported: unknown this time
            self._handles.pop(bdf, None)
            return None

    def close(self) -> None:
        """Shut NVML down (best effort)."""
        nvml, self._nvml = self._nvml, None
        if nvml is not None:
            try:
                nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001 - shutting down: nothing to report to
                pass


#: NVML's lists of the processes with a context on a GPU (nvidia-ml-py: each returns a list of
#: process-info structs with a ``pid``): CUDA compute, graphics, and MPS clients.
_PROCESS_CALLS = (
    "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetGraphicsRunningProcesses",
    "nvmlDeviceGetMPSComputeRunningProcesses",
)


class RunningProcesses(msgspec.Struct, frozen=True):
    """The processes NVML says use each GPU, by BDF (``topoagent audit``).  ``why_not``: why
    NVML could not say (no library, no driver); ``errors``: calls that failed for one GPU."""

    by_bdf: dict[str, tuple[int, ...]] = msgspec.field(default_factory=dict)
    why_not: str | None = None
    errors: tuple[ProbeError, ...] = ()


def running_processes(nvml: Any = None) -> RunningProcesses:
    """Ask NVML which processes have a context on each GPU.  ``nvml``: the ``pynvml`` module or
    a stand-in.  Never raises for host reasons; PIDs are in the driver's (the host's) PID
    namespace."""
    if nvml is None:
        nvml, why = _import_pynvml()
        if nvml is None:
            return RunningProcesses(why_not=why)
    try:
        nvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - no driver, no library: NVML has nothing to say
        return RunningProcesses(why_not=f"nvmlInit failed: {_describe(exc)}")
    p = _Prober(nvml)
    out: dict[str, tuple[int, ...]] = {}
    try:
        count = p.value("", "nvmlDeviceGetCount", convert=int)
        for index in range(count or 0):
            where = f"gpu{index}"
            try:
                handle = p.call(where, "nvmlDeviceGetHandleByIndex", index)
            except _Skip:
                continue
            bdf = p.bdf(where, handle)
            if bdf is None:
                continue
            pids: dict[int, None] = {}
            for fn in _PROCESS_CALLS:
                infos = p.value(where, fn, handle, convert=list) or []
                pids.update(dict.fromkeys(int(i.pid) for i in infos if getattr(i, "pid", None) is not None))
            out[bdf] = tuple(sorted(pids))
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception as exc:  # noqa: BLE001 - a failed shutdown is a probe error, never the end of the scan
            p.errors.append(ProbeError(f"{SOURCE}:nvmlShutdown", _describe(exc)))
    if count is None:
        return RunningProcesses(why_not="NVML could not count the GPUs", errors=tuple(p.errors))
    return RunningProcesses(out, None, tuple(p.errors))
