"""A Broadcom switch presented as two levels counts as one exactly where NCCL flattens it.

NCCL's rule (NVIDIA/nccl src/graph/topo.cc, ``getBcmGen`` and ``ncclTopoFlattenBcmSwitches``):
the upper upstream port and the lower one must both be Broadcom (1000) with a Broadcom subsystem
vendor, and the subsystem device must be 0xaxxx on both levels for Gen4 (PEX88xxx, c010), 0x0xxx
above and 0x1xxx below for Gen5 (PEX890xx, c030).  ``nvidia-smi topo -m`` flattens nothing: it
prints PXB for every pair below the two levels.
"""

from __future__ import annotations

import pytest

from tests.fakesysfs import generate
from topoagent.core import pci
from topoagent.core.api import scan


@pytest.mark.parametrize(
    "ids, level, gen",
    [
        ((0x1000, 0xC010, 0x1000, 0xA064), 0, 4),
        ((0x1000, 0xC010, 0x1000, 0xA064), 1, 4),
        ((0x1000, 0xC010, 0x1000, 0x0064), 0, 0),
        ((0x1000, 0xC030, 0x1000, 0x0064), 0, 5),
        ((0x1000, 0xC030, 0x1000, 0x1064), 1, 5),
        ((0x1000, 0xC030, 0x1000, 0x1064), 0, 0),
        ((0x1000, 0xC030, 0x1000, 0x0064), 1, 0),
        ((0x1000, 0xC030, 0x1000, 0xA064), 0, 0),  # Gen4-style subsystem on a Gen5 chip
        ((0x1000, 0xC030, 0x15D9, 0x0064), 0, 0),  # an OEM subsystem vendor
        ((0x10B5, 0x8796, 0x10B5, 0x8796), 0, 0),  # a PLX Gen3 switch
        ((0x1000, 0xC030, 0x1000, None), 0, 0),
    ],
)
def test_bcm_gen(ids, level, gen):
    assert pci.bcm_gen(*ids, level) == gen


def _two_level(part: str, upper: str, lower: str) -> dict:
    """One GPU and one NIC, each below its own lower-level switch of one two-level chip."""
    tree = f"""01.0 spr-rp
  {part} subsys={upper}
    {part} > {part} subsys={lower}
      {part} > h100
    {part} > {part} subsys={lower}
      {part} > cx7-ib"""
    return {
        "machine": {"hostname": "bcm", "config": 4096},
        "cpu": {"sockets": 1, "cores": 2, "threads": 1},
        "rootbus": [{"id": "0000:10", "node": 0, "tree": tree}],
    }


@pytest.mark.parametrize(
    "part, upper, lower, cls",
    [
        ("pex88096", "1000:a064", "1000:a064", "PIX"),  # Gen4: flattened (nvidia-smi: PXB)
        ("pex890", "1000:0064", "1000:1064", "PIX"),  # Gen5 in base mode: flattened (nvidia-smi: PXB)
        ("pex890", "1000:a064", "1000:a064", "PXB"),  # Gen5 without the level-coded ids: two switches
        ("pex890", "1000:1064", "1000:0064", "PXB"),  # levels the wrong way round
        ("pex88096", "15d9:a064", "15d9:a064", "PXB"),  # an OEM's subsystem vendor
    ],
)
def test_gpu_nic_class_follows_nccl(tmp_path, part, upper, lower, cls):
    result = scan(str(generate(_two_level(part, upper, lower), tmp_path / "m")), nvml="off")
    topo = result.topology
    (path,) = [p for p in result.paths if {topo.by_id(p.a).kind.name, topo.by_id(p.b).kind.name} == {"GPU", "NIC"}]
    assert path.pcie.name == cls
