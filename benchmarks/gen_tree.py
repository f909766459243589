"""Large fake host trees for the benchmarks: machine descriptions (dicts) for tests/fakesysfs.

    python benchmarks/gen_tree.py growth 4000 /tmp/g4000      # ~4,000 endpoint functions
    python benchmarks/gen_tree.py sriov 250 /tmp/sriov250     # DGX-like, 16 CX-7 x 250 VFs

Two families, both deterministic:

* :func:`growth` -- a two-socket DGX-class host with ``n`` endpoint functions: up to 8 GPUs and
  8 ConnectX-7 rail NICs (the pairs the analysis builds stay bounded, as on a real host), the
  rest NVMe drives behind Gen5 switches (32 per switch, 7 switches per PCI domain, so bus
  numbers never run out).  Cost should grow linearly in ``n``.
* :func:`sriov` -- a DGX H100 layout (8 H100, 8 rail ConnectX-7, 8 storage ConnectX-7 on their
  own root ports: 16 ConnectX-7) whose every ConnectX-7 enables ``vfs`` SR-IOV virtual
  functions (0..254: one bus holds 256 functions).  250 VFs each gives ~4,100 functions.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.fakesysfs import generate, load_machine  # noqa: E402  found through the sys.path set above

#: ConnectX-7 parts with an SR-IOV capability (the catalogue's have none): 254 VFs fit on the
#: PF's bus at offset 1, stride 1.
_SRIOV_PARTS: dict[str, dict[str, Any]] = {
    "cx7-ib-sriov": {"base": "cx7-ib", "sriov_total": 254, "vf_part": "cx7-ib-vf",
                     "vf_offset": 1, "vf_stride": 1},
    "cx7-ib-vf": {"base": "cx7-ib", "name": "ConnectX-7 Virtual Function", "id": "15b3:101e",
                  "link": "zero", "irqs": 1},
    "cx7-eth-sriov": {"base": "cx7-eth", "sriov_total": 254, "vf_part": "cx7-eth-vf",
                      "vf_offset": 1, "vf_stride": 1},
    "cx7-eth-vf": {"base": "cx7-eth", "name": "ConnectX-7 Virtual Function", "id": "15b3:101e",
                   "link": "zero", "irqs": 1, "phys_port": False},
}

_CPU = {"model": "Intel(R) Xeon(R) Platinum 8480C", "sockets": 2, "cores": 56, "threads": 2,
        "memory_gib": 1024}
_MACHINE = {"hostname": "bench-host", "dmi": ["NVIDIA", "DGXH100"], "config": 4096,
            "iommu": "identity", "cmdline": "ro intel_iommu=on iommu=pt",
            "modules": {"nvidia": "535.161.08", "nvidia_peermem": "535.161.08",
                        "mlx5_core": "", "nvme": ""}}

_RAIL_GPU_NIC = """
01.0 spr-rp
  pex890
    pex890 > cx7-ib
    pex890 > h100
"""


def growth(n: int) -> dict[str, Any]:
    """A host with ``n`` (>= 2) endpoint functions: GPUs and rail NICs up to 8 each, NVMe the rest."""
    if n < 2:
        raise ValueError("growth trees need at least 2 endpoint functions")
    rails = min(8, n // 16) or 1
    drives = n - 2 * rails
    rootbuses: list[dict[str, Any]] = []
    for r in range(rails):
        rootbuses.append({"id": f"0000:{0x10 + r * 0x10:02x}", "node": r % 2, "tree": _RAIL_GPU_NIC})
    # NVMe: 32 per switch, 7 switches per root bus (domain 1, 2, ...): 34 buses per switch.
    per_switch, per_bus = 32, 7
    domain = 1
    while drives > 0:
        lines = []
        for s in range(per_bus):
            if drives <= 0:
                break
            k = min(per_switch, drives)
            drives -= k
            lines += [f"{s + 1:02x}.0 spr-rp", "  pex890", f"    pex890 *{k} > pm1733"]
        rootbuses.append({"id": f"{domain:04x}:00", "node": domain % 2, "tree": "\n".join(lines)})
        domain += 1
    return {"machine": dict(_MACHINE, hostname=f"growth-{n}"), "cpu": dict(_CPU),
            "rootbus": rootbuses}


def sriov(vfs: int) -> dict[str, Any]:
    """The DGX H100 fixture with 16 ConnectX-7 (8 rail, 8 storage), each with ``vfs`` VFs."""
    if not 0 <= vfs <= 254:
        raise ValueError("0..254 VFs per ConnectX-7 (one bus)")
    desc = copy.deepcopy(load_machine("dgx-h100"))
    desc["machine"]["hostname"] = f"sriov-{vfs}"
    desc.setdefault("parts", {}).update(copy.deepcopy(_SRIOV_PARTS))
    attrs = f" vfs={vfs}" if vfs else ""
    rail = desc["blocks"]["rail"]["tree"]
    desc["blocks"]["rail"]["tree"] = rail.replace("> cx7-ib ", f"> cx7-ib-sriov{attrs} ", 1)
    assert "cx7-ib-sriov" in desc["blocks"]["rail"]["tree"], "dgx-h100 rail block changed"
    # Storage: the fixture's two dual-port CX-7 become four root buses of two single-function
    # ConnectX-7 each, each on its own root port (so each PF's VFs have a bus to themselves).
    storage = [rb for rb in desc["rootbus"] if "cx7-eth" in str(rb.get("tree", ""))]
    for rb in storage:
        desc["rootbus"].remove(rb)
    for bus, node in (("0000:28", 0), ("0000:30", 0), ("0000:a9", 1), ("0000:b1", 1)):
        tree = "\n".join(f"{p:02x}.0 spr-rp > cx7-eth-sriov{attrs}" for p in (1, 2))
        desc["rootbus"].append({"id": bus, "node": node, "tree": tree})
    return desc


def describe(kind: str, n: int) -> dict[str, Any]:
    """The description of one benchmark tree: ``growth`` N functions or ``sriov`` N VFs per NIC."""
    if kind == "growth":
        return growth(n)
    if kind == "sriov":
        return sriov(n)
    raise ValueError(f"unknown tree kind {kind!r} (growth, sriov)")


def make(kind: str, n: int, dest: str | os.PathLike[str]) -> Path:
    """Write the tree into ``dest`` (a new or empty directory) and return its root."""
    return generate(describe(kind, n), dest)


def count_functions(root: Path) -> int:
    """PCI functions listed in ``sys/bus/pci/devices`` (bridges included)."""
    return len(os.listdir(root / "sys/bus/pci/devices"))


def count_endpoints(root: Path) -> int:
    """PCI functions that are not bridges (class 0x0604xx)."""
    n = 0
    base = root / "sys/bus/pci/devices"
    for name in os.listdir(base):
        if not (base / name / "class").read_text().startswith("0x0604"):
            n += 1
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kind", choices=("growth", "sriov"))
    ap.add_argument("n", type=int, help="growth: endpoint functions; sriov: VFs per ConnectX-7")
    ap.add_argument("dest", help="an empty or new directory")
    opts = ap.parse_args()
    root = make(opts.kind, opts.n, opts.dest)
    print(f"{root}: {count_functions(root)} PCI functions, {count_endpoints(root)} endpoints")


if __name__ == "__main__":
    main()
