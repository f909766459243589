"""``topoagent capture -o FILE.tar.gz``: record what a scan reads on this host, scrubbed.

The tarball replays with ``topoagent scan --root FILE.tar.gz`` (or its unpacked directory), so
a user's bug report becomes a fixture.  What is recorded and what is scrubbed:
``docs/capture.md`` and :mod:`topoagent.features.capture`.
"""

from __future__ import annotations

import io
import sys

import click

from topoagent.core.command.common import EXIT_OK, Progress, fail, output_option, refuse_binary_terminal, write_output
from topoagent.core.errors import TopoagentError
from topoagent.core.tree import is_this_host
from topoagent.features.capture.collect import collect_capture
from topoagent.features.capture.pack import entries_to_tar


@click.command()
@output_option(required=True)
@click.option(
    "--root",
    default="/",
    show_default=True,
    metavar="DIR",
    help="Capture the host tree below this directory instead of / (no tools are run then).",
)
@click.option("--no-tools", is_flag=True, help="Do not run lspci, nvidia-smi or the NVML recorder.")
@click.option("--tool-timeout", default=30.0, show_default=True, metavar="SECONDS", help="Time limit for each tool.")
@click.option("-q", "--quiet", is_flag=True, help="No progress line on a terminal.")
def capture(output: str, root: str, no_tools: bool, tool_timeout: float, quiet: bool) -> None:
    """Record the allow-listed /sys and /proc files a scan reads, plus lspci and nvidia-smi output,
    with host names, MACs, GUIDs and serial numbers scrubbed, into a .tar.gz."""
    refuse_binary_terminal(output, "a capture (-o -)")  # before the work, not after it
    live = is_this_host(root)
    with Progress("capture", quiet=quiet) as progress:
        try:
            cap = collect_capture(root, tools=live and not no_tools, tool_timeout=tool_timeout, step=progress.step)
        except TopoagentError as exc:
            fail(str(exc))
        entries = cap.ordered()
        progress.step(f"writing {len(entries)} entries")
        buffer = io.BytesIO()  # a capture is small (kilobytes to a few megabytes): built in memory, written whole
        entries_to_tar(entries, buffer)
        write_output(output, buffer.getvalue())
    files = sum(1 for e in entries if e.kind == "file")
    if output != "-":
        click.echo(f"topoagent: wrote {output} ({files} files; replay with: topoagent scan --root {output})", err=True)
    sys.exit(EXIT_OK)
