"""NVML joined to sysfs: NV# classes, P2P findings, and NVML's absence as a source status."""

import copy

from tests.fakenvml import load_recording, make_fake
from topoagent.core.api import scan
from topoagent.core.findings import CATALOGUE
from topoagent.core.findings.doc import example_text
from topoagent.core.render.matrix import matrix_of


def test_hgx_h100_gpus_are_nv18(fixture_root):
    result = scan(fixture_root("dgx-h100"), nvml=make_fake("hgx_h100_8gpu"))
    tokens = {(p.a, p.b): p.token for p in result.paths}
    gpus = [g.id for g in result.topology.gpus]
    assert len(gpus) == 8
    for i, a in enumerate(gpus):
        for b in gpus[i + 1 :]:
            assert tokens[(a, b)] == "NV18"
    # GPU-NIC classes stay PCIe: NVLink joins GPUs only; every GPU keeps its PIX rail.
    assert all(r.cls is not None and r.cls.name == "PIX" for r in result.rails.rails)
    m = matrix_of(result)
    assert m.cell("GPU0", "GPU7") == "NV18"
    sources = {s.name: s.status for s in result.snapshot.sources}
    assert sources["nvml"] == "ok"
    assert result.snapshot.driver_version
    assert not [f for f in result.findings if f.code == "NVLINK_P2P_DISABLED"]


def test_p2p_not_ok_over_nvlink_is_critical(fixture_root):
    rec = copy.deepcopy(load_recording("hgx_h100_8gpu"))
    rec["gpus"][0]["p2p_read"] = {"3": "NOT_SUPPORTED"}  # NVML_P2P_STATUS_ suffix
    result = scan(fixture_root("dgx-h100"), nvml=make_fake(rec))
    found = [f for f in result.findings if f.code == "NVLINK_P2P_DISABLED"]
    assert [f.subjects for f in found] == [("gpu0", "gpu3")]
    assert found[0].severity.label == "critical"
    assert example_text(found[0]) == CATALOGUE["NVLINK_P2P_DISABLED"].examples[0].text  # docs/findings.md's


def test_driver_not_loaded_is_a_source_status_not_an_error(fixture_root):
    result = scan(fixture_root("dgx-h100"), nvml=make_fake("driver_not_loaded"))
    nvml = next(s for s in result.snapshot.sources if s.name == "nvml")
    assert nvml.status == "unavailable" and "Driver Not Loaded" in (nvml.detail or "")
    assert all(p.nvlinks == 0 for p in result.paths)


def test_fake_root_never_asks_nvml(fixture_root):
    result = scan(fixture_root("dgx-h100"))
    assert "nvml" not in {s.name for s in result.snapshot.sources}
