"""``topoagent fleet``: many hosts' scan JSON, daemon ``state.json`` or captures, grouped by
hardware class and fingerprint, with every odd host out and why (docs/fleet.md).

Streams: each file is read, its head (host, class, fingerprint) decoded, and its slot facts
decoded only when its fingerprint is new (:class:`~topoagent.features.fleet.tally.FleetTally`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator

import click
import msgspec

from topoagent.core.api import run
from topoagent.core.baseline import Baseline, read_head
from topoagent.core.command.common import EXIT_FINDINGS, EXIT_OK, emit, fail
from topoagent.core.errors import InputError, TopoagentError
from topoagent.core.inputs import NVML_OFF, Inputs
from topoagent.core.read.archive import resolve_root
from topoagent.core.read.expectation import load_expectation
from topoagent.core.read.textinput import open_regular, read_fd
from topoagent.core.render.escape import shown
from topoagent.core.render.json_report import render
from topoagent.features.fleet.report import render_html, render_json, render_text
from topoagent.features.fleet.tally import FleetTally

#: The most one host's JSON may hold (a state.json of the largest host is a few MB).
MAX_HOST_BYTES = 64 * 1024 * 1024
_GZIP = b"\x1f\x8b"


def _is_capture_dir(path: str) -> bool:
    return os.path.isdir(os.path.join(path, "sys"))


def _walk(top: str) -> Iterator[str]:
    """Below directory ``top``, sorted: capture directories (not descended into), ``*.json``
    files and capture tarballs.  Iterative: ``os.walk`` recurses once per level on Python 3.10
    and 3.11 and stops at the recursion limit in a tree ~1,000 directories deep; links to
    directories are not followed (a loop would never end)."""
    stack = [top]
    while stack:
        here = stack.pop()
        try:
            with os.scandir(here) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError:
            continue
        subdirs = []
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                if _is_capture_dir(e.path):
                    yield e.path
                else:
                    subdirs.append(e.path)
            elif e.name.endswith((".json", ".tar.gz", ".tgz")):
                yield e.path
        stack.extend(reversed(subdirs))


def expand(names: Iterable[str]) -> Iterator[str]:
    """Files and capture directories from the names given: a directory is walked (sorted) for
    ``*.json`` files, capture tarballs (``*.tar.gz``, ``*.tgz``) and capture directories."""
    for name in names:
        if not os.path.isdir(name) or _is_capture_dir(name):
            yield name
        else:
            yield from _walk(name)


def _scan_capture(path: str) -> bytes:
    """A capture (tarball or directory) scanned here, as its scan JSON: a tarball is read into
    memory for its scan only (nothing is unpacked to disk), so a thousand cost a thousand times
    one."""
    return render(run(Inputs(root=resolve_root(path), nvml=NVML_OFF))).encode()


def _read(path: str) -> tuple[bytes, bool]:
    """The host's JSON and whether it came from a capture (whose host name is scrubbed).  Of a
    capture tarball only the magic bytes are read here (the archive reader reads the rest)."""
    if os.path.isdir(path):
        return _scan_capture(path), True
    fd = open_regular(path)
    try:
        data = read_fd(fd, len(_GZIP) - 1)  # at most len(_GZIP) bytes
        if not data.startswith(_GZIP):
            data += read_fd(fd, MAX_HOST_BYTES - len(data))
    finally:
        os.close(fd)
    if data.startswith(_GZIP):
        return _scan_capture(path), True
    if len(data) > MAX_HOST_BYTES:
        raise ValueError("larger than 64 MiB: not a host's JSON")
    return data, False


def _host_name(path: str) -> str:
    base = os.path.basename(path.rstrip("/"))
    for suffix in (".tar.gz", ".tgz", ".json"):
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base


def tally(paths: Iterable[str], expected: Baseline | None) -> tuple[FleetTally, list[tuple[str, str]]]:
    """Every host of ``paths`` counted; the inputs that could not be read, with why."""
    t = FleetTally(expected)
    bad: list[tuple[str, str]] = []
    for path in paths:
        try:
            data, captured = _read(path)
            head = read_head(data)
            name = _host_name(path) if captured or not head.name else head.name
            t.add(name, path, head)
        except (OSError, ValueError, msgspec.DecodeError, TopoagentError, RecursionError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            if isinstance(exc, RecursionError):  # values nested thousands deep, even where skipped
                why = "nested too deeply"
            bad.append((path, " ".join(why.split())))
    return t, bad


@click.command(name="fleet")
@click.argument("inputs", nargs=-1, metavar="[FILE|DIR]...")
@click.option(
    "--expect",
    "expect",
    metavar="FILE",
    help="Compare every host with this expected topology instead of its class's majority.",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json", "html"]), default="text", show_default=True)
@click.option("--pretty", is_flag=True, help="Indent the JSON for a person.")
def fleet(inputs: tuple[str, ...], expect: str | None, fmt: str, pretty: bool) -> None:
    """Group hosts by hardware class and fingerprint; say why each odd one out differs.

    Reads scan JSON files (scan --format json), daemon state.json files and captures
    (topoagent capture), named as files or directories, or one path a line on stdin (none
    given, or -).  An input that cannot be read is named on stderr (and in the output) and the
    rest are compared.  Exit status: 0 no outlier and every input read, 1 outliers or
    unreadable inputs, 2 a usage error or nothing readable.
    """
    expected = None
    if expect is not None:
        try:
            expected = load_expectation(expect)
        except InputError as exc:
            fail(f"--expect {exc}")
    names: Iterable[str] = inputs
    if not inputs or inputs == ("-",):
        names = (line.strip() for line in sys.stdin if line.strip())
    t, bad = tally(expand(names), expected)
    if t.count == 0:
        detail = f": {bad[0][0]}: {bad[0][1]}" if bad else ""
        fail(f"no host could be read ({len(bad)} input(s)){detail}")
    for path, why in bad:  # one line each; the readable hosts are still compared
        click.echo(f"topoagent: fleet: cannot read {shown(path)}: {shown(why)}", err=True)
    v = t.verdict()
    for name, files in v.duplicates:  # each is reported under its file's name as well
        listed = ", ".join(map(shown, files[:3])) + (f" ... ({len(files) - 3} more)" if len(files) > 3 else "")
        click.echo(f"topoagent: fleet: {len(files)} files claim host name {shown(name)}: {listed}", err=True)
    emit(
        render_json(v, bad, pretty=pretty)
        if fmt == "json"
        else render_html(v, bad)
        if fmt == "html"
        else render_text(v, bad)
    )
    sys.exit(EXIT_FINDINGS if v.outliers or bad else EXIT_OK)
