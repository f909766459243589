"""``plan --format text``: the plan as a table a person reads, then the groups and notes."""

from __future__ import annotations

from typing import Any

from topoagent.core.advice.plan import Plan, visible_var
from topoagent.core.render.columns import columns
from topoagent.core.render.escape import shown
from topoagent.core.render.verdict import unknown_line, unusable_words
from topoagent.core.result import ScanResult
from topoagent.features.plan.common import nic_words, plan_of


def render(result: ScanResult, plan: Plan | None = None, **_: Any) -> str:
    """The per-GPU table (GPU, BDF, node, CPUs, rank CPUs, rail NICs; an unusable GPU's state
    instead of its ranks), groups, what is unknown, and what is wrong: the scan's findings and
    the plan's notes."""
    p = plan_of(result, plan)
    var = visible_var(result.topology)
    topo = result.topology
    k = p.ranks_per_gpu
    head = (
        f"Plan for {shown(topo.hostname or 'host')} (root {topo.root or 'pasted output'}): {len(p.gpus)} GPU(s)"
        + (f" ({lost} unusable)" if (lost := sum(1 for g in p.gpus if not g.usable)) else "")
        + ", "
        f"allowed CPUs {p.allowed if p.allowed is not None else 'unknown'}, {k} rank(s) per GPU"
    )
    lines = [head]
    if p.reserved:
        lines.append(f"Reserved for the OS and daemons: CPUs {p.reserved}")
    if not p.gpus:
        lines.append("No GPUs: nothing to place.")
    else:
        rows = [["GPU", "BDF", "NODE", "CPUs", "RANK CPUs" if k == 1 else f"RANK CPUs (x{k})", "RAIL NICs"]]
        for g in p.gpus:
            state = unusable_words(result, g.gpu)
            rows.append(
                [
                    g.gpu,
                    g.bdf or "-",
                    str(g.numa_node) if g.numa_node is not None else "?",
                    "-" if state else str(g.cpus) or "NONE",
                    state or " | ".join(str(c) or "NONE" for c in g.rank_cpus),
                    "-" if state else "; ".join(nic_words(r) for r in g.rails) or "none",
                ]
            )
        lines += [""] + columns(rows)
        lines += ["", "NUMA groups (one job per node):"]
        for ng in p.numa_groups:
            node = f"node {ng.numa_node}" if ng.numa_node is not None else "node ?"
            lines.append(
                f"  {node}: {' '.join(ng.gpus)}  {var}={ng.cuda_visible_devices}  CPUs {ng.cpus if ng.cpus else 'NONE'}"
            )
    if p.split:
        lines += ["", f"Split into {len(p.split)} group(s):"]
        for s in p.split:
            nics = ", ".join(r for r in s.nics) or "no NIC"
            lines.append(
                f"  group {s.index}: {' '.join(s.gpus)}  {var}={s.cuda_visible_devices}  "
                f"CPUs {s.cpus or 'NONE'}  NICs {nics}" + (f"  crosses {s.crosses}" if s.crosses else "")
            )
    # the scan's findings (the host's story, as scan tells it) and the plan's own notes
    notes = {(n.code, n.subjects): n for n in (*result.findings, *p.notes)}
    unknown = unknown_line(result)
    if unknown is not None:
        lines += ["", unknown]
    if notes:
        lines += ["", "What is wrong, and what to do:"]
        for n in sorted(notes.values(), key=lambda f: (-f.severity, f.code, f.subjects)):
            lines.append(f"  [{n.severity.label}] {n.code} ({shown(', '.join(n.subjects))}): {shown(n.message)}")
            lines.append(f"      do: {shown(n.remedy)}")
    return "\n".join(lines) + "\n"
