"""``topoagent plan``: the placement plan of a host, in the shapes people and schedulers read."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click
import msgspec

from topoagent.core.command.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    deliver,
    fail,
    output_option,
    pretty_option,
    require_gpus,
)
from topoagent.core.command.options import run_scan, scan_inputs
from topoagent.core.errors import TopoagentError
from topoagent.core.findings import Severity
from topoagent.core.inputs import Inputs
from topoagent.core.result import failing
from topoagent.features.plan import FORMATS, dra
from topoagent.features.plan.options import gpu_option, make_plan, pick_gpu, plan_options
from topoagent.features.plan.slurm import CORE_MODES

if TYPE_CHECKING:
    from topoagent.core.advice.plan import Plan


#: Formats with nothing to say without a GPU (exit 2, one line), and what each would write.
NEEDS_GPUS = {"slurm": "a gres.conf", "nccl-topo": "an NCCL topology"}


#: Formats ``--gpu N`` narrows to one GPU (env: that GPU's first rank).
ONE_GPU = ("text", "json", "env")


def only_gpu(p: Plan, n: int) -> Plan:
    """The plan narrowed to GPU ``n`` (PCI bus order): its row, the NUMA group and split group
    holding it, and the host's notes."""
    g = p.gpus[n]
    return msgspec.structs.replace(
        p,
        gpus=(g,),
        numa_groups=tuple(x for x in p.numa_groups if g.gpu in x.gpus),
        split=tuple(x for x in p.split if g.gpu in x.gpus),
    )


@click.command()
@scan_inputs(cross_check=False)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(tuple(FORMATS)),
    default="text",
    show_default=True,
    help="text: a table; json: the plan contract; env: export lines for one rank; "
    "slurm: gres.conf lines; nccl-topo: an NCCL_TOPO_FILE; rails: each GPU's NIC per rail "
    "(NVIDIA/topograph's record); dra: the Kubernetes DRA standard attributes of GPUs, NICs and CPUs.",
)
@gpu_option("Only this GPU: its row (text, json) or its first rank's exports (env).")
@click.option(
    "--local-rank",
    type=click.IntRange(min=0),
    metavar="R",
    help="For --format env: local rank R (GPU R // ranks-per-gpu).",
)
@click.option(
    "--gres-cores",
    type=click.Choice(CORE_MODES),
    default="socket",
    show_default=True,
    help="For --format slurm: Cores= per whole socket (what Slurm >= 24.05.5 accepts), per NUMA "
    "node (needs SlurmdParameters=numa_node_as_socket in slurm.conf), or per L3 cache -- each GPU its "
    "own core complexes, as --bind core-complex (needs SlurmdParameters=l3cache_as_socket).",
)
@click.option("--node-uid", metavar="UID", help="For --format rails: the Kubernetes Node's metadata.uid (nodeUID).")
@click.option(
    "--dra-numa",
    type=click.Choice(dra.NUMA_FORMS),
    default="scalar",
    show_default=True,
    help="For --format dra: resource.kubernetes.io/numaNode as a scalar int, or as the list KEP-6072 "
    "defines (the node, then its equidistant same-socket nodes; needs DRAListTypeAttributes).",
)
@click.option(
    "--claim",
    metavar="DEVICES",
    help="For --format dra: judge this claim instead (gpu0,nic0,cpus=0-15): does matchAttribute on "
    "pcieRoot and numaNode accept it, and is it aligned on this host? Exit 1 when not.",
)
@pretty_option
@output_option()
@plan_options
@click.option(
    "--split",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Cut the host into N disjoint GPU groups (jobs or tenants), each NUMA-local where possible.",
)
def plan(
    inputs: Inputs,
    fmt: str,
    gpu: str | None,
    local_rank: int | None,
    gres_cores: str,
    node_uid: str | None,
    dra_numa: str,
    claim: str | None,
    pretty: bool,
    output: str | None,
    ranks_per_gpu: int,
    reserve_cores: int,
    bind: str,
    allowed_cpus: str,
    split: int | None,
) -> None:
    """Plan where each GPU's ranks should run: CPUs, NUMA node, rail NICs, environment.

    Exit status: 0 nothing critical, 1 a critical finding (as scan exits 1) or a GPU got no
    allowed CPU (CPUSET_EMPTY), 2 the scan could not run, an option is wrong, or --format
    slurm or nccl-topo found no GPU.  A GPU a finding makes unusable (FELL_OFF_BUS) gets no rank.
    """
    if gpu is not None and local_rank is not None:
        fail("give --gpu or --local-rank, not both")
    if fmt == "env" and gpu is None and local_rank is None:
        fail("--format env is for one rank: give --gpu GPU or --local-rank R")
    if local_rank is not None and fmt != "env":
        fail("--local-rank is for --format env (one rank's exports); --gpu GPU shows one GPU's plan")
    if gpu is not None and fmt not in ONE_GPU:
        fail(f"--gpu is for --format {', '.join(ONE_GPU)}: --format {fmt} describes the whole host")
    if claim is not None and fmt != "dra":
        fail("--claim is for --format dra")
    result = run_scan(inputs)
    if claim is not None:
        try:
            check = dra.check_claim(result, claim, dra_numa)
        except TopoagentError as exc:
            fail(str(exc))
        deliver(dra.render_check(check, pretty=pretty), output)
        sys.exit(EXIT_OK if check.aligned else EXIT_FINDINGS)
    if fmt in NEEDS_GPUS:
        require_gpus(result, NEEDS_GPUS[fmt])
    if fmt == "slurm" and gres_cores == "l3cache":
        bind = "core-complex"  # each GPU's Cores= are the core complexes the plan gives it
    p = make_plan(result, inputs, allowed_cpus, reserve_cores, ranks_per_gpu, split or 0, bind=bind)
    index = pick_gpu(result, p, gpu) if gpu is not None else None
    if index is not None and fmt != "env":
        p = only_gpu(p, index)
    options: dict[str, Any] = {
        "plan": p,
        "gpu": index,
        "local_rank": local_rank,
        "gres_cores": gres_cores,
        "node_uid": node_uid,
        "dra_numa": dra_numa,
        "pretty": pretty,
    }
    try:
        text = FORMATS[fmt](result, **options)
    except TopoagentError as exc:
        fail(str(exc))
    deliver(text, output)
    # the scan's verdict, with the plan's own notes (CPUSET_EMPTY): the rule scan --fail-on critical uses
    sys.exit(EXIT_FINDINGS if failing((*result.findings, *p.notes), Severity.CRITICAL) else EXIT_OK)
