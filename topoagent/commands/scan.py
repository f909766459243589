"""``topoagent scan``: read the host (or pasted output), report its tree, paths and findings."""

from __future__ import annotations

import sys

import click

from topoagent.commands.common import EXIT_FINDINGS, EXIT_OK, emit
from topoagent.commands.options import run_scan, scan_inputs
from topoagent.inputs import Inputs
from topoagent.outputs import formats, renderer

SEVERITIES = ("critical", "warning", "info")


@click.command()
@scan_inputs()
@click.option("--format", "fmt", type=click.Choice(formats("scan")), default="tree", show_default=True,
              help="Output format.")
@click.option("--all", "show_all", is_flag=True, help="Show every PCI function in the tree.")
@click.option("--fail-on", type=click.Choice(SEVERITIES), default="critical", show_default=True,
              help="Exit 1 when a finding at or above this severity is raised.")
def scan(inputs: Inputs, fmt: str, show_all: bool, fail_on: str) -> None:
    """Read this host's PCIe/NUMA tree and report it.

    With --nvidia-smi-topo, --lspci-tree or --lspci-verbose (any combination) the saved
    outputs are analysed instead: sysfs is not read and --root is ignored.

    Exit status: 0 nothing at or above --fail-on, 1 findings at or above it, 2 the scan
    could not run.
    """
    from topoagent.analysis.findings import Severity

    result = run_scan(inputs)
    emit(renderer("scan", fmt)(result, show_all=show_all))
    worst = result.worst()
    sys.exit(EXIT_FINDINGS if worst is not None and worst >= Severity.parse(fail_on) else EXIT_OK)
