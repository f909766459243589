"""What a plan is asked with, for every command that makes one (``plan``, ``exec``, ``apply``):
the options that share CPUs out, the GPU chosen, and the plan of a scan under them."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click
import msgspec

from topoagent.core.advice.allocation import allocated_gpus
from topoagent.core.advice.plan import BIND_MODES, PlanOptions
from topoagent.core.command.common import fail
from topoagent.core.cpuset import MAX_CPUS, CpuSet
from topoagent.core.digits import is_decimal
from topoagent.core.errors import InputError
from topoagent.core.inputs import Inputs
from topoagent.core.read import is_live
from topoagent.core.read.process import allowed_cpus

if TYPE_CHECKING:
    from topoagent.core.advice.allocation import Allocation
    from topoagent.core.advice.plan import Plan
    from topoagent.core.result import ScanResult

F = TypeVar("F", bound="Callable[..., Any]")

__all__ = ["gpu_option", "make_plan", "pick_gpu", "plan_options", "resolve_allowed"]


def gpu_option(what: str) -> Callable[[F], F]:
    """``--gpu GPU``, one spelling for every command that chooses a GPU (``plan``, ``exec``,
    ``apply``): its index in PCI bus order, its id (``gpu3``) or its BDF; ``what`` says what the
    command does with it.  :func:`pick_gpu` resolves it against the plan."""
    return click.option(
        "--gpu", metavar="GPU", help=f"{what} GPU: its index in PCI bus order (3), its id (gpu3) or its PCI address."
    )


def pick_gpu(result: ScanResult, plan: Plan, ref: str) -> int:
    """The index in ``plan.gpus`` (PCI bus order) of the GPU ``--gpu`` names; one line and
    exit 2 where it names none."""
    count = f"the host has {len(plan.gpus)} GPU(s)" + (f" (0-{len(plan.gpus) - 1})" if plan.gpus else "")
    if is_decimal(ref):
        if int(ref) >= len(plan.gpus):
            fail(f"--gpu {ref}: {count}")
        return int(ref)
    d = result.device(ref)
    match = next((i for i, g in enumerate(plan.gpus) if d is not None and g.gpu == d.id), None)
    if match is None:
        fail(f"--gpu {ref}: no such GPU ({count}; give an index in PCI bus order, a gpu id or a PCI address)")
    return match


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
