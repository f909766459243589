"""``topoagent draw``: a picture of the host with the problem paths marked."""

from __future__ import annotations

import shutil
import subprocess
import sys

import click

from topoagent.core.command.common import (
    EXIT_OK,
    Progress,
    deliver,
    emit_bytes,
    fail,
    output_option,
    refuse_binary_terminal,
    write_output,
)
from topoagent.core.command.options import run_scan, scan_inputs
from topoagent.core.inputs import Inputs
from topoagent.features.draw import FORMATS

#: Seconds Graphviz may take to lay out a host (hundreds of nodes take well under one).
DOT_TIMEOUT = 60


def dot_to_png(dot_text: str) -> bytes:
    """Draw DOT source with Graphviz's ``neato -n2 -Tpng``, which keeps the positions the DOT
    carries from the layout (https://graphviz.org/docs/layouts/neato/, ``-n2``), so the PNG is
    the SVG's picture; one clear line and exit 2 when Graphviz is missing or fails."""
    exe = shutil.which("neato")
    if exe is None:
        fail(
            "--format png needs Graphviz's neato, which is not installed (Debian/Ubuntu: apt-get install graphviz); "
            "--format svg or html need nothing"
        )
    try:
        proc = subprocess.run(
            [exe, "-n2", "-Tpng"], input=dot_text.encode("utf-8"), capture_output=True, timeout=DOT_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        fail(f"neato -n2 -Tpng did not finish in {DOT_TIMEOUT} s")
    except OSError as exc:
        fail(f"cannot run {exe}: {exc}")
    if proc.returncode != 0 or not proc.stdout:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        fail(f"neato -n2 -Tpng failed (exit {proc.returncode}): {err[-1] if err else 'no output'}")
    return proc.stdout


@click.command()
@scan_inputs(cross_check=False)
@click.option(
    "--format",
    "fmt",
    type=click.Choice((*FORMATS, "png")),
    default="svg",
    show_default=True,
    help="svg: the picture; html: picture, findings and matrix in one page; dot: Graphviz source; "
    "png: the DOT drawn by Graphviz (needs neato).",
)
@output_option()
@click.option("-q", "--quiet", is_flag=True, help="No progress line on a terminal (shown for --format png).")
def draw(inputs: Inputs, fmt: str, output: str | None, quiet: bool) -> None:
    """Draw the host: sockets, NUMA nodes, host bridges, switches, GPUs and NICs, each GPU
    tied to its rail NIC, findings marked where they live.

    Reads what `topoagent scan` reads (the live host, --root, or pasted tool output).
    Exit status: 0 drawn, 2 the scan could not run or the output could not be written.
    """
    if fmt == "png":
        refuse_binary_terminal(output, "--format png")  # before the work, not after it
        with Progress("draw", quiet=quiet) as progress:  # Graphviz may take seconds on a big host
            progress.step("scanning")
            result = run_scan(inputs)
            progress.step("laying out with Graphviz dot")
            data = dot_to_png(FORMATS["dot"](result))
        if output is None:
            emit_bytes(data)
        else:
            write_output(output, data)
        sys.exit(EXIT_OK)
    deliver(FORMATS[fmt](run_scan(inputs)), output)
    sys.exit(EXIT_OK)
