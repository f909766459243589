"""What every command shares: exit codes, the one-line error, and writing the output."""

from __future__ import annotations

import sys
from typing import NoReturn

import click

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Print ``topoagent: <message>`` on stderr (one line) and exit ``code``."""
    click.echo(f"topoagent: {' '.join(message.split())}", err=True)
    sys.exit(code)


def emit(text: str) -> None:
    """Write a command's output to stdout as it is (no newline added)."""
    click.echo(text, nl=False)
