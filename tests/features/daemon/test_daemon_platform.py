"""The daemon's view of NVIDIA's GPU platforms (topoagent.core.platform): the metrics and NFD
labels of a Data Direct tray and an Inline host, as set up by NVIDIA's guides and with faults,
and each GPU's NVLink fabric registration from NVML."""

from __future__ import annotations

import copy
import shutil
import subprocess

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fakenvml import load_recording, make_fake
from topoagent.core.api import scan
from topoagent.features.daemon.exports import nfd_features
from topoagent.features.daemon.metrics import render_text
from topoagent.features.daemon.status import Attempt, Status


def _samples(result) -> dict[str, list]:
    text = render_text(Status(started_at=0.0, result=result, last=Attempt(0.0, True, 0.1))).decode()
    if shutil.which("promtool"):
        checked = subprocess.run(
            ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, check=False, timeout=60
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


@pytest.mark.parametrize(("name", "kind"), [("gb300-tray", "data_direct"), ("hgx-b300", "inline")])
def test_a_platform_set_up_as_its_guide_says_pages_nothing(fixture_root, name, kind):
    result = scan(fixture_root(name), nvml="off")
    got = _samples(result)
    assert [s.labels["kind"] for s in got["topoagent_platform_info"]] == [kind]
    acs = got["topoagent_platform_acs_ok"]
    assert acs and all(s.value == 1 for s in acs)
    critical = [s for s in got["topoagent_findings"] if s.labels.get("severity") == "critical"]
    assert all(s.value == 0 for s in critical)
    labels = nfd_features(result, degraded_links=False)
    assert labels["topoagent.platform.kind"] == kind.replace("_", "-")
    assert labels["topoagent.platform.acs-ok"] == "true"
    # Ready means proven: NCCL reaches a Data Direct NIC over DMA-BUF only (no peer-memory module),
    # which a scan does not yet prove (the open GPU module and kernel >= 5.12: fix peermem reads them)
    assert labels["topoagent.gdr.ready"] == ("false" if kind == "data_direct" else "true")


def test_a_platform_port_off_its_mask_is_a_zero_and_not_gdr_ready(fixture_root):
    result = scan(fixture_root("gb300-tray-faults"), nvml="off")
    got = _samples(result)
    # One series per role of port (the series budget): the finding names the ports and masks.
    ok = {s.labels["role"]: s.value for s in got["topoagent_platform_acs_ok"]}
    ports = {rule.bdf: rule for rule in result.topology.platform.acs}
    off = {
        bdf: ports[bdf].mask
        for f in result.findings
        if f.code == "ACS_PLATFORM_MISMATCH"
        for s in f.subjects
        if (d := result.topology.by_id(s)) is not None and (bdf := d.key) in ports
    }
    assert off == {
        "0000:00:00.0": "xx111x1",
        "0008:02:01.0": "xx101x1",
        "0009:02:00.0": "xx110x1",
        "0019:00:00.0": "xx111x0",
    }
    assert {role for role, value in ok.items() if value == 0} == {ports[bdf].role.value for bdf in off}
    assert set(ok) == {rule.role.value for rule in ports.values()}
    labels = nfd_features(result, degraded_links=False)
    assert labels["topoagent.platform.acs-ok"] == "false"
    assert labels["topoagent.gdr.ready"] == "false"


def test_fabric_state_and_clique_per_gpu(fixture_root):
    rec = copy.deepcopy(load_recording("gb200_nvl72_tray"))
    rec["gpus"][1]["fabric"] = {"state": "IN_PROGRESS", "clique_id": 0}
    result = scan(fixture_root("gb200-tray"), nvml=make_fake(rec))
    got = _samples(result)
    state = {s.labels["gpu_bdf"]: s.value for s in got["topoagent_gpu_fabric_state"]}
    assert state == {"0008:01:00.0": 3, "0009:01:00.0": 2, "0018:01:00.0": 3, "0019:01:00.0": 3}
    clique = {s.labels["gpu_bdf"]: s.value for s in got["topoagent_gpu_fabric_clique"]}
    assert clique == {"0008:01:00.0": 32766, "0018:01:00.0": 32766, "0019:01:00.0": 32766}
    labels = nfd_features(result, degraded_links=False)
    assert labels["topoagent.nvlink.fabric-state"] == "mixed"
    assert labels["topoagent.nvlink.clique"] == "mixed"
