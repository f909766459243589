"""Command-line interface.  Thin: each command parses its options, asks
:func:`topoagent.api.run` for a result, renders it and exits.

Commands live in :mod:`topoagent.commands`, one module each, imported only when invoked, so
``topoagent scan`` pays for no other command.  Exit codes: 0 ok, 1 findings at or above
``--fail-on``, 2 usage error or nothing scannable.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from topoagent import __version__

#: command name -> "module:attribute" of its click command.
COMMANDS = {
    "scan": "topoagent.commands.scan:scan",
    "plan": "topoagent.commands.plan:plan",
    "exec": "topoagent.commands.exec:exec_",
    "apply": "topoagent.commands.apply:apply",
    "fix": "topoagent.commands.fix:fix",
    "draw": "topoagent.commands.draw:draw",
    "vms": "topoagent.commands.vms:vms",
    "daemon": "topoagent.commands.daemon:daemon",
    "capture": "topoagent.commands.capture:capture",
}


class _LazyGroup(click.Group):
    """A group that imports a command's module only when that command is used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS:
            module, _, attr = COMMANDS[cmd_name].partition(":")
            command: click.Command = getattr(importlib.import_module(module), attr)
            return command
        return super().get_command(ctx, cmd_name)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="topoagent")
def cli() -> None:
    """Host topology discovery and NUMA/affinity agent for GPU servers."""


def main(argv: Any = None) -> None:
    """Console-script entry point; never lets a traceback reach a person."""
    from topoagent.commands.common import EXIT_ERROR, EXIT_OK, fail, quiet_stdout

    try:
        cli.main(args=argv, prog_name="topoagent", standalone_mode=False)
    except click.exceptions.Abort:
        fail("aborted")
    except click.exceptions.UsageError as exc:
        # One line, not click's usage block: the command's --help says the rest.
        fail(f"{exc.format_message()} (see {exc.ctx.command_path if exc.ctx else 'topoagent'} --help)")
    except click.exceptions.ClickException as exc:
        fail(exc.format_message())
    except SystemExit:
        raise
    except BrokenPipeError:
        quiet_stdout()
        sys.exit(EXIT_OK)
    except KeyboardInterrupt:
        fail("interrupted", 130)
    except Exception as exc:  # the last line of defence: one line, exit 2
        fail(f"internal error: {type(exc).__name__}: {exc}", EXIT_ERROR)
