"""``topoagent apply``: change what is already running -- a process's CPUs, rail NICs' IRQs --
shown first (dry run by default), journalled before each change, undoable."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

import click

from topoagent.commands.common import EXIT_FINDINGS, EXIT_OK, fail
from topoagent.commands.options import run_scan, scan_inputs
from topoagent.inputs import Inputs


def state_dir_option(f: Any) -> Any:
    """``--state-dir`` (where the undo journal lives) and ``--yes`` (act, not just show)."""
    from topoagent.apply.journal import DEFAULT_STATE_DIR

    f = click.option("--yes", is_flag=True, help="Make the changes (without it: show them, change nothing).")(f)
    return click.option("--state-dir", default=DEFAULT_STATE_DIR, show_default=True, metavar="DIR",
                        help="Where the undo journal is kept.")(f)


def _shown(value: str | None, absent: str) -> str:
    if value is None:
        return absent
    return repr(value) if "\n" in value else value


def show(changes: Sequence[Any]) -> None:
    """Print each planned change as ``what: current -> proposed``."""
    for ch in changes:
        click.echo(f"  {ch.what}: {_shown(ch.before, '(none)')} -> {_shown(ch.after, '(removed)')}")


def run_changes(changes: Sequence[Any], root: str, state_dir: str, yes: bool, *, needs: str) -> int:
    """Show the changes; with ``yes`` check privileges, then make them through the writer
    and journal.  Returns the exit status (0 all made or refused by the kernel, 1 a failure)."""
    from topoagent.apply.execute import FAILED, REFUSED, apply_changes, target_rel
    from topoagent.apply.journal import Journal, JournalError
    from topoagent.apply.writer import HostWriter

    if not changes:
        click.echo("Nothing to change.")
        return EXIT_OK
    click.echo(f"{'Changing' if yes else 'Would change'} ({len(changes)}):")
    show(changes)
    if not yes:
        click.echo("Dry run: nothing was changed. Run again with --yes to make these changes.")
        return EXIT_OK
    writer, journal = HostWriter(root), Journal(state_dir)
    if not journal.writable():
        fail(f"cannot write the undo journal in {state_dir} ({needs}, or choose --state-dir): nothing changed")
    rels = (target_rel(c.kind, c.target) for c in changes)
    denied = [rel for rel in rels if rel is not None and not writer.can_write(rel)]
    if denied:
        fail(f"writing /{denied[0]} needs {needs}" + (f" (and {len(denied) - 1} more)" if len(denied) > 1 else "")
             + ": nothing changed")
    try:
        outcomes = apply_changes(changes, writer, journal)
    except JournalError as exc:  # the record comes first, so the change it was for was not made
        fail(f"journal: {exc}: stopped before the next change")
    for o in outcomes:
        click.echo(f"  {o.status}: {o.what}" + (f" -- {o.detail}" if o.detail else ""))
    refused = [o for o in outcomes if o.status == REFUSED]
    if refused:
        click.echo(f"{len(refused)} change(s) refused by the kernel (not an error: left as they were).")
    click.echo(f"Journal: {journal.path}  (undo: topoagent apply --undo --yes --state-dir {state_dir})")
    return EXIT_FINDINGS if any(o.status == FAILED for o in outcomes) else EXIT_OK


@click.command()
@scan_inputs(cross_check=False)
@click.option("--pid", type=click.IntRange(min=1), metavar="PID", help="Bind every thread of this process.")
@click.option("--gpu", type=click.IntRange(min=0), metavar="N", help="With --pid: to GPU N's CPUs (PCI bus order).")
@click.option("--node", type=click.IntRange(min=0), metavar="N", help="With --pid: to NUMA node N's CPUs.")
@click.option("--irqs", is_flag=True, help="Move each rail NIC's MSI/MSI-X IRQs onto its NUMA node's CPUs.")
@click.option("--undo", is_flag=True, help="Restore what earlier applies and fixes changed, newest first.")
@state_dir_option
def apply(inputs: Inputs, pid: int | None, gpu: int | None, node: int | None, irqs: bool, undo: bool,
          state_dir: str, yes: bool) -> None:
    """Apply the plan to what is running.  Dry run unless --yes.

    \b
    topoagent apply --pid 4242 --gpu 3          # show: every thread of 4242 -> GPU 3's CPUs
    topoagent apply --pid 4242 --gpu 3 --yes    # do it (journalled first)
    topoagent apply --irqs --yes                # rail NIC IRQs onto their NUMA nodes
    topoagent apply --undo --yes                # put it all back, newest first
    """
    if sum(bool(x) for x in (pid is not None, irqs, undo)) != 1:
        fail("give exactly one of --pid, --irqs, --undo")
    if undo:
        sys.exit(_undo(state_dir, yes))
    if pid is not None:
        sys.exit(_pid(inputs, pid, gpu, node, state_dir, yes))
    sys.exit(_irqs(inputs, state_dir, yes))


def _pid(inputs: Inputs, pid: int, gpu: int | None, node: int | None, state_dir: str, yes: bool) -> int:
    from topoagent.apply.changes import thread_changes
    from topoagent.commands.plan import make_plan
    from topoagent.sources.process import ProcessError, cgroup_cpus, owner_uid, threads

    if (gpu is None) == (node is None):
        fail("--pid needs one of --gpu N or --node N")
    try:
        current = threads(pid)
    except ProcessError as exc:
        fail(str(exc))
    result = run_scan(inputs)
    plan = make_plan(result, inputs, "auto", 0, 1, this_process=True)
    if gpu is not None:
        if gpu >= len(plan.gpus):
            fail(f"--gpu {gpu}: the host has {len(plan.gpus)} GPU(s)")
        target, where = plan.gpus[gpu].cpus, f"{plan.gpus[gpu].gpu}'s NUMA node {plan.gpus[gpu].numa_node}"
    else:
        n = result.topology.node(node)
        if n is None or not n.cpus:
            fail(f"--node {node}: no NUMA node {node} with CPUs on this host")
        target = n.cpus & plan.allowed if plan.allowed is not None else n.cpus
        where = f"NUMA node {node}"
    theirs = cgroup_cpus(pid=pid)  # a process in a Slurm job or container keeps to its cpuset
    if target is not None and theirs:
        target = target & theirs
    if target is None or not target:
        fail(f"none of {where}'s CPUs is allowed here (this process: {plan.allowed}; pid {pid}'s cpuset: "
             f"{theirs if theirs else 'unrestricted'}): nothing to bind pid {pid} to")
    click.echo(f"pid {pid} ({len(current)} thread(s)) -> {where}: CPUs {target}")
    if yes and os.geteuid() != 0 and owner_uid(pid) != os.getuid():
        fail(f"pid {pid} belongs to another user: changing its affinity needs root: nothing changed")
    return run_changes(thread_changes(pid, [(t.tid, t.cpus) for t in current], target), inputs.root, state_dir,
                       yes, needs="root")


def _irqs(inputs: Inputs, state_dir: str, yes: bool) -> int:
    from topoagent.apply.changes import irq_changes, rail_nics
    from topoagent.hostfs import HostFS
    from topoagent.sources.irqs import device_irqs, irq_affinity, irqbalance_pids

    if inputs.offline:
        fail("--irqs changes a host: it needs a host tree (--root), not pasted output")
    result = run_scan(inputs)
    fs = HostFS(inputs.root)
    nics = rail_nics(result.topology, result.rails)
    if not nics:
        click.echo("No rail NICs: nothing to place.")
        return EXIT_OK
    state = {n.id: tuple((i, irq_affinity(fs, i)) for i in device_irqs(fs, n.bdf)) for n in nics if n.bdf}
    changes, skipped = irq_changes(result.topology, nics, state)
    for line in skipped:
        click.echo(f"  left alone: {line}")
    balancers = irqbalance_pids(fs)
    if balancers and changes:
        irq_list = " ".join(f"--banirq={c.target['irq']}" for c in changes)
        click.echo(f"Note: irqbalance is running (pid {', '.join(map(str, balancers))}): it will move these IRQs "
                   "again within seconds. Ban them from it instead, in /etc/default/irqbalance "
                   f"(or /etc/sysconfig/irqbalance): IRQBALANCE_ARGS=\"{irq_list}\" -- or keep it off the "
                   "NICs' CPUs with IRQBALANCE_BANNED_CPULIST=<cpus> -- then restart irqbalance.")
    return run_changes(changes, inputs.root, state_dir, yes, needs="root (/proc/irq is the kernel's)")


def _undo(state_dir: str, yes: bool) -> int:
    from topoagent.apply.execute import FAILED, describe, undo
    from topoagent.apply.journal import Journal, JournalError

    journal = Journal(state_dir)
    try:
        entries = journal.to_undo()
    except JournalError as exc:
        fail(str(exc))
    if not entries:
        click.echo(f"Nothing to undo in {journal.path}.")
        return EXIT_OK
    click.echo(f"{'Undoing' if yes else 'Would undo'} ({len(entries)}, newest first):")
    for e in entries:
        click.echo(f"  {describe(e)}: {e.after!r} -> {e.before!r}")
    if not yes:
        click.echo("Dry run: nothing was changed. Run again with --yes to undo.")
        return EXIT_OK
    if not journal.writable():
        fail(f"cannot write the journal {journal.path} (needs root, or choose --state-dir): nothing undone")
    try:
        outcomes = undo(journal, entries)
    except JournalError as exc:
        fail(f"journal: {exc}: stopped")
    for o in outcomes:
        click.echo(f"  {o.status}: {o.what}" + (f" -- {o.detail}" if o.detail else ""))
    return EXIT_FINDINGS if any(o.status == FAILED for o in outcomes) else EXIT_OK
