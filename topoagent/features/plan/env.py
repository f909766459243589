"""``plan --format env``: shell ``export`` lines for one rank, to ``eval`` in a job script.

The rank is ``--gpu N`` (rank 0 of GPU N, PCI bus order; refused for an unusable GPU) or
``--local-rank R`` (usable GPU ``R // ranks_per_gpu``).  Comments above the exports say where the rank runs and what is
wrong with its placement, so a person reading a job log sees it.
"""

from __future__ import annotations

import shlex
from typing import Any

from topoagent.core.advice.plan import SOCKET_IFNAME_NOTE, Plan, gpu_rank_env, rank_env
from topoagent.core.errors import InputError
from topoagent.core.render.escape import comment
from topoagent.core.render.verdict import unusable_words
from topoagent.core.result import ScanResult
from topoagent.features.plan.common import plan_of


def render(
    result: ScanResult, plan: Plan | None = None, gpu: int | None = None, local_rank: int | None = None, **_: Any
) -> str:
    """Export lines for the rank chosen by ``gpu`` or ``local_rank``."""
    p = plan_of(result, plan)
    if gpu is None and local_rank is None:
        raise InputError("--format env is for one rank: give --gpu N or --local-rank R")
    try:
        if local_rank is not None:
            g, cpus, env = rank_env(p, local_rank)
            who = f"local rank {local_rank}"
        else:
            assert gpu is not None
            if not 0 <= gpu < len(p.gpus):
                raise IndexError(f"--gpu {gpu}: the host has {len(p.gpus)} GPU(s) (0-{len(p.gpus) - 1})")
            state = unusable_words(result, p.gpus[gpu].gpu)
            if state is not None:
                raise InputError(f"--gpu {gpu}: {p.gpus[gpu].gpu} is {state}: no rank is planned for it")
            g, cpus, env = gpu_rank_env(p, p.gpus[gpu], 0)
            who = f"GPU {gpu}"
    except IndexError as exc:
        raise InputError(str(exc)) from None
    node = f"NUMA node {g.numa_node}" if g.numa_node is not None else "NUMA node unknown"
    # Every comment line goes through `comment`: a name in it cannot end the comment under `eval`.
    notes = [f"topoagent plan: {who} -> {g.gpu} ({g.bdf or g.key}), {node}"]
    if cpus:
        notes.append(f"bind: taskset -c {cpus} ...   or: topoagent exec --gpu {g.cuda_index} -- ...")
    else:
        notes.append("no CPU of this GPU is allowed to the caller: nothing to bind to (see notes)")
    for r in g.rails:
        if r.remote:
            notes.append(
                f"{r.nic} ({', '.join(r.rdma + r.netdevs)}) is remote: {r.token} from {g.gpu}; "
                "GPUDirect RDMA is off for it (see topoagent plan for what to do)"
            )
    seen = {(n.code, n.subjects) for n in g.notes}
    plan_notes = [n for n in p.notes if g.gpu in n.subjects and (n.code, n.subjects) not in seen]
    notes += [f"{n.severity.label}: {n.code}: {n.message}" for n in (*g.notes, *plan_notes)]
    if any(r.netdevs for r in g.rails):
        notes.append(SOCKET_IFNAME_NOTE)
    lines = [comment(n) for n in notes]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
    return "\n".join(lines) + "\n"
