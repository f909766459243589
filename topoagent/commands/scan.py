"""``topoagent scan``: read the host (or pasted output), report its tree, paths and findings.

The command people, prologs and monitoring checks run most, so it runs without click when its
command line is plain (:func:`fast`; see :mod:`topoagent.commands.argspec`); :func:`command`
makes the click command, for ``--help``, errors and ``topoagent``'s command list.  Both parse
the same option rows and call the same :func:`run`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from topoagent.commands.argspec import Opt, click_options, parse
from topoagent.commands.common import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, emit
from topoagent.commands.options import input_options, run_scan, take_inputs
from topoagent.outputs import formats, renderer

if TYPE_CHECKING:
    import click

SEVERITIES = ("critical", "warning", "info")
#: Nagios plugin exit codes (Nagios Plugin API): OK, WARNING, CRITICAL, UNKNOWN.
NAGIOS_OK, NAGIOS_WARNING, NAGIOS_CRITICAL, NAGIOS_UNKNOWN = 0, 1, 2, 3

HELP = """Read this host's PCIe/NUMA tree and report it.

With --nvidia-smi-topo, --lspci-tree or --lspci-verbose (any combination) the saved
outputs are analysed instead: sysfs is not read and --root is ignored.

Exit status: 0 nothing at or above --fail-on, 1 findings at or above it, 2 the scan
could not run.  With --exit-codes nagios: 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.
"""


def options() -> tuple[Opt, ...]:
    """``scan``'s option rows, in ``--help`` order."""
    return (
        Opt("--exit-codes", "exit_codes", "nagios: 0 OK, 1 WARNING, 2 CRITICAL (the worst finding; --fail-on is "
            "ignored), 3 UNKNOWN (the scan could not run).", default="default", choices=("default", "nagios"),
            show_default=True),
        *input_options(cross_check=True),
        Opt("--format", "fmt", "Output format.", default="tree", choices=tuple(formats("scan")), show_default=True),
        Opt("--all", "show_all", "Show every PCI function in the tree.", flag=True),
        Opt("--pretty", "pretty", "Indent the JSON for a person (compact by default).", flag=True),
        Opt("--fail-on", "fail_on", "Exit 1 when a finding at or above this severity is raised.",
            default="critical", choices=SEVERITIES, show_default=True),
    )


def run(params: dict[str, Any]) -> None:
    """Scan, print, and exit with the verdict (``params`` as the option rows name them)."""
    try:
        result = run_scan(take_inputs(params))
        emit(renderer("scan", params["fmt"])(result, show_all=params["show_all"], pretty=params["pretty"]))
    except SystemExit as exc:
        if params["exit_codes"] == "nagios" and exc.code == EXIT_ERROR:
            sys.exit(NAGIOS_UNKNOWN)  # the scan could not run (or its report could not be written)
        raise
    from topoagent.analysis.findings import Severity

    worst = result.worst()
    if params["exit_codes"] == "nagios":
        sys.exit({None: NAGIOS_OK, Severity.INFO: NAGIOS_OK, Severity.WARNING: NAGIOS_WARNING,
                  Severity.CRITICAL: NAGIOS_CRITICAL}[worst])
    sys.exit(EXIT_FINDINGS if worst is not None and worst >= Severity.parse(params["fail_on"]) else EXIT_OK)


def fast(argv: Sequence[str]) -> bool:
    """Run ``scan`` with ``argv`` if it is a plain command line; False leaves it to click."""
    params = parse(options(), argv)
    if params is None:
        return False
    run(params)
    return True


def command() -> click.Command:
    """The click command (help, errors, and every command line :func:`fast` leaves alone)."""
    import click

    @click.command(name="scan", help=HELP)
    @click_options(options())
    def scan(**params: Any) -> None:
        run(params)

    return scan
