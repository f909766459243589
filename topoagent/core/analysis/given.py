"""Classes a source states outright (cells of a pasted ``nvidia-smi topo -m``) checked against
the classes the pasted ``lspci`` tree gives for the same pairs."""

from __future__ import annotations

from topoagent.core.analysis.paths import pcie_class
from topoagent.core.pathclass import PathClass
from topoagent.core.topology import Topology

__all__ = ["matrix_vs_tree"]


def matrix_vs_tree(topo: Topology) -> str | None:
    """Where a pasted ``nvidia-smi topo -m`` and a pasted ``lspci`` tree both give a pair's
    class, compare them; a note for the nvidia-smi source status when they disagree.

    The two were matched by PCI bus order (an assumption, :mod:`topoagent.core.paste`),
    so a disagreement says the match may be wrong.  The matrix's classes are used.
    """
    devs = [d for d in topo.devices if d.label is not None and d.root_bus is not None]
    differ = []
    for i, a in enumerate(devs):
        for b in devs[i + 1 :]:
            token = topo.given_token(a, b)
            stated = PathClass.from_token(token) if token is not None else None
            if stated is None or stated in (PathClass.X, PathClass.NV):
                continue  # NV# hides the PCIe class; "?" says nothing
            cls, known = pcie_class(topo, a, b)
            if known and cls is not stated:
                differ.append(f"{a.label}/{b.label} {token} in the matrix, {cls.token} from lspci")
    if not differ:
        return None
    return (
        f"matrix and lspci disagree on {len(differ)} pair(s) ({'; '.join(differ[:3])}"
        f"{'; …' if len(differ) > 3 else ''}): the bus-order match may be wrong; the matrix's classes are used"
    )
