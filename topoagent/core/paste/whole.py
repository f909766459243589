"""One host from whole pastes: every tool output found in each text, read and merged.

:func:`read_pastes` takes texts (a bug report, an e-mail, a ``nvidia-bug-report`` excerpt) and
the outputs given by kind (the ``--nvidia-smi-topo`` … flags), finds each tool's output in the
texts (:func:`~topoagent.core.parse.segment.find_outputs`), reads each with its kind's parser,
and joins them into one snapshot: the drawing (:func:`_drawing`), then the facts that enrich it
(:mod:`.facts`).  What was recognised where, and what was not (line ranges), is the ``paste``
source's detail; the lines each parser could not read are probe errors.  A text in which
nothing is recognised is refused with one line (:class:`~topoagent.core.errors.OfflineInputError`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from topoagent.core.errors import InputError, OfflineInputError
from topoagent.core.parse import segment as seg
from topoagent.core.parse.amd_topo import AmdTopology
from topoagent.core.parse.lspci_tree import LspciTree, LspciTreeNode
from topoagent.core.parse.lspci_verbose import LspciFunction, LspciListing
from topoagent.core.parse.nvsmi_p2p import P2PMatrix
from topoagent.core.parse.nvsmi_topo import TopoMatrix
from topoagent.core.parse.paste import Skipped
from topoagent.core.paste.amd import given_token, snapshot_from_amd
from topoagent.core.paste.facts import (
    apply_aer,
    apply_numactl,
    apply_nvlink,
    apply_p2p,
    apply_query,
    apply_rdma,
    gpu_labels,
    is_gpu,
)
from topoagent.core.paste.hwloc import snapshot_from_lstopo
from topoagent.core.paste.lspci import snapshot_from_lspci
from topoagent.core.paste.matrix import snapshot_from_topo_matrix
from topoagent.core.paste.merge import merge
from topoagent.core.paste.nccl_xml import snapshot_from_nccl_xml
from topoagent.core.snapshot import GivenPath, ProbeError, Snapshot, SourceStatus

__all__ = ["PasteInput", "combine", "read_pastes"]


class PasteInput(msgspec.Struct, frozen=True):
    """One text to read: where it came from (``--paste issue.txt``), the text, and its kind
    where the option said it (None: find the outputs in it)."""

    origin: str
    text: str
    kind: seg.PasteKind | None = None


class _Part(msgspec.Struct, frozen=True):
    origin: str
    text: str
    command: str | None


#: A command line that shows part of a listing: lspci -s/-d, a grep.
_FILTERED = re.compile(r"(?:^|\s)-[sd]\b|\|\s*e?grep\b")


class _Reading:
    """The outputs of every input, parsed, and the report of what was found."""

    def __init__(self) -> None:
        self.parts: dict[seg.PasteKind, list[_Part]] = {}
        self.parsed: dict[seg.PasteKind, list[tuple[_Part, Any]]] = {}
        self.report: list[str] = []
        self.notes: list[str] = []
        self.errors: list[ProbeError] = []
        self.partial: list[str] = []
        #: What every output read (set aside or not) states that a host has one of.
        self.census: list[tuple[str, str, str]] = []

    def find(self, given: PasteInput) -> None:
        if given.kind is not None:
            self.parts.setdefault(given.kind, []).append(_Part(given.origin, given.text, None))
            return
        found = seg.find_outputs(given.text)
        where = "; ".join(f"{s.where}: {s.kind.name}" for s in found.segments)
        skipped = ", ".join(s.where for s in found.unrecognised)
        self.report.append(
            f"{given.origin}: " + (where or "no tool output") + (f"; not recognised: {skipped}" if skipped else "")
        )
        for kind in found.kinds():
            # a kind whose every start is another output (a matrix): one part each; else its
            # outputs in one text are read as one (a -q broken by prose, lspci records)
            outputs = [(s,) for s in found.of(kind)] if kind.restarts else [found.of(kind)]
            for segs in outputs:
                origin = f"{given.origin} {segs[0].where}" if len(outputs) > 1 else given.origin
                text = seg.segment_text(found, kind, segs)
                self.parts.setdefault(kind, []).append(_Part(origin, text, segs[0].command))
            filtered = [s.command for s in found.of(kind) if s.command and _FILTERED.search(s.command)]
            if filtered:
                self.partial.append(f"{given.origin}: {filtered[0]}: a filtered listing, only what the filter kept")

    def parse(self) -> None:
        for kind, parts in self.parts.items():
            for part in parts:
                try:
                    value = kind.read(part.text, part.command)
                except InputError as exc:
                    self.errors.append(ProbeError(f"{part.origin}: {kind.name}", f"nothing read: {exc}"))
                    continue
                self.census += [(fact, v, f"{kind.name} ({part.origin})") for fact, v in kind.census(value)]
                if kind.one_per_host and self.parsed.get(kind):
                    self.notes.append(
                        f"a second {kind.name} output ({part.origin}) set aside: one host is read at a time"
                    )
                    continue
                self.parsed.setdefault(kind, []).append((part, value))
                self.errors += _skipped(part.origin, kind, value)

    def two_hosts(self) -> str | None:
        """Where two outputs state one fact differently (their census): they are two hosts'."""
        seen: dict[str, tuple[str, str]] = {}
        for fact, value, where in self.census:
            if fact in seen and seen[fact][0] != value:
                return f"{fact} is {seen[fact][0]} in {seen[fact][1]} but {value} in {where}"
            seen.setdefault(fact, (value, where))
        return None

    def first(self, kind: seg.PasteKind) -> Any:
        got = self.parsed.get(kind)
        return got[0][1] if got else None

    def found(self, *of: seg.PasteKind) -> list[Any]:
        """Everything found in the outputs of these kinds (their parsers give found, skipped)."""
        return [x for kind in of for _, (items, _) in self.parsed.get(kind, []) for x in items]


def _skipped(origin: str, kind: seg.PasteKind, value: Any) -> list[ProbeError]:
    """The lines a parser skipped, as probe errors (where the snapshot made of it does not
    report them)."""
    if kind.own_report:
        return []
    skipped: tuple[Skipped, ...] = value[1] if isinstance(value, tuple) else getattr(value, "skipped", ())
    return [ProbeError(f"{origin}: {kind.name} {s.where}", s.why) for s in skipped]


def read_pastes(inputs: Sequence[PasteInput]) -> Snapshot:
    """One snapshot from pasted texts (see the module's docstring).  Raises
    :class:`OfflineInputError` when no tool output is recognised in any of them."""
    r = _Reading()
    for given in inputs:
        r.find(given)
    r.parse()
    if (clash := r.two_hosts()) is not None:
        origins = ", ".join(i.origin for i in inputs)
        raise OfflineInputError(
            f"{origins} holds two hosts' outputs ({clash}): one host is read at a time; give each host's outputs alone"
        )
    if not r.parsed:
        origins = ", ".join(i.origin for i in inputs)
        why = "; ".join(e.error for e in r.errors[:2])
        looked = ", ".join(k.name for k in seg.KINDS)
        raise OfflineInputError(
            f"no tool output recognised in {origins}" + (f" ({why})" if why else f" (looked for: {looked})")
        )
    snap = _drawing(r)
    snap = _enrich(r, snap)
    if not any(k.lists_nics for k in r.parsed):
        listings = ", ".join(dict.fromkeys(k.evidence for k in seg.KINDS if k.lists_nics))
        r.partial.append(f"no output given lists the host's NICs ({listings}): NICs unknown")
    status = SourceStatus(
        "paste",
        "partial" if r.notes or r.errors else "ok",
        "; ".join([*r.report, *r.notes]) or None,
    )
    return msgspec.structs.replace(
        snap,
        sources=(status, *snap.sources),
        probe_errors=snap.probe_errors + tuple(r.errors),
        partial_inputs=snap.partial_inputs + tuple(r.partial),
    )


def combine(
    matrix: TopoMatrix | None,
    tree: tuple[LspciTreeNode, ...] | LspciTree | None,
    verbose: tuple[LspciFunction, ...] | LspciListing | None,
    *,
    names: Callable[[int, int], str | None] | None = None,
) -> Snapshot:
    """The snapshot of any combination of parsed outputs (at least one).

    ``tree`` and ``verbose`` may be what the lenient readers return (:class:`LspciTree`,
    :class:`LspciListing`): their skipped lines become probe errors and their notes source
    notes.  ``names`` looks up a name for ids that lspci printed as ``Device XXXX``.
    """
    lspci = None
    if tree is not None or verbose is not None:
        lspci = snapshot_from_lspci(tree, verbose, names=names)
    if matrix is None:
        if lspci is None:
            raise OfflineInputError("no output given")
        return lspci
    m = snapshot_from_topo_matrix(matrix)
    if lspci is None:
        return m
    try:
        return merge(m, lspci)
    except OfflineInputError as exc:
        # The two cannot be matched (an lspci excerpt, a filtered listing, another host).  The
        # matrix still describes every GPU and NIC with its path classes: analyse it alone and
        # say why lspci's facts were set aside, rather than refuse the whole input.
        why = f"not joined to the nvidia-smi matrix: {exc}; analysed from the matrix alone"
        return msgspec.structs.replace(
            m,
            sources=m.sources
            + tuple(msgspec.structs.replace(s, status="unavailable", detail=why) for s in lspci.sources),
        )


def _drawing(r: _Reading) -> Snapshot:
    """The snapshot that places the devices: ``nvidia-smi topo -m`` with ``lspci -tv``/``-vvv``
    (:func:`combine`), else ``lstopo``, else an NCCL topology file, else an AMD tool's tables
    (which add their stated pairs next to a drawing), else an empty host for the other facts
    (``nvidia-smi -q`` adds GPUs)."""
    matrix, tree, verbose = r.first(seg.TOPO_M), r.first(seg.LSPCI_TREE), r.first(seg.LSPCI_VERBOSE)
    amd: AmdTopology | None = r.first(seg.AMD_SMI) or r.first(seg.ROCM_SMI)
    lstopo, nccl = r.first(seg.LSTOPO), r.first(seg.NCCL_XML)
    if nccl is not None and (matrix is not None or tree is not None or verbose is not None or lstopo is not None):
        r.notes.append("the NCCL topology XML set aside: the host is drawn from the other tools' output")
    if matrix is not None or tree is not None or verbose is not None:
        snap = combine(matrix, tree, verbose)
        if lstopo is not None:
            snap = _numa_from(snap, snapshot_from_lstopo(lstopo))
    elif lstopo is not None:
        snap = snapshot_from_lstopo(lstopo)
    elif nccl is not None:
        snap = snapshot_from_nccl_xml(nccl)
    elif amd is not None:
        return snapshot_from_amd(amd)
    else:
        return Snapshot(hostname=None, root=None, sources=())
    if amd is not None:
        snap = _with_amd(snap, amd, r.notes)
    return snap


def _numa_from(snap: Snapshot, lstopo: Snapshot) -> Snapshot:
    """``snap`` with lstopo's NUMA nodes (their CPUs) and its devices' RDMA names and netdevs."""
    names = {f.bdf: f for f in lstopo.pci}
    fns = tuple(
        msgspec.structs.replace(
            f,
            rdma_names=f.rdma_names or names[f.bdf].rdma_names,
            numa_node=f.numa_node if f.numa_node is not None else names[f.bdf].numa_node,
            numa_source=f.numa_source if f.numa_node is not None else names[f.bdf].numa_source,
        )
        if f.bdf in names
        else f
        for f in snap.pci
    )
    return msgspec.structs.replace(
        snap,
        pci=fns,
        numa_nodes=lstopo.numa_nodes or snap.numa_nodes,
        netdevs=snap.netdevs + lstopo.netdevs,
        rdma=snap.rdma + lstopo.rdma,
    )


def _with_amd(snap: Snapshot, amd: AmdTopology, notes: list[str]) -> Snapshot:
    """``snap`` (a tree) with an AMD tool's stated pairs, joined by BDF (amd-smi) or by the
    tools' BDF-order numbering (rocm-smi)."""
    snap, note = gpu_labels(snap)
    label_of = {f.bdf: f.label for f in snap.pci if is_gpu(f) and f.label}
    rename = {g.label: label_of.get(g.bdf, g.label) for g in amd.gpus} if any(g.bdf for g in amd.gpus) else {}
    if note and not rename:
        notes.append(f"{amd.tool} GPU[i] joined to the i-th AMD GPU in PCI bus order ({note})")
    given = tuple(
        GivenPath(rename.get(p.a, p.a), rename.get(p.b, p.b), tok)
        for p in amd.pairs
        if (tok := given_token(p)) is not None
    )
    return msgspec.structs.replace(snap, given_paths=snap.given_paths + given)


def _enrich(r: _Reading, snap: Snapshot) -> Snapshot:
    """``snap`` with every enriching output's facts (:mod:`.facts`)."""
    query = r.first(seg.QUERY)
    if query is not None:
        snap, notes = apply_query(snap, query)
        r.notes += notes
    numactl = r.first(seg.NUMACTL)
    if numactl is not None:
        snap = apply_numactl(snap, numactl)
    ports = r.found(seg.IBDEV2NETDEV, seg.IBV_DEVINFO)
    if ports:
        snap, notes = apply_rdma(snap, ports)
        r.notes += notes
    p2p: P2PMatrix | None = r.first(seg.P2P)
    nvlink = r.found(seg.NVLINK)
    if p2p is not None or nvlink:
        snap, note = gpu_labels(snap)
        if note:
            r.notes.append(note)
    if p2p is not None:
        letter = {"read": "r", "write": "w", "nvlink": "n", "atomics": "a", "prop": "p"}.get(p2p.capability or "")
        snap = apply_p2p(snap, p2p, f"nvidia-smi topo -p2p {letter}" if letter else "nvidia-smi topo -p2p")
    if nvlink:
        snap = apply_nvlink(snap, nvlink)
    events = r.found(seg.DMESG)
    if events:
        snap = apply_aer(snap, events)
    return snap
