"""What every command shares: exit codes, the one-line error, and writing the output."""

from __future__ import annotations

import errno
import os
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from topoagent.core.render.escape import shown
from topoagent.core.render.monitor import nagios_unknown
from topoagent.core.write.files import write_atomically

if TYPE_CHECKING:
    from topoagent.core.result import ScanResult

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2

F = TypeVar("F", bound="Callable[..., Any]")

#: Characters of the tree view and their ASCII stand-ins, for a terminal that cannot show them.
_ASCII = str.maketrans(
    {
        "└": "`",
        "├": "|",
        "│": "|",
        "─": "-",
        "·": "-",
        "×": "x",
        "…": "...",
        "→": "->",
        "←": "<-",
        "≤": "<=",
        "≥": ">=",
        "—": "-",
        "–": "-",
    }
)


#: Exit code of a monitoring check that could not run (Nagios UNKNOWN; node-problem-detector
#: reads any code but 0 and 1 as Unknown).
EXIT_UNKNOWN = 3


def monitoring() -> str | None:
    """``nagios`` or ``npd`` while a ``scan --exit-codes nagios|npd`` runs (the CLI puts it in
    the click context's ``obj``; ``scan`` does too for its own option), else None."""
    ctx = click.get_current_context(silent=True)
    obj = ctx.find_object(dict) if ctx is not None else None
    return obj.get("monitor") if obj else None


def set_monitoring(mode: str | None) -> None:
    """Make the running command's errors the monitor's UNKNOWN (see :func:`fail`)."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.ensure_object(dict)["monitor"] = mode


def fail(message: str, code: int = EXIT_ERROR, *, monitor: str | None = None) -> NoReturn:
    """Print ``topoagent: <message>`` on stderr (one line) and exit ``code``.

    Under a monitoring mode (``monitor``, else the running command's: :func:`monitoring`) an
    error (exit 2) is instead the check's UNKNOWN: the line also goes to stdout (``TOPOAGENT
    UNKNOWN - ...`` for Nagios) and the exit code is 3.
    """
    line = shown(" ".join(message.split()))
    for progress in tuple(_SHOWN):  # the error on a line of its own, not after a progress line
        progress.close()
    _write(sys.stderr, f"topoagent: {line}\n")
    mode = monitor or monitoring()
    if mode is not None and code == EXIT_ERROR:
        try:
            _write(sys.stdout, nagios_unknown(line) if mode == "nagios" else f"topoagent: {line}\n")
        except OSError:
            pass
        code = EXIT_UNKNOWN
    sys.exit(code)


def require_gpus(result: ScanResult, output: str) -> None:
    """Exit 2 with ``topoagent: no GPUs on this host: <output> would be empty`` where the scan
    found no GPU and ``output`` (a GPU matrix, a gres.conf, an NCCL topology) would be useless to
    its consumer: configuration management treats any non-zero exit as a failed step, so no
    empty file is installed in silence."""
    if result.topology.gpus:
        return
    root = result.topology.root
    where = "" if root in ("/", None) else f" (root {root})"
    fail(f"no GPUs on this host{where}: {output} would be empty")


def emit(text: str) -> None:
    """Write a command's output to stdout as it is (no newline added).

    A terminal whose encoding cannot show the tree's characters gets ASCII; a reader that has
    gone away (``| head``) ends the command quietly; a full disk is one line and exit 2.
    """

    def write() -> None:
        if sys.stdout is None:  # closed at start-up: an output nobody gets is a failure, not success
            raise OSError(errno.EBADF, "stdout is closed")
        _write(sys.stdout, text)

    _guarded(write)


def emit_bytes(data: bytes) -> None:
    """Write binary output (a PNG) to stdout, with :func:`emit`'s handling of errors."""

    def write() -> None:
        if sys.stdout is None:  # closed at start-up
            raise OSError(errno.EBADF, "stdout is closed")
        out = sys.stdout.buffer
        out.write(data)
        out.flush()

    _guarded(write)


def write_output(path: str, data: bytes) -> None:
    """A command's ``-o PATH`` output: ``-`` is stdout (as :func:`emit_bytes`), anything else
    is written whole through the one file writer (:func:`~topoagent.core.write.files.write_atomically`:
    a regular file or nothing is replaced; a device, FIFO, directory or link there is refused)."""
    if path == "-":
        emit_bytes(data)
        return
    try:
        write_atomically(path, data)
    except OSError as exc:
        fail(f"cannot write {path}: {exc.strerror or exc}")


#: ``--fail-on``'s choices, most severe first, in every command that has it.
SEVERITIES = ("critical", "warning", "info")


def output_option(*, required: bool = False) -> Callable[[F], F]:
    """``-o/--output FILE``, one spelling for every command that writes a document (``-`` is
    stdout): :func:`deliver` (text) or :func:`write_output` (bytes) writes it."""
    return click.option(
        "-o",
        "--output",
        "output",
        required=required,
        metavar="FILE",
        help="Write the output to FILE (written whole, or not at all) instead of stdout; - is stdout.",
    )


def pretty_option(fn: F) -> F:
    """``--pretty``, for every command that prints JSON: compact by default, indented for people."""
    return click.option("--pretty", is_flag=True, help="Indent the JSON for a person (compact by default).")(fn)


def deliver(text: str, output: str | None) -> None:
    """A command's text output: to stdout (:func:`emit`), or to ``-o FILE`` (:func:`write_output`)."""
    if output is None or output == "-":
        emit(text)
    else:
        write_output(output, text.encode("utf-8"))


def refuse_binary_terminal(output: str | None, what: str) -> None:
    """One line and exit 2, before any work, where binary output (``what``) would go to a
    terminal: no ``-o FILE`` (or ``-o -``) and stdout a terminal."""
    if output not in (None, "-") or sys.stdout is None:
        return
    try:
        tty = sys.stdout.isatty()
    except (OSError, ValueError):
        tty = False
    if tty:
        fail(f"{what} is binary: give -o FILE or redirect stdout")


def _guarded(write: Callable[[], None]) -> None:
    try:
        write()
    except BrokenPipeError:
        quiet_stdout()
        sys.exit(EXIT_OK)
    except OSError as exc:
        quiet_stdout()
        why = "no space left on device" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc))
        fail(f"cannot write the output: {why}")


def _write(stream: object, text: str) -> None:
    if stream is None:  # closed at start-up (python sets sys.stdout to None)
        return
    encoding = getattr(stream, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        text = text.translate(_ASCII).encode("ascii", "replace").decode("ascii")
    stream.write(text)  # type: ignore[attr-defined]  # any text stream
    stream.flush()  # type: ignore[attr-defined]


def quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


#: Progress lines now on the terminal (:func:`fail` erases them before its line).
_SHOWN: list[Progress] = []


class Progress:
    """A progress line on stderr for work that can take more than a second or two (``capture``,
    ``draw --format png``; ``fleet`` over many files), shown only to a person: nothing is written
    unless stderr is a terminal, and nothing with ``quiet`` (a command's ``--quiet``).  So
    pipelines, logs, cron mail and tests that read stderr never see it.

    Use it as a context manager; :meth:`step` names the phase now running, :meth:`count` the
    items done (``done``/``total``, redrawn at most ten times a second, so a loop over thousands
    of files may call it for each).  The line is rewritten in place (``\\r``) and erased when the
    block ends, leaving stderr as it was for the command's own messages::

        with Progress("fleet", quiet=quiet) as progress:
            for i, path in enumerate(paths, 1):
                progress.count(i, len(paths), "files")
                ...
    """

    #: Seconds between redraws of a count.
    INTERVAL = 0.1

    def __init__(self, command: str, *, quiet: bool = False) -> None:
        stream = sys.stderr
        try:
            tty = stream is not None and stream.isatty()
        except (OSError, ValueError, AttributeError):
            tty = False
        self.command = command
        self.enabled = tty and not quiet
        self._last = 0.0

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def step(self, message: str) -> None:
        """Show ``topoagent <command>: <message>...`` (the phase now running)."""
        self._draw(f"{message}...")

    def count(self, done: int, total: int | None = None, unit: str = "") -> None:
        """Show ``done/total unit`` (throttled; the last item always shows)."""
        now = time.monotonic()
        if not self.enabled or (now - self._last < self.INTERVAL and done != total):
            return
        self._last = now
        self._draw(f"{done}{f'/{total}' if total is not None else ''}{f' {unit}' if unit else ''}")

    def close(self) -> None:
        """Erase the line (if one was drawn)."""
        if self in _SHOWN:
            _SHOWN.remove(self)
            self._put("\r\033[K")

    def _draw(self, text: str) -> None:
        if self.enabled:
            self._put(f"\rtopoagent {self.command}: {' '.join(text.split())}\033[K")
            if self not in _SHOWN:
                _SHOWN.append(self)

    def _put(self, text: str) -> None:
        try:
            _write(sys.stderr, text)
        except (OSError, ValueError):
            self.enabled = False  # a terminal gone away: the work goes on without a line
