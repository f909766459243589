"""Command-line interface.  Thin: parse options, call :mod:`topoagent.api`, render, exit.

Exit codes: 0 ok, 1 findings at or above ``--fail-on``, 2 usage error or nothing scannable.
"""

from __future__ import annotations

import sys

import click

from topoagent import __version__

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _fail(message: str) -> None:
    click.echo(f"topoagent: {message}", err=True)
    sys.exit(EXIT_ERROR)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="topoagent")
def cli() -> None:
    """Host topology discovery and NUMA/affinity agent for GPU servers."""


@cli.command()
@click.option("--root", default="/", show_default=True, metavar="DIR",
              help="Read the host tree below this directory (a fake or captured root).")
@click.option("--format", "fmt", type=click.Choice(["tree", "json", "matrix"]), default="tree",
              show_default=True, help="Output format.")
@click.option("--all", "show_all", is_flag=True, help="Show every PCI function in the tree.")
@click.option("--fail-on", type=click.Choice(["critical", "warning", "info"]), default="critical",
              show_default=True, help="Exit 1 when a finding at or above this severity is raised.")
@click.option("--no-nvml", is_flag=True, help="Do not ask NVML (it is asked only when scanning /).")
def scan(root: str, fmt: str, show_all: bool, fail_on: str, no_nvml: bool) -> None:
    """Read this host's PCIe/NUMA tree and report it.

    Exit status: 0 nothing at or above --fail-on, 1 findings at or above it, 2 the scan
    could not run.
    """
    from topoagent.analysis.findings import Severity

    from topoagent.api import analyse, read_host
    from topoagent.hostfs import NotAHostTree

    try:
        snapshot = read_host(root, nvml=None if no_nvml else "auto")
    except NotAHostTree as exc:
        _fail(str(exc))
    result = analyse(snapshot)
    if fmt == "json":
        from topoagent.outputs.json_report import render_json

        click.echo(render_json(result), nl=False)
    elif fmt == "matrix":
        from topoagent.analysis.matrix import matrix_of
        from topoagent.outputs.matrix import render_topo_matrix

        click.echo(render_topo_matrix(matrix_of(result)), nl=False)
    else:
        from topoagent.outputs.tree import render_tree

        click.echo(render_tree(result, show_all=show_all), nl=False)
    worst = result.worst()
    sys.exit(EXIT_FINDINGS if worst is not None and worst >= Severity.parse(fail_on) else EXIT_OK)


def main() -> None:
    """Console-script entry point; never lets a traceback reach a person."""
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("topoagent: aborted", err=True)
        sys.exit(EXIT_ERROR)
    except click.exceptions.ClickException as exc:
        exc.show()
        sys.exit(EXIT_ERROR)
    except SystemExit:
        raise
    except BrokenPipeError:
        sys.exit(EXIT_OK)
    except Exception as exc:  # the last line of defence: one line, exit 2
        click.echo(f"topoagent: internal error: {type(exc).__name__}: {exc}", err=True)
        sys.exit(EXIT_ERROR)
