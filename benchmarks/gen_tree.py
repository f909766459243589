"""Large fake host trees for the benchmarks: machine descriptions (dicts) for tests/fakesysfs.

    python benchmarks/gen_tree.py growth 4000 /tmp/g4000      # ~4,000 endpoint functions
    python benchmarks/gen_tree.py sriov 250 /tmp/sriov250     # DGX-like, 16 CX-7 x 250 VFs
    python benchmarks/gen_tree.py nics 3000 /tmp/nics3000     # 8 GPUs, ~3,000 NIC functions
    python benchmarks/gen_tree.py numa 4096 /tmp/numa4096     # 4,096 NUMA nodes

Four families, all deterministic:

* :func:`growth` -- a two-socket DGX-class host with ``n`` endpoint functions: up to 8 GPUs and
  8 ConnectX-7 rail NICs (the pairs the analysis builds stay bounded, as on a real host), the
  rest NVMe drives behind Gen5 switches (32 per switch, 7 switches per PCI domain, so bus
  numbers never run out).  Cost should grow linearly in ``n``.
* :func:`sriov` -- a DGX H100 layout (8 H100, 8 rail ConnectX-7, 8 storage ConnectX-7 on their
  own root ports: 16 ConnectX-7) whose every ConnectX-7 enables ``vfs`` SR-IOV virtual
  functions (0..254: one bus holds 256 functions).  250 VFs each gives ~4,100 functions.
* :func:`nics` -- the growth host's 8 GPUs and 8 rail NICs, then dual-port ConnectX-7 Ethernet
  cards (two physical functions each, no SR-IOV) behind Gen5 switches up to ``n`` NIC functions:
  every function is a NIC and an RDMA device, so NIC pairs grow as ``n**2``.
* :func:`numa` -- the growth host's 8 GPUs and 8 rail NICs on a two-socket host with ``n``
  NUMA nodes of one CPU each (the distance table is ``n**2`` numbers).
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
    "cx7-ib-sriov": {"base": "cx7-ib", "sriov_total": 254, "vf_part": "cx7-ib-vf", "vf_offset": 1, "vf_stride": 1},
    "cx7-ib-vf": {
        "base": "cx7-ib",
        "name": "ConnectX-7 Virtual Function",
        "id": "15b3:101e",
        "link": "zero",
        "irqs": 1,
    },
    "cx7-eth-sriov": {"base": "cx7-eth", "sriov_total": 254, "vf_part": "cx7-eth-vf", "vf_offset": 1, "vf_stride": 1},
    "cx7-eth-vf": {
        "base": "cx7-eth",
        "name": "ConnectX-7 Virtual Function",
        "id": "15b3:101e",
        "link": "zero",
        "irqs": 1,
        "phys_port": False,
    },
}

_CPU = {"model": "Intel(R) Xeon(R) Platinum 8480C", "sockets": 2, "cores": 56, "threads": 2, "memory_gib": 1024}
_MACHINE = {
    "hostname": "bench-host",
    "dmi": ["NVIDIA", "DGXH100"],
    "config": 4096,
    "iommu": "identity",
    "cmdline": "ro intel_iommu=on iommu=pt",
    "modules": {"nvidia": "535.161.08", "nvidia_peermem": "535.161.08", "mlx5_core": "", "nvme": ""},
}

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
    return {"machine": dict(_MACHINE, hostname=f"growth-{n}"), "cpu": dict(_CPU), "rootbus": rootbuses}


def _rails_only() -> dict[str, Any]:
    """The growth host's 8 GPUs and 8 rail NICs, without its NVMe drives."""
    desc = growth(128)
    desc["rootbus"] = [rb for rb in desc["rootbus"] if rb["id"].startswith("0000:")]
    return desc


def nics(n: int) -> dict[str, Any]:
    """A host with 8 GPUs and ``n`` (>= 16) NIC functions: 8 rail ConnectX-7 and dual-port
    ConnectX-7 Ethernet cards (32 per switch, 7 switches per PCI domain) for the rest."""
    if n < 16:
        raise ValueError("nics trees need at least 16 NIC functions")
    desc = _rails_only()
    ports = n - 8
    per_switch, per_bus, domain = 32, 7, 1
    while ports > 0:
        lines = []
        for s in range(per_bus):
            if ports <= 0:
                break
            k = min(per_switch, (ports + 1) // 2)
            ports -= 2 * k
            lines += [f"{s + 1:02x}.0 spr-rp", "  pex890", f"    pex890 *{k}", "      00.0 cx7-eth", "      .1 cx7-eth"]
        desc["rootbus"].append({"id": f"{domain:04x}:00", "node": domain % 2, "tree": "\n".join(lines)})
        domain += 1
    desc["machine"]["hostname"] = f"nics-{n}"
    return desc


def numa(n: int) -> dict[str, Any]:
    """The growth host's 8 GPUs and 8 rail NICs on two sockets split into ``n`` (even, >= 2)
    NUMA nodes of one CPU each."""
    if n < 2 or n % 2:
        raise ValueError("numa trees need an even number (>= 2) of NUMA nodes")
    desc = _rails_only()
    desc["cpu"] = dict(_CPU, cores=n // 2, threads=1, nodes_per_socket=n // 2, memory_gib=1)
    desc["machine"]["hostname"] = f"numa-{n}"
    return desc


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
    """The description of one benchmark tree: ``growth`` N functions, ``sriov`` N VFs per NIC,
    ``nics`` N NIC functions or ``numa`` N NUMA nodes."""
    if kind == "growth":
        return growth(n)
    if kind == "sriov":
        return sriov(n)
    if kind == "nics":
        return nics(n)
    if kind == "numa":
        return numa(n)
    raise ValueError(f"unknown tree kind {kind!r} (growth, sriov, nics, numa)")


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
    ap.add_argument("kind", choices=("growth", "sriov", "nics", "numa"))
    ap.add_argument(
        "n",
        type=int,
        help="growth: endpoint functions; sriov: VFs per ConnectX-7; nics: NIC functions; numa: NUMA nodes",
    )
    ap.add_argument("dest", help="an empty or new directory")
    opts = ap.parse_args()
    root = make(opts.kind, opts.n, opts.dest)
    print(f"{root}: {count_functions(root)} PCI functions, {count_endpoints(root)} endpoints")


if __name__ == "__main__":
    main()
