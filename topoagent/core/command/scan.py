"""``topoagent scan``: read the host (or pasted output), report its tree, paths and findings.

The command people, prologs and monitoring checks run most, so it runs without click when its
command line is plain (:func:`fast`; see :mod:`topoagent.core.command.argspec`); :func:`command`
makes the click command, for ``--help``, errors and ``topoagent``'s command list.  Both parse
the same option rows and call the same :func:`run`.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from topoagent.core.command.argspec import Opt, click_command, fast_runner
from topoagent.core.command.common import EXIT_FINDINGS, EXIT_OK, emit
from topoagent.core.command.options import input_options, run_scan, take_inputs
from topoagent.core.render import FORMATS

if TYPE_CHECKING:
    import click

    from topoagent.core.result import ScanResult

SEVERITIES = ("critical", "warning", "info")
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


def options() -> tuple[Opt, ...]:
    """``scan``'s option rows, in ``--help`` order."""
    return (
        Opt(
            "--exit-codes",
            "exit_codes",
            "nagios: a Nagios plugin's status line and 0 OK, 1 WARNING, 2 CRITICAL "
            "(the worst finding; --fail-on is ignored), 3 UNKNOWN (the scan could not run); npd: a "
            "node-problem-detector plugin's message and 0 OK, 1 a finding at or above --fail-on, 3 Unknown.",
            default="default",
            choices=EXIT_CODES,
            show_default=True,
        ),
        *input_options(cross_check=True),
        Opt("--format", "fmt", "Output format.", default="tree", choices=tuple(FORMATS), show_default=True),
        Opt("--all", "show_all", "Show every PCI function in the tree.", flag=True),
        Opt("--pretty", "pretty", "Indent the JSON for a person (compact by default).", flag=True),
        Opt(
            "--expect",
            "expect",
            "Compare with this expected topology (topoagent baseline, or a good host's scan "
            "JSON): every difference is an EXPECT_* finding.",
            metavar="FILE",
        ),
        Opt(
            "--fail-on",
            "fail_on",
            "Exit 1 when a finding at or above this severity is raised.",
            default="critical",
            choices=SEVERITIES,
            show_default=True,
        ),
    )


def run(params: dict[str, Any]) -> None:
    """Scan, print, and exit with the verdict (``params`` as the option rows name them).

    Under a monitoring mode an error exits 3 with the check's UNKNOWN text
    (:func:`topoagent.core.command.common.fail`; the CLI sets the mode before parsing).
    """
    from topoagent.core.analysis.findings import Severity
    from topoagent.core.command.common import monitor

    mode = params["exit_codes"]
    if mode != "default":
        monitor["mode"] = mode
    result = run_scan(take_inputs(params))
    if params.get("expect"):
        result = expect_from(params["expect"], result)
    fail_on = Severity.parse(params["fail_on"])
    if mode != "default":
        from topoagent.core.render.monitor import nagios_text, npd_text

        text, code = nagios_text(result) if mode == "nagios" else npd_text(result, fail_on)
        emit(text)
        sys.exit(code)
    if params["fmt"] == "matrix":
        from topoagent.core.command.common import require_gpus

        require_gpus(result, "the GPU matrix")
    emit(FORMATS[params["fmt"]](result, show_all=params["show_all"], pretty=params["pretty"]))
    worst = result.worst()
    sys.exit(EXIT_FINDINGS if worst is not None and worst >= fail_on else EXIT_OK)


def expect_from(name: str, result: ScanResult) -> ScanResult:
    """``result`` with the differences from the expected topology in file ``name`` (one line
    and exit 2 when it cannot be read)."""
    from topoagent.core.command.common import fail
    from topoagent.core.errors import InputError
    from topoagent.core.read.expectation import load_expectation
    from topoagent.core.result import with_expected

    try:
        return with_expected(result, load_expectation(name))
    except InputError as exc:
        fail(f"--expect {exc}")


#: ``scan`` without click for a plain command line (see :mod:`topoagent.core.command.argspec`).
fast = fast_runner(options, run)


def command() -> click.Command:
    """The click command (help, errors, and every command line :func:`fast` leaves alone)."""
    return click_command("scan", HELP, options, run)
