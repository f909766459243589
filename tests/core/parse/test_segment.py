"""Each paste kind is one record (``core/parse/segment.py``), and what the package does per kind
follows from it: the segmenter's kinds, the reader's one-per-host rule, the findings' proof
and bound, the documentation's table.  Adding a kind is its record and its tests."""

from __future__ import annotations

import pytest
from benchmarks.bench_paste import PASTES, SAMPLES

from tests.paths import REPO
from topoagent.core.api import analyse
from topoagent.core.findings.catalogue import Proof, evidence_bound, proof_of
from topoagent.core.findings.finding import Evidence, Severity
from topoagent.core.parse import segment
from topoagent.core.parse.segment import KINDS, PasteKind
from topoagent.core.paste import PasteInput, read_pastes

ALL = pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)


def test_every_record_is_a_kind_with_its_own_name() -> None:
    records = [v for v in vars(segment).values() if isinstance(v, PasteKind)]
    assert records == list(KINDS) and len({k.name for k in KINDS}) == len(KINDS)


@ALL
def test_a_kinds_evidence_is_pasted_proof_within_its_records_bound(kind: PasteKind) -> None:
    """What a kind's evidence lines start with is pasted proof (a kind missing from the
    catalogue's list would cap its findings at warning), bounded as its record says."""
    line = Evidence(f"{kind.evidence} GPU0: a field", "a value")
    assert proof_of(line) is Proof.PASTED
    assert evidence_bound([line]) is Severity.parse(kind.bound)


@ALL
def test_a_second_output_is_set_aside_exactly_for_a_kind_one_host_has_one_of(kind: PasteKind) -> None:
    text = (PASTES / SAMPLES[kind.name]).read_text()
    snap = read_pastes([PasteInput("first", text), PasteInput("second", text)])
    (status,) = [s for s in snap.sources if s.name == "paste"]
    assert (f"a second {kind.name} output (second) set aside" in (status.detail or "")) is kind.one_per_host


def test_every_evidence_line_from_a_paste_is_a_kinds_or_says_it_is_inferred() -> None:
    """No evidence line of a pasted host falls through to an inference by its spelling alone:
    it names the output it came from (a kind's ``evidence``), or says it is inferred."""
    texts = [*PASTES.glob("*.txt"), *(REPO / "tests/offline_samples").glob("*.txt")]
    lines = [
        e
        for path in texts
        for f in analyse(read_pastes([PasteInput(path.name, path.read_text())])).findings
        for e in f.evidence
    ]
    cited = {k.evidence for k in KINDS if any(e.path.startswith(k.evidence) for e in lines)}
    assert {"nvidia-smi topo -m", "nvidia-smi -q", "lspci", "ibdev2netdev", "dmesg"} <= cited
    assert not [
        e.path
        for e in lines
        if proof_of(e) is not Proof.PASTED and not (e.path.startswith(("path ", "inferred: ")) or " via " in e.path)
    ]


@ALL
def test_the_offline_page_lists_every_kind(kind: PasteKind) -> None:
    rows = (REPO / "docs/offline.md").read_text().splitlines()
    assert any(row.startswith(f"| `{kind.evidence}") for row in rows), kind.name
