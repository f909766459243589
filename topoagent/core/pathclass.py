"""Path classes: one ordered vocabulary for how two devices reach each other.

The order is NCCL's, best first: its path types are numbered so that a smaller one is a better
path (NVIDIA/nccl src/graph/topo.h, src/include/graph.h since NCCL 2.30: ``PATH_LOC`` 0,
``PATH_NVL`` 1, ``PATH_NVB`` 2, ``PATH_C2C`` 3, ``PATH_PIX`` 4, ``PATH_PXB`` 5, ``PATH_P2C`` 6,
``PATH_PXN`` 7, ``PATH_PHB`` 8, ``PATH_SYS`` 9, ``PATH_NET`` 10, ``PATH_DIS`` 11), and NCCL
compares them as numbers (``ncclTopoCheckGdr``: GPUDirect RDMA only up to ``netGdrLevel``).
``nvidia-smi topo -m`` adds ``NODE`` (between host bridges inside one NUMA node), which NCCL's
``PHB`` covers: it sits between PHB and SYS.  The classes this package computes or names are::

    X < NV < C2C < PIX < PXB < P2C < PXN < PHB < NODE < SYS

PXN (a GPU's path to a NIC through an NVLinked peer GPU, :mod:`topoagent.core.analysis.ncclnet`)
names how NCCL routes a rail, never a path of the PCIe tree.  NCCL's NVB (NVLink through another
GPU), NET and DIS are left out: nothing here computes or states them.  The values are ranks,
not NCCL's numbers (NODE has none).
"""

from __future__ import annotations

from enum import IntEnum

from topoagent.core.digits import is_decimal

__all__ = ["XGMI", "PathClass"]

#: What rocm-smi and amd-smi print for a pair of GPUs joined by XGMI (``Link Type``).
XGMI = "XGMI"


class PathClass(IntEnum):
    """A path class, ordered best to worst (NCCL's order, nvidia-smi's NODE between PHB and SYS).

    :attr:`token` is what ``nvidia-smi topo -m`` prints for it.  C2C (a GPU's NVLink-C2C to its
    Grace CPU) and P2C (a C2C GPU to a NIC on its own CPU) are NCCL's names only: nvidia-smi's
    matrix pairs GPUs and NICs and prints ``SYS`` from a C2C GPU to every NIC, its own CPU's
    included (sgl-project/sglang#11208 pastes a GB200 tray's matrix), so their token is ``SYS``.
    PXN is NCCL's route, not a cell: its token is its name, and no cell reads as it.
    """

    X = 0
    NV = 1
    C2C = 2
    PIX = 3
    PXB = 4
    P2C = 5
    PXN = 6
    PHB = 7
    NODE = 8
    SYS = 9

    @property
    def token(self) -> str:
        """The ``nvidia-smi topo -m`` token: the name, ``SYS`` for NCCL's C2C and P2C, and ``NV``
        without its link count (a cell says ``NV18``: :attr:`topoagent.core.analysis.paths.Path.token`)."""
        return _TOKENS.get(self, self.name)

    @classmethod
    def from_token(cls, token: str) -> PathClass | None:
        """The class of an ``nvidia-smi topo -m`` cell (``X``, ``NV12``, ``PIX`` ... ``SYS``);
        None for anything else (``?``, an unreadable cell, or a name nvidia-smi never prints)."""
        if token.startswith("NV"):
            return cls.NV if is_decimal(token[2:]) else None
        return _BY_TOKEN.get(token)


#: Tokens that are not the class's name: nvidia-smi has no C2C or P2C.
_TOKENS = {PathClass.C2C: "SYS", PathClass.P2C: "SYS"}
#: The classes nvidia-smi prints by name (NV# is matched by prefix; PXN is never printed).
_BY_TOKEN = {c.name: c for c in PathClass if c not in _TOKENS and c not in (PathClass.NV, PathClass.PXN)}
