"""DGX H100 hosts of one build for the fleet tests: the good build under other names, and three
faulty copies (a GPU trained to x8, a rail NIC moved to the other socket, a GPU gone)."""

from __future__ import annotations

import copy
from pathlib import Path

from tests.fakesysfs import generate, load_machine

_RAIL = """
01.0 spr-rp
  pex890 subsys=1000:0064
    {nic}
    pex890 > pex890 subsys=1000:1064
      {gpu}
"""
_GOOD = {"nic": "pex890 > cx7-ib", "gpu": "pex890 > h100"}
#: What differs in the first rail (GPU0 and its NIC, root bus 0000:15) of each variant.
VARIANTS = {
    "good": {},
    "gpu-x8": {"gpu": "pex890 > h100 width=8"},
    "nic-moved": {"nic": "pex890"},
    "gpu-gone": {"gpu": "pex890"},
    # A BIOS update that turned ACS redirect on in GPU0's switch port.
    "acs-on": {"gpu": "pex890 acs=ReqRedir,CmpltRedir > h100"},
}


def description(variant: str = "good", hostname: str = "dgx-h100-01") -> dict:
    """The dgx-h100 description with its first rail changed as ``variant`` says."""
    desc = copy.deepcopy(load_machine("dgx-h100"))
    desc["machine"]["hostname"] = hostname
    rails = [r for r in desc["rootbus"] if r.get("tree") == "@rail"]
    first = rails[0]
    ids = list(first["id"])
    first["id"] = ids[1:]
    tree = _RAIL.format(**{**_GOOD, **VARIANTS[variant]})
    desc["rootbus"].insert(0, {"id": ids[0], "node": 0, "tree": tree})
    if variant == "nic-moved":  # its own root port on socket 1
        desc["rootbus"].append({"id": "0000:f0", "node": 1, "tree": "01.0 spr-rp > cx7-ib"})
    return desc


def host_root(variant: str, out: Path, hostname: str = "dgx-h100-01") -> Path:
    """Write the variant's fake host tree under ``out`` and return it."""
    return generate(description(variant, hostname), out)
