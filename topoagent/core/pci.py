"""One home for PCI knowledge: vendor, device and class tables, ACS bits, port types, and the
predicates that say what a function is.  Used alike by the sysfs source, the offline (pasted
text) sources, the topology and the renderers, so a fact about a PCI id is written once.

Names: a short built-in table, not the whole pci.ids database, so names stay the same on every
host; a function we have no name for gets a readable fallback (``NVIDIA device 2330``).
Class codes are the PCI-SIG's (PCI Code and ID Assignment Specification); ``class16`` is the
base class and subclass (``0x0302``), ``class_code`` the full 24-bit value (``0x030200``).
"""

from __future__ import annotations

import re
from enum import Enum

NVIDIA = 0x10DE
MELLANOX = 0x15B3
AMAZON = 0x1D0F
BROADCOM_LSI = 0x1000  # Broadcom / LSI: the PEX88xxx/PEX890xx switches
INTEL = 0x8086
AMD_ATI = 0x1002  # AMD's GPUs and Instinct accelerators (0x1022 is AMD's CPUs and chipsets)

#: Vendors whose "Processing accelerator" (0x1200) functions are GPUs for placement: AMD
#: Instinct MI300A/MI300X present that class (pci.ids), and RCCL applies NCCL's PCIe rules to
#: them.  Other 0x12 functions (Habana Gaudi, FPGAs, inference cards) stay accelerators.
GPU_CLASS_ACCELERATOR_VENDORS = frozenset({AMD_ATI})


class DeviceKind(str, Enum):
    """What a PCI function is, for placement: GPU, NIC, NVMe, accelerator, NVSwitch, bridge, other."""

    GPU = "gpu"
    NIC = "nic"
    NVME = "nvme"
    ACCELERATOR = "accelerator"
    NVSWITCH = "nvswitch"
    BRIDGE = "bridge"
    OTHER = "other"


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
    (0x10DE, 0x1AF1): "NVSwitch (A100)",  # pci.ids: GA100 [A100 NVSwitch]
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
    # AMD Instinct (pci.ids): MI300A/MI300X present class 0x1200, MI200/MI100 0x0380
    (0x1002, 0x74A0): "Instinct MI300A",
    (0x1002, 0x74A1): "Instinct MI300X",
    (0x1002, 0x740C): "Instinct MI250X/MI250",
    (0x1002, 0x740F): "Instinct MI210",
    (0x1002, 0x738C): "Instinct MI100",
    # ENA: PF, PF with LLQ, VF, VF with LLQ (Linux drivers/net/ethernet/amazon/ena, PCI_DEV_ID_ENA_*)
    (0x1D0F, 0x0EC2): "Elastic Network Adapter (ENA)",
    (0x1D0F, 0x1EC2): "Elastic Network Adapter (ENA)",
    (0x1D0F, 0xEC20): "Elastic Network Adapter (ENA)",
    (0x1D0F, 0xEC21): "Elastic Network Adapter (ENA)",
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
    # Added for pasted lspci whose pci.ids was older than the part (``NVIDIA Corporation Device
    # 2335``); names as pci.ids spells them (https://pci-ids.ucw.cz/read/PC/10de,
    # https://pci-ids.ucw.cz/read/PC/15b3), shortened like the entries above.
    (0x10DE, 0x2321): "H100 NVL",
    (0x10DE, 0x2322): "H800 PCIe",
    (0x10DE, 0x2324): "H800",
    (0x10DE, 0x2329): "H20",
    (0x10DE, 0x2336): "H100",
    (0x10DE, 0x2339): "H100",
    (0x10DE, 0x233B): "H200 NVL",
    (0x10DE, 0x2348): "GH200 144GB HBM3e",
    (0x10DE, 0x2901): "B200",
    (0x10DE, 0x29BC): "B100",
    (0x10DE, 0x2941): "GB200",
    (0x10DE, 0x31C2): "GB300",
    (0x10DE, 0x31C3): "GB300",
    (0x10DE, 0x31A1): "GB300 MaxQ",
    (0x10DE, 0x2E12): "GB10",
    (0x10DE, 0x20B1): "A100 PCIe 40GB",
    (0x10DE, 0x20B3): "A100 SXM 64GB",
    (0x10DE, 0x20B7): "A30",
    (0x10DE, 0x20B8): "A100X",
    (0x10DE, 0x20F3): "A800 SXM4 80GB",
    (0x10DE, 0x20F5): "A800 PCIe 80GB",
    (0x10DE, 0x20F6): "A800 PCIe 40GB",
    (0x10DE, 0x2230): "RTX A6000",
    (0x10DE, 0x2235): "A40",
    (0x10DE, 0x2236): "A10",
    (0x10DE, 0x2571): "RTX A2000 12GB",
    (0x10DE, 0x26B1): "RTX 6000 Ada Generation",
    (0x10DE, 0x26B5): "L40",
    (0x10DE, 0x2B85): "GeForce RTX 5090",
    (0x10DE, 0x1DB6): "V100 PCIe 32GB",
    (0x10DE, 0x1EB8): "T4",
    (0x10DE, 0x15F8): "P100 PCIe 16GB",
    (0x10DE, 0x102D): "K80",
    (0x15B3, 0x1007): "ConnectX-3 Pro",
    (0x15B3, 0x1013): "ConnectX-4",
    (0x15B3, 0x1015): "ConnectX-4 Lx",
    (0x15B3, 0x1014): "ConnectX-4 Virtual Function",
    (0x15B3, 0x1016): "ConnectX-4 Lx Virtual Function",
    (0x15B3, 0x1018): "ConnectX-5 Virtual Function",
    (0x15B3, 0x101A): "ConnectX-5 Ex Virtual Function",
    (0x15B3, 0x101C): "ConnectX-6 Virtual Function",
    (0x15B3, 0xA2D2): "BlueField integrated ConnectX-5",
    (0x15B3, 0x1979): "ConnectX-7 PCIe Bridge",
    (0x15B3, 0x197B): "BlueField-3 SoC PCIe Bridge",
    # NVIDIA's platform tool names these (linux-rdma/rdma-core kernel-boot/rdma_topo,
    # pci_device_types): the ports of a ConnectX-8's own PCIe switch, its Data Direct DMA
    # function, ConnectX-9, and Grace's and Vera's root ports; B300's name is pci.ids'
    # ("GB110 [B300 SXM6 AC]").
    (0x15B3, 0x197C): "ConnectX-8 PCIe Bridge",
    (0x15B3, 0x2100): "ConnectX-8 DMA Controller (Data Direct)",
    (0x15B3, 0x1025): "ConnectX-9",
    (0x10DE, 0x22B1): "Grace PCI Root Port Bridge",
    (0x10DE, 0x22B2): "Grace PCI Root Port Bridge",
    (0x10DE, 0x22B8): "Grace PCI Root Port Bridge",
    (0x10DE, 0x2F95): "Vera PCIe Root Port Bridge",
    (0x10DE, 0x2F96): "Vera PCIe Root Port Bridge",
    (0x10DE, 0x3182): "B300 SXM6 AC",
    (0x1000, 0xC012): "PEX880xx PCIe Gen4 Switch",
    (0x1000, 0xC034): "PEX890xx PCIe Gen5 Switch",
    (0x10B5, 0x8725): "PEX 8725 PCIe Gen3 Switch",
    (0x10B5, 0x8748): "PEX 8748 PCIe Gen3 Switch",
    (0x10B5, 0x8749): "PEX 8749 PCIe Gen3 Switch",
    (0x10B5, 0x9733): "PEX 9733 PCIe Gen3 Switch",
}

#: What an id *is*, for sources that show no class code (``lspci -tv`` names only).  GPUs and
#: NICs only: bridges are known from the tree's drawing, and everything else stays unnamed.
DEVICE_KINDS: dict[tuple[int, int], str] = {
    **{
        (NVIDIA, d): "gpu"
        for d in (
            0x2330,
            0x2331,
            0x2335,
            0x2342,
            0x20B0,
            0x20B2,
            0x20B5,
            0x20F1,
            0x1DB1,
            0x1DB5,
            0x1DB4,
            0x2684,
            0x2204,
            0x26B9,
            0x27B8,
            0x2321,
            0x2322,
            0x2324,
            0x2329,
            0x2336,
            0x2339,
            0x233B,
            0x2348,
            0x2901,
            0x29BC,
            0x2941,
            0x31C2,
            0x31C3,
            0x3182,
            0x20B1,
            0x20B3,
            0x20B7,
            0x20B8,
            0x20F3,
            0x20F5,
            0x20F6,
            0x2230,
            0x2235,
            0x2236,
            0x2571,
            0x26B1,
            0x26B5,
            0x2B85,
            0x1DB6,
            0x1EB8,
            0x15F8,
            0x102D,
        )
    },
    **{
        (MELLANOX, d): "nic"
        for d in (
            0x1003,
            0x1007,
            0x1013,
            0x1015,
            0x1017,
            0x1018,
            0x1019,
            0x101B,
            0x101C,
            0x101D,
            0x101E,
            0x101F,
            0x1021,
            0x1023,
            0x1025,
            0xA2D2,
            0xA2D6,
            0xA2DC,
            0x673C,
        )
    },
    **{(AMAZON, d): "nic" for d in (0xEFA0, 0xEFA1, 0xEFA2, 0xEFA3, 0x0EC2, 0x1EC2, 0xEC20, 0xEC21)},
}

#: Mellanox part numbers and family names as pci.ids has printed them (older pci.ids named
#: 15b3:101d ``MT28841``; newer ones ``MT2892 Family [ConnectX-6 Dx]``), mapped to the NIC
#: function's device id.  Read only when the name carries no ``[vvvv:dddd]`` and is not a
#: bridge, VF, flash-recovery or SoC-management function of the family.
MELLANOX_PARTS = (
    ("BlueField-3 integrated ConnectX-7", 0xA2DC),
    ("BlueField-2 integrated ConnectX-6 Dx", 0xA2D6),
    ("BlueField integrated ConnectX-5", 0xA2D2),
    ("ConnectX-8", 0x1023),
    ("CX8 Family", 0x1023),
    ("ConnectX-7", 0x1021),
    ("MT2910", 0x1021),
    ("ConnectX-6 Lx", 0x101F),
    ("MT2894", 0x101F),
    ("ConnectX-6 Dx", 0x101D),
    ("MT2892", 0x101D),
    ("MT28841", 0x101D),
    ("ConnectX-6", 0x101B),
    ("MT28908", 0x101B),
    ("ConnectX-5 Ex", 0x1019),
    ("MT28800", 0x1019),
    ("ConnectX-5", 0x1017),
    ("MT27800", 0x1017),
    ("ConnectX-4 Lx", 0x1015),
    ("MT27710", 0x1015),
    ("ConnectX-4", 0x1013),
    ("MT27700", 0x1013),
    ("ConnectX-3 Pro", 0x1007),
    ("MT27520", 0x1007),
    ("ConnectX-3", 0x1003),
    ("MT27500", 0x1003),
)
_NOT_THE_NIC = r"(?i)Virtual Function|Flash Recovery|Bridge|SoC|Management|Crypto"


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


#: GPUs attached to a Grace CPU over NVLink-C2C (GH200, GB200, GB300, GB10).  NCCL calls their
#: path to a NIC on the same CPU "P2C" and enables GPUDirect RDMA there by default
#: (NCCL_NET_GDR_LEVEL defaults to P2C on Grace: NVIDIA/nccl src/graph/paths.cc).  The ids are
#: the PCI ID Repository's (pci.ids, github.com/pciutils/pciids): 2342 "GH100 [GH200 120GB /
#: 480GB]", 2348 "GH100 [GH200 144G HBM3e]", 2941 "GB100 [HGX GB200]", 31c2 and 31c3 "GB110
#: [GB300]", 31a1 "GB110 [GB300 MaxQ]", 2e12 "GB20B [GB10]" (DGX Spark); nvidia-smi names them
#: "NVIDIA GB300", "NVIDIA GB10".
C2C_GPUS = frozenset(
    {
        (NVIDIA, 0x2342),
        (NVIDIA, 0x2348),
        (NVIDIA, 0x2941),
        (NVIDIA, 0x31C2),
        (NVIDIA, 0x31C3),
        (NVIDIA, 0x31A1),
        (NVIDIA, 0x2E12),
    }
)

#: The functions NVIDIA's platform tool sorts a Grace/Blackwell or ConnectX-8 host by
#: (linux-rdma/rdma-core ``kernel-boot/rdma_topo``, ``pci_device_types``): Grace and Vera root
#: ports, the ports of a ConnectX (CX-7/CX-8) or BlueField-3 PCIe switch, ConnectX-7/8/9 and
#: BlueField-3 NIC functions, and the ConnectX-8 Data Direct DMA function.
GRACE_ROOT_PORTS = frozenset({(NVIDIA, 0x22B1), (NVIDIA, 0x22B2), (NVIDIA, 0x22B8)})
VERA_ROOT_PORTS = frozenset({(NVIDIA, 0x2F95), (NVIDIA, 0x2F96)})
CX_SWITCH_PORTS = frozenset({(MELLANOX, 0x197C), (MELLANOX, 0x1979)})
BF3_SWITCH_PORTS = frozenset({(MELLANOX, 0x197B)})
CX_NICS = frozenset({(MELLANOX, 0x1021), (MELLANOX, 0x1023), (MELLANOX, 0x1025)})
BF3_NICS = frozenset({(MELLANOX, 0xA2DC)})
CX_DMA = frozenset({(MELLANOX, 0x2100)})
#: Functions whose VPD a scan reads: those whose name and ``V3`` keyword pair a NIC with its
#: Data Direct DMA function (rdma_topo reads VPD for ``cx_nic`` and ``cx_dma`` only).
VPD_READ = CX_NICS | CX_DMA


#: Vendors whose display controllers are BMC or emulated consoles, not compute GPUs: an
#: ASPEED AST2500 on every server board must not become ``gpu0`` and shift the numbering that
#: CUDA and nvidia-smi use.  ASPEED, Matrox (G200 BMCs), Cirrus Logic (QEMU's cirrus-vga),
#: Bochs/QEMU std VGA (1234), VMware SVGA, Red Hat (QEMU's qxl and virtio VGA: 1b36, 1af4),
#: Microsoft (Hyper-V's synthetic VGA, 1414), VirtualBox (80ee), Xen's platform device (5853) and
#: Amazon (the Nitro console's VGA, 1d0f:1111: Amazon makes no GPU).
CONSOLE_DISPLAY_VENDORS = frozenset(
    {0x1A03, 0x102B, 0x1013, 0x1234, 0x15AD, 0x1B36, 0x1AF4, 0x1414, 0x80EE, 0x5853, AMAZON}
)

#: Hypervisors' own PCI vendors: a function of theirs exists only inside a guest (QEMU's
#: devices 1b36, Hyper-V's 1414, VirtualBox 80ee, Xen 5853, Parallels 1ab8; VMware 15ad).  Red
#: Hat's virtio (1af4) is left out: a BlueField DPU emulates virtio-net functions on bare metal.
HYPERVISOR_VENDORS = frozenset({0x1B36, 0x1414, 0x80EE, 0x5853, 0x1AB8, 0x15AD})

#: Chipsets that today exist only as a hypervisor's emulation (QEMU hw/pci-host/q35.c and
#: i440fx.c, Hyper-V Generation 1): the q35 host bridge (Intel 82G33 DRAM controller, 8086:29c0)
#: and ICH9 LPC (8086:2918), the i440FX host bridge (8086:1237) and PIIX3/PIIX4 ISA bridges
#: (8086:7000, 8086:7110), the 440BX host bridge Hyper-V presents (8086:7192).  A 2007 desktop
#: chipset beside data-centre GPUs is an emulated root complex.
EMULATED_CHIPSETS = frozenset(
    {(INTEL, 0x29C0), (INTEL, 0x2918), (INTEL, 0x1237), (INTEL, 0x7000), (INTEL, 0x7110), (INTEL, 0x7192)}
)
#: The same chipsets as lspci names them (pci.ids), for output without ``-nn``.
_EMULATED_CHIPSET_NAME = (
    r"82G33/G31/P35/P31 Express DRAM|82801IB \(ICH9\) LPC|440FX - 82441FX|82371SB PIIX3 ISA"
    r"|82371AB/EB/MB PIIX4 ISA|440BX/ZX/DX"
)

#: Broadcom switch chips that present two levels of ports for one chip, with the subsystem id NCCL
#: requires of each level (NVIDIA/nccl src/graph/topo.cc, ``getBcmGen``): (vendor, device) ->
#: generation, and per generation the subsystem device's top nibble at the upper and the lower level
#: (Gen4 PEX88xxx 0xaxxx at both; Gen5 PEX890xx 0x0xxx above, 0x1xxx below); the subsystem vendor
#: must be Broadcom too.
BROADCOM_TWO_LEVEL = {(BROADCOM_LSI, 0xC010): 4, (BROADCOM_LSI, 0xC030): 5}
_BCM_SUBSYS_NIBBLE = {4: (0xA, 0xA), 5: (0x0, 0x1)}

#: AWS Elastic Fabric Adapter device ids.
EFA_DEVICES = frozenset({0xEFA0, 0xEFA1, 0xEFA2, 0xEFA3})
#: An EFA function as lspci names it without ids.
_EFA_NAME = r"Elastic Fabric Adapter|\bEFA\b"
#: Drivers that always register an RDMA device for their NIC.
RDMA_DRIVERS = frozenset({"mlx5_core", "mlx4_core", "efa"})

#: ACS control-register bits (PCIe Base Spec 7.7.8.3, ACS Control Register), in lspci's spelling
#: and register order: bit 0 is SrcValid.
ACS_FLAGS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")
#: ACS bits that send peer-to-peer traffic up to the root complex: Request Redirect,
#: Completion Redirect, Egress Control.
ACS_P2P_REDIRECT_MASK = 0b101100

#: Standard capability ids (PCI Local Bus Spec 3.0, appendix H): Vital Product Data, whose
#: contents the kernel exposes as the function's ``vpd`` file (drivers/pci/vpd.c).
CAP_ID_VPD = 0x03
#: Extended capability ids (PCIe Base Spec 7.6.3; include/uapi/linux/pci_regs.h PCI_EXT_CAP_ID_*).
EXT_CAP_ID_ACS = 0x000D
EXT_CAP_ID_ATS = 0x000F

#: PCIe capability, Device/Port Type (bits 7:4 of the register at +0x02; PCIe Base Spec 7.5.3.2).
PORT_TYPES = {
    0: "endpoint",
    1: "legacy_endpoint",
    4: "root_port",
    5: "switch_upstream",
    6: "switch_downstream",
    7: "pcie_to_pci_bridge",
    8: "pci_to_pcie_bridge",
    9: "rc_integrated_endpoint",
    10: "rc_event_collector",
}
PORT_CODES = {name: code for code, name in PORT_TYPES.items()}

#: lspci's names for the PCIe capability's Device/Port Type (pciutils ls-caps.c), mapped to
#: the names of :data:`PORT_TYPES`; longest first where one is a prefix of another.
LSPCI_PORT_NAMES = (
    ("Root Complex Integrated Endpoint", "rc_integrated_endpoint"),
    ("Root Complex Event Collector", "rc_event_collector"),
    ("Legacy Endpoint", "legacy_endpoint"),
    ("Endpoint", "endpoint"),
    ("Root Port", "root_port"),
    ("Upstream Port", "switch_upstream"),
    ("Downstream Port", "switch_downstream"),
    ("PCI-Express to PCI/PCI-X Bridge", "pcie_to_pci_bridge"),
    ("PCI/PCI-X to PCI-Express Bridge", "pci_to_pcie_bridge"),
)


#: lspci's class names (pci.ids) -> class and subclass, for output without ``-nn``.
LSPCI_CLASSES = {
    "Non-VGA unclassified device": 0x0000,
    "SCSI storage controller": 0x0100,
    "IDE interface": 0x0101,
    "RAID bus controller": 0x0104,
    "SATA controller": 0x0106,
    "Serial Attached SCSI controller": 0x0107,
    "Non-Volatile memory controller": 0x0108,
    "Mass storage controller": 0x0180,
    "Ethernet controller": 0x0200,
    "Token ring network controller": 0x0201,
    "Infiniband controller": 0x0207,
    "Fabric controller": 0x0208,
    "Network controller": 0x0280,
    "VGA compatible controller": 0x0300,
    "XGA compatible controller": 0x0301,
    "3D controller": 0x0302,
    "Display controller": 0x0380,
    "Audio device": 0x0403,
    "Memory controller": 0x0580,
    "RAM memory": 0x0500,
    "Host bridge": 0x0600,
    "ISA bridge": 0x0601,
    "PCI bridge": 0x0604,
    "Semi-transparent PCI-to-PCI bridge": 0x0609,
    "Bridge": 0x0680,
    "System peripheral": 0x0880,
    "IOMMU": 0x0806,
    "Co-processor": 0x0B40,
    "USB controller": 0x0C03,
    "SMBus": 0x0C05,
    "InfiniBand": 0x0C06,
    "Serial bus controller": 0x0C80,
    "Encryption controller": 0x1080,
    "Signal processing controller": 0x1180,
    "Processing accelerators": 0x1200,
    "Unassigned class": 0xFF00,
}

#: Vendor names as lspci prints them (pci.ids), for output without ``-nn``.
LSPCI_VENDORS = (
    ("NVIDIA Corporation", NVIDIA),
    ("Mellanox Technologies", MELLANOX),
    ("Amazon.com, Inc.", AMAZON),
    ("Intel Corporation", 0x8086),
    ("Broadcom / LSI", 0x1000),
    ("Broadcom Inc. and subsidiaries", 0x14E4),
    ("PLX Technology, Inc.", 0x10B5),
    ("Advanced Micro Devices, Inc. [AMD/ATI]", 0x1002),
    ("Advanced Micro Devices, Inc. [AMD]", 0x1022),
    ("ASPEED Technology, Inc.", 0x1A03),
    ("Matrox Electronics Systems Ltd.", 0x102B),
    ("Samsung Electronics Co Ltd", 0x144D),
    ("Red Hat, Inc.", 0x1AF4),
    ("VMware", 0x15AD),
    ("Microsoft Corporation", 0x1414),
    ("Cirrus Logic", 0x1013),
    ("InnoTek Systemberatung GmbH", 0x80EE),
    ("XenSource, Inc.", 0x5853),
)

#: Shorter or older spellings seen in pastes (case-insensitive prefixes): ``Mellanox Tech``,
#: ``Mellanox``, old pci.ids' ``nVidia Corporation``, a bare ``NVIDIA``.  Longest first.
VENDOR_ALIASES = (
    ("mellanox", MELLANOX),
    ("nvidia", NVIDIA),
    ("amazon", AMAZON),
    ("intel", 0x8086),
    ("plx technology", 0x10B5),
    ("samsung", 0x144D),
)


# Patterns of device names, read only for pasted lspci output: kept as text and compiled on first
# use (``re``'s cache), so that importing this module -- every scan does -- compiles none.
# GB20B/GB10B (GB10, Jetson Thor) end in a letter: pci.ids "GB20B [GB10]".
_NVIDIA_GPU_CHIP = r"\b(?:G[KMPVAHB][0-9]{3}|TU[0-9]{3}|AD[0-9]{3}|GB[0-9]{3}|GB[0-9]{2}B)"
_NOT_A_GPU = r"(?i)NVSwitch|Audio|USB|UCSI|Serial|SMBus|Bridge"
_NIC_NAME = (
    r"ConnectX|Infiniband|InfiniBand|Ethernet|Network Connection|NetXtreme|Elastic Fabric Adapter"
    r"|Elastic Network Adapter|BlueField"
)
# GPU-class compute devices of other vendors, as pci.ids names them: AMD Instinct (Arcturus
# MI100, Aldebaran MI200, Aqua Vanjaram MI300) and Intel Data Center GPU Max/Flex (Ponte Vecchio).
_OTHER_GPU_NAME = r"Instinct|Arcturus|Aldebaran|Aqua Vanjaram|Data Center GPU|Ponte Vecchio"
_NVME_NAME = r"NVMe|Non-Volatile memory"
_DEVICE_IN_NAME = (
    r"\b(?:(?P<vd>Device|Unknown device)\s+(?P<v>[0-9a-fA-F]{4}):(?P<d>[0-9a-fA-F]{4})"
    r"|(?:Device|Unknown device)\s+(?P<d2>[0-9a-fA-F]{4}))\b"
)


# -- predicates -------------------------------------------------------------------------------


def emulated_platform(vendor: int | None, device: int | None, name: str | None = None) -> bool:
    """A function only a hypervisor presents: one of a hypervisor's own vendors, or a chipset
    that exists today only as an emulated root complex (:data:`EMULATED_CHIPSETS`, by ids or by
    the name lspci prints)."""
    if vendor in HYPERVISOR_VENDORS or (vendor, device) in EMULATED_CHIPSETS:
        return True
    return vendor == INTEL and device is None and re.search(_EMULATED_CHIPSET_NAME, name or "") is not None


def class16(class_code: int | None) -> int | None:
    """Base class and subclass (``0x0302``) of a 24-bit class code."""
    return class_code >> 8 if class_code is not None else None


def kind_of(class_code: int | None, vendor: int | None, given: str | None = None) -> DeviceKind:
    """A function's kind from its class code, else from what its source said (``given``)."""
    if class_code is None:
        return DeviceKind(given) if given is not None else DeviceKind.OTHER
    base, sub = class_code >> 16, (class_code >> 8) & 0xFF
    if base == 0x03:
        return DeviceKind.OTHER if vendor in CONSOLE_DISPLAY_VENDORS else DeviceKind.GPU
    if base == 0x12 and vendor in GPU_CLASS_ACCELERATOR_VENDORS:
        return DeviceKind.GPU
    if base == 0x12 or (base == 0x0B and sub == 0x40):
        return DeviceKind.ACCELERATOR
    if is_nic_class(class_code >> 8):
        return DeviceKind.NIC
    if base == 0x01 and sub == 0x08:
        return DeviceKind.NVME
    if is_nvswitch(class_code, vendor):
        return DeviceKind.NVSWITCH
    if base == 0x06:
        return DeviceKind.BRIDGE
    return DeviceKind.OTHER


def is_nic_class(class16_: int | None) -> bool:
    """Network controllers (base class 0x02) and InfiniBand serial-bus functions (0x0c06)."""
    return class16_ is not None and (class16_ >> 8 == 0x02 or class16_ == 0x0C06)


def is_infiniband(class_code: int | None) -> bool:
    """An InfiniBand controller (class 0x0207): RDMA-capable by definition."""
    return class_code is not None and class_code >> 8 == 0x0207


def is_p2p_bridge_class(class_code: int | None) -> bool:
    """A PCI-to-PCI bridge (0x0604) or semi-transparent one (0x0609)."""
    return class_code is not None and (class_code >> 8) in (0x0604, 0x0609)


def is_nvswitch(class_code: int | None, vendor: int | None) -> bool:
    """An NVSwitch's management endpoint: an NVIDIA "other" bridge (class 0x0680, e.g. 10de:22a3
    on HGX H100, 10de:1af1 on HGX A100).  It is a type-0 function, not a PCI-to-PCI bridge:
    nothing hangs below it and no PCIe path crosses it (NVIDIA Fabric Manager user guide,
    "NVSwitch" PCI devices; ``lspci`` lists them as "Bridge: NVIDIA Corporation ... NVSwitch")."""
    return vendor == NVIDIA and class_code is not None and class_code >> 8 == 0x0680


def is_nvswitch_or_other_bridge(class_code: int | None) -> bool:
    """An "other" bridge (0x0680): NVSwitch management endpoints (:func:`is_nvswitch`) and
    other vendors' non-PCI-to-PCI bridge functions."""
    return class_code is not None and class_code >> 8 == 0x0680


def bcm_gen(
    vendor: int | None, device: int | None, subsystem_vendor: int | None, subsystem_device: int | None, level: int
) -> int:
    """The Broadcom generation (4, 5) of a switch upstream port at ``level`` (0 the chip's upper
    level, 1 the lower) when NCCL flattens the two into one switch, else 0 (NCCL's ``getBcmGen``)."""
    gen = BROADCOM_TWO_LEVEL.get((vendor, device)) if vendor is not None and device is not None else None
    if gen is None or subsystem_vendor != BROADCOM_LSI or subsystem_device is None:
        return 0
    return gen if subsystem_device >> 12 == _BCM_SUBSYS_NIBBLE[gen][level] else 0


def rdma_capable_by_ids(
    class16_: int | None,
    kind: str | None,
    vendor: int | None,
    device: int | None,
    driver: str | None,
    name: str | None = None,
) -> bool:
    """An RDMA-capable NIC judged by ids, driver and name alone (no ``/sys/class/infiniband``).

    InfiniBand controllers, every Mellanox/NVIDIA ConnectX/BlueField NIC function (RoCE when
    in Ethernet mode), AWS EFA (by id, or by the name lspci prints: ``Elastic Fabric Adapter
    (EFA)`` is pci.ids' name of efa0, efa1 and efa2 alike; NCCL reaches it through the
    aws-ofi-nccl plugin), and functions bound to mlx4/mlx5/efa.  Broadcom and Intel NICs are
    RDMA-capable only with bnxt_re/irdma loaded, which ids do not show: not counted.
    """
    if not (is_nic_class(class16_) or (class16_ is None and kind == "nic")):
        return False
    return (
        class16_ == 0x0207
        or vendor == MELLANOX
        or (vendor == AMAZON and device in EFA_DEVICES)
        or (vendor == AMAZON and device is None and re.search(_EFA_NAME, name or "") is not None)
        or driver in RDMA_DRIVERS
    )


def vendor_from_name(text: str | None) -> int | None:
    """A vendor id from the vendor name lspci prints (``NVIDIA Corporation`` -> 0x10de), or a
    shorter spelling (``Mellanox Tech``, ``nVidia``), or a bare Mellanox part (``MT28841``)."""
    if not text:
        return None
    exact = next((vid for name, vid in LSPCI_VENDORS if text.startswith(name)), None)
    if exact is not None:
        return exact
    low = text.lower()
    alias = next((vid for name, vid in VENDOR_ALIASES if low.startswith(name)), None)
    if alias is None and re.match(r"(?:MT[0-9]{4,6}[A-Z0-9]*|CX[0-9])\b", text):
        alias = MELLANOX
    return alias


def ids_from_name(text: str | None, vendor: int | None) -> tuple[int | None, int | None, str | None]:
    """Vendor and device ids that a name itself states, and how they were read.

    lspci prints ``<vendor> Device 2335`` when its pci.ids knows the vendor but not the device,
    ``Device 10de:2335`` when it knows neither (pciutils ``lib/names.c``), and older versions
    ``Unknown device 2335``.  A Mellanox name may be a bare part number or family
    (``MT28841``, ``MT2910 Family [ConnectX-7]``): that names the NIC function's id, unless the
    name says it is a VF, bridge or management function of the family.  ``how`` is None when
    nothing was read.
    """
    if not text:
        return vendor, None, None
    m = re.search(_DEVICE_IN_NAME, text)
    if m:
        if m.group("d") is not None:
            return (
                int(m.group("v"), 16),
                int(m.group("d"), 16),
                f"{m.group('vd')} {m.group('v')}:{m.group('d')} in the name",
            )
        return vendor, int(m.group("d2"), 16), f"Device {m.group('d2')} in the name"
    if vendor == MELLANOX and not re.search(_NOT_THE_NIC, text):
        for part, device in MELLANOX_PARTS:
            if re.search(rf"(?<![\w-]){re.escape(part)}(?![\w-])", text):
                return vendor, device, f"Mellanox part {part!r} in the name"
    return vendor, None, None


def kind_from_vendor(text: str | None, vendor: int | None) -> str | None:
    """A kind guessed from the vendor alone, for a function that has no class and an unknown
    device id: NVIDIA makes GPUs (besides NVSwitches, audio and USB functions of its cards,
    which names say), Mellanox makes NICs.  The caller must say the kind was inferred."""
    if text and (re.search(_NOT_A_GPU, text) or re.search(_NOT_THE_NIC, text)):
        return None
    if vendor == NVIDIA:
        return "gpu"
    if vendor == MELLANOX:
        return "nic"
    return None


def kind_from_name(text: str | None, vendor: int | None, device: int | None) -> str | None:
    """What a function is from its name alone (``lspci -tv`` has no class): GPU, NIC, NVMe.

    Used only where no class is known, and said so in the source status.
    """
    known = DEVICES.get((vendor, device)) if vendor is not None and device is not None else None
    if vendor is not None and device is not None and (vendor, device) in DEVICE_KINDS:
        return DEVICE_KINDS[(vendor, device)]
    text = " ".join(t for t in (text, known) if t)
    if not text:
        return None
    if re.search(_NVME_NAME, text):
        return "nvme"
    if vendor == NVIDIA and "NVSwitch" in text:
        return "nvswitch"  # as kind_of names an NVIDIA 0x0680 function: offline and live agree
    if re.search(_NIC_NAME, text):
        return "nic"
    if vendor == NVIDIA and not re.search(_NOT_A_GPU, text) and (known or re.search(_NVIDIA_GPU_CHIP, text)):
        return "gpu"
    if vendor in (AMD_ATI, INTEL) and re.search(_OTHER_GPU_NAME, text) and not re.search(_NOT_A_GPU, text):
        return "gpu"
    return None


def is_vf_id(vendor: int | None, device: int | None) -> bool:
    """Whether the built-in table names this id an SR-IOV virtual function (``ConnectX-5
    Virtual Function``, ``ConnectX Family VF``): what a paste that shows no ``physfn`` has."""
    name = DEVICES.get((vendor, device)) if vendor is not None and device is not None else None
    return name is not None and re.search(r"Virtual Function|\bVF\b", name) is not None


def known_device(vendor: int | None, device: int | None) -> bool:
    """Whether the built-in table names this device."""
    return vendor is not None and device is not None and (vendor, device) in DEVICES


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
