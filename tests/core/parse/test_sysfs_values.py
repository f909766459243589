import pytest

from topoagent.core.parse import sysfs_values as sv


@pytest.mark.parametrize(
    "text, gts",
    [
        ("32.0 GT/s PCIe", 32.0),
        ("16.0 GT/s PCIe", 16.0),
        ("2.5 GT/s PCIe", 2.5),
        ("16 GT/s", 16.0),  # kernels <= 5.6
        ("8 GT/s", 8.0),
        ("5.0 GT/s", 5.0),
        ("Unknown", None),  # pci_speed_string() for an unknown code
        ("Unknown speed", None),
        ("", None),
    ],
)
def test_link_speed(text, gts):
    assert sv.parse_link_speed(text) == gts


def test_link_speed_rejects_garbage():
    with pytest.raises(ValueError):
        sv.parse_link_speed("fast")


@pytest.mark.parametrize("text, width", [("16", 16), ("8", 8), ("1", 1), ("0", None), ("255", None)])
def test_link_width(text, width):
    assert sv.parse_link_width(text) == width


@pytest.mark.parametrize("text, node", [("0", 0), ("3", 3), ("-1", None), ("255", 255)])
def test_numa_node(text, node):
    assert sv.parse_numa_node(text) == node


@pytest.mark.parametrize("text, value", [("0x10de", 0x10DE), ("0x030200", 0x030200), ("0X15B3", 0x15B3)])
def test_hex_id(text, value):
    assert sv.parse_hex_id(text) == value


@pytest.mark.parametrize("text", ["10de", "", "0xzz"])
def test_hex_id_rejects(text):
    with pytest.raises(ValueError):
        sv.parse_hex_id(text)


def test_node_meminfo():
    text = "Node 0 MemTotal:       263921240 kB\nNode 0 MemFree:        1 kB\n"
    assert sv.parse_node_meminfo_total(text) == 263921240 * 1024
    assert sv.parse_node_meminfo_total("Node 3 MemFree: 1 kB") is None


@pytest.mark.parametrize(
    "text, state, rate",
    [("4: ACTIVE", "ACTIVE", None), ("1: DOWN", "DOWN", None)],
)
def test_rdma_state(text, state, rate):
    assert sv.parse_rdma_state(text) == state


@pytest.mark.parametrize(
    "text, rate",
    [
        ("400 Gb/sec (4X NDR)", 400.0),
        ("56 Gb/sec (4X FDR)", 56.0),
        ("2.5 Gb/sec (1X SDR)", 2.5),
        ("100 Gb/sec (2X HDR)", 100.0),
    ],
)
def test_rdma_rate(text, rate):
    assert sv.parse_rdma_rate(text) == rate


@pytest.mark.parametrize("text, mbps", [("100000", 100000), ("-1", None), ("", None), ("4294967295", None)])
def test_net_speed(text, mbps):
    assert sv.parse_net_speed(text) == mbps


def test_cpus_allowed():
    status = "Name:\tbash\nCpus_allowed:\tff\nCpus_allowed_list:\t0-3,6\nMems_allowed:\t1\n"
    assert str(sv.parse_cpus_allowed(status)) == "0-3,6"
    assert sv.parse_cpus_allowed("Name:\tx\n") is None


@pytest.mark.parametrize(
    "cpulist, mask, expected",
    [("0-3", None, "0-3"), (None, "0000000f", "0-3"), (None, "00ff,00000000", "32-39"), (None, None, None)],
)
def test_local_cpus(cpulist, mask, expected):
    got = sv.parse_local_cpus(cpulist, mask)
    assert (None if got is None else str(got)) == expected


@pytest.mark.parametrize(
    "text, flag",
    [
        ("processor : 0\nflags\t\t: fpu vme hypervisor lahf_lm\n", True),
        ("processor : 0\nflags\t\t: fpu vme lahf_lm\n", False),
        ("cpu\t\t: POWER9 (raw), altivec supported\n", False),
    ],
)
def test_cpuinfo_hypervisor(text, flag):
    assert sv.parse_cpuinfo_hypervisor(text) is flag


@pytest.mark.parametrize("text", ["0x1_0", "0x\u0661", "0x", "10de", "0x10de0000000000000000"])
def test_hex_ids_are_ascii_hex_only(text):
    with pytest.raises(ValueError):
        sv.parse_hex_id(text)
