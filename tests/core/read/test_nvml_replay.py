"""A capture's NVML recording (tools/nvml.json) replays through --root as the live probe saw it."""

import copy
import json

import pytest

from tests.fakenvml import FIXTURES, load_recording, make_fake
from topoagent.core.api import scan
from topoagent.core.parse.nvml_recording import NvmlRecordingError, parse_nvml_recording
from topoagent.core.read import NVML_RECORDING
from topoagent.core.read.nvml import probe_nvml


@pytest.mark.parametrize("name", sorted(p.stem for p in FIXTURES.glob("*.json")))
def test_replay_equals_the_live_probe(name):
    """The pure replay gives exactly what probe_nvml gets from pynvml serving the recording."""
    rec = load_recording(name)
    gpus, driver, why_not = parse_nvml_recording(json.dumps(rec))
    live = probe_nvml(make_fake(rec))
    if rec.get("init_error"):
        assert why_not and live.source.status == "unavailable" and gpus == live.gpus == ()
        return
    assert why_not is None and live.source.status in ("ok", "partial")
    assert (gpus, driver) == (live.gpus, live.driver_version)


def test_replay_keeps_p2p_failures():
    rec = copy.deepcopy(load_recording("hgx_h100_8gpu"))
    rec["gpus"][0]["p2p_read"] = {"3": "NOT_SUPPORTED"}
    gpus, _, _ = parse_nvml_recording(json.dumps(rec))
    assert gpus[0].p2p_not_ok == (gpus[3].bdf,)
    assert gpus[0].p2p_not_ok == probe_nvml(make_fake(rec)).gpus[0].p2p_not_ok


@pytest.mark.parametrize(
    "text, says",
    [
        ("", "not JSON"),
        ("[]", "not an NVML recording"),
        ('{"format": "something-else"}', "not an NVML recording"),
        ('{"format": "topoagent-nvml-recording/1"}', "no 'gpus' list"),
        ('{"format": "topoagent-nvml-recording/1", "gpus": "x"}', "no 'gpus' list"),
    ],
)
def test_bad_recordings_are_one_clear_error(text, says):
    with pytest.raises(NvmlRecordingError, match=says):
        parse_nvml_recording(text)


def test_a_host_without_nvml_records_why():
    gpus, driver, why = parse_nvml_recording(
        json.dumps({"format": "topoagent-nvml-recording/1", "init_error": "NVML_ERROR_DRIVER_NOT_LOADED"})
    )
    assert gpus == () and driver is None and "DRIVER_NOT_LOADED" in why


def test_a_capture_with_a_recording_replays_its_nvlinks(fixture_root, scratch_root):
    root = scratch_root("dgx-h100")
    (root / NVML_RECORDING).parent.mkdir()
    (root / NVML_RECORDING).write_text(json.dumps(load_recording("hgx_h100_8gpu")))
    replayed = scan(root)  # nvml="auto": the recording
    live = scan(fixture_root("dgx-h100"), nvml=make_fake("hgx_h100_8gpu"))
    assert [p.token for p in replayed.paths] == [p.token for p in live.paths]
    assert replayed.path("gpu0", "gpu7").token == "NV18"
    status = next(s for s in replayed.snapshot.sources if s.name == "nvml")
    assert status.status == "ok" and "replayed" in status.detail
    assert "nvml" not in {s.name for s in scan(root, nvml="off").snapshot.sources}


def test_a_root_without_a_recording_adds_no_nvml_source(fixture_root):
    assert "nvml" not in {s.name for s in scan(fixture_root("workstation")).snapshot.sources}


def test_an_unreadable_recording_is_an_error_status(scratch_root):
    root = scratch_root("workstation")
    (root / NVML_RECORDING).parent.mkdir()
    (root / NVML_RECORDING).write_text("{not json")
    status = next(s for s in scan(root).snapshot.sources if s.name == "nvml")
    assert status.status == "error" and "not JSON" in status.detail
