"""``topoagent exec``: start a command placed for its GPU -- CPUs, memory, environment.

A launch wrapper for torchrun, srun and mpirun ranks: it plans (the same plan as ``topoagent
plan``), binds itself to the rank's CPUs, sets the memory policy and the environment, then
replaces itself with the command (``execvp``), so the exit status and signals are the
command's own.  CPU affinity and the memory policy both survive ``execve``.
"""

from __future__ import annotations

import os
import shlex
import sys
from typing import Any, NoReturn

import click

from topoagent.core.advice.allocation import Allocation, allocated_gpus, allocation_from, allocation_from_dra
from topoagent.core.advice.plan import PLAN_CODES, VISIBLE_VARS, gpu_rank_env, rank_env
from topoagent.core.advice.ranks import local_rank_from
from topoagent.core.command.common import EXIT_ERROR, fail
from topoagent.core.command.options import run_scan, scan_inputs
from topoagent.core.digits import is_decimal
from topoagent.core.errors import InputError
from topoagent.core.hostfs import HostFS
from topoagent.core.inputs import Inputs
from topoagent.core.read.dra_metadata import METADATA_DIR, read_dra_metadata
from topoagent.core.render.escape import comment, shown
from topoagent.features.act.mempolicy import MODES, MempolicyError, set_policy
from topoagent.features.plan.command import make_plan, plan_options


def _say(message: str) -> None:
    click.echo(f"topoagent: {shown(message)}", err=True)


class _ExecCommand(click.Command):
    """Options, then ``--``, then the command: only what follows ``--`` is run, so a misspelt
    option is a usage error (exit 2), never a command to execute."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--help" in args[: args.index("--") if "--" in args else len(args)]:
            return super().parse_args(ctx, args)
        if "--" not in args:
            raise click.UsageError("the command goes after -- (topoagent exec [OPTIONS] -- CMD [ARGS...])", ctx)
        cut = args.index("--")
        rest = super().parse_args(ctx, args[:cut])
        if ctx.params.get("command"):
            raise click.UsageError(f"unexpected {ctx.params['command'][0]!r} before --: the command goes after --", ctx)
        ctx.params["command"] = tuple(args[cut + 1 :])
        return rest


@click.command("exec", cls=_ExecCommand)
@scan_inputs(cross_check=False)
@click.option("--gpu", metavar="N", help="The GPU: index in PCI bus order (or gpu id / BDF).")
@click.option(
    "--local-rank",
    type=click.IntRange(min=0),
    metavar="R",
    help="The local rank: GPU R // ranks-per-gpu in PCI bus order.",
)
@click.option(
    "--auto",
    is_flag=True,
    help="Take the local rank from LOCAL_RANK, SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK or "
    "MPI_LOCALRANKID (the first set).",
)
@plan_options
@click.option(
    "--mem",
    type=click.Choice(["prefer", "bind", "none"]),
    default="prefer",
    show_default=True,
    help="Memory policy on the GPU's NUMA node: prefer it, bind to it, or leave it alone.",
)
@click.option(
    "--keep-visible",
    is_flag=True,
    help="Leave CUDA_VISIBLE_DEVICES alone (launchers that pick the device by rank); the default inside an allocation.",
)
@click.option(
    "--narrow-visible", is_flag=True, help="Inside an allocation: set CUDA_VISIBLE_DEVICES to the rank's GPU alone."
)
@click.option(
    "--allow-no-gpu",
    is_flag=True,
    help="On a node without GPUs (or a job given none): run COMMAND unbound, with a warning.",
)
@click.option("--dry-run", is_flag=True, help="Print what would be set and the command; run nothing.")
@click.argument("command", nargs=-1, required=False, type=click.UNPROCESSED)
def exec_(
    inputs: Inputs,
    gpu: str | None,
    local_rank: int | None,
    auto: bool,
    ranks_per_gpu: int,
    reserve_cores: int,
    bind: str,
    allowed_cpus: str,
    mem: str,
    keep_visible: bool,
    narrow_visible: bool,
    allow_no_gpu: bool,
    dry_run: bool,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND bound to a GPU's CPUs and memory, with its environment:

        topoagent exec --auto -- python train.py

    A local rank (--auto, --local-rank) indexes the GPUs the job was given -- CUDA_VISIBLE_DEVICES
    (indices or UUIDs), SLURM_STEP_GPUS/SLURM_JOB_GPUS, NVIDIA_VISIBLE_DEVICES, else (in a
    Kubernetes pod) the DRA device metadata in /var/run/dra-device-attributes -- and their
    CUDA_VISIBLE_DEVICES is kept as the scheduler set it (--narrow-visible: the rank's GPU
    only).  The plan's CPUs are intersected with this process's own (affinity and cgroup
    cpuset), also when it comes from --root: an empty intersection stops here, exit 2.
    """
    command = _checked_usage(gpu, local_rank, auto, keep_visible, narrow_visible, command)
    rank, source = local_rank, "--local-rank"
    if auto:
        try:
            rank, source = local_rank_from(os.environ)
        except InputError as exc:
            fail(str(exc))
        _say(f"local rank {rank} from {source}")

    # A rank indexes the job's GPUs; --gpu names a host GPU outright.
    alloc = None
    if gpu is None:
        try:
            alloc = allocation_from(os.environ)
        except InputError as exc:
            fail(str(exc))
    result = run_scan(inputs)
    if gpu is None and alloc is None:
        alloc = _dra_allocation(inputs, result)
    # The plan is applied to this process: its own CPUs bound every set, whatever the root.
    plan = make_plan(
        result, inputs, allowed_cpus, reserve_cores, ranks_per_gpu, this_process=True, allocation=alloc, bind=bind
    )
    if not plan.gpus or (alloc is not None and not alloc.gpus):
        why = "no GPU on this host" if not plan.gpus else f"the job was given no GPU ({alloc.source if alloc else ''})"
        if not allow_no_gpu:
            fail(f"{why}: nothing to place the command on (--allow-no-gpu runs it unbound)")
        _run_unbound(why, command, dry_run)
    k = plan.ranks_per_gpu
    sub = (rank or 0) % k
    narrow = None
    if gpu is not None:
        g, cpus, env = gpu_rank_env(plan, _pick_gpu(result, plan, gpu), sub)
    elif alloc is not None:
        assert rank is not None
        g, cpus, env, index = _job_gpu(result, plan, alloc, rank)
        if narrow_visible:
            narrow = _narrowed(alloc, index, g, result.topology.nvml_gpus)
        keep_visible = True  # the scheduler's CUDA_VISIBLE_DEVICES, unless narrowed below
    else:
        assert rank is not None
        try:
            g, cpus, env = rank_env(plan, rank)
        except IndexError as exc:
            fail(str(exc))
    notes = {(n.code, n.subjects): n for n in (*g.notes, *plan.notes)}
    for note in notes.values():
        if note.code in PLAN_CODES and g.gpu in note.subjects and note.code != "CPUSET_EMPTY":
            _say(f"{note.severity.label}: {note.code}: {note.message}")
    _set_visible(env, keep_visible, narrow, alloc)
    node = g.numa_node
    who = f"{g.gpu} ({g.bdf or g.key})" + (f", rank {sub} of {k}" if k > 1 else "")

    if dry_run:
        kept = alloc is not None and narrow is None
        _dry_run(who, g, cpus, plan, mem, env, command, f"{rank // k if rank is not None else 0}" if kept else None)

    if not cpus:
        fail(
            f"none of {g.gpu}'s CPUs ({g.cpus or 'unknown'} before this process's limits) is allowed to "
            f"this process (allowed: {plan.allowed}): refusing to run it unbound"
        )
    try:
        os.sched_setaffinity(0, set(cpus))
    except OSError as exc:
        fail(f"cannot bind to CPUs {cpus}: {exc.strerror}")
    _set_memory(mem, node)
    child_env = dict(os.environ)
    child_env.update(env)
    _exec(command, child_env)


def _job_gpu(result: Any, plan: Any, alloc: Allocation, rank: int) -> tuple[Any, Any, dict[str, str], int]:
    """The GPU, CPU set and environment of a local rank inside an allocation, and the GPU's
    place among the job's (one line and exit 2 where the job has no such GPU)."""
    k = plan.ranks_per_gpu
    try:
        mine = allocated_gpus(alloc, plan, result.topology.nvml_gpus, result.topology.amd_gpus)
    except InputError as exc:
        fail(str(exc))
    index = rank // k
    if index >= len(mine):
        fail(
            f"local rank {rank} needs the job's GPU {index} ({k} rank(s) per GPU), but {alloc.source} "
            f"gives it {len(mine)}"
        )
    g, cpus, env = gpu_rank_env(plan, mine[index], rank % k)
    _say(f"{g.gpu} is the job's GPU {index} ({alloc.source})")
    return g, cpus, env, index


def _set_visible(env: dict[str, str], keep: bool, narrow: str | None, alloc: Allocation | None) -> None:
    """The device list of the command: the scheduler's kept (``keep``), or narrowed to the
    rank's GPU in the variable the allocation came in (``ROCR_VISIBLE_DEVICES`` on AMD)."""
    if keep:
        for var in VISIBLE_VARS:  # the scheduler's device list stays as it set it
            env.pop(var, None)
    if narrow is not None:
        env[alloc.var if alloc is not None else "CUDA_VISIBLE_DEVICES"] = narrow


def _dry_run(
    who: str, g: Any, cpus: Any, plan: Any, mem: str, env: dict[str, str], command: tuple[str, ...], kept: str | None
) -> NoReturn:
    """--dry-run: what would be set and run (``kept``: the job's device index where its own
    device list is kept), and exit 0, or 2 where no CPU could be bound."""
    node = g.numa_node
    lines = [comment(f"{who}, NUMA node {node if node is not None else 'unknown'}")]
    lines.append(
        f"cpu affinity: {cpus}"
        if cpus
        else f"cpu affinity: NONE -- none of {g.gpu}'s CPUs is allowed to this process "
        f"({plan.allowed}): exec would stop here"
    )
    lines.append(f"memory policy: {_mem_words(mem, node)}")
    var = next((v for v in VISIBLE_VARS if v in os.environ), None)
    if kept is not None and var is not None:
        lines.append(comment(f"{var}={os.environ[var]} kept as the job's (the command's device {kept} is {g.gpu})"))
    lines += [f"export {key}={shlex.quote(value)}" for key, value in env.items()]
    lines.append("exec " + " ".join(shlex.quote(c) for c in command))
    click.echo("\n".join(lines))
    sys.exit(0 if cpus else EXIT_ERROR)


def _dra_allocation(inputs: Inputs, result: Any) -> Allocation | None:
    """Inside a Kubernetes pod whose GPUs came from a DRA claim: the GPUs the DRA device
    metadata files name (read below the root, as the scan is), when no variable names any."""
    meta = read_dra_metadata(HostFS(inputs.root))
    for problem in meta.problems:
        _say(f"DRA device metadata skipped: {problem}")
    where = METADATA_DIR if len(meta.files) != 1 else meta.files[0].lstrip("/")
    return allocation_from_dra(meta.bdfs, [g.bdf for g in result.topology.gpus if g.bdf], "/" + where)


def _checked_usage(
    gpu: str | None,
    local_rank: int | None,
    auto: bool,
    keep_visible: bool,
    narrow_visible: bool,
    command: tuple[str, ...],
) -> tuple[str, ...]:
    """The command to run, once the options make sense together (else one line and exit 2)."""
    if local_rank is not None and auto:
        fail("give one of --local-rank or --auto")
    if keep_visible and narrow_visible:
        fail("give one of --keep-visible or --narrow-visible")
    if gpu is None and local_rank is None and not auto:
        fail("say which GPU: --gpu N, --local-rank R or --auto")
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        fail("no command given (topoagent exec ... -- CMD [ARGS...])")
    return command


def _exec(command: tuple[str, ...], env: dict[str, str]) -> NoReturn:
    """Become the command (its exit status and signals are its own); 127/126 where it cannot run."""
    try:
        os.execvpe(command[0], list(command), env)
    except FileNotFoundError:
        _say(f"{command[0]}: command not found")
        sys.exit(127)
    except OSError as exc:
        _say(f"{command[0]}: {exc.strerror}")
        sys.exit(126)


def _run_unbound(why: str, command: tuple[str, ...], dry_run: bool) -> NoReturn:
    """--allow-no-gpu: one warning line, then the command as it was asked for (no binding,
    no memory policy, the environment untouched), so shared launch scripts also run on
    nodes without GPUs."""
    _say(f"warning: {why}: running the command unbound (--allow-no-gpu)")
    if dry_run:
        click.echo("# no GPU: nothing bound, environment unchanged\nexec " + " ".join(shlex.quote(c) for c in command))
        sys.exit(0)
    _exec(command, dict(os.environ))


def _narrowed(alloc: Any, index: int, g: Any, nvml: Any) -> str:
    """CUDA_VISIBLE_DEVICES naming the rank's GPU alone (--narrow-visible): the scheduler's own
    entry for it, its position in a container's list (CUDA numbers a container's GPUs from 0),
    else its UUID (CUDA takes UUIDs whatever the numbering)."""
    if alloc.cuda is not None and index < len(alloc.cuda):
        return str(alloc.cuda[index])
    if alloc.source == "NVIDIA_VISIBLE_DEVICES" or alloc.source.startswith("DRA device metadata"):
        return str(index)
    uuid = next((n.uuid for n in nvml if n.bdf == g.bdf and n.uuid), None)
    if uuid is None:
        fail(f"--narrow-visible: {alloc.source} sets no CUDA_VISIBLE_DEVICES and NVML gives no UUID for {g.gpu}")
    return str(uuid)


def _pick_gpu(result: Any, plan: Any, ref: str) -> Any:
    if is_decimal(ref):
        index = int(ref)
        if index >= len(plan.gpus):
            fail(f"--gpu {ref}: the host has {len(plan.gpus)} GPU(s) (0-{len(plan.gpus) - 1})")
        return plan.gpus[index]
    d = result.device(ref)
    match = next((g for g in plan.gpus if d is not None and g.gpu == d.id), None)
    if match is None:
        fail(f"--gpu {ref}: no such GPU (give an index in PCI bus order, a gpu id or a BDF)")
    return match


def _mem_words(mem: str, node: int | None) -> str:
    if mem == "none":
        return "left alone (--mem none)"
    if node is None:
        return "left alone: the GPU's NUMA node is unknown"
    return f"{'preferred' if mem == 'prefer' else 'bound to'} NUMA node {node} (set_mempolicy)"


def _set_memory(mem: str, node: int | None) -> None:
    """Set the memory policy; where that is impossible, say so on stderr and go on."""
    if mem == "none":
        return
    if node is None:
        _say("memory policy left alone: the GPU's NUMA node is unknown")
        return

    try:
        set_policy(MODES[mem], {node})
    except (MempolicyError, OSError) as exc:
        _say(f"memory policy not set ({exc.strerror or exc}); running without it")
