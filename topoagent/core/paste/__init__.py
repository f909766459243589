"""Snapshots from pasted tool output: ``nvidia-smi topo -m``, ``lspci -tv`` and ``lspci -vvv``.

Pure conversions (:mod:`.matrix`, :mod:`.lspci`, :mod:`.merge`): the parsed text in, a
:class:`~topoagent.core.snapshot.Snapshot` out, never a path or a host file (reading the files is
the CLI's and :func:`topoagent.core.api.read_offline`'s job).  A snapshot made here has
``root = None``: the kernel's state (loaded modules, command line, IOMMU types, CPU topology)
is unknown, not empty, and the analysis treats it so.

What each source gives:

* the matrix: GPUs and NICs by label (``GPU0``, ``NIC3``), no BDF, no tree; the path class of
  every pair verbatim (:class:`~topoagent.core.snapshot.GivenPath`); a GPU's CPU affinity and, where
  it is one node, its NUMA node; the NICs' RDMA names from the ``NIC Legend``; Grace GPU memory
  nodes from ``GPU NUMA ID``.  NUMA nodes are those the GPUs name, their CPUs the union of those
  GPUs' CPU affinities; sockets are unknown.
* ``lspci -tv``: the tree (``sysfs_path``-like strings are built from the nesting, so the
  ancestry code that reads sysfs paths works unchanged) and device names (ids with ``-tvnn``).
* ``lspci -vvv``: class, ids (``-nn``), driver, ``NUMA node``, link (``LnkCap`` = max,
  ``LnkSta`` = current), port type and ACS, as a :class:`~topoagent.core.snapshot.ConfigSpace`.
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

import msgspec

from topoagent.core.errors import InputError, OfflineInputError
from topoagent.core.parse.lspci_tree import LspciTree, read_lspci_tree
from topoagent.core.parse.lspci_verbose import LspciListing, read_lspci_verbose
from topoagent.core.parse.nvsmi_topo import read_topo_matrix
from topoagent.core.paste.lspci import snapshot_from_lspci
from topoagent.core.paste.matrix import snapshot_from_topo_matrix
from topoagent.core.paste.merge import MATCH_ASSUMPTION, merge
from topoagent.core.paste.whole import PasteInput, combine, read_pastes
from topoagent.core.read import Collection
from topoagent.core.read.pciids_db import lookup
from topoagent.core.snapshot import ProbeError, Snapshot, SourceStatus

T = TypeVar("T")

__all__ = [
    "MATCH_ASSUMPTION",
    "OfflineInputError",
    "PasteInput",
    "read_pastes",
    "collect",
    "combine",
    "merge",
    "read_offline",
    "snapshot_from_lspci",
    "snapshot_from_topo_matrix",
]


#: Input name -> (source name, tool as people call it).
_TOOLS = {
    "nvidia_smi_topo": ("nvidia-smi", "nvidia-smi topo -m"),
    "lspci_tree": ("lspci", "lspci -tv"),
    "lspci_verbose": ("lspci", "lspci -vvv"),
}


def read_offline(
    nvidia_smi_topo: str | None = None, lspci_tree: str | None = None, lspci_verbose: str | None = None
) -> Snapshot:
    """A snapshot from pasted tool output instead of a host tree: the *texts* of
    ``nvidia-smi topo -m``, ``lspci -tv`` and ``lspci -vvv`` (any combination, at least one).

    A paste is evidence: each text is read leniently (lines that cannot be read are skipped
    and listed as probe errors such as ``lspci -tv lines 12-14``).  An input that holds no
    output at all is reported as an unavailable source when another input was read; when
    none was, :class:`OfflineInputError` is raised (``input`` names the first argument at
    fault; the parser's error is its ``__cause__``), as it is for outputs that cannot be one
    host.
    """
    failures: list[tuple[str, OfflineInputError]] = []

    def parse(name: str, text: str | None, parser: Callable[[str], T]) -> T | None:
        if text is None:
            return None
        try:
            if not text.strip():
                raise OfflineInputError("empty", input=name)
            return parser(text)
        except OfflineInputError as exc:
            failures.append((name, exc))
        except InputError as exc:
            err = OfflineInputError(str(exc), input=name)
            err.__cause__ = exc
            failures.append((name, err))
        return None

    matrix = parse("nvidia_smi_topo", nvidia_smi_topo, read_topo_matrix)
    tree = parse("lspci_tree", lspci_tree, read_lspci_tree)
    verbose = parse("lspci_verbose", lspci_verbose, read_lspci_verbose)
    if matrix is None and tree is None and verbose is None:
        if failures:
            raise failures[0][1]
        raise OfflineInputError("no output given")
    names = None
    if _needs_names(tree, verbose):
        names = lookup
    snap = combine(matrix, tree, verbose, names=names)
    if failures:
        errors = tuple(ProbeError(path=_TOOLS[name][1], error=f"nothing read: {exc}") for name, exc in failures)
        status = tuple(
            SourceStatus(_TOOLS[name][0], "unavailable", f"{_TOOLS[name][1]}: {exc}") for name, exc in failures
        )
        snap = msgspec.structs.replace(snap, sources=snap.sources + status, probe_errors=snap.probe_errors + errors)
    return snap


def _needs_names(tree: LspciTree | None, verbose: LspciListing | None) -> bool:
    """Whether a pasted lspci names a device only by its id (``Device 2335``): then, and only
    then, the analysing machine's pci.ids is worth reading."""
    descs = [n.description for n in tree.walk()] if tree is not None else []
    descs += [f.description for f in verbose.functions] if verbose is not None else []
    return any(d and ("Device " in d or "device " in d) for d in descs)


#: Input field -> the kind (topoagent.core.parse.segment) its option forces.
_FORCED = {
    "nvidia_smi_topo_text": "nvidia-smi topo -m",
    "lspci_tree_text": "lspci -tv",
    "lspci_verbose_text": "lspci -vvv",
}


def collect(c: Collection) -> None:
    """The primary source of an offline scan: the snapshot of the pasted outputs.  With whole
    pastes (``--paste``) every input is read by :func:`read_pastes`, the per-kind options as
    outputs of their kind."""
    i = c.inputs
    if not i.paste_texts:
        c.snapshot = read_offline(i.nvidia_smi_topo_text, i.lspci_tree_text, i.lspci_verbose_text)
        return
    origins = i.origins or {}
    given = [
        PasteInput(origins.get(field, kind), text, kind)
        for field, kind in _FORCED.items()
        if (text := getattr(i, field)) is not None
    ]
    given += [
        PasteInput(origins.get(f"paste_texts#{n}", f"--paste #{n + 1}"), text) for n, text in enumerate(i.paste_texts)
    ]
    c.snapshot = read_pastes(given)
