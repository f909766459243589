"""What a PCI function is for placement, by class code and by name: GPU-class compute devices of
every vendor are GPUs (RCCL and oneCCL apply NCCL's PCIe rules to them), cloud NICs are NICs,
and what only looks like a GPU stays what it is."""

import pytest

from topoagent.core.pci import DeviceKind, kind_from_name, kind_of

AMD, INTEL, NVIDIA, AMAZON, HABANA = 0x1002, 0x8086, 0x10DE, 0x1D0F, 0x1DA3


@pytest.mark.parametrize(
    "class_code, vendor, kind",
    [
        (0x030200, NVIDIA, DeviceKind.GPU),  # H100: 3D controller
        (0x120000, AMD, DeviceKind.GPU),  # Instinct MI300A/MI300X: Processing accelerators
        (0x038000, AMD, DeviceKind.GPU),  # Instinct MI250X: Display controller
        (0x038000, INTEL, DeviceKind.GPU),  # Data Center GPU Max (PF and its VFs)
        (0x120000, HABANA, DeviceKind.ACCELERATOR),  # Gaudi: an accelerator with its own NICs
        (0x0B4000, INTEL, DeviceKind.ACCELERATOR),  # QuickAssist: a co-processor, no GPU
        (0x120000, None, DeviceKind.ACCELERATOR),
        (0x020000, AMAZON, DeviceKind.NIC),  # ENA
        (0x030000, 0x1A03, DeviceKind.OTHER),  # ASPEED BMC console
    ],
)
def test_kind_by_class(class_code, vendor, kind):
    assert kind_of(class_code, vendor) is kind


@pytest.mark.parametrize(
    "name, vendor, device, kind",
    [
        # lspci -tv names (no class code), as pci.ids spells them
        ("Advanced Micro Devices, Inc. [AMD/ATI] Aqua Vanjaram [Instinct MI300X]", AMD, None, "gpu"),
        ("Advanced Micro Devices, Inc. [AMD/ATI] Device 74a0", AMD, 0x74A0, "gpu"),  # the built-in table names it
        ("Advanced Micro Devices, Inc. [AMD/ATI] Aldebaran/MI200 [Instinct MI250X/MI250]", AMD, None, "gpu"),
        ("Intel Corporation Ponte Vecchio XT (1 Tile) [Data Center GPU Max 1100]", INTEL, None, "gpu"),
        ("Intel Corporation Ponte Vecchio XT (2 Tile) [Data Center GPU Max 1550]", INTEL, None, "gpu"),
        ("Advanced Micro Devices, Inc. [AMD/ATI] Aldebaran/MI200 HD Audio", AMD, None, None),
        ("Amazon.com, Inc. Elastic Network Adapter (ENA)", AMAZON, None, "nic"),
        ("Amazon.com, Inc. Device 0ec2", AMAZON, 0x0EC2, "nic"),
        ("Amazon.com, Inc. Elastic Fabric Adapter (EFA)", AMAZON, 0xEFA1, "nic"),
        ("Intel Corporation Sapphire Rapids QAT", INTEL, None, None),
    ],
)
def test_kind_by_name(name, vendor, device, kind):
    assert kind_from_name(name, vendor, device) == kind


@pytest.mark.parametrize(
    "class_code, vendor, kind",
    [
        (0x068000, NVIDIA, DeviceKind.NVSWITCH),  # 10de:22a3 NVSwitch (H100), 10de:1af1 (A100)
        (0x068000, 0x8086, DeviceKind.BRIDGE),  # another vendor's "other" bridge stays a bridge
        (0x060400, NVIDIA, DeviceKind.BRIDGE),  # a PCI-to-PCI bridge of NVIDIA's is no NVSwitch
        (0x060000, NVIDIA, DeviceKind.BRIDGE),
    ],
)
def test_nvswitch_is_a_kind_of_its_own(class_code, vendor, kind):
    assert kind_of(class_code, vendor) is kind


def test_nvswitches_numbered_apart_and_never_a_hop(fixture_root):
    """On the DGX H100 fixture the four NVSwitch functions are nvswitch0..3 in PCI order, no
    device hangs below one, and the bridge ids do not count them."""
    from topoagent.core.api import scan

    r = scan(fixture_root("dgx-h100"), nvml="off")
    topo = r.topology
    switches = topo.of_kind(DeviceKind.NVSWITCH)
    assert [(d.id, d.bdf) for d in switches] == [
        ("nvswitch0", "0000:e7:00.0"),
        ("nvswitch1", "0000:e8:00.0"),
        ("nvswitch2", "0000:e9:00.0"),
        ("nvswitch3", "0000:ea:00.0"),
    ]
    assert all(d.role is None and "NVSwitch" in d.name for d in switches)
    assert not any("NVSwitch" in d.name for d in topo.of_kind(DeviceKind.BRIDGE))
    bdfs = {d.bdf for d in switches}
    assert not any(bdfs & set(d.ancestors) for d in topo.devices)
    assert all(not topo.children(b) for b in bdfs)


def test_an_nvswitch_named_in_a_paste_is_an_nvswitch():
    # lspci -tv has no class code: the name says what kind_of says from class 0x0680
    assert kind_from_name("NVIDIA Corporation GH100 [H100 NVSwitch]", NVIDIA, None) == "nvswitch"
    assert kind_of(0x068000, NVIDIA) is DeviceKind.NVSWITCH
