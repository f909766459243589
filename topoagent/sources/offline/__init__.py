"""Snapshots from pasted tool output: ``nvidia-smi topo -m``, ``lspci -tv`` and ``lspci -vvv``.

Pure conversions (:mod:`.matrix`, :mod:`.lspci`, :mod:`.merge`): the parsed text in, a :class:`~topoagent.snapshot.Snapshot` out, never a
path or a host file (reading the files is the CLI's and :func:`topoagent.api.read_offline`'s
job).  A snapshot made here has ``root = None``: the kernel's state (loaded modules, command
line, IOMMU types, CPU topology) is unknown, not empty, and the analysis treats it so.

What each source gives:

* the matrix: GPUs and NICs by label (``GPU0``, ``NIC3``), no BDF, no tree; the path class of
  every pair verbatim (:class:`~topoagent.snapshot.GivenPath`); a GPU's CPU affinity and, where
  it is one node, its NUMA node; the NICs' RDMA names from the ``NIC Legend``; Grace GPU memory
  nodes from ``GPU NUMA ID``.  NUMA nodes are those the GPUs name, their CPUs the union of those
  GPUs' CPU affinities; sockets are unknown.
* ``lspci -tv``: the tree (``sysfs_path``-like strings are built from the nesting, so the
  ancestry code that reads sysfs paths works unchanged) and device names (ids with ``-tvnn``).
* ``lspci -vvv``: class, ids (``-nn``), driver, ``NUMA node``, link (``LnkCap`` = max,
  ``LnkSta`` = current), port type and ACS, as a :class:`~topoagent.snapshot.ConfigSpace`.
  Without a tree, parents come from the bridges' ``Bus: secondary=…, subordinate=…`` lines.

Given both a matrix and lspci, :func:`merge` names lspci's functions by the matrix's labels.
ASSUMPTION (stated in the source status): the matrix lists GPUs and NICs in PCI bus order --
GPU0 is the first NVIDIA GPU function in BDF order (nvidia-smi's own enumeration order), NIC0 the
first RDMA-capable NIC function (mlx5_N are numbered in probe order, which is bus order on
every host seen; bonded ports break it).  Counts that do not agree are refused rather than
matched halfway.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from topoagent.errors import InputError, OfflineInputError
from topoagent.parsers.lspci_tree import LspciTreeNode
from topoagent.parsers.lspci_verbose import LspciFunction
from topoagent.parsers.nvsmi_topo import TopoMatrix
from topoagent.snapshot import Snapshot
from topoagent.sources import Collection
from topoagent.sources.offline.lspci import snapshot_from_lspci
from topoagent.sources.offline.matrix import snapshot_from_topo_matrix
from topoagent.sources.offline.merge import MATCH_ASSUMPTION, merge

T = TypeVar("T")

__all__ = [
    "MATCH_ASSUMPTION",
    "OfflineInputError",
    "collect",
    "combine",
    "merge",
    "read_offline",
    "snapshot_from_lspci",
    "snapshot_from_topo_matrix",
]


def combine(
    matrix: TopoMatrix | None,
    tree: tuple[LspciTreeNode, ...] | None,
    verbose: tuple[LspciFunction, ...] | None,
) -> Snapshot:
    """The snapshot of any combination of parsed outputs (at least one)."""
    lspci = snapshot_from_lspci(tree, verbose) if tree is not None or verbose is not None else None
    if matrix is None:
        if lspci is None:
            raise OfflineInputError("no output given")
        return lspci
    m = snapshot_from_topo_matrix(matrix)
    return m if lspci is None else merge(m, lspci)




def read_offline(nvidia_smi_topo: str | None = None, lspci_tree: str | None = None,
                 lspci_verbose: str | None = None) -> Snapshot:
    """A snapshot from pasted tool output instead of a host tree: the *texts* of
    ``nvidia-smi topo -m``, ``lspci -tv`` and ``lspci -vvv`` (any combination, at least one).

    Raises :class:`OfflineInputError` for text that is not that output (``input`` names the
    argument; the parser's error is its ``__cause__``), for blank text, and for outputs that
    cannot be one host.
    """
    from topoagent.parsers.lspci_tree import parse_lspci_tree
    from topoagent.parsers.lspci_verbose import parse_lspci_verbose
    from topoagent.parsers.nvsmi_topo import parse_topo_matrix

    def parse(name: str, text: str | None, parser: Callable[[str], T]) -> T | None:
        if text is None:
            return None
        if not text.strip():
            raise OfflineInputError("empty", input=name)
        try:
            return parser(text)
        except InputError as exc:
            raise OfflineInputError(str(exc), input=name) from exc

    return combine(parse("nvidia_smi_topo", nvidia_smi_topo, parse_topo_matrix),
                   parse("lspci_tree", lspci_tree, parse_lspci_tree),
                   parse("lspci_verbose", lspci_verbose, parse_lspci_verbose))


def collect(c: Collection) -> None:
    """The primary source of an offline scan: the snapshot of the pasted outputs."""
    i = c.inputs
    c.snapshot = read_offline(i.nvidia_smi_topo_text, i.lspci_tree_text, i.lspci_verbose_text)
