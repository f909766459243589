"""The audit's findings: stable codes, the severity each may reach, and what proves it.

Same shape as the scan's findings (:class:`~topoagent.core.findings.Finding`), kept in
this slice because they judge running processes, not the host.  A code is never reused.

=============================  ========  =====================================================
code                           severity  raised when (evidence)
=============================  ========  =====================================================
PROCESS_CPUS_OFF_GPU_NODE      warning   a thread of a GPU's process may run on no CPU of the
                                         GPU's NUMA node (``task/<tid>/status``); warning where
                                         those CPUs are on another socket, info on the same one
PROCESS_MEMORY_OFF_GPU_NODE    warning   most of its anonymous memory (at least
                                         :data:`MEMORY_MIN_BYTES`) lives off the GPU's node, or
                                         its memory policy names only other nodes
                                         (``numa_maps``); warning / info as above
PROCESS_HCA_NOT_RAIL           warning   its ``NCCL_IB_HCA`` (``environ``) lets NCCL use none of
                                         the GPU's rail NICs' RDMA devices
=============================  ========  =====================================================
"""

from __future__ import annotations

from topoagent.core.findings import Severity

__all__ = ["CODES", "MEMORY_MIN_BYTES", "PROCESS_CPUS", "PROCESS_HCA", "PROCESS_MEMORY"]

PROCESS_CPUS = "PROCESS_CPUS_OFF_GPU_NODE"
PROCESS_MEMORY = "PROCESS_MEMORY_OFF_GPU_NODE"
PROCESS_HCA = "PROCESS_HCA_NOT_RAIL"

#: Code -> the most severe a finding of it gets (on another socket; the same socket: info).
CODES: dict[str, Severity] = {
    PROCESS_CPUS: Severity.WARNING,
    PROCESS_MEMORY: Severity.WARNING,
    PROCESS_HCA: Severity.WARNING,
}

#: Below this much anonymous memory off the GPU's node a process is not flagged for it: the
#: pages a small process touches cost little wherever they are.
MEMORY_MIN_BYTES = 256 << 20
