"""``topoagent baseline``: write the expected topology of a good host (its hardware class,
fingerprint and per-slot facts; docs/fleet.md) for ``scan --expect``, the daemon's ``expect``
and ``topoagent fleet --expect``."""

from __future__ import annotations

import click

from topoagent.core.command.common import emit, fail, write_output
from topoagent.core.command.options import run_scan, scan_inputs
from topoagent.core.errors import InputError
from topoagent.core.inputs import Inputs
from topoagent.core.read.expectation import load_expectation
from topoagent.core.render.json_report import encode


@click.command(name="baseline")
@scan_inputs(cross_check=False)
@click.option(
    "--from-json",
    "from_json",
    metavar="FILE",
    help="Take it from this scan JSON or daemon state.json (- for stdin) instead of scanning.",
)
@click.option("--output", "-o", "output", metavar="FILE", help="Write it to FILE instead of stdout.")
def baseline(inputs: Inputs, from_json: str | None, output: str | None) -> None:
    """Write this host's (or a capture's, with --root) expected topology as JSON.

    Every fact must match on a host that --expect compares with it, except links: the link
    values are the least the slot must train to (edit them down to tolerate less).
    """
    if from_json is not None:
        try:
            expected = load_expectation(from_json)
        except InputError as exc:
            fail(f"--from-json {exc}")
    else:
        expected = run_scan(inputs).baseline
    text = encode(expected, pretty=True)
    if output is None:
        emit(text)
        return
    write_output(output, text.encode("utf-8"))
