"""Link quirks (topoagent.core.quirks): functions whose link registers mean nothing raise no link
finding; everything else still does.  One test per quirk."""

import pytest

from tests.core.test_bad_input import BDF, minimal_tree
from topoagent.core.api import scan
from topoagent.core.quirks import LINK_QUIRKS, link_quirk

DEV = f"sys/devices/pci0000:16/0000:16:01.0/{BDF}"


def _degraded_nic(tmp_path, device_id: str):
    root = minimal_tree(tmp_path)
    dev = root / DEV
    for name, value in {
        "class": "0x020000",
        "vendor": "0x8086",
        "device": device_id,
        "current_link_width": "1",
        "max_link_width": "8",
        "current_link_speed": "2.5 GT/s PCIe",
        "max_link_speed": "8.0 GT/s PCIe",
    }.items():
        (dev / name).write_text(value + "\n")
    return root


def _link_findings(root):
    return [f for f in scan(root, nvml="off").findings if f.code.startswith("LINK_")]


def test_x722_lan_function_raises_no_link_finding(tmp_path):
    assert _link_findings(_degraded_nic(tmp_path, "0x37d2")) == []


def test_another_intel_nic_at_x1_of_x8_still_does(tmp_path):
    codes = {f.code for f in _link_findings(_degraded_nic(tmp_path, "0x1572"))}
    assert codes == {"LINK_WIDTH_DEGRADED", "LINK_SPEED_DEGRADED"}


def test_rc_integrated_endpoint_raises_no_link_finding(tmp_path):

    root = _degraded_nic(tmp_path, "0x1572")
    # A PCIe capability with Device/Port Type 9 (RCiEP) at 0x40, in a 256-byte config space.
    cfg = bytearray(256)
    cfg[0:4] = bytes.fromhex("8680721a")  # vendor 8086, device 1572 (little endian)
    cfg[0x06] = 0x10  # status: capability list present
    cfg[0x34] = 0x40
    cfg[0x40], cfg[0x41] = 0x10, 0x00  # PCIe capability, end of list
    cfg[0x42] = 0x92  # version 2, Device/Port Type 9
    (root / DEV / "config").write_bytes(bytes(cfg))
    assert _link_findings(root) == []


@pytest.mark.parametrize("quirk", LINK_QUIRKS, ids=lambda q: q.name)
def test_every_quirk_names_a_public_reference(quirk):
    assert quirk.reference and quirk.why
    assert quirk.devices or quirk.port_types


def test_lookup():
    assert link_quirk(0x8086, 0x37D0, None).name.startswith("Intel X722")
    assert link_quirk(0x10DE, 0x2330, 9).name == "Root Complex Integrated Endpoint"
    assert link_quirk(0x10DE, 0x2330, 0) is None
