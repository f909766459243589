"""What the plan formats share: the plan of a result (computed once by the command and
passed as the ``plan`` option, or made here with default options), and the rank a
per-rank format is asked for."""

from __future__ import annotations

from topoagent.core.advice.plan import Plan, RailNic
from topoagent.core.render.escape import shown
from topoagent.core.result import ScanResult


def plan_of(result: ScanResult, plan: Plan | None = None) -> Plan:
    """The plan given, or the default plan of the result (the tree's allowed CPUs)."""
    if plan is not None:
        return plan
    return result.plan_with()


def nic_words(r: RailNic) -> str:
    """A rail NIC the way a person reads it: ``nic2 mlx5_0 ibp24s0 PIX``, remote ones marked."""
    words = [r.nic, *map(shown, (*r.rdma, *r.netdevs)), r.token or "?"]
    if r.nccl_path is not None:
        words.append(f"(NCCL {r.nccl_path.name}, GPUDirect RDMA {'on' if r.gdr else 'off'})")  # Grace: SYS here is P2C
    if r.remote:
        where = ", ".join(
            x
            for x in (
                f"node {r.numa_node}" if r.numa_node is not None else "",
                f"socket {r.socket}" if r.socket is not None else "",
            )
            if x
        )
        words.append(f"remote ({where})" if where else "remote")
    return " ".join(words)
