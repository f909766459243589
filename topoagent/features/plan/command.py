"""``topoagent plan``: the placement plan of a host, in the shapes people and schedulers read."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click
import msgspec

from topoagent.core.advice.allocation import allocated_gpus
from topoagent.core.advice.plan import BIND_MODES, PlanOptions
from topoagent.core.command.common import EXIT_FINDINGS, EXIT_OK, emit, fail, require_gpus
from topoagent.core.command.options import run_scan, scan_inputs
from topoagent.core.cpuset import MAX_CPUS, CpuSet
from topoagent.core.errors import InputError, TopoagentError
from topoagent.core.findings import Severity
from topoagent.core.inputs import Inputs
from topoagent.core.read import is_live
from topoagent.core.read.process import allowed_cpus
from topoagent.features.plan import FORMATS, dra
from topoagent.features.plan.slurm import CORE_MODES

if TYPE_CHECKING:
    from topoagent.core.advice.allocation import Allocation
    from topoagent.core.advice.plan import Plan
    from topoagent.core.result import ScanResult


#: Formats with nothing to say without a GPU (exit 2, one line), and what each would write.
NEEDS_GPUS = {"slurm": "a gres.conf", "nccl-topo": "an NCCL topology"}


#: Formats ``--gpu N`` narrows to one GPU (env: that GPU's first rank).
ONE_GPU = ("text", "json", "env")


def only_gpu(p: Plan, n: int) -> Plan:
    """The plan narrowed to GPU ``n`` (PCI bus order): its row, the NUMA group and split group
    holding it, and the host's notes; one line and exit 2 when there is no GPU ``n``."""
    if not 0 <= n < len(p.gpus):
        fail(f"--gpu {n}: the host has {len(p.gpus)} GPU(s)" + (f" (0-{len(p.gpus) - 1})" if p.gpus else ""))
    g = p.gpus[n]
    return msgspec.structs.replace(
        p,
        gpus=(g,),
        numa_groups=tuple(x for x in p.numa_groups if g.gpu in x.gpus),
        split=tuple(x for x in p.split if g.gpu in x.gpus),
    )


def plan_options(f: Any) -> Any:
    """The options `plan` and `exec` share: how CPUs are shared out."""
    for option in reversed(
        [
            click.option(
                "--ranks-per-gpu",
                type=click.IntRange(min=1, max=MAX_CPUS),
                default=1,
                show_default=True,
                metavar="K",
                help="Ranks per GPU; each gets its own whole cores (SMT siblings together).",
            ),
            click.option(
                "--reserve-cores",
                type=click.IntRange(min=0),
                default=0,
                show_default=True,
                metavar="N",
                help="Whole cores per NUMA node kept for the OS and daemons.",
            ),
            click.option(
                "--bind",
                type=click.Choice(BIND_MODES),
                default="numa",
                show_default=True,
                help="How a NUMA node's CPUs are shared out among its GPUs and their ranks: runs of whole cores "
                "(numa), or whole core complexes -- CPUs sharing one L3 cache, AMD CCDs (core-complex, as "
                "torchrun --numa-binding=core-complex).",
            ),
            click.option(
                "--allowed-cpus",
                default="auto",
                show_default=True,
                metavar="auto|self|LIST",
                help="CPUs the plan may use (never widened): auto = this process's on a live scan, "
                "the tree's recorded Cpus_allowed otherwise; self = this process's affinity and "
                "cgroup cpuset, whatever the root; or a CPU list.",
            ),
        ]
    ):
        f = option(f)
    return f


def resolve_allowed(spec: str, inputs: Inputs) -> CpuSet | None:
    """The allowed-CPU set an --allowed-cpus value names (None: the tree's record)."""
    if spec == "self" or (spec == "auto" and is_live(inputs)):
        return allowed_cpus()
    if spec == "auto":
        return None
    try:
        return CpuSet.parse(spec)
    except ValueError as exc:
        fail(f"--allowed-cpus {spec!r}: {exc}")


def make_plan(
    result: ScanResult,
    inputs: Inputs,
    allowed: str,
    reserve_cores: int,
    ranks_per_gpu: int,
    split: int = 0,
    *,
    this_process: bool = False,
    allocation: Allocation | None = None,
    bind: str = "numa",
) -> Plan:
    """The plan of a result under the command's options (one line and exit 2 on bad ones).

    ``this_process``: the plan is applied to this process (``exec``), so its own CPUs bound
    every set too, whatever the root and --allowed-cpus say.  ``allocation``: the job's GPUs;
    a node's cores are then shared among those of its GPUs only.
    """
    cpus = resolve_allowed(allowed, inputs)
    if this_process:
        mine = allowed_cpus()
        cpus = mine if cpus is None else cpus & mine
    options = PlanOptions(
        allowed=cpus, reserve_cores=reserve_cores, ranks_per_gpu=ranks_per_gpu, split=split, bind=bind
    )
    try:
        plan = result.plan_with(options)
        if allocation is None or not allocation.gpus or not plan.gpus:
            return plan
        given = tuple(g.gpu for g in allocated_gpus(allocation, plan, result.topology.nvml_gpus))
        return result.plan_with(msgspec.structs.replace(options, gpus=given))
    except (ValueError, InputError) as exc:
        fail(str(exc))


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
@click.option(
    "--gpu",
    type=click.IntRange(min=0),
    metavar="N",
    help="GPU N (PCI bus order) alone: its row (text, json) or its first rank's exports (env).",
)
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
    gpu: int | None,
    local_rank: int | None,
    gres_cores: str,
    node_uid: str | None,
    dra_numa: str,
    claim: str | None,
    ranks_per_gpu: int,
    reserve_cores: int,
    bind: str,
    allowed_cpus: str,
    split: int | None,
) -> None:
    """Plan where each GPU's ranks should run: CPUs, NUMA node, rail NICs, environment.

    Exit status: 0 a plan for every GPU, 1 a GPU got no allowed CPU (CPUSET_EMPTY),
    2 the scan could not run, an option is wrong, or --format slurm or nccl-topo found no GPU.
    """
    if gpu is not None and local_rank is not None:
        fail("give --gpu or --local-rank, not both")
    if fmt == "env" and gpu is None and local_rank is None:
        fail("--format env is for one rank: give --gpu N or --local-rank R")
    if local_rank is not None and fmt != "env":
        fail("--local-rank is for --format env (one rank's exports); --gpu N shows one GPU's plan")
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
        emit(dra.render_check(check))
        sys.exit(EXIT_OK if check.aligned else EXIT_FINDINGS)
    if fmt in NEEDS_GPUS:
        require_gpus(result, NEEDS_GPUS[fmt])
    if fmt == "slurm" and gres_cores == "l3cache":
        bind = "core-complex"  # each GPU's Cores= are the core complexes the plan gives it
    p = make_plan(result, inputs, allowed_cpus, reserve_cores, ranks_per_gpu, split or 0, bind=bind)
    if gpu is not None and fmt != "env":
        p = only_gpu(p, gpu)
    options: dict[str, Any] = {
        "plan": p,
        "gpu": gpu,
        "local_rank": local_rank,
        "gres_cores": gres_cores,
        "node_uid": node_uid,
        "dra_numa": dra_numa,
    }
    try:
        text = FORMATS[fmt](result, **options)
    except TopoagentError as exc:
        fail(str(exc))
    emit(text)
    worst = max((n.severity for n in p.notes), default=None)
    sys.exit(EXIT_FINDINGS if worst is not None and worst >= Severity.CRITICAL else EXIT_OK)
