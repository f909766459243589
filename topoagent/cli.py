"""Command-line interface: one click group, one module per command.

Each command parses its options, asks :func:`topoagent.core.api.run` for a result, renders it
and exits.  :func:`main` is the one error boundary: whatever a command raises becomes one line
on stderr and an exit code, never a traceback.  Exit codes: 0 ok, 1 findings at or above
``--fail-on``, 2 usage error or nothing scannable (3 UNKNOWN under ``scan --exit-codes``).
"""

from __future__ import annotations

import errno
import sys
from collections.abc import Sequence
from importlib import import_module

import click

from topoagent.core.command.common import EXIT_ERROR, EXIT_OK, fail, quiet_stdout
from topoagent.core.command.interrupt import EXIT_INTERRUPTED, Interrupted, deferred, raising
from topoagent.core.version import __version__

__all__ = ["COMMANDS", "cli", "main"]

#: Every command: its name and where its click command lives (``module:attribute``).
COMMANDS: dict[str, str] = {
    "scan": "topoagent.core.command.scan:scan",
    "plan": "topoagent.features.plan.command:plan",
    "exec": "topoagent.features.act.exec:exec_",
    "apply": "topoagent.features.act.apply:apply",
    "audit": "topoagent.features.audit.command:audit",
    "fix": "topoagent.features.act.fix:fix",
    "draw": "topoagent.features.draw.command:draw",
    "vms": "topoagent.features.vms.command:vms",
    "daemon": "topoagent.features.daemon.command:daemon",
    "capture": "topoagent.features.capture.command:capture",
    "health": "topoagent.features.act.health:health",
    "baseline": "topoagent.features.fleet.baseline:baseline",
    "fleet": "topoagent.features.fleet.command:fleet",
}


class CommandGroup(click.Group):
    """The group of :data:`COMMANDS`, each loaded when it is named: click's documented way of
    lazily loading subcommands (click.palletsprojects.com, "Lazily Loading Subcommands").  A
    command's module imports what it needs at its top, so ``topoagent scan`` does not pay for
    the daemon's prometheus_client, structlog and HTTP server, or the drawings' layout."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, _, attr = COMMANDS[cmd_name].partition(":")
        with deferred():  # an import is not cut short (core/command/interrupt.py)
            loaded = import_module(module)
        command: click.Command = getattr(loaded, attr)
        return command


@click.group(cls=CommandGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="topoagent")
def cli() -> None:
    """Host topology discovery and NUMA/affinity agent for GPU servers."""


def monitor_mode(args: Sequence[str]) -> str | None:
    """``nagios`` or ``npd`` when ``args`` is a ``scan --exit-codes nagios|npd`` command line
    (so that even a usage error is the check's UNKNOWN, exit 3, not 2), else None."""
    if not args or args[0] != "scan":
        return None
    mode = None
    for i, arg in enumerate(args):
        if arg == "--exit-codes" and i + 1 < len(args):
            mode = args[i + 1]
        elif arg.startswith("--exit-codes="):
            mode = arg.partition("=")[2]
    return mode if mode in ("nagios", "npd") else None


def _run(args: list[str], mode: str | None) -> None:
    if not args:
        # Bare ``topoagent``: the whole help, as ``--help`` prints it, but on stderr and exit 2
        # (a usage error), as click >= 8.2 and git do -- whatever click version is installed.
        with cli.make_context("topoagent", [], resilient_parsing=True) as ctx:
            click.echo(ctx.get_help(), err=True)
        sys.exit(EXIT_ERROR)
    if sys.stdout is None and args[0] in ("apply", "fix") and "--help" not in args:
        fail(f"{args[0]} reports each change on stdout, and stdout is closed: nothing changed", monitor=mode)
    try:
        cli.main(args=args, prog_name="topoagent", standalone_mode=False, obj={"monitor": mode})
    except SystemExit as exc:
        # click answers a reader gone away (EPIPE from click.echo) with exit 1 after wrapping
        # stdout; every command ends quietly with 0 there instead, as scan's own output does
        if exc.code == 1 and type(sys.stdout).__name__ in ("PacifyFlushWrapper", "_PacifyFlushWrapper"):
            quiet_stdout()
            sys.exit(EXIT_OK)
        raise
    except click.exceptions.Abort:
        fail("aborted", monitor=mode)
    except click.exceptions.UsageError as exc:
        # One line, not click's usage block: the command's --help says the rest.
        fail(f"{exc.format_message()} (see {exc.ctx.command_path if exc.ctx else 'topoagent'} --help)", monitor=mode)
    except click.exceptions.ClickException as exc:
        fail(exc.format_message(), monitor=mode)


def main(argv: Sequence[str] | None = None) -> None:
    """Run a command line; never lets a traceback reach a person."""
    args = list(sys.argv[1:] if argv is None else argv)
    mode = monitor_mode(args)
    try:
        with raising():
            _run(args, mode)
    except SystemExit:
        raise
    except (Interrupted, KeyboardInterrupt):
        # One ending for Ctrl-C at any moment: before the handler was set (KeyboardInterrupt)
        # or after it (Interrupted); the shell's 128 + SIGINT.
        fail("interrupted", EXIT_INTERRUPTED, monitor=mode)
    except BrokenPipeError:
        quiet_stdout()
        sys.exit(EXIT_OK)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EIO, errno.EBADF):
            fail(f"internal error: {type(exc).__name__}: {exc}", monitor=mode)
        quiet_stdout()  # a report that could not be written (a full disk, /dev/full): one line, exit 2
        fail(f"cannot write the output: {exc.strerror or exc}", monitor=mode)
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, exit 2
        fail(f"internal error: {type(exc).__name__}: {exc}", monitor=mode)
