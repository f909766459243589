"""``topoagent apply``: change what is already running -- a process's CPUs, rail NICs' IRQs --
shown first (dry run by default), journalled before each change, undoable."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from typing import Any

import click
from click.core import ParameterSource

from topoagent.core.analysis.locality import switch_node_mismatches
from topoagent.core.analysis.rails import compute_nics
from topoagent.core.command.common import EXIT_FINDINGS, EXIT_OK, fail
from topoagent.core.command.options import require_this_machine, run_scan, scan_inputs
from topoagent.core.hostfs import HostFS
from topoagent.core.inputs import Inputs
from topoagent.core.read.process import ProcessError, cgroup_cpus, owner_uid, threads
from topoagent.core.render.escape import shown
from topoagent.core.tree import Root, root_name
from topoagent.core.write.files import DEFAULT_STATE_DIR
from topoagent.features.act.changes import FILE, irq_changes, thread_changes
from topoagent.features.act.execute import FAILED, LEFT, REFUSED, SKIPPED, apply_changes, describe, target_rel, undo
from topoagent.features.act.irqs import device_irqs, irq_affinity, irqbalance_pids
from topoagent.features.act.journal import Journal, JournalError
from topoagent.features.act.writer import HostWriter
from topoagent.features.plan.options import gpu_option, make_plan, pick_gpu


def state_dir_option(f: Any) -> Any:
    """``--state-dir`` (where the undo journal lives) and ``--yes`` (act, not just show)."""
    f = click.option("--yes", is_flag=True, help="Make the changes (without it: show them, change nothing).")(f)
    return click.option(
        "--state-dir",
        default=DEFAULT_STATE_DIR,
        show_default=True,
        metavar="DIR",
        help="Where the undo journal is kept.",
    )(f)


def _shown(value: str | None, absent: str) -> str:
    if value is None:
        return absent
    return repr(value) if "\n" in value else value


def _file_lines(value: str | None, absent: str) -> list[str]:
    """A file's text as the dry run shows it: one line each, control characters escaped."""
    if value is None:
        return [f"      {absent}"]
    return [f"      | {shown(line)}" for line in value.rstrip("\n").split("\n")]


def show(changes: Sequence[Any]) -> None:
    """Print each planned change as ``what: current -> proposed``; a whole file as its lines,
    exactly as it will be written (a grub drop-in's escaped quotes included)."""
    for ch in changes:
        if ch.kind == FILE:
            click.echo(f"  {ch.what}:")
            click.echo("    now:")
            for line in _file_lines(ch.before, "(no file)"):
                click.echo(line)
            click.echo("    proposed:")
            for line in _file_lines(ch.after, "(removed)"):
                click.echo(line)
            continue
        click.echo(f"  {ch.what}: {_shown(ch.before, '(none)')} -> {_shown(ch.after, '(removed)')}")


def run_changes(changes: Sequence[Any], root: Root, state_dir: str, yes: bool, *, needs: str) -> int:
    """Show the changes; with ``yes`` check privileges, then make them through the writer
    and journal.  Returns the exit status (0 all made or refused by the kernel, 1 a failure)."""
    if not changes:
        click.echo("Nothing to change.")
        return EXIT_OK
    click.echo(f"{'Changing' if yes else 'Would change'} ({len(changes)}):")
    show(changes)
    if not yes:
        click.echo("Dry run: nothing was changed. Run again with --yes to make these changes.")
        return EXIT_OK
    writer, journal = HostWriter(root_name(root)), Journal(state_dir)
    if not journal.writable():
        fail(f"cannot write the undo journal in {state_dir} ({needs}, or choose --state-dir): nothing changed")
    rels = (target_rel(c.kind, c.target) for c in changes)
    denied = [(rel, why) for rel in rels if rel is not None and (why := writer.why_not(rel)) is not None]
    if denied:
        rel, why = denied[0]
        # "needs root" only where root would help: a refusal for another reason says that reason
        reason = f"writing /{rel} needs {needs}" if why == "permission denied" and os.geteuid() != 0 else why
        fail(reason + (f" (and {len(denied) - 1} more)" if len(denied) > 1 else "") + ": nothing changed")
    try:
        outcomes = apply_changes(changes, writer, journal)
    except JournalError as exc:  # the record comes first, so the change it was for was not made
        fail(f"journal: {exc}: stopped before the next change")
    for o in outcomes:
        click.echo(f"  {o.status}: {o.what}" + (f" -- {o.detail}" if o.detail else ""))
    refused = [o for o in outcomes if o.status == REFUSED]
    if refused:
        click.echo(f"{len(refused)} change(s) refused by the kernel (not an error: left as they were).")
    # undo puts each record back under its own root (the journal names it)
    click.echo(f"Journal: {journal.path}  (undo: topoagent apply --undo --yes --state-dir {shlex.quote(state_dir)})")
    return EXIT_FINDINGS if any(o.status == FAILED for o in outcomes) else EXIT_OK


@click.command()
@scan_inputs(cross_check=False, pasted=False)
@click.option("--pid", type=click.IntRange(min=1), metavar="PID", help="Bind every thread of this process.")
@gpu_option("With --pid: to the CPUs of this")
@click.option("--numa-node", type=click.IntRange(min=0), metavar="N", help="With --pid: to NUMA node N's CPUs.")
@click.option("--irqs", is_flag=True, help="Move each rail NIC's MSI/MSI-X IRQs onto its NUMA node's CPUs.")
@click.option("--undo", is_flag=True, help="Restore what earlier applies and fixes changed, newest first.")
@state_dir_option
def apply(
    inputs: Inputs,
    pid: int | None,
    gpu: str | None,
    numa_node: int | None,
    irqs: bool,
    undo: bool,
    state_dir: str,
    yes: bool,
) -> None:
    """Apply the plan to what is running.  Dry run unless --yes.

    \b
    topoagent apply --pid 4242 --gpu 3          # show: every thread of 4242 -> GPU 3's CPUs
    topoagent apply --pid 4242 --gpu 3 --yes    # do it (journalled first)
    topoagent apply --irqs --yes                # rail NIC IRQs onto their NUMA nodes
    topoagent apply --undo --yes                # put it all back, newest first

    --pid binds a process of this machine: with --yes it needs this machine's own tree.
    --irqs and a fix write below --root, the tree they read; --undo puts back each change
    under the root it was made in (the journal's; --root picks one).
    """
    if sum(bool(x) for x in (pid is not None, irqs, undo)) != 1:
        fail("give exactly one of --pid, --irqs, --undo")
    if undo:
        sys.exit(_undo(_undo_root(inputs.root), state_dir, yes))
    if pid is not None:
        sys.exit(_pid(inputs, pid, gpu, numa_node, state_dir, yes))
    sys.exit(_irqs(inputs, state_dir, yes))


def _pid(inputs: Inputs, pid: int, gpu: str | None, node: int | None, state_dir: str, yes: bool) -> int:
    if (gpu is None) == (node is None):
        fail("--pid needs one of --gpu GPU or --numa-node N")
    if yes:  # a process here is bound by this machine's topology, never another's
        require_this_machine(inputs, "apply --pid --yes", "apply --pid without --yes")
    try:
        threads(pid)  # a missing process is refused before the scan
    except ProcessError as exc:
        fail(str(exc))
    result = run_scan(inputs)
    plan = make_plan(result, inputs, "auto", 0, 1, this_process=True)
    if gpu is not None:
        g = plan.gpus[pick_gpu(result, plan, gpu)]
        target, where = g.cpus, f"{g.gpu}'s NUMA node {g.numa_node}"
    else:
        n = result.topology.node(node)
        if n is None or not n.cpus:
            fail(f"--numa-node {node}: no NUMA node {node} with CPUs on this host")
        target = n.cpus & plan.allowed if plan.allowed is not None else n.cpus
        where = f"NUMA node {node}"
    theirs = cgroup_cpus(pid=pid)  # a process in a Slurm job or container keeps to its cpuset
    if target is not None and theirs:
        target = target & theirs
    if target is None or not target:
        fail(
            f"none of {where}'s CPUs is allowed here (this process: {plan.allowed}; pid {pid}'s cpuset: "
            f"{theirs if theirs else 'unrestricted'}): nothing to bind pid {pid} to"
        )
    try:
        current = threads(pid)  # listed after the scan: threads started during it are bound too
    except ProcessError as exc:
        fail(str(exc))
    click.echo(f"pid {pid} ({len(current)} thread(s)) -> {where}: CPUs {target}")
    if yes and os.geteuid() != 0 and owner_uid(pid) != os.getuid():
        fail(f"pid {pid} belongs to another user: changing its affinity needs root: nothing changed")
    return bind_threads(pid, target, current, inputs.root, state_dir, yes)


#: How many times ``apply --pid`` lists the threads again for ones started meanwhile.
CONVERGE_ROUNDS = 10


def bind_threads(pid: int, target: Any, current: Sequence[Any], root: Root, state_dir: str, yes: bool) -> int:
    """Show (and with ``yes`` make) the changes that move ``current`` -- ``pid``'s threads as
    listed -- onto ``target``.  With ``yes``, then bind the threads it started meanwhile: list
    them again until no new one appears (at most :data:`CONVERGE_ROUNDS` times), and name every
    thread still off ``target`` (the kernel refused it, or it kept starting threads).  Every
    round, the first included, goes through this one loop.  Returns the exit status."""
    status, tried, batch = EXIT_OK, set[int](), list(current)
    try:
        for round_ in range(CONVERGE_ROUNDS + 1):
            if round_:
                batch = [t for t in threads(pid) if t.tid not in tried and t.cpus != target]
                if not batch:
                    break
                click.echo(f"pid {pid} started {len(batch)} thread(s) meanwhile: binding them too")
            tried.update(t.tid for t in batch)
            changes = thread_changes(pid, [(t.tid, t.cpus) for t in batch], target, {t.tid: t.start for t in batch})
            status = max(status, run_changes(changes, root, state_dir, yes, needs="root"))
            if not yes:
                return status
        off = [t.tid for t in threads(pid) if t.cpus != target]
    except ProcessError:
        return status  # the process ended: nothing left to bind
    if off:
        shown = " ".join(map(str, off[:20])) + (f" (and {len(off) - 20} more)" if len(off) > 20 else "")
        click.echo(f"not bound: {len(off)} thread(s) of pid {pid} are not on CPUs {target}: {shown}")
        status = EXIT_FINDINGS
    return status


def _irqs(inputs: Inputs, state_dir: str, yes: bool) -> int:
    result = run_scan(inputs)
    fs = HostFS(inputs.root)
    nics = compute_nics(result.topology, result.rails.roles)
    if not nics:
        click.echo("No rail NICs: nothing to place.")
        return EXIT_OK
    state = {n.id: tuple((i, irq_affinity(fs, i)) for i in device_irqs(fs, n.bdf)) for n in nics if n.bdf}
    changes, skipped = irq_changes(result.topology, nics, state)
    for line in skipped:
        click.echo(f"  left alone: {line}")
    # A NIC whose node its switch siblings contradict is left alone and the run exits 1: an IRQ
    # placed by a node that may be wrong could land on the other socket (NUMA_SWITCH_MISMATCH).
    ids = {n.id for n in nics}
    disputed = any(m.device in ids for m in switch_node_mismatches(result.topology))
    balancers = irqbalance_pids(fs)
    if balancers and changes:
        irq_list = " ".join(f"--banirq={c.target['irq']}" for c in changes)
        click.echo(
            f"Note: irqbalance is running (pid {', '.join(map(str, balancers))}): it will move these IRQs "
            "again within seconds. Ban them from it instead, in /etc/default/irqbalance "
            f'(or /etc/sysconfig/irqbalance): IRQBALANCE_ARGS="{irq_list}" -- or keep it off the '
            "NICs' CPUs with IRQBALANCE_BANNED_CPULIST=<cpus> -- then restart irqbalance."
        )
    status = run_changes(changes, inputs.root, state_dir, yes, needs="root (/proc/irq is the kernel's)")
    return max(status, EXIT_FINDINGS) if disputed else status


def _undo_root(root: Root) -> str | None:
    """``--root`` where it was given; None where it was not: each change is then put back under
    the root the journal says it was made in (none need be typed again)."""
    given = click.get_current_context().get_parameter_source("root") is not ParameterSource.DEFAULT
    return root_name(root) if given else None


def _undo(root: str | None, state_dir: str, yes: bool) -> int:
    journal = Journal(state_dir)
    try:
        entries = journal.to_undo()
    except JournalError as exc:
        fail(str(exc))
    for line in journal.skipped:
        click.echo(f"topoagent: {line}", err=True)
    if not entries:
        click.echo(f"Nothing to undo in {journal.path}.")
        return EXIT_OK
    click.echo(f"{'Undoing' if yes else 'Would undo'} ({len(entries)}, newest first):")
    for e in entries:
        under = "" if e.root == "/" else f" (under --root {shown(e.root)})"
        click.echo(f"  {describe(e)}: {e.after!r} -> {e.before!r}{under}")
    if not yes:
        click.echo("Dry run: nothing was changed. Run again with --yes to undo.")
        return EXIT_OK
    if not journal.writable():
        fail(f"cannot write the journal {journal.path} (needs root, or choose --state-dir): nothing undone")
    outcomes = []
    for where in [root] if root is not None else dict.fromkeys(e.root for e in entries):
        outcomes += undo(journal, [e for e in entries if root is not None or e.root == where], where)
    for o in outcomes:
        click.echo(f"  {o.status}: {o.what}" + (f" -- {o.detail}" if o.detail else ""))
    bad = journal.skipped or any(o.status in (FAILED, LEFT, SKIPPED) for o in outcomes)
    return EXIT_FINDINGS if bad else EXIT_OK
