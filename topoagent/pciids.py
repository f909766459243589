"""Names for the PCI ids that matter on GPU servers, and how to classify a function.

A short built-in table, not the whole pci.ids database: names stay the same on every host,
and a function we have no name for gets a readable fallback (``NVIDIA device 2330``).
"""

from __future__ import annotations

VENDORS = {
    0x10DE: "NVIDIA",
    0x15B3: "Mellanox",
    0x1D0F: "Amazon",
    0x1002: "AMD",
    0x1022: "AMD",
    0x8086: "Intel",
    0x10B5: "PLX",
    0x1000: "Broadcom",
    0x14E4: "Broadcom",
    0x144D: "Samsung",
    0x1AF4: "Red Hat virtio",
    0x1B36: "Red Hat",
    0x1A03: "ASPEED",
    0x102B: "Matrox",
    0x15AD: "VMware",
    0x1077: "QLogic",
    0x1924: "Solarflare",
    0x1FC9: "Tehuti",
    0x1DD8: "AMD Pensando",
    0x19E5: "Huawei",
    0x1E3B: "Xsight",
    0x1CC4: "Union Memory",
}

DEVICES = {
    (0x10DE, 0x2330): "H100 SXM5 80GB",
    (0x10DE, 0x2331): "H100 PCIe",
    (0x10DE, 0x2335): "H200 SXM 141GB",
    (0x10DE, 0x2342): "GH100 [GH200 120GB / 480GB]",
    (0x10DE, 0x20B0): "A100 SXM4 40GB",
    (0x10DE, 0x20B2): "A100 SXM4 80GB",
    (0x10DE, 0x20B5): "A100 PCIe 80GB",
    (0x10DE, 0x20F1): "A100 PCIe 40GB",
    (0x10DE, 0x1DB1): "V100 SXM2 16GB",
    (0x10DE, 0x1DB5): "V100 SXM2 32GB",
    (0x10DE, 0x1DB4): "V100 PCIe 16GB",
    (0x10DE, 0x2684): "GeForce RTX 4090",
    (0x10DE, 0x22BA): "AD102 High Definition Audio",
    (0x10DE, 0x2204): "GeForce RTX 3090",
    (0x10DE, 0x26B9): "L40S",
    (0x10DE, 0x27B8): "L4",
    (0x10DE, 0x1AF1): "NVSwitch (V100)",
    (0x10DE, 0x1AF2): "NVSwitch (A100)",
    (0x10DE, 0x22A3): "NVSwitch (H100)",
    (0x15B3, 0x1017): "ConnectX-5",
    (0x15B3, 0x1019): "ConnectX-5 Ex",
    (0x15B3, 0x101B): "ConnectX-6",
    (0x15B3, 0x101D): "ConnectX-6 Dx",
    (0x15B3, 0x101E): "ConnectX Family VF",
    (0x15B3, 0x101F): "ConnectX-6 Lx",
    (0x15B3, 0x1021): "ConnectX-7",
    (0x15B3, 0x1023): "ConnectX-8",
    (0x15B3, 0xA2D6): "BlueField-2",
    (0x15B3, 0xA2DC): "BlueField-3",
    (0x15B3, 0x1003): "ConnectX-3",
    (0x15B3, 0x673C): "ConnectX-2 (MT26428)",
    (0x1D0F, 0xEFA0): "Elastic Fabric Adapter (EFA)",
    (0x1D0F, 0xEFA1): "Elastic Fabric Adapter (EFA)",
    (0x1D0F, 0xEFA2): "Elastic Fabric Adapter (EFA)",
    (0x1D0F, 0xEC20): "Elastic Network Adapter (ENA)",
    (0x1D0F, 0x8061): "NVMe EBS Controller",
    (0x1D0F, 0xCD01): "NVMe SSD Controller",
    (0x8086, 0x1593): "Ethernet E810-C",
    (0x8086, 0x1592): "Ethernet E810-C",
    (0x8086, 0x1572): "Ethernet X710",
    (0x8086, 0x1521): "Ethernet I350",
    (0x8086, 0x10FB): "Ethernet 82599",
    (0x8086, 0x352A): "Sapphire Rapids PCIe Root Port",
    (0x8086, 0x0D57): "Host bridge",
    (0x1022, 0x14AB): "Genoa PCIe Root Port",
    (0x1022, 0x1483): "Starship/Matisse GPP Bridge",
    (0x1000, 0xC030): "PEX890xx PCIe Gen5 Switch",
    (0x1000, 0xC010): "PEX880xx PCIe Gen4 Switch",
    (0x1000, 0x02B2): "Virtual PCIe Placeholder Endpoint",
    (0x10B5, 0x8796): "PEX 8796 PCIe Gen3 Switch",
    (0x10B5, 0x8747): "PEX 8747 PCIe Gen3 Switch",
    (0x144D, 0xA80A): "NVMe SSD PM9A3",
    (0x1AF4, 0x1000): "Virtio network device",
    (0x1AF4, 0x1041): "Virtio 1.0 network device",
    (0x1AF4, 0x1042): "Virtio 1.0 block device",
    (0x1AF4, 0x1001): "Virtio block device",
}

#: Class-code prefixes (base class, subclass) and their names, for functions without a name.
CLASSES = {
    0x0300: "VGA controller",
    0x0302: "3D controller",
    0x0380: "Display controller",
    0x0200: "Ethernet controller",
    0x0207: "InfiniBand controller",
    0x0280: "Network controller",
    0x0108: "Non-Volatile memory controller",
    0x0106: "SATA controller",
    0x0104: "RAID controller",
    0x0107: "Serial Attached SCSI controller",
    0x0600: "Host bridge",
    0x0601: "ISA bridge",
    0x0604: "PCI bridge",
    0x0680: "Bridge",
    0x0880: "System peripheral",
    0x0C03: "USB controller",
    0x0C05: "SMBus",
    0x0C06: "InfiniBand",
    0x0B40: "Co-processor",
    0x1200: "Processing accelerator",
    0x0403: "Audio device",
}

#: GPUs attached to a Grace CPU over NVLink-C2C (GH200, GB200).  NCCL calls their path to a
#: NIC on the same CPU "P2C" and enables GPUDirect RDMA there by default
#: (NCCL_NET_GDR_LEVEL defaults to P2C on Grace; REFERENCE §4-5).
C2C_GPUS = frozenset({(0x10DE, 0x2342), (0x10DE, 0x2348), (0x10DE, 0x2941)})

#: Vendors whose display controllers are BMC or emulated consoles, not compute GPUs: an
#: ASPEED AST2500 on every server board must not become ``gpu0`` and shift the numbering that
#: CUDA and nvidia-smi use.
CONSOLE_DISPLAY_VENDORS = frozenset({0x1A03, 0x102B, 0x1013, 0x1234, 0x15AD, 0x1B36, 0x1414})


def device_name(vendor: int | None, device: int | None, class_code: int | None) -> str:
    """A readable name: ``NVIDIA H100 SXM5 80GB``, else vendor + class + device id."""
    cname = CLASSES.get(class_code >> 8) if class_code is not None else None
    if vendor is None:
        return f"{cname or 'PCI function'} (ids unknown)"
    vname = VENDORS.get(vendor, f"vendor {vendor:04x}")
    known = DEVICES.get((vendor, device or -1))
    if known:
        return f"{vname} {known}"
    dev = f"{device:04x}" if device is not None else "????"
    return f"{vname} {cname or 'device'} {dev}"
