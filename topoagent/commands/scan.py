"""``topoagent scan``: read the host (or pasted output), report its tree, paths and findings."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import click

from topoagent.commands.common import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, emit
from topoagent.commands.options import run_scan, scan_inputs
from topoagent.inputs import Inputs
from topoagent.outputs import formats, renderer

SEVERITIES = ("critical", "warning", "info")
#: Nagios plugin exit codes (Nagios Plugin API): OK, WARNING, CRITICAL, UNKNOWN.
NAGIOS_OK, NAGIOS_WARNING, NAGIOS_CRITICAL, NAGIOS_UNKNOWN = 0, 1, 2, 3


class _Verdict(SystemExit):
    """The exit of a scan that ran (so a Nagios 2 = CRITICAL is not taken for an error)."""


def _unknown_on_error(fn: Callable[..., Any]) -> Callable[..., Any]:
    """With ``--exit-codes nagios``, a scan that cannot run exits 3 (UNKNOWN), not 2."""

    @functools.wraps(fn)
    def run(*args: Any, exit_codes: str, **kwargs: Any) -> Any:
        try:
            return fn(*args, exit_codes=exit_codes, **kwargs)
        except _Verdict:
            raise
        except SystemExit as exc:
            if exit_codes == "nagios" and exc.code == EXIT_ERROR:
                sys.exit(NAGIOS_UNKNOWN)
            raise

    return run


@click.command()
@click.option("--exit-codes", type=click.Choice(["default", "nagios"]), default="default", show_default=True,
              help="nagios: 0 OK, 1 WARNING, 2 CRITICAL (the worst finding; --fail-on is ignored), "
                   "3 UNKNOWN (the scan could not run).")
@_unknown_on_error
@scan_inputs()
@click.option("--format", "fmt", type=click.Choice(formats("scan")), default="tree", show_default=True,
              help="Output format.")
@click.option("--all", "show_all", is_flag=True, help="Show every PCI function in the tree.")
@click.option("--pretty", is_flag=True, help="Indent the JSON for a person (compact by default).")
@click.option("--fail-on", type=click.Choice(SEVERITIES), default="critical", show_default=True,
              help="Exit 1 when a finding at or above this severity is raised.")
def scan(inputs: Inputs, fmt: str, show_all: bool, pretty: bool, fail_on: str, exit_codes: str) -> None:
    """Read this host's PCIe/NUMA tree and report it.

    With --nvidia-smi-topo, --lspci-tree or --lspci-verbose (any combination) the saved
    outputs are analysed instead: sysfs is not read and --root is ignored.

    Exit status: 0 nothing at or above --fail-on, 1 findings at or above it, 2 the scan
    could not run.  With --exit-codes nagios: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.
    """
    from topoagent.analysis.findings import Severity

    result = run_scan(inputs)
    emit(renderer("scan", fmt)(result, show_all=show_all, pretty=pretty))
    worst = result.worst()
    if exit_codes == "nagios":
        raise _Verdict({None: NAGIOS_OK, Severity.INFO: NAGIOS_OK, Severity.WARNING: NAGIOS_WARNING,
                        Severity.CRITICAL: NAGIOS_CRITICAL}[worst])
    sys.exit(EXIT_FINDINGS if worst is not None and worst >= Severity.parse(fail_on) else EXIT_OK)
