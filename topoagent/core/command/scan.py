"""``topoagent scan``: read the host (or pasted output), report its tree, paths and findings."""

from __future__ import annotations

import sys

import click

from topoagent.core.command.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    SEVERITIES,
    deliver,
    fail,
    output_option,
    pretty_option,
    require_gpus,
    set_monitoring,
)
from topoagent.core.command.options import run_scan, scan_inputs
from topoagent.core.errors import InputError
from topoagent.core.findings import Severity
from topoagent.core.inputs import Inputs
from topoagent.core.read.expectation import load_expectation
from topoagent.core.render import FORMATS
from topoagent.core.render.monitor import nagios_text, npd_text
from topoagent.core.result import ScanResult, with_expected

__all__ = ["scan"]

EXIT_CODES = ("default", "nagios", "npd")

HELP = """Read this host's PCIe/NUMA tree and report it.

With --nvidia-smi-topo, --lspci-tree or --lspci-verbose (any combination) the saved
outputs are analysed instead: sysfs is not read and --root is ignored.

Exit status: 0 nothing at or above --fail-on, 1 findings at or above it, 2 the scan
could not run (or --format matrix found no GPU).  With --exit-codes nagios (a Nagios/Icinga plugin): the status line
"TOPOAGENT CRITICAL - ... | perfdata", then one line per finding; 0 OK, 1 WARNING,
2 CRITICAL, 3 UNKNOWN (the scan or the command line failed).  With --exit-codes npd (a
node-problem-detector custom plugin): the fault in the first 80 characters; 0 OK, 1 a
finding at or above --fail-on, 3 Unknown.  Both print that text instead of --format.
"""


@click.command("scan", help=HELP)
@click.option(
    "--exit-codes",
    "exit_codes",
    type=click.Choice(EXIT_CODES),
    default="default",
    show_default=True,
    help="nagios: a Nagios plugin's status line and 0 OK, 1 WARNING, 2 CRITICAL "
    "(the worst finding; --fail-on is ignored), 3 UNKNOWN (the scan could not run); npd: a "
    "node-problem-detector plugin's message and 0 OK, 1 a finding at or above --fail-on, 3 Unknown.",
)
@scan_inputs(cross_check=True)
@click.option(
    "--format", "fmt", type=click.Choice(tuple(FORMATS)), default="tree", show_default=True, help="Output format."
)
@click.option("--all", "show_all", is_flag=True, help="Show every PCI function in the tree.")
@pretty_option
@output_option()
@click.option(
    "--expect",
    metavar="FILE",
    help="Compare with this expected topology (topoagent baseline, or a good host's scan "
    "JSON): every difference is an EXPECT_* finding.",
)
@click.option(
    "--fail-on",
    "fail_on",
    type=click.Choice(SEVERITIES),
    default=None,
    help="Exit 1 when a finding at or above this severity is raised.  [default: critical; with "
    "--expect, also any EXPECT_* warning: a narrower link or an added card differs from the build]",
)
def scan(
    inputs: Inputs,
    exit_codes: str,
    fmt: str,
    show_all: bool,
    pretty: bool,
    output: str | None,
    expect: str | None,
    fail_on: str | None,
) -> None:
    """Scan, print, and exit with the verdict.

    Under a monitoring mode an error exits 3 with the check's UNKNOWN text
    (:func:`topoagent.core.command.common.fail`).
    """
    if exit_codes != "default":
        set_monitoring(exit_codes)
    result = run_scan(inputs)
    if expect:
        result = expect_from(expect, result)
    threshold = Severity.parse(fail_on or "critical")
    if exit_codes != "default":
        text, code = nagios_text(result) if exit_codes == "nagios" else npd_text(result, threshold)
        deliver(text, output)
        sys.exit(code)
    if fmt == "matrix":
        require_gpus(result, "the GPU matrix")
    deliver(FORMATS[fmt](result, show_all=show_all, pretty=pretty), output)
    failed = result.failing(threshold, expect_warns=bool(expect) and fail_on is None)
    sys.exit(EXIT_FINDINGS if failed else EXIT_OK)


def expect_from(name: str, result: ScanResult) -> ScanResult:
    """``result`` with the differences from the expected topology in file ``name`` (one line
    and exit 2 when it cannot be read)."""
    try:
        return with_expected(result, load_expectation(name))
    except InputError as exc:
        fail(f"--expect {exc}")
