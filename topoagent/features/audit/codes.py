"""The audit's findings: the names of its codes and the severity each may reach.

Their entries -- words, severity rule, what proves them -- are in the one findings catalogue
(:mod:`topoagent.core.findings.catalogue`, family ``audit``), so ``docs/findings.md`` lists them;
the checks that raise them stay in this slice (:mod:`.advise`), because they judge running
processes, not the host.  A code is never reused.
"""

from __future__ import annotations

from topoagent.core.findings import CATALOGUE, Severity

__all__ = ["CODES", "MEMORY_MIN_BYTES", "PROCESS_CPUS", "PROCESS_HCA", "PROCESS_MEMORY"]

PROCESS_CPUS = "PROCESS_CPUS_OFF_GPU_NODE"
PROCESS_MEMORY = "PROCESS_MEMORY_OFF_GPU_NODE"
PROCESS_HCA = "PROCESS_HCA_NOT_RAIL"

#: Code -> the most severe a finding of it gets (on another socket; the same socket: info), as
#: the catalogue's severity rule says.
CODES: dict[str, Severity] = {code: CATALOGUE[code].worst for code in (PROCESS_CPUS, PROCESS_MEMORY, PROCESS_HCA)}

#: Below this much anonymous memory off the GPU's node a process is not flagged for it: the
#: pages a small process touches cost little wherever they are.
MEMORY_MIN_BYTES = 256 << 20
