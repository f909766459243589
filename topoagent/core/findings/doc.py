"""``docs/findings.md``, generated from the catalogue (:mod:`~topoagent.core.findings.catalogue`).

:func:`page` is the whole page: the hand-written :data:`HEADER` and :data:`FOOTER` around a
table of every code and one section per code, grouped by family.  ``python -m
topoagent.core.findings`` writes it; ``tests/core/findings/test_catalogue.py`` fails when the file differs.
"""

from __future__ import annotations

from topoagent.core.findings.catalogue import CATALOGUE, FAMILIES, PROOF_BOUND, Entry, Example, Grade, Wording
from topoagent.core.findings.finding import Finding

__all__ = ["FOOTER", "HEADER", "RULE_END", "example_text", "page"]

HEADER = """\
# Findings catalogue

<!-- Generated from topoagent/core/findings/catalogue.py by `python -m topoagent.core.findings`:
     edit the catalogue (or the header and footer in topoagent/core/findings/doc.py), not this file. -->

Every finding has a stable `code` (never reused), a `severity`, `subjects` (device ids, or
`nodeN` for NUMA nodes), a one-sentence `message`, `evidence` (the sysfs paths or values that
prove it) and a concrete `remedy`. `topoagent scan --fail-on SEVERITY` exits 1 when a finding at
or above SEVERITY is raised (default `critical`).

This page is the catalogue (`topoagent/core/findings/catalogue.py`) the checks word their
findings from: for each code its severity rule, what kind of evidence proves it, the outputs
that carry it, the alert that pages on it (`deploy/prometheus/topoagent-rules.yml`), its
messages and remedies as templates (a `{field}` is filled in by the check; where the remedy
differs by host kind -- bare metal, guest, Grace, pasted text -- each is given) and an example.
Every finding a scan raises is in every view of the scan's findings: text, JSON, exit status,
Nagios/NPD, `draw`'s list, the daemon's `topoagent_finding` series, NFD
`topoagent.findings.worst` and `health`'s drain reason. An output that treats some codes apart
(an NFD label, a drawing's mark, a daemon event) reads them from the entries, so a new code
reaches what its entry names.

Each example is real output of a fixture in `tests/fixtures/machines/` (see
`tests/golden/*/scan.json`) or of the test it names; `tests/core/findings/test_catalogue.py` fails when
this page differs from the catalogue, when a fixture's example is not that fixture's output, and
when a code is raised by no fixture nor named test.

## The rule: every finding names its evidence, and the weakest link bounds its severity

Each evidence line is of one kind -- a file the kernel exports, config space, NVML, a token of
pasted tool output, an expected topology, or an inference from other facts (a path class the
tree gives, a NIC's node reached through its paths) -- and a finding is never more severe than
its weakest line allows (the catalogue's `finding` clamps it):

"""

FOOTER = """\
---

`topoagent plan` adds notes of its own about the plan rather than the host (`CPUSET_EMPTY`,
`CORES_UNKNOWN`, `RANKS_SHARE_CORES`, `SPLIT_CROSSES_NUMA`, `SPLIT_UNEVEN`); they are described in
[plan.md](plan.md). The daemon's change events (`device_removed`, `link_width_changed`,
`finding_raised` ...) are listed in [daemon.md](daemon.md).
"""


RULE_END = """
What an input can only suggest is info or warning, never critical; what it cannot show at all
is not claimed: a paste shows NUMA nodes, not sockets (`GPU_NIC_CROSS_NUMA`, not
`GPU_NIC_CROSS_SOCKET`); a filtered or cut listing shows no absence (`NO_RDMA_NIC`); a matrix
alone only suggests a guest.  `--fail-on critical` on pasted text therefore exits 1 only where
the paste itself proves the fault (an `ACSCtl` line with redirect bits set, a SOC cell that
names sockets).  Remedies are written per kind of host -- bare metal, guest, Grace, pasted text
-- and a finding says the one that fits the host it is about.

## Every code
"""


def page() -> str:
    """The text of ``docs/findings.md``."""
    parts = [HEADER + _bounds() + RULE_END, _table()]
    for family in FAMILIES.values():
        parts.append(f"## {family.title}\n" + (f"\n{family.about}\n" if family.about else ""))
        parts.extend(_section(e) for e in CATALOGUE.values() if e.family == family.module)
    parts.append(FOOTER)
    return "\n".join(parts)


def example_text(f: Finding) -> str:
    """A finding as the page shows it: severity and message, subjects, the first three
    evidence lines and the remedy."""
    lines = [f"[{f.severity.label}] {f.message}", f"    subjects: {', '.join(f.subjects)}"]
    lines += [f"    evidence: {e.path} = {e.value if e.value is not None else '(none)'}" for e in f.evidence[:3]]
    lines.append(f"    remedy:   {f.remedy}")
    return "\n".join(lines)


def _table() -> str:
    rows = ["| code | severity | proved by |", "|---|---|---|"]
    for e in _in_page_order():
        rows.append(
            f"| [`{e.code}`](#{e.code.lower()}) | {_severity_cell(e.severity)} | "
            + ", ".join(p.name.lower().replace("_", " ") for p in e.proof)
            + " |"
        )
    return "\n".join(rows) + "\n"


def _bounds() -> str:
    rows = ["| evidence | at most |", "|---|---|"]
    rows += [f"| {p.value} | {b.label} |" for p, b in PROOF_BOUND.items()]
    return "\n".join(rows) + "\n"


def _in_page_order() -> list[Entry]:
    return [e for family in FAMILIES for e in CATALOGUE.values() if e.family == family]


def _severity_cell(grades: tuple[Grade, ...]) -> str:
    first, *others = grades
    if not others:
        return first.severity.label
    return f"{first.severity.label} ({'; '.join(f'{g.severity.label}: {g.when}' for g in others)})"


def _section(e: Entry) -> str:
    out = [f"### {e.code}", "", e.about, ""]
    out += _listed("Severity", [g.severity.label + (f": {g.when}" if g.when else "") for g in e.severity])
    out += _listed("Proved by", [p.value for p in e.proof])
    capped = [p for p in e.proof if PROOF_BOUND[p] < e.worst]
    if capped:
        out += _listed(
            "Bounded by its evidence",
            [f"at most {PROOF_BOUND[p].label} where a line of its evidence is {p.value}" for p in capped],
        )
    out += _listed("Outputs", [o.value for o in e.outputs] + ([f"the alert `{e.alert}`"] if e.alert else []))
    out += _listed("Message", [_wording(w) for w in e.messages.values()])
    out += _listed("Remedy", [_wording(w) for w in e.remedies.values()])
    for x in e.examples:
        out += _example(x)
    return "\n".join(out[:-1]) + "\n"


def _listed(title: str, items: list[str]) -> list[str]:
    """``**Title:** item`` for one item; a list of them for more."""
    if len(items) == 1:
        return [f"**{title}:** {items[0]}", ""]
    return [f"**{title}:**", "", *(f"- {i}" for i in items), ""]


def _wording(w: Wording) -> str:
    if w.host is not None:
        said = w.host.value + (f" ({w.when})" if w.when else "")
    else:
        said = w.when
    return (f"{said}: " if said else "") + _code(w.text)


def _code(text: str) -> str:
    """A template as Markdown code (no template holds a backtick: tests/core/findings/test_catalogue.py)."""
    return f"`{text}`"


def _example(x: Example) -> list[str]:
    where = f"From the `{x.fixture}` fixture:" if x.fixture else (f"From {x.source}:" if x.source else "")
    return ([where, ""] if where else []) + ["```text", x.text, "```", ""]
