"""``plan --format json``: the plan alone (schema ``topoagent/schema/plan.schema.json``).

Device ids and keys are the scan's (``gpu0``, ``nic2``, BDF keys), so a plan and a scan of one
host join on them.  ``schema_version`` is bumped only for breaking changes.
"""

from __future__ import annotations

import json
from typing import Any

from topoagent.advice.plan import Plan, gpu_rank_env
from topoagent.outputs.json_report import finding_dict, str_or_none
from topoagent.outputs.plan_common import plan_of
from topoagent.result import ScanResult
from topoagent.version import __version__

SCHEMA_VERSION = 1


def report(result: ScanResult, plan: Plan | None = None) -> dict[str, Any]:
    """The plan as the JSON contract's object."""
    p = plan_of(result, plan)
    snap = result.snapshot
    gpus = []
    for g in p.gpus:
        ranks = []
        for sub in range(p.ranks_per_gpu):
            _, cpus, env = gpu_rank_env(p, g, sub)
            ranks.append({"local_rank": g.cuda_index * p.ranks_per_gpu + sub, "cpus": str(cpus), "env": env})
        gpus.append({
            "gpu": g.gpu, "key": g.key, "bdf": g.bdf, "cuda_index": g.cuda_index, "numa_node": g.numa_node,
            "socket": g.socket, "cpus": str_or_none(g.cpus),
            "nics": [{"nic": r.nic, "key": r.key, "bdf": r.bdf, "rdma": list(r.rdma), "port": r.port,
                      "netdevs": list(r.netdevs), "kind": r.kind, "remote": r.remote,
                      "numa_node": r.numa_node, "socket": r.socket} for r in g.rails],
            "env": dict(g.env), "numactl": g.numactl, "ranks": ranks,
            "notes": [finding_dict(n) for n in g.notes],
        })
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "topoagent", "version": __version__},
        "host": {"hostname": snap.hostname, "root": snap.root},
        "allowed_cpus": str_or_none(p.allowed),
        "reserved_cpus": str(p.reserved),
        "ranks_per_gpu": p.ranks_per_gpu,
        "gpus": gpus,
        "numa_groups": [{"numa_node": n.numa_node, "gpus": list(n.gpus),
                         "cuda_visible_devices": n.cuda_visible_devices, "cpus": str_or_none(n.cpus)}
                        for n in p.numa_groups],
        "split": [{"index": s.index, "gpus": list(s.gpus), "cuda_visible_devices": s.cuda_visible_devices,
                   "numa_nodes": list(s.numa_nodes), "cpus": str(s.cpus), "nics": list(s.nics),
                   "crosses": s.crosses} for s in p.split],
        "notes": [finding_dict(n) for n in p.notes],
    }


def render(result: ScanResult, plan: Plan | None = None, **_: Any) -> str:
    """``plan --format json``: the plan, indented."""
    return json.dumps(report(result, plan), indent=2) + "\n"
