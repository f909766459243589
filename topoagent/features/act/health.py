"""``topoagent health``: a Slurm ``HealthCheckProgram`` that drains a node on a critical finding.

Slurm runs the program as root on every node at once, every ``HealthCheckInterval`` seconds and
when slurmd starts, kills it after 60 s, and acts on nothing it prints or returns: "any action
to be taken must be explicitly performed by the program" (slurm.conf(5), HealthCheckProgram).
So this command scans (the one orchestration, :func:`topoagent.core.api.run`, under a time limit
well below those 60 s), decides (:mod:`topoagent.features.act.drain`, pure) and runs
``scontrol update NodeName=<node> State=DRAIN Reason="topoagent: <CODE> <subject>"`` -- or
``State=RESUME`` for a node it drained itself that is healthy again.  A node drained for any
other reason is never touched.  Without ``--yes`` it only prints the lines it would run.

Exit status: 0 the verdict was carried out (or printed), whatever it was -- Slurm reads the
drain, not the status, and some Slurm versions rerun a failing health program at slurmd start
-- 2 the scan or scontrol failed or an option is wrong (nothing is changed then).
"""

from __future__ import annotations

import os
import re
import socket
import sys
import threading

import click

from topoagent.core.command.common import EXIT_ERROR, EXIT_OK, SEVERITIES, emit, fail
from topoagent.core.command.options import is_this_machine, require_this_machine, run_scan, scan_inputs
from topoagent.core.findings import Severity
from topoagent.core.inputs import Inputs
from topoagent.core.read.tools import run_tool
from topoagent.features.act.drain import (
    Action,
    NodeState,
    decide,
    drain_reason,
    parse_show_node,
    scontrol_argv,
    shell_line,
)

__all__ = ["health"]

#: The scan's time limit by default: Slurm kills the program at 60 s, and scontrol needs two
#: calls of at most SCONTROL_TIMEOUT after it.
DEFAULT_TIMEOUT = 30.0
SCONTROL_TIMEOUT = 10.0
_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # fullmatch: `$` would let a trailing newline in

HELP = """Drain this Slurm node on a critical finding; resume it once healthy.

For slurm.conf's HealthCheckProgram.  Scans the node; on findings at or above --fail-on
runs scontrol update NodeName=NODE State=DRAIN Reason="topoagent: CODE SUBJECT"; when
healthy again, State=RESUME -- only for a node whose reason topoagent set (prefix
"topoagent:"): a node drained by anyone else is left alone.  Prints the scontrol lines;
runs them only with --yes, and only from this machine's own scan (another host's --root or
pasted output is a dry run for that host's node).

Exit status: 0 done (drained, resumed, nothing to do, or a dry run), 2 the scan or
scontrol failed or an option is wrong (nothing changed).
"""


def node_name(given: str | None, elsewhere: str | None = None, *, here: bool = True) -> str:
    """The node to act on: ``--node``, else (``here``: this machine's scan) ``$SLURMD_NODENAME``
    (set by slurmd for the programs it runs) or the short host name, else the host name the
    scanned tree gives (``elsewhere``): another host's data never names this machine's node.
    One line and exit 2 if it is no node name, or there is none."""
    name = given or (os.environ.get("SLURMD_NODENAME") or socket.gethostname() if here else elsewhere)
    if not name:
        fail("--node NAME: the scanned host names no host, and this machine's node is not the scanned one")
    name = name if given else name.split(".")[0]
    if not _NODE_NAME.fullmatch(name):
        fail(f"--node {name!r}: not a node name")
    return name


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 3600:
        fail(f"--timeout {text!r}: give seconds, more than 0")
    return value


def _watchdog(seconds: float) -> threading.Timer:
    """End the process (exit 2, nothing changed) if the scan outlives ``seconds``.

    A thread, not SIGALRM: a read stuck in the kernel or a wedged NVML call holds the main
    thread where no signal handler runs, and it releases the GIL, so this thread still does.
    """

    def expire() -> None:
        sys.stderr.write(f"topoagent: health: the scan took longer than {seconds:g} s; nothing changed\n")
        sys.stderr.flush()
        os._exit(EXIT_ERROR)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    return timer


def current_state(node: str) -> tuple[NodeState | None, str | None]:
    """The node's state and reason from ``scontrol show node`` (None and the error if it failed)."""
    shown = run_tool(["scontrol", "show", "node", node], timeout=SCONTROL_TIMEOUT)
    if not shown.ok:
        return None, shown.error
    return parse_show_node(shown.stdout), None


@click.command("health", help=HELP)
@click.option("--yes", is_flag=True, help="Run the scontrol lines (without it: print them only).")
@click.option("--node", metavar="NAME", help="Slurm node name [default: $SLURMD_NODENAME, else the short host name].")
@click.option(
    "--fail-on",
    "fail_on",
    type=click.Choice(SEVERITIES),
    default="critical",
    show_default=True,
    help="Drain on a finding at or above this severity.",
)
@click.option(
    "--timeout",
    default=str(int(DEFAULT_TIMEOUT)),
    metavar="SECONDS",
    show_default=True,
    help="Give up the scan after this many seconds (changing nothing); Slurm kills a health program at 60 s.",
)
@scan_inputs(cross_check=False)
def health(inputs: Inputs, yes: bool, node: str | None, fail_on: str, timeout: str) -> None:
    """Scan, decide, print the scontrol line, run it under --yes, exit.  Another host's data
    (pasted output, a tree of another machine or boot) is a dry run for that host's node: this
    machine's Slurm is neither asked nor changed."""
    here = is_this_machine(inputs)
    if yes:
        require_this_machine(inputs, "health --yes", "health without --yes")
    if node is not None or here:
        node = node_name(node)
    limit = _seconds(timeout)
    timer = _watchdog(limit)
    try:
        result = run_scan(inputs)
    finally:
        timer.cancel()
    node = node or node_name(None, result.topology.hostname, here=False)
    wanted = drain_reason(result.failing(Severity.parse(fail_on)))
    state, error = current_state(node) if here else (None, None)
    lines = [f"# node {node}: " + (wanted.removeprefix("topoagent: ") if wanted else f"nothing at or above {fail_on}")]
    if not here:
        lines.append(f"# another host's data: a dry run for node {node}; this machine's Slurm is not asked")
    elif state is None:
        if yes:
            emit("\n".join(lines) + "\n")
            fail(f"health: scontrol show node {node}: {error}; nothing changed")
        lines.append(f"# current reason unknown (scontrol show node: {error}); shown as if the node had none")
    decision = decide(wanted, state.reason if state is not None else None)
    lines.append(f"# {decision.action.value}: {decision.why}")
    argv = scontrol_argv(node, decision)
    if argv is not None:
        lines.append(shell_line(argv))
        if not yes:
            lines.append("# dry run: nothing changed; --yes runs the line above")
    emit("\n".join(lines) + "\n")
    if argv is not None and yes:
        done = run_tool(list(argv), timeout=SCONTROL_TIMEOUT)
        if not done.ok:
            fail(f"health: {shell_line(argv)}: {done.error}")
        emit(f"# {'drained' if decision.action is Action.DRAIN else 'resumed'} {node}\n")
    sys.exit(EXIT_OK)
