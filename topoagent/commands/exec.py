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
from typing import Any

import click

from topoagent.commands.common import EXIT_ERROR, fail
from topoagent.commands.options import run_scan, scan_inputs
from topoagent.commands.plan import make_plan, plan_options
from topoagent.digits import is_decimal
from topoagent.inputs import Inputs


def _say(message: str) -> None:
    click.echo(f"topoagent: {message}", err=True)


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
            raise click.UsageError(f"unexpected {ctx.params['command'][0]!r} before --: the command goes after --",
                                   ctx)
        ctx.params["command"] = tuple(args[cut + 1:])
        return rest


@click.command(cls=_ExecCommand)
@scan_inputs(cross_check=False)
@click.option("--gpu", metavar="N", help="The GPU: index in PCI bus order (or gpu id / BDF).")
@click.option("--local-rank", type=click.IntRange(min=0), metavar="R",
              help="The local rank: GPU R // ranks-per-gpu in PCI bus order.")
@click.option("--auto", is_flag=True,
              help="Take the local rank from LOCAL_RANK, SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK or "
                   "MPI_LOCALRANKID (the first set).")
@plan_options
@click.option("--mem", type=click.Choice(["prefer", "bind", "none"]), default="prefer", show_default=True,
              help="Memory policy on the GPU's NUMA node: prefer it, bind to it, or leave it alone.")
@click.option("--keep-visible", is_flag=True,
              help="Leave CUDA_VISIBLE_DEVICES alone (launchers that pick the device by rank).")
@click.option("--dry-run", is_flag=True, help="Print what would be set and the command; run nothing.")
@click.argument("command", nargs=-1, required=False, type=click.UNPROCESSED)
def exec_(inputs: Inputs, gpu: str | None, local_rank: int | None, auto: bool, ranks_per_gpu: int,
          reserve_cores: int, allowed_cpus: str, mem: str, keep_visible: bool, dry_run: bool,
          command: tuple[str, ...]) -> None:
    """Run COMMAND bound to a GPU's CPUs and memory, with its environment:

        topoagent exec --auto -- python train.py

    The plan's CPUs are intersected with this process's own (affinity and cgroup cpuset),
    also when it comes from --root: an empty intersection stops here, exit 2.
    """
    from topoagent.advice.plan import PLAN_CODES, gpu_rank_env, rank_env
    from topoagent.advice.ranks import local_rank_from
    from topoagent.errors import InputError

    if local_rank is not None and auto:
        fail("give one of --local-rank or --auto")
    if gpu is None and local_rank is None and not auto:
        fail("say which GPU: --gpu N, --local-rank R or --auto")
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        fail("no command given (topoagent exec ... -- CMD [ARGS...])")
    rank, source = local_rank, "--local-rank"
    if auto:
        try:
            rank, source = local_rank_from(os.environ)
        except InputError as exc:
            fail(str(exc))
        _say(f"local rank {rank} from {source}")

    result = run_scan(inputs)
    # The plan is applied to this process: its own CPUs bound every set, whatever the root.
    plan = make_plan(result, inputs, allowed_cpus, reserve_cores, ranks_per_gpu, this_process=True)
    if not plan.gpus:
        fail("no GPU on this host: nothing to place the command on")
    k = plan.ranks_per_gpu
    sub = (rank or 0) % k
    if gpu is not None:
        g, cpus, env = gpu_rank_env(plan, _pick_gpu(result, plan, gpu), sub)
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
    if keep_visible:
        env.pop("CUDA_VISIBLE_DEVICES", None)
    node = g.numa_node
    who = f"{g.gpu} ({g.bdf or g.key})" + (f", rank {sub} of {k}" if k > 1 else "")

    if dry_run:
        lines = [f"# {who}, NUMA node {node if node is not None else 'unknown'}"]
        lines.append(f"cpu affinity: {cpus}" if cpus else
                     f"cpu affinity: NONE -- none of {g.gpu}'s CPUs is allowed to this process "
                     f"({plan.allowed}): exec would stop here")
        lines.append(f"memory policy: {_mem_words(mem, node)}")
        lines += [f"export {key}={shlex.quote(value)}" for key, value in env.items()]
        lines.append("exec " + " ".join(shlex.quote(c) for c in command))
        click.echo("\n".join(lines))
        sys.exit(0 if cpus else EXIT_ERROR)

    if not cpus:
        fail(f"none of {g.gpu}'s CPUs ({g.cpus or 'unknown'} before this process's limits) is allowed to "
             f"this process (allowed: {plan.allowed}): refusing to run it unbound")
    try:
        os.sched_setaffinity(0, set(cpus))
    except OSError as exc:
        fail(f"cannot bind to CPUs {cpus}: {exc.strerror}")
    _set_memory(mem, node)
    child_env = dict(os.environ)
    child_env.update(env)
    try:
        os.execvpe(command[0], list(command), child_env)
    except FileNotFoundError:
        _say(f"{command[0]}: command not found")
        sys.exit(127)
    except OSError as exc:
        _say(f"{command[0]}: {exc.strerror}")
        sys.exit(126)


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
    from topoagent.apply.mempolicy import MODES, MempolicyError, set_policy

    try:
        set_policy(MODES[mem], {node})
    except (MempolicyError, OSError) as exc:
        _say(f"memory policy not set ({exc.strerror or exc}); running without it")
