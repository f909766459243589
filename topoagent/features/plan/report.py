"""``plan --format json``: the plan alone (schema ``topoagent/schema/plan.schema.json``).

Device ids and keys are the scan's (``gpu0``, ``nic2``, BDF keys), so a plan and a scan of one
host join on them.  ``schema_version`` is bumped only for breaking changes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from topoagent.core.advice.plan import Plan, gpu_rank_env
from topoagent.core.render.json_report import (
    Bdf,
    CpuList,
    CudaDevices,
    FindingEntry,
    GpuId,
    NodeId,
    NumaGroupEntry,
    PathToken,
    Tool,
    UnknownEntry,
    encode,
    finding_entry,
    str_or_none,
    unknown_entries,
)
from topoagent.core.result import ScanResult
from topoagent.core.version import __version__
from topoagent.features.plan.common import plan_of

SCHEMA_VERSION: Literal[1] = 1

NicId = Annotated[str, msgspec.Meta(pattern=r"^nic[0-9]+$")]


class PlanHost(msgspec.Struct, frozen=True):
    """The host a plan is for."""

    hostname: str | None
    root: str | None


# The contract's shape of the model's :class:`topoagent.core.advice.plan.RailNic`: ``remote`` is
# a field here, ``driver`` is left out, the classes are tokens.  Its name is the schema's
# (``$defs/RailNic`` in plan.schema.json), so it stays.
class RailNic(msgspec.Struct, frozen=True):
    """A rail NIC of a GPU, with the names a launcher needs (RDMA device, port, netdevs)."""

    nic: NicId
    key: str
    bdf: Bdf | None
    rdma: list[str]
    port: Annotated[int, msgspec.Meta(ge=1)] | None
    netdevs: list[str]
    kind: PathToken | None
    remote: bool
    numa_node: int | None
    socket: int | None
    nccl_path: Annotated[
        str | None,
        msgspec.Meta(
            description="The path as NCCL names it where that differs from kind: for a Grace GPU's NIC "
            "on its own CPU P2C (one of the GPU's fastest NICs) or PHB (a slower one); kind is then SYS, "
            "as nvidia-smi prints it; null otherwise."
        ),
    ] = None
    gdr: Annotated[
        bool | None,
        msgspec.Meta(
            description="Whether NCCL uses GPUDirect RDMA to this NIC by default (path PXB or better, or "
            "P2C with NCCL >= 2.27); null: the path is unknown."
        ),
    ] = None


class Rank(msgspec.Struct, frozen=True):
    """One local rank of a GPU: its cores and its environment."""

    local_rank: NodeId
    cpus: CpuList
    env: dict[str, str]


class GpuEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One GPU's plan: CPUs, rail NICs, environment, ranks and notes."""

    gpu: GpuId
    key: str | None
    bdf: Bdf | None
    cuda_index: NodeId
    numa_node: int | None
    socket: int | None
    cpus: Annotated[
        CpuList | None, msgspec.Meta(description="NUMA-local CPUs, allowed, not reserved; empty: none allowed.")
    ]
    nics: list[RailNic]
    env: dict[str, str]
    numactl: str | None
    ranks: Annotated[
        list[Rank],
        msgspec.Meta(
            description="Its local ranks (ranks_per_gpu of them), numbered among the usable GPUs; none "
            "for an unusable GPU."
        ),
    ]
    notes: Annotated[
        list[FindingEntry], msgspec.Meta(description="The scan's findings naming it or its rail NICs, and the plan's.")
    ]
    usable: Annotated[
        bool,
        msgspec.Meta(description="False where a finding makes it unusable (FELL_OFF_BUS, in notes): no rank, no CPUs."),
    ] = True


class SplitEntry(msgspec.Struct, frozen=True):
    """One of the --split N disjoint groups: its GPUs, their NUMA nodes, CPUs and NICs."""

    index: NodeId
    gpus: Annotated[list[GpuId], msgspec.Meta(min_length=1)]
    cuda_visible_devices: CudaDevices
    numa_nodes: list[int | None]
    cpus: CpuList
    nics: list[NicId]
    crosses: str | None


class PlanReport(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``topoagent plan --format json``."""

    schema_version: Literal[1]
    tool: Tool
    host: PlanHost
    allowed_cpus: Annotated[
        CpuList | None, msgspec.Meta(description="The caller's CPUs every set was intersected with; null: unknown.")
    ]
    reserved_cpus: Annotated[
        CpuList, msgspec.Meta(description="Whole cores kept for the OS and daemons (--reserve-cores).")
    ]
    ranks_per_gpu: Annotated[int, msgspec.Meta(ge=1)]
    gpus: list[GpuEntry]
    numa_groups: list[NumaGroupEntry]
    split: Annotated[
        list[SplitEntry], msgspec.Meta(description="--split N: disjoint GPU groups; empty without --split.")
    ]
    notes: Annotated[
        list[FindingEntry],
        msgspec.Meta(
            description=(
                "The plan's own notes (CPUSET_EMPTY, CORE_COMPLEX_UNKNOWN, CORES_UNKNOWN, RANKS_SHARE_CORES, "
                "SPLIT_CROSSES_NUMA, SPLIT_UNEVEN)."
            )
        ),
    ]
    bind: Annotated[
        Literal["numa", "core-complex"],
        msgspec.Meta(
            description="How CPU shares were cut: runs of whole cores (numa), or whole core complexes, CPUs "
            "sharing one L3 (core-complex; numa where --bind core-complex found no L3 domains)."
        ),
    ] = "numa"
    findings: Annotated[
        list[FindingEntry],
        msgspec.Meta(description="The scan's findings, as scan --format json gives them: the host's verdict."),
    ] = msgspec.field(default_factory=list)
    unknown: Annotated[
        list[UnknownEntry], msgspec.Meta(description="What the scan could not read, as scan --format json says it.")
    ] = msgspec.field(default_factory=list)


def report(result: ScanResult, plan: Plan | None = None) -> PlanReport:
    """The plan as the JSON contract's object."""
    p = plan_of(result, plan)
    topo = result.topology
    gpus = []
    first = 0  # local ranks are numbered among the usable GPUs (rank_env)
    for g in p.gpus:
        ranks = []
        for sub in range(p.ranks_per_gpu if g.usable else 0):
            _, cpus, env = gpu_rank_env(p, g, sub)
            ranks.append(Rank(first + sub, str(cpus), env))
        first += len(ranks)
        gpus.append(
            GpuEntry(
                gpu=g.gpu,
                key=g.key,
                bdf=g.bdf,
                cuda_index=g.cuda_index,
                numa_node=g.numa_node,
                socket=g.socket,
                cpus=str_or_none(g.cpus),
                nics=[
                    RailNic(
                        nic=r.nic,
                        key=r.key,
                        bdf=r.bdf,
                        rdma=list(r.rdma),
                        port=r.port,
                        netdevs=list(r.netdevs),
                        kind=r.token,
                        remote=r.remote,
                        numa_node=r.numa_node,
                        socket=r.socket,
                        nccl_path=r.nccl_path.name if r.nccl_path is not None else None,
                        gdr=r.gdr,
                    )
                    for r in g.rails
                ],
                env=dict(g.env),
                numactl=g.numactl,
                ranks=ranks,
                notes=[finding_entry(n) for n in g.notes],
                usable=g.usable,
            )
        )
    return PlanReport(
        schema_version=SCHEMA_VERSION,
        tool=Tool("topoagent", __version__),
        host=PlanHost(topo.hostname, topo.root),
        allowed_cpus=str_or_none(p.allowed),
        reserved_cpus=str(p.reserved),
        ranks_per_gpu=p.ranks_per_gpu,
        bind=p.bind,  # type: ignore[arg-type]
        gpus=gpus,
        numa_groups=[
            NumaGroupEntry(n.numa_node, list(n.gpus), n.cuda_visible_devices, str_or_none(n.cpus))
            for n in p.numa_groups
        ],
        split=[
            SplitEntry(
                s.index, list(s.gpus), s.cuda_visible_devices, list(s.numa_nodes), str(s.cpus), list(s.nics), s.crosses
            )
            for s in p.split
        ],
        notes=[finding_entry(n) for n in p.notes],
        findings=[finding_entry(f) for f in result.findings],
        unknown=unknown_entries(result),
    )


def render(result: ScanResult, plan: Plan | None = None, pretty: bool = False, **_: Any) -> str:
    """``plan --format json``: the plan, one compact line (``pretty``: indented)."""
    return encode(report(result, plan), pretty=pretty)
