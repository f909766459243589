"""Command-line interface.  Thin: parse options, call :mod:`topoagent.api`, render, exit.

Exit codes: 0 ok, 1 findings at or above ``--fail-on``, 2 usage error or nothing scannable.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from topoagent import __version__

if TYPE_CHECKING:
    from topoagent.snapshot import Snapshot

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
@click.option("--cross-check", is_flag=True,
              help="Also run nvidia-smi topo -m and lspci -vvv (if installed) and report where they "
                   "disagree with sysfs. Live host (/) only.")
@click.option("--nvidia-smi-topo", "nvsmi_file", metavar="FILE",
              help="Analyse this saved `nvidia-smi topo -m` output (- for stdin) instead of the host.")
@click.option("--lspci-tree", "tree_file", metavar="FILE",
              help="Analyse this saved `lspci -tv` (or -t, -tvnn) output (- for stdin).")
@click.option("--lspci-verbose", "verbose_file", metavar="FILE",
              help="Analyse this saved `lspci -vvv` (or -vvvnn, -D -vvv; as root for ACS) output (- for stdin).")
def scan(root: str, fmt: str, show_all: bool, fail_on: str, no_nvml: bool, cross_check: bool,
         nvsmi_file: str | None, tree_file: str | None, verbose_file: str | None) -> None:
    """Read this host's PCIe/NUMA tree and report it.

    With --nvidia-smi-topo, --lspci-tree or --lspci-verbose (any combination) the saved
    outputs are analysed instead: sysfs is not read and --root is ignored.

    Exit status: 0 nothing at or above --fail-on, 1 findings at or above it, 2 the scan
    could not run.
    """
    import os

    from topoagent.analysis.findings import Severity
    from topoagent.api import analyse, read_host

    offline = {"nvidia_smi_topo": ("--nvidia-smi-topo", nvsmi_file), "lspci_tree": ("--lspci-tree", tree_file),
               "lspci_verbose": ("--lspci-verbose", verbose_file)}
    offline = {k: v for k, v in offline.items() if v[1] is not None}
    if cross_check and (offline or os.path.realpath(root) != "/"):
        _fail("--cross-check runs this host's nvidia-smi and lspci: it needs a live scan of --root /")
    if offline:
        snapshot = _read_offline(offline)
    else:
        from topoagent.hostfs import NotAHostTree

        try:
            snapshot = read_host(root, nvml=None if no_nvml else "auto")
        except NotAHostTree as exc:
            _fail(str(exc))
    result = analyse(snapshot)
    if cross_check:
        from topoagent.api import cross_check as run_cross_check

        result = run_cross_check(result)
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


def _read_text(option: str, name: str) -> str:
    """The text of a file, or of stdin for ``-``; one line and exit 2 where it cannot be read."""
    try:
        if name == "-":
            data = click.get_binary_stream("stdin").read()
        else:
            with open(name, "rb") as f:
                data = f.read()
        return data.decode("utf-8-sig")  # a BOM from a Windows editor is no part of the text
    except UnicodeDecodeError as exc:
        _fail(f"{option} {name}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})")
    except OSError as exc:
        _fail(f"{option} {name}: {exc.strerror or exc}")
    raise AssertionError("unreachable")


def _read_offline(inputs: dict[str, tuple[str, str]]) -> "Snapshot":
    """The snapshot of saved tool outputs given on the command line (``{arg: (option, file)}``)."""
    from topoagent.api import read_offline
    from topoagent.sources.offline import OfflineInputError

    stdin = [opt for opt, name in inputs.values() if name == "-"]
    if len(stdin) > 1:
        _fail(f"{' and '.join(stdin)} cannot both read stdin (-)")
    texts = {arg: _read_text(opt, name) for arg, (opt, name) in inputs.items()}
    try:
        return read_offline(**texts)
    except OfflineInputError as exc:
        where = f"{inputs[exc.input][0]} {inputs[exc.input][1]}: " if exc.input in inputs else ""
        _fail(where + " ".join(str(exc).split()))
    raise AssertionError("unreachable")


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
