"""Command-line interface.  Thin: each command parses its options, asks
:func:`topoagent.core.api.run` for a result, renders it and exits.

Commands live in :mod:`topoagent.core.command`, one module each, imported only when invoked, so
``topoagent scan`` pays for no other command.  A plain ``scan`` command line does not import
click at all (:data:`FAST`; :mod:`topoagent.core.command.argspec` says why and how).  Exit codes:
0 ok, 1 findings at or above ``--fail-on``, 2 usage error or nothing scannable.
"""

from __future__ import annotations

import errno
import functools
import sys
from collections.abc import Sequence
from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import click

#: command name -> "module:attribute" of its click command, or of a function that makes it.
COMMANDS = {
    "scan": "topoagent.core.command.scan:command",
    "plan": "topoagent.features.plan.command:plan",
    "exec": "topoagent.features.act.exec:exec_",
    "apply": "topoagent.features.act.apply:apply",
    "fix": "topoagent.features.act.fix:fix",
    "draw": "topoagent.features.draw.command:draw",
    "vms": "topoagent.features.vms.command:vms",
    "daemon": "topoagent.features.daemon.command:daemon",
    "capture": "topoagent.features.capture.command:capture",
    "health": "topoagent.features.act.health:command",
    "baseline": "topoagent.features.fleet.baseline:baseline",
    "fleet": "topoagent.features.fleet.command:fleet",
}

#: command name -> module whose ``fast(argv) -> bool`` runs a plain command line without click.
FAST = {"scan": "topoagent.core.command.scan", "health": "topoagent.features.act.health"}


def load_command(name: str) -> click.Command:
    """The click command ``name`` from :data:`COMMANDS` (imported now)."""
    import click

    module, _, attr = COMMANDS[name].partition(":")
    obj = getattr(import_module(module), attr)
    command: click.Command = obj if isinstance(obj, click.Command) else obj()
    return command


@functools.cache
def group() -> click.Group:
    """The ``topoagent`` click group, made on first use (click is imported only then)."""
    import click

    from topoagent.core.version import __version__

    class LazyGroup(click.Group):
        """A group that imports a command's module only when that command is used."""

        def list_commands(self, ctx: click.Context) -> list[str]:
            return sorted(set(super().list_commands(ctx)) | set(COMMANDS))

        def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
            if cmd_name in COMMANDS:
                return load_command(cmd_name)
            return super().get_command(ctx, cmd_name)

    @click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(__version__, prog_name="topoagent")
    def cli() -> None:
        """Host topology discovery and NUMA/affinity agent for GPU servers."""

    return cli


def __getattr__(name: str) -> Any:
    if name == "cli":  # topoagent.cli.cli, the group, as before it was made lazily
        return group()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _click_main(args: list[str]) -> None:
    import click

    from topoagent.core.command.common import EXIT_ERROR, fail

    if not args:
        # Bare ``topoagent``: the whole help, as ``--help`` prints it, but on stderr and exit 2
        # (a usage error), as click >= 8.2 and git do -- whatever click version is installed.
        with group().make_context("topoagent", [], resilient_parsing=True) as ctx:
            click.echo(ctx.get_help(), err=True)
        sys.exit(EXIT_ERROR)
    try:
        group().main(args=args, prog_name="topoagent", standalone_mode=False)
    except SystemExit as exc:
        # click answers a reader gone away (EPIPE from click.echo) with exit 1 after wrapping
        # stdout; every command ends quietly with 0 there instead, as scan's own output does
        if exc.code == 1 and type(sys.stdout).__name__ in ("PacifyFlushWrapper", "_PacifyFlushWrapper"):
            from topoagent.core.command.common import quiet_stdout

            quiet_stdout()
            sys.exit(0)
        raise
    except click.exceptions.Abort:
        fail("aborted")
    except click.exceptions.UsageError as exc:
        # One line, not click's usage block: the command's --help says the rest.
        fail(f"{exc.format_message()} (see {exc.ctx.command_path if exc.ctx else 'topoagent'} --help)")
    except click.exceptions.ClickException as exc:
        fail(exc.format_message())


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


#: Set when a command line ran on its fast path (no click): see :func:`entry`.
_ran_fast = False


def main(argv: Sequence[str] | None = None) -> None:
    """Run a command line; never lets a traceback reach a person."""
    global _ran_fast
    from topoagent.core.command.common import EXIT_ERROR, EXIT_OK, fail, monitor, quiet_stdout

    args = list(sys.argv[1:] if argv is None else argv)
    _ran_fast = False
    monitor["mode"] = monitor_mode(args)
    try:
        if args == ["--version"]:  # click's answer, without importing click (~20 ms)
            from topoagent.core.command.common import emit
            from topoagent.core.version import __version__

            emit(f"topoagent, version {__version__}\n")
            return
        fast = FAST.get(args[0]) if args else None
        handled = False
        if fast is not None:
            try:
                handled = import_module(fast).fast(args[1:])
            except SystemExit:  # a fast path ends by exiting with its verdict
                _ran_fast = True
                raise
        if not handled:
            if sys.stdout is None and args and args[0] in ("apply", "fix") and "--help" not in args:
                fail(f"{args[0]} reports each change on stdout, and stdout is closed: nothing changed")
            _click_main(args)
    except SystemExit:
        raise
    except BrokenPipeError:
        quiet_stdout()
        sys.exit(EXIT_OK)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EIO, errno.EBADF):
            fail(f"internal error: {type(exc).__name__}: {exc}", EXIT_ERROR)
        quiet_stdout()  # a report that could not be written (a full disk, /dev/full): one line, exit 2
        fail(f"cannot write the output: {exc.strerror or exc}", EXIT_ERROR)
    except KeyboardInterrupt:
        fail("interrupted", 130)
    except Exception as exc:  # the last line of defence: one line, exit 2
        fail(f"internal error: {type(exc).__name__}: {exc}", EXIT_ERROR)


def entry() -> None:
    """The console script (and ``python -m topoagent``): :func:`main`, then, after a plain
    ``scan``, an exit that skips the interpreter's teardown.

    Tearing down frees every module and object one by one: ~4 ms on a 2-vCPU VM, a tenth of
    a whole scan of a small host.  A plain scan has by then written and flushed its report and
    holds no open files; where nothing else needs the teardown (no exit handler registered, no
    other thread) stdout and stderr are flushed and the process ends with ``os._exit``.  Any
    other command, or any doubt, exits the ordinary way.
    """
    try:
        main()
    except SystemExit as exc:
        if _ran_fast and isinstance(exc.code, int) and _nothing_to_tear_down():
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except (OSError, ValueError, AttributeError):
                raise exc from None  # the ordinary exit reports it as before
            import os

            os._exit(exc.code)
        raise


def _nothing_to_tear_down() -> bool:
    import atexit

    handlers = getattr(atexit, "_ncallbacks", None)  # CPython's count of registered handlers
    threading = sys.modules.get("threading")
    return handlers is not None and handlers() == 0 and (threading is None or threading.active_count() == 1)
