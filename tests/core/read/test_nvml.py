"""The NVML adapter against recorded hosts replayed by a fake ``pynvml`` module."""

from __future__ import annotations

import copy
import ctypes
import importlib.util
import subprocess
import sys
import types

import pynvml
import pytest

from tests.fakenvml import load_recording, make_fake
from tests.paths import REPO
from topoagent.core.cpuset import CpuSet
from topoagent.core.read.nvml import (
    cpus_from_words,
    normalize_bus_id,
    probe_nvml,
)
from topoagent.core.snapshot import NvLink, NvmlGpu, from_dict, to_dict

H100_BDFS = (
    "0000:1b:00.0", "0000:43:00.0", "0000:52:00.0", "0000:61:00.0",
    "0000:9d:00.0", "0000:c3:00.0", "0000:d1:00.0", "0000:df:00.0",
)  # fmt: skip
H100_LINKS = (
    NvLink("0000:05:00.0", 4),
    NvLink("0000:06:00.0", 5),
    NvLink("0000:07:00.0", 5),
    NvLink("0000:08:00.0", 4),
)
V100_BDFS = (
    "0000:06:00.0", "0000:07:00.0", "0000:0a:00.0", "0000:0b:00.0",
    "0000:85:00.0", "0000:86:00.0", "0000:89:00.0", "0000:8a:00.0",
)  # fmt: skip
# `nvidia-smi topo -m` of a DGX-1 with V100 (GPU part), the shape the recording must give.
DGX1_MATRIX = """
      GPU0 GPU1 GPU2 GPU3 GPU4 GPU5 GPU6 GPU7
GPU0   X   NV1  NV1  NV2  NV2  SYS  SYS  SYS
GPU1  NV1   X   NV2  NV1  SYS  NV2  SYS  SYS
GPU2  NV1  NV2   X   NV2  SYS  SYS  NV1  SYS
GPU3  NV2  NV1  NV2   X   SYS  SYS  SYS  NV1
GPU4  NV2  SYS  SYS  SYS   X   NV1  NV1  NV2
GPU5  SYS  NV2  SYS  SYS  NV1   X   NV2  NV1
GPU6  SYS  SYS  NV1  SYS  NV1  NV2   X   NV2
GPU7  SYS  SYS  SYS  NV1  NV2  NV1  NV2   X
"""


def _dgx1_links() -> dict[int, dict[int, int]]:
    rows = [line.split()[1:] for line in DGX1_MATRIX.strip().splitlines()[1:]]
    return {i: {j: int(cell[2:]) for j, cell in enumerate(row) if cell.startswith("NV")} for i, row in enumerate(rows)}


def _probe(recording, **kwargs):
    nvml = make_fake(recording, **kwargs)
    return probe_nvml(nvml), nvml.fake


# -- whole recordings -----------------------------------------------------------------------


def test_hgx_h100_gpus_nvswitch_links_and_p2p():
    probe, fake = _probe("hgx_h100_8gpu")
    assert probe.source.status == "ok"
    assert probe.errors == ()
    assert probe.driver_version == "550.90.07"
    assert tuple(g.bdf for g in probe.gpus) == H100_BDFS
    assert [g.index for g in probe.gpus] == list(range(8))
    for i, gpu in enumerate(probe.gpus):
        assert gpu.name == "NVIDIA H100 80GB HBM3"
        assert gpu.uuid and gpu.uuid.startswith("GPU-")
        assert gpu.minor == i
        assert gpu.numa_node is None  # x86: nvmlDeviceGetNumaNodeId is Not Supported
        assert str(gpu.cpu_affinity) == ("0-55,112-167" if i < 4 else "56-111,168-223")
        # Every link ends on an NVSwitch; 18 in all, 5/5/4/4 over the four switches.
        assert gpu.nvlinks == H100_LINKS
        assert sum(link.count for link in gpu.nvlinks) == 18
        assert gpu.p2p_ok == tuple(b for b in H100_BDFS if b != gpu.bdf)
        assert gpu.p2p_not_ok == ()
    assert fake.init_calls == 1 and fake.shutdown_calls == 1


def test_dgx1_hybrid_cube_mesh():
    probe, _ = _probe("dgx1_v100_8gpu")
    assert probe.source.status == "ok", probe.errors
    assert tuple(g.bdf for g in probe.gpus) == V100_BDFS
    expected = _dgx1_links()
    for i, gpu in enumerate(probe.gpus):
        assert gpu.name == "Tesla V100-SXM2-32GB"
        assert str(gpu.cpu_affinity) == ("0-19,40-59" if i < 4 else "20-39,60-79")
        links = {V100_BDFS.index(link.peer_bdf): link.count for link in gpu.nvlinks}
        assert links == expected[i], f"gpu{i}"
        assert [link.peer_bdf for link in gpu.nvlinks] == sorted(V100_BDFS[j] for j in links)
        assert sum(links.values()) == 6
        assert set(gpu.p2p_ok) == {V100_BDFS[j] for j in expected[i]}
        assert set(gpu.p2p_not_ok) == {V100_BDFS[j] for j in range(8) if j != i} - set(gpu.p2p_ok)


def test_pcie_box_without_nvlink():
    probe, _ = _probe("pcie_2gpu_no_nvlink")
    assert probe.source.status == "ok"
    assert probe.errors == ()  # a GPU without NVLink is normal, not an error
    assert probe.gpus == (
        NvmlGpu(
            index=0,
            bdf="0000:17:00.0",
            name="NVIDIA A10",
            uuid="GPU-00000017-2f6d-0e45-b1c0-000000000000",
            minor=0,
            numa_node=None,
            cpu_affinity=CpuSet.parse("0-15,32-47"),
            nvlinks=(),
            p2p_ok=(),
            p2p_not_ok=("0000:ca:00.0",),
        ),
        NvmlGpu(
            index=1,
            bdf="0000:ca:00.0",
            name="NVIDIA A10",
            uuid="GPU-000000ca-2f6d-0e45-b1c0-000000000001",
            minor=1,
            numa_node=None,
            cpu_affinity=CpuSet.parse("16-31,48-63"),
            nvlinks=(),
            p2p_ok=(),
            p2p_not_ok=("0000:17:00.0",),
        ),
    )


@pytest.mark.parametrize(
    ("init_error", "word"),
    [
        ("NVML_ERROR_DRIVER_NOT_LOADED", "NVMLError_DriverNotLoaded"),
        ("NVML_ERROR_LIBRARY_NOT_FOUND", "NVMLError_LibraryNotFound"),
        ("NVML_ERROR_NO_PERMISSION", "NVMLError_NoPermission"),
        ("NVML_ERROR_UNKNOWN", "NVMLError_Unknown"),
    ],
)
def test_init_failure_is_unavailable(init_error, word):
    rec = load_recording("driver_not_loaded")
    rec["init_error"] = init_error
    probe, fake = _probe(rec)
    assert probe.gpus == () and probe.driver_version is None and probe.errors == ()
    assert probe.source.name == "nvml"
    assert probe.source.status == "unavailable"
    assert word in probe.source.detail
    assert "\n" not in probe.source.detail
    assert fake.shutdown_calls == 0  # never shut down what did not start


def test_driver_not_loaded_recording():
    probe, _ = _probe("driver_not_loaded")
    assert probe.source.status == "unavailable"
    assert probe.source.detail == "nvmlInit failed: NVMLError_DriverNotLoaded: Driver Not Loaded"


def test_init_raising_something_else_is_unavailable():
    def init():
        raise OSError("libnvidia-ml.so.1: cannot open shared object file")

    probe = probe_nvml(types.SimpleNamespace(nvmlInit=init))
    assert probe.source.status == "unavailable"
    assert "OSError" in probe.source.detail


def test_pynvml_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` now fails
    probe = probe_nvml()
    assert probe.gpus == () and probe.errors == ()
    assert probe.source.status == "unavailable"
    assert "not installed" in probe.source.detail


def test_real_pynvml_never_raises():
    """The installed nvidia-ml-py, for real: no driver here gives 'unavailable'."""
    probe = probe_nvml()
    assert probe.source.name == "nvml"
    if probe.source.status == "unavailable":
        assert probe.gpus == ()
        assert probe.source.detail.startswith("nvmlInit failed: NVMLError_")
    else:  # a host with a driver
        assert probe.source.status in ("ok", "partial")
        assert all(g.bdf for g in probe.gpus)


def test_import_does_not_load_pynvml():
    code = (
        "import sys, topoagent.core.read.nvml, topoagent.core.read.tools\n"
        "assert 'pynvml' not in sys.modules, 'pynvml imported at module import'\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)


# -- failures inside a probe ----------------------------------------------------------------


def test_per_call_errors_are_recorded_and_the_rest_survives():
    rec = copy.deepcopy(load_recording("hgx_h100_8gpu"))
    gpus = rec["gpus"]
    gpus[0]["nvlinks"][5] = {"remote_error": "NVML_ERROR_NO_PERMISSION"}
    gpus[1]["errors"] = {"nvmlDeviceGetUUID": "NVML_ERROR_GPU_IS_LOST"}
    gpus[2]["nvlinks"][3] = {"error": "NVML_ERROR_UNKNOWN"}
    gpus[3]["p2p_read"] = {"4": {"error": "NVML_ERROR_UNKNOWN"}, "5": "DISABLED_BY_REGKEY"}
    gpus[4]["errors"] = {"nvmlDeviceGetCpuAffinity": "NVML_ERROR_INSUFFICIENT_SIZE"}
    gpus[6]["nvlinks"][0] = None  # a link that is down: not an error, one link fewer

    probe, fake = _probe(rec)
    assert probe.source.status == "partial"
    assert [(e.path, e.error) for e in probe.errors] == [
        (
            "nvml:nvmlDeviceGetNvLinkRemotePciInfo(gpu0,link5)",
            "NVMLError_NoPermission: Insufficient Permissions",
        ),
        ("nvml:nvmlDeviceGetUUID(gpu1)", "NVMLError_GpuIsLost: GPU is lost"),
        ("nvml:nvmlDeviceGetNvLinkState(gpu2,link3)", "NVMLError_Unknown: Unknown Error"),
        ("nvml:nvmlDeviceGetP2PStatus(gpu3,gpu4)", "NVMLError_Unknown: Unknown Error"),
        ("nvml:nvmlDeviceGetCpuAffinity(gpu4)", "NVMLError_InsufficientSize: Insufficient Size"),
    ]
    g = probe.gpus
    assert len(g) == 8
    # gpu0 link 5 went to the switch at 07: one link fewer there
    assert g[0].nvlinks == (H100_LINKS[0], H100_LINKS[1], NvLink("0000:07:00.0", 4), H100_LINKS[3])
    assert g[1].uuid is None and g[1].name == "NVIDIA H100 80GB HBM3"
    # gpu2 link 3 went to the switch at 06
    assert g[2].nvlinks == (H100_LINKS[0], NvLink("0000:06:00.0", 4), H100_LINKS[2], H100_LINKS[3])
    assert "0000:9d:00.0" not in g[3].p2p_ok + g[3].p2p_not_ok  # the failed pair: unknown
    assert g[3].p2p_not_ok == ("0000:c3:00.0",)
    assert g[4].cpu_affinity is None
    assert sum(link.count for link in g[6].nvlinks) == 17
    assert fake.shutdown_calls == 1


def test_gpu_without_handle_is_skipped():
    rec = copy.deepcopy(load_recording("hgx_h100_8gpu"))
    rec["gpus"][5]["errors"] = {"nvmlDeviceGetHandleByIndex": "NVML_ERROR_GPU_IS_LOST"}
    probe, _ = _probe(rec)
    assert [e.path for e in probe.errors] == ["nvml:nvmlDeviceGetHandleByIndex(gpu5)"]
    assert [g.index for g in probe.gpus] == [0, 1, 2, 3, 4, 6, 7]
    assert "0000:c3:00.0" not in probe.gpus[0].p2p_ok
    assert len(probe.gpus[0].p2p_ok) == 6


def test_count_failure_is_unavailable_and_still_shuts_down():
    rec = copy.deepcopy(load_recording("hgx_h100_8gpu"))
    rec["count_error"] = "NVML_ERROR_UNKNOWN"
    probe, fake = _probe(rec)
    assert probe.source.status == "unavailable"
    assert probe.gpus == ()
    assert [e.path for e in probe.errors] == ["nvml:nvmlDeviceGetCount"]
    assert probe.driver_version == "550.90.07"
    assert fake.shutdown_calls == 1


def test_unparseable_remote_bus_id_is_an_error():
    rec = copy.deepcopy(load_recording("pcie_2gpu_no_nvlink"))
    rec["gpus"][0]["nvlinks"] = ["FFFFFFFF:FF:FF.F", "00000000:CA:00.0"]
    probe, _ = _probe(rec)
    assert probe.gpus[0].nvlinks == (NvLink("0000:ca:00.0", 1),)
    (err,) = probe.errors
    assert err.path == "nvml:nvmlDeviceGetNvLinkRemotePciInfo(gpu0,link0)"
    assert "FFFFFFFF:FF:FF.F" in err.error


def test_unexpected_value_is_an_error():
    rec = copy.deepcopy(load_recording("pcie_2gpu_no_nvlink"))
    rec["gpus"][1]["minor"] = "not-a-number"
    probe, _ = _probe(rec)
    (err,) = probe.errors
    assert err.path == "nvml:nvmlDeviceGetMinorNumber(gpu1)"
    assert "ValueError" in err.error
    assert probe.gpus[1].minor is None and probe.gpus[1].name == "NVIDIA A10"


@pytest.mark.parametrize(
    ("numa_node", "expected"),
    [
        (None, None),  # Not Supported: x86, GPU memory is no NUMA node
        (1, 1),  # Grace: the GPU's own memory node
        (-1, None),  # "none" spelt as c_int -1
        ({"error": "NVML_ERROR_FUNCTION_NOT_FOUND"}, None),  # a driver older than the call
    ],
)
def test_numa_node(numa_node, expected):
    rec = copy.deepcopy(load_recording("pcie_2gpu_no_nvlink"))
    rec["gpus"][0]["numa_node"] = numa_node
    probe, _ = _probe(rec)
    assert probe.gpus[0].numa_node == expected
    assert probe.errors == ()


def test_bytes_from_older_bindings():
    probe, _ = _probe("pcie_2gpu_no_nvlink", bytes_strings=True)
    assert probe.driver_version == "550.54.15"
    assert probe.gpus[0].name == "NVIDIA A10"
    assert probe.gpus[1].uuid == "GPU-000000ca-2f6d-0e45-b1c0-000000000001"


def test_functions_missing_from_an_older_binding():
    probe, _ = _probe("hgx_h100_8gpu", omit=("nvmlDeviceGetP2PStatus", "nvmlDeviceGetNumaNodeId"))
    assert probe.errors == ()
    assert all(g.p2p_ok == () and g.p2p_not_ok == () for g in probe.gpus)
    assert all(g.nvlinks == H100_LINKS for g in probe.gpus)


def test_p2p_index_is_passed_as_an_integer():
    # nvidia-ml-py spells the constant "= 0," - a tuple ctypes cannot convert.
    assert pynvml.NVML_P2P_CAPS_INDEX_READ in (0, (0,))
    probe, fake = _probe("pcie_2gpu_no_nvlink")
    assert probe.errors == ()
    p2p = [args for name, args in fake.calls if name == "nvmlDeviceGetP2PStatus"]
    assert len(p2p) == 2
    assert all(type(args[2]) is int and args[2] == 0 for args in p2p)


def test_cpu_affinity_words_above_64():
    rec = copy.deepcopy(load_recording("pcie_2gpu_no_nvlink"))
    rec["gpus"][0]["cpu_affinity"] = "0,63-65,127-128,200"
    probe, fake = _probe(rec)
    assert str(probe.gpus[0].cpu_affinity) == "0,63-65,127-128,200"
    (args,) = [a for n, a in fake.calls if n == "nvmlDeviceGetCpuAffinity" and a[0].index == 0]
    assert args[1] >= 4  # asked for enough 64-bit words


def test_snapshot_records_round_trip():
    probe, _ = _probe("dgx1_v100_8gpu")
    assert len(probe.gpus) == 8
    for gpu in probe.gpus:
        assert from_dict(NvmlGpu, to_dict(gpu)) == gpu


# -- pure helpers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "bdf"),
    [
        ("00000000:1B:00.0", "0000:1b:00.0"),
        (b"00000000:DF:00.0", "0000:df:00.0"),
        (b"0000:1B:00.0\x00\x00junk", "0000:1b:00.0"),  # busIdLegacy, NUL-padded buffer
        ("00000008:00:00.0", "0008:00:00.0"),  # Azure-style NVSwitch domain
        ("00010000:E1:00.1", "10000:e1:00.1"),  # VMD domain: sysfs prints %04x
        ("0002:c1:00.1", "0002:c1:00.1"),
        ("1B:00.0", "0000:1b:00.0"),
        ("", None),
        ("garbage", None),
        ("FFFFFFFF:FF:FF.F", None),
        (None, None),
        (17, None),
    ],
)
def test_normalize_bus_id(raw, bdf):
    assert normalize_bus_id(raw) == bdf


@pytest.mark.parametrize(
    ("words", "cpus"),
    [
        ([], set()),
        ([0b1011], {0, 1, 3}),
        ([0, 1], {64}),
        ([1 << 63, 1], {63, 64}),
        ((ctypes.c_ulonglong * 2)(0xF, 0x1), {0, 1, 2, 3, 64}),
    ],
)
def test_cpus_from_words(words, cpus):
    assert cpus_from_words(words) == cpus


# -- the fake and the recorder agree ---------------------------------------------------------


def test_fake_raises_real_pynvml_classes():
    nvml = make_fake("pcie_2gpu_no_nvlink")
    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetNvLinkState(handle, 0)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        nvml.nvmlDeviceGetHandleByIndex(2)
    assert isinstance(nvml.nvmlDeviceGetPciInfo(handle), pynvml.nvmlPciInfo_t)
    nvml.nvmlShutdown()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nvml.nvmlDeviceGetCount()


def _load_recorder():
    spec = importlib.util.spec_from_file_location("record_nvml", REPO / "scripts/record_nvml.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["hgx_h100_8gpu", "dgx1_v100_8gpu", "pcie_2gpu_no_nvlink", "driver_not_loaded"])
def test_recorder_reproduces_each_recording(monkeypatch, name):
    """scripts/record_nvml.py run against a replay writes the recording back."""
    recorder = _load_recorder()
    original = load_recording(name)
    monkeypatch.setattr(recorder, "pynvml", make_fake(original))
    again = recorder.record(original["description"])
    assert again["format"] == original["format"]
    assert again["init_error"] == original["init_error"]
    assert again["driver_version"] == original["driver_version"]
    assert len(again["gpus"]) == len(original["gpus"])
    for new, old in zip(again["gpus"], original["gpus"], strict=True):
        old = {"p2p_read": {}, "fabric": None, **old}  # (older recordings predate fabric info)
        assert new == old
    # ... and the replay of the re-recording probes the same
    assert probe_nvml(make_fake(again)) == probe_nvml(make_fake(original))
