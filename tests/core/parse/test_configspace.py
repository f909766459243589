import pytest

from tests.configbytes import config_bytes
from topoagent.core.parse.configspace import ConfigSpaceError, parse_config_space
from topoagent.core.snapshot import LinkInfo


@pytest.mark.parametrize(
    "kwargs, port_type, link",
    [
        ({"port_type": 0}, 0, LinkInfo(16.0, 16, 16.0, 16)),
        ({"header_type": 1, "port_type": 4, "buses": (0, 1, 5)}, 4, LinkInfo(16.0, 16, 16.0, 16)),
        (
            {"header_type": 1, "port_type": 5, "link_cap": (32.0, 16), "link_status": (32.0, 16)},
            5,
            LinkInfo(32.0, 16, 32.0, 16),
        ),
        (
            {"header_type": 1, "port_type": 6, "link_cap": (32.0, 16), "link_status": (16.0, 8)},
            6,
            LinkInfo(16.0, 8, 32.0, 16),
        ),
        ({"port_type": 0, "link_cap": (8.0, 8), "link_status": (2.5, 8)}, 0, LinkInfo(2.5, 8, 8.0, 8)),
        ({"port_type": 9, "link_cap": None, "link_status": None}, 9, LinkInfo(None, None, None, None)),
        ({"port_type": None}, None, None),  # conventional PCI: no PCIe capability
    ],
)
def test_pcie_capability(kwargs, port_type, link):
    cs = parse_config_space(config_bytes(**kwargs))
    assert cs.pcie_port_type == port_type
    assert cs.link == link


def test_bridge_bus_numbers():
    cs = parse_config_space(config_bytes(header_type=0x81, port_type=4, buses=(0, 0x17, 0x1C)))
    assert cs.header_type == 1  # bit 7 is the multi-function flag
    assert (cs.secondary_bus, cs.subordinate_bus) == (0x17, 0x1C)


@pytest.mark.parametrize(
    "ctl, enabled, redirects",
    [
        (0x0000, (), False),
        (0x001D, ("SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"), True),
        (0x0020, ("EgressCtrl",), True),
        (0x0011, ("SrcValid", "UpstreamFwd"), False),
        (0x007F, ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans"), True),
    ],
)
def test_acs(ctl, enabled, redirects):
    cs = parse_config_space(config_bytes(header_type=1, port_type=6, acs=(0x005F, ctl)))
    assert cs.extended_readable
    assert cs.extended_caps == (0x0001, 0x000D)
    assert cs.acs is not None and cs.acs.capability == 0x005F
    assert cs.acs.enabled() == enabled
    assert cs.acs.redirects_p2p is redirects


def test_no_acs_capability_on_full_view():
    cs = parse_config_space(config_bytes(header_type=1, port_type=6))
    assert cs.extended_readable and cs.acs is None and cs.extended_caps == (0x0001,)


@pytest.mark.parametrize("size", [64, 256])
def test_unprivileged_and_conventional_views(size):
    cs = parse_config_space(config_bytes(size=size, header_type=1, port_type=6, acs=(0x5F, 0x1D)))
    assert cs.size == size
    assert not cs.extended_readable and cs.acs is None  # unknown, not "no ACS"
    if size == 64:
        assert cs.pcie_port_type is None  # the capability list starts past the 64-byte view
    else:
        assert cs.pcie_port_type == 6


@pytest.mark.parametrize("data", [b"", b"\x86\x80" * 10, bytes(63)])
def test_truncated(data):
    with pytest.raises(ConfigSpaceError, match="truncated"):
        parse_config_space(data)


def test_absent_device_reads_all_ones():
    with pytest.raises(ConfigSpaceError, match="absent"):
        parse_config_space(b"\xff" * 256)


@pytest.mark.parametrize(
    "kwargs, subsystem",
    [
        ({"header_type": 0}, (0, 0)),  # a type-0 header's registers at 0x2C (zero here)
        ({"header_type": 1, "port_type": 6, "ssvid": (0x10DE, 0x1234)}, (0x10DE, 0x1234)),
        ({"header_type": 1, "port_type": 6}, (0, 0)),  # whole list read, no SSVID: the kernel shows 0
        ({"header_type": 1, "port_type": 6, "ssvid": (0x10DE, 0x1234), "size": 64}, None),  # list unseen
        ({"header_type": 2, "port_type": None}, None),  # CardBus: sysfs says
    ],
)
def test_subsystem_ids_as_the_kernel_shows_them(kwargs, subsystem):
    """drivers/pci/probe.c pci_setup_device: a bridge's subsystem ids come from its SSVID
    capability, and stay 0 without one."""
    assert parse_config_space(config_bytes(**kwargs)).subsystem == subsystem


def test_capability_loop_terminates():
    b = bytearray(config_bytes(size=256, port_type=None))
    b[0x06] = 0x10
    b[0x34] = 0x40
    b[0x40], b[0x41] = 0x01, 0x50
    b[0x50], b[0x51] = 0x05, 0x40  # 0x50 -> 0x40 -> 0x50 ...
    cs = parse_config_space(bytes(b))
    assert cs.pcie_port_type is None


def test_extended_loop_terminates():
    import struct

    b = bytearray(config_bytes(port_type=0))
    struct.pack_into("<I", b, 0x100, 0x0001 | (0x100 << 20))  # points at itself
    cs = parse_config_space(bytes(b))
    assert cs.extended_caps == (0x0001,)


def test_random_bytes_never_crash():
    import random

    rng = random.Random(7)
    for _ in range(300):
        n = rng.choice([64, 100, 256, 300, 4096])
        data = bytes([0x86, 0x80]) + bytes(rng.getrandbits(8) for _ in range(n - 2))
        parse_config_space(data)


def test_virtual_function_ids_read_ffff_by_design():
    """SR-IOV VFs answer 0xffff for Vendor/Device ID; that is no absent device."""
    data = bytes.fromhex("ffffffff") + bytes(60)
    with pytest.raises(ConfigSpaceError):
        parse_config_space(data)
    assert parse_config_space(data, virtual_function=True).size == 64


@pytest.mark.parametrize(
    ("kwargs", "size", "vf_device", "caps"),
    [
        ({"vendor": 0x15B3, "device": 0x101D, "vf_device": 0x101E}, 4096, 0x101E, (0x0001, 0x0010)),
        (
            {"vendor": 0x15B3, "device": 0x101D, "vf_device": 0x101E, "acs": (0x5F, 0x1D)},
            4096,
            0x101E,
            (0x0001, 0x000D, 0x0010),
        ),
        ({"vendor": 0x15B3, "device": 0x101D, "vf_device": 0x101E}, 256, None, ()),  # extended space unseen
        ({"vendor": 0x15B3, "device": 0x101D}, 4096, None, (0x0001,)),  # no SR-IOV capability
    ],
)
def test_sriov_vf_device_id(kwargs, size, vf_device, caps):
    """A PF's SR-IOV capability names its VFs' device id (VF Device ID, +0x1A)."""
    cs = parse_config_space(config_bytes(size=size, **kwargs))
    assert (cs.sriov.vf_device if cs.sriov else None) == vf_device and cs.extended_caps == caps


def test_sriov_capability_registers():
    from topoagent.core.snapshot import SriovCap

    cs = parse_config_space(config_bytes(vendor=0x15B3, device=0x101D, vf_device=0x101E, vfs=(4, 2, 1)))
    assert cs.sriov == SriovCap(total_vfs=8, num_vfs=4, first_offset=2, stride=1, vf_device=0x101E)
