"""``topoagent audit``: are the processes using the GPUs placed where their GPUs are?"""

from __future__ import annotations

import sys

import click

from topoagent.core.command.common import EXIT_FINDINGS, EXIT_OK, SEVERITIES, deliver, output_option, pretty_option
from topoagent.core.command.options import run_scan, scan_inputs
from topoagent.core.findings import Severity
from topoagent.core.inputs import NVML_OFF, Inputs
from topoagent.core.read import is_live
from topoagent.core.result import with_findings
from topoagent.features.audit.read import audit_host
from topoagent.features.audit.render import render_json, render_text

__all__ = ["audit"]


@click.command()
@scan_inputs(cross_check=False, pasted=False)
@click.option("--format", "fmt", type=click.Choice(("text", "json")), default="text", show_default=True)
@pretty_option
@output_option()
@click.option(
    "--fail-on",
    "fail_on",
    type=click.Choice(SEVERITIES),
    default="warning",
    show_default=True,
    help="Exit 1 when a finding is at or above this severity.",
)
def audit(inputs: Inputs, fmt: str, pretty: bool, output: str | None, fail_on: str) -> None:
    """Check the processes using each GPU: their threads' CPUs, where their memory lives and
    their NCCL_IB_HCA, against the GPU's NUMA node, CPUs and rail NICs.

    \b
    topoagent audit                  # this host (as root: every user's processes)
    topoagent audit --format json    # findings as scan --format json gives them
    topoagent audit --root DIR       # a fake or captured tree with its own /proc

    The GPU users are NVML's running processes where a driver answers, else the processes
    holding /dev/nvidiaN or /dev/dri/renderD* open (their fd links are read, never opened).
    Other users' processes can be read only by root: the report names those it could not read.
    The host's verdict is the scan's findings with the audit's (the daemon's is the same).
    Exit status: 0 nothing at or above --fail-on, 1 findings at or above it, 2 it could not run.
    """
    result = run_scan(inputs)
    asked = is_live(inputs) and inputs.nvml != NVML_OFF
    why = "not asked (--no-nvml)" if inputs.nvml == NVML_OFF else "not asked (not the live host)"
    report = audit_host(result, inputs.root, ask_nvml=asked, why_not=None if asked else why)
    host = with_findings(result, report.findings)  # the host's verdict: the scan's findings and the audit's
    deliver(render_json(host, report, pretty=pretty) if fmt == "json" else render_text(host, report), output)
    sys.exit(EXIT_FINDINGS if host.failing(Severity.parse(fail_on)) else EXIT_OK)
