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
import msgspec

from topoagent.core.advice.allocation import Allocation, allocated_gpus, allocation_from, allocation_from_dra
from topoagent.core.advice.plan import PLAN_CODES, VISIBLE_VARS, GpuPlan, Plan, gpu_rank_env, rank_env
from topoagent.core.advice.ranks import local_rank_from
from topoagent.core.command.common import EXIT_ERROR, fail
from topoagent.core.command.options import require_this_machine, run_scan, scan_inputs
from topoagent.core.cpuset import CpuSet
from topoagent.core.errors import InputError
from topoagent.core.hostfs import HostFS
from topoagent.core.inputs import Inputs
from topoagent.core.read.dra_metadata import METADATA_DIR, read_dra_metadata
from topoagent.core.render.escape import comment, shown
from topoagent.core.render.verdict import unusable_words
from topoagent.features.act.mempolicy import MODES, MempolicyError, set_policy
from topoagent.features.plan.options import gpu_option, make_plan, pick_gpu, plan_options


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
@gpu_option("Bind to this")
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
    cpuset): an empty intersection stops here, exit 2.  The command runs only on this machine's
    own topology: --root of another machine or boot, or pasted output, is for --dry-run.
    """
    command = _checked_usage(gpu, local_rank, auto, keep_visible, narrow_visible, allow_no_gpu, command)
    if not dry_run:  # the command runs here: bound by this machine's topology, never another's
        require_this_machine(inputs, "exec", "exec --dry-run")
    rank = _rank(auto, local_rank)
    alloc = None if gpu is not None else _allocation()  # a rank indexes the job's GPUs; --gpu names a host GPU
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
    if gpu is None and rank is None:  # --allow-no-gpu asked no GPU: there are some, so say which
        fail(f"the host has {len(plan.gpus)} GPU(s): say which: --gpu GPU, --local-rank R or --auto")
    rank_plan = _rank_plan(result, plan, gpu, rank, alloc, narrow_visible)
    state = unusable_words(result, rank_plan.gpu.gpu)
    if state is not None:  # the plan gives it no rank: nothing to bind the command to
        fail(f"{rank_plan.who} is {state}: refusing to run the command on it (topoagent scan says why)")
    keep_visible = keep_visible or rank_plan.in_allocation  # the scheduler's device list
    g, env = rank_plan.gpu, rank_plan.env
    _say_notes(g, plan)
    if keep_visible:
        for var in VISIBLE_VARS:  # the scheduler's device list (CUDA's, or ROCm's) stays as it set it
            env.pop(var, None)
    if rank_plan.narrow is not None:  # in the variable the allocation came in (ROCR_VISIBLE_DEVICES on AMD)
        env[alloc.var if alloc is not None else "CUDA_VISIBLE_DEVICES"] = rank_plan.narrow
    if dry_run:
        _dry_run(plan, rank_plan, rank, alloc, mem, command)
    _bind_and_exec(plan, rank_plan, mem, command)


class _RankPlan(msgspec.Struct):
    """The rank's GPU, CPUs and environment, and how the job's allocation named it."""

    gpu: GpuPlan
    cpus: CpuSet
    env: dict[str, str]
    sub: int
    per_gpu: int
    in_allocation: bool = False
    narrow: str | None = None

    @property
    def who(self) -> str:
        """The GPU, and the rank among those sharing it, for people."""
        g = self.gpu
        return f"{g.gpu} ({g.bdf or g.key})" + (f", rank {self.sub} of {self.per_gpu}" if self.per_gpu > 1 else "")


def _rank(auto: bool, local_rank: int | None) -> int | None:
    """The local rank: given, or (--auto) from the launcher's environment."""
    if not auto:
        return local_rank
    try:
        rank, source = local_rank_from(os.environ)
    except InputError as exc:
        fail(str(exc))
    _say(f"local rank {rank} from {source}")
    return rank


def _allocation() -> Allocation | None:
    """The GPUs the environment gives the job (None: nothing restricts them)."""
    try:
        return allocation_from(os.environ)
    except InputError as exc:
        fail(str(exc))


def _rank_plan(
    result: Any, plan: Plan, gpu: str | None, rank: int | None, alloc: Allocation | None, narrow_visible: bool
) -> _RankPlan:
    """The rank's GPU: ``--gpu`` outright, else the rank's among the job's GPUs, else among the host's."""
    k = plan.ranks_per_gpu
    sub = (rank or 0) % k
    if gpu is not None:
        g, cpus, env = gpu_rank_env(plan, plan.gpus[pick_gpu(result, plan, gpu)], sub)
        return _RankPlan(g, cpus, env, sub, k)
    assert rank is not None
    if alloc is None:
        try:
            g, cpus, env = rank_env(plan, rank)
        except IndexError as exc:
            fail(str(exc))
        return _RankPlan(g, cpus, env, sub, k)
    try:
        mine = allocated_gpus(alloc, plan, result.topology.nvml_gpus, result.topology.amd_gpus)
    except InputError as exc:
        fail(str(exc))
    index = rank // k
    if index >= len(mine):
        fail(
            f"local rank {rank} needs the job's GPU {index} ({k} rank(s) per GPU), "
            f"but {alloc.source} gives it {len(mine)}"
        )
    g, cpus, env = gpu_rank_env(plan, mine[index], sub)
    _say(f"{g.gpu} is the job's GPU {index} ({alloc.source})")
    narrow = _narrowed(alloc, index, g, result.topology.nvml_gpus) if narrow_visible else None
    return _RankPlan(g, cpus, env, sub, k, in_allocation=True, narrow=narrow)


def _say_notes(g: GpuPlan, plan: Plan) -> None:
    """What is wrong with the rank's placement, on stderr (an empty CPU set is said below)."""
    notes = {(n.code, n.subjects): n for n in (*g.notes, *plan.notes)}
    for note in notes.values():
        if note.code in PLAN_CODES and g.gpu in note.subjects and note.code != "CPUSET_EMPTY":
            _say(f"{note.severity.label}: {note.code}: {note.message}")


def _dry_run(
    plan: Plan, rp: _RankPlan, rank: int | None, alloc: Allocation | None, mem: str, command: tuple[str, ...]
) -> NoReturn:
    """Print what exec would do, and exit (2 where it would stop: no CPU to bind to)."""
    g, cpus, node = rp.gpu, rp.cpus, rp.gpu.numa_node
    lines = [comment(f"{rp.who}, NUMA node {node if node is not None else 'unknown'}")]
    lines.append(
        f"cpu affinity: {cpus}"
        if cpus
        else f"cpu affinity: NONE -- none of {g.gpu}'s CPUs is allowed to this process "
        f"({plan.allowed}): exec would stop here"
    )
    lines.append(f"memory policy: {_mem_words(mem, node)}")
    var = next((v for v in VISIBLE_VARS if v in os.environ), None)
    if alloc is not None and rp.narrow is None and var is not None:
        lines.append(
            comment(
                f"{var}={os.environ[var]} kept as the job's "
                f"(the command's device {rank // rp.per_gpu if rank is not None else 0} is {g.gpu})"
            )
        )
    lines += [f"export {key}={shlex.quote(value)}" for key, value in rp.env.items()]
    lines.append("exec " + " ".join(shlex.quote(c) for c in command))
    click.echo("\n".join(lines))
    sys.exit(0 if cpus else EXIT_ERROR)


def _bind_and_exec(plan: Plan, rp: _RankPlan, mem: str, command: tuple[str, ...]) -> NoReturn:
    """Bind this process to the rank's CPUs, set its memory policy, and become the command."""
    g, cpus = rp.gpu, rp.cpus
    if not cpus:
        fail(
            f"none of {g.gpu}'s CPUs ({g.cpus or 'unknown'} before this process's limits) is allowed to "
            f"this process (allowed: {plan.allowed}): refusing to run it unbound"
        )
    try:
        os.sched_setaffinity(0, set(cpus))
    except OSError as exc:
        fail(f"cannot bind to CPUs {cpus}: {exc.strerror}")
    _set_memory(mem, g.numa_node)
    child_env = dict(os.environ)
    child_env.update(rp.env)
    _exec(command, child_env)


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
    allow_no_gpu: bool,
    command: tuple[str, ...],
) -> tuple[str, ...]:
    """The command to run, once the options make sense together (else one line and exit 2).
    With ``--allow-no-gpu`` the GPU is asked for only once the host turns out to have one."""
    if local_rank is not None and auto:
        fail("give one of --local-rank or --auto")
    if keep_visible and narrow_visible:
        fail("give one of --keep-visible or --narrow-visible")
    if gpu is None and local_rank is None and not auto and not allow_no_gpu:
        fail("say which GPU: --gpu GPU, --local-rank R or --auto")
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
