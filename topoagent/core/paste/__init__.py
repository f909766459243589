"""Snapshots from pasted tool output instead of a host tree.

:func:`read_pastes` (:mod:`.whole`) finds every output in whole texts -- each kind read is one
record, :data:`topoagent.core.parse.segment.KINDS` -- and joins them into one host;
:func:`read_offline` reads the per-kind options' ``nvidia-smi topo -m``, ``lspci -tv`` and
``lspci -vvv``.  The conversions are pure (:mod:`.matrix`, :mod:`.lspci`, :mod:`.merge`,
:mod:`.hwloc`, :mod:`.amd`, :mod:`.facts`: parsed text in, a
:class:`~topoagent.core.snapshot.Snapshot` out, never a path or a host file).  A snapshot made
here has ``root = None``: the kernel's state (loaded modules, command line, IOMMU types, CPU
topology) is unknown, not empty, and the analysis treats it so.
"""

from __future__ import annotations

from typing import Any

import msgspec

from topoagent.core.errors import InputError, OfflineInputError
from topoagent.core.parse.lspci_tree import LspciTree
from topoagent.core.parse.lspci_verbose import LspciListing
from topoagent.core.parse.segment import LSPCI_TREE, LSPCI_VERBOSE, TOPO_M
from topoagent.core.paste.lspci import snapshot_from_lspci
from topoagent.core.paste.matrix import snapshot_from_topo_matrix
from topoagent.core.paste.merge import MATCH_ASSUMPTION, merge
from topoagent.core.paste.whole import PasteInput, combine, read_pastes
from topoagent.core.read import Collection
from topoagent.core.read.pciids_db import lookup
from topoagent.core.snapshot import ProbeError, Snapshot, SourceStatus

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


#: Input name -> the kind of output its option forces (its source: the tool's name).
_TOOLS = {"nvidia_smi_topo": TOPO_M, "lspci_tree": LSPCI_TREE, "lspci_verbose": LSPCI_VERBOSE}


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

    def parse(name: str, text: str | None) -> Any:
        if text is None:
            return None
        try:
            if not text.strip():
                raise OfflineInputError("empty", input=name)
            return _TOOLS[name].read(text, None)
        except OfflineInputError as exc:
            failures.append((name, exc))
        except InputError as exc:
            err = OfflineInputError(str(exc), input=name)
            err.__cause__ = exc
            failures.append((name, err))
        return None

    matrix = parse("nvidia_smi_topo", nvidia_smi_topo)
    tree = parse("lspci_tree", lspci_tree)
    verbose = parse("lspci_verbose", lspci_verbose)
    if matrix is None and tree is None and verbose is None:
        if failures:
            raise failures[0][1]
        raise OfflineInputError("no output given")
    names = None
    if _needs_names(tree, verbose):
        names = lookup
    snap = combine(matrix, tree, verbose, names=names)
    if failures:
        errors = tuple(ProbeError(path=_TOOLS[name].name, error=f"nothing read: {exc}") for name, exc in failures)
        status = tuple(
            SourceStatus(_TOOLS[name].evidence.split()[0], "unavailable", f"{_TOOLS[name].name}: {exc}")
            for name, exc in failures
        )
        snap = msgspec.structs.replace(snap, sources=snap.sources + status, probe_errors=snap.probe_errors + errors)
    return snap


def _needs_names(tree: LspciTree | None, verbose: LspciListing | None) -> bool:
    """Whether a pasted lspci names a device only by its id (``Device 2335``): then, and only
    then, the analysing machine's pci.ids is worth reading."""
    descs = [n.description for n in tree.walk()] if tree is not None else []
    descs += [f.description for f in verbose.functions] if verbose is not None else []
    return any(d and ("Device " in d or "device " in d) for d in descs)


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
        PasteInput(origins.get(f"{name}_text", kind.name), text, kind)
        for name, kind in _TOOLS.items()
        if (text := getattr(i, f"{name}_text")) is not None
    ]
    given += [
        PasteInput(origins.get(f"paste_texts#{n}", f"--paste #{n + 1}"), text) for n, text in enumerate(i.paste_texts)
    ]
    c.snapshot = read_pastes(given)
