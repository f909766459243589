"""The fast path and click read a command line alike (topoagent.core.command.argspec).

``scan`` runs without click when its command line is plain; these tests hold the two readers
together: every command line the fast parser accepts, click reads to the same values; every
one it declines is one click either rejects or reads (so nothing is lost by declining).  And a
plain scan really does start without click, dataclasses, inspect or typing.
"""

from __future__ import annotations

import subprocess
import sys

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topoagent.cli import load_command
from topoagent.core.command import scan
from topoagent.core.command.argspec import Opt, parse

OPTS = scan.options()


def click_params(argv: list[str]) -> dict[str, object] | None:
    """What click reads from ``scan``'s ``argv`` (None where it rejects it)."""
    try:
        ctx = load_command("scan").make_context("scan", list(argv), resilient_parsing=False)
    except click.exceptions.ClickException:
        return None
    return dict(ctx.params)


VALUES = st.sampled_from(["/", "/tmp/x", "-", "", "json", "tree", "nagios", "warning", "x=y", "a b", "é"])


@st.composite
def token(draw: st.DrawFn) -> list[str]:
    o: Opt = draw(st.sampled_from(OPTS))
    if o.flag:
        return [o.name]
    value = draw(st.sampled_from(o.choices) if o.choices and draw(st.booleans()) else VALUES)
    return [f"{o.name}={value}"] if draw(st.booleans()) else [o.name, value]


noise = st.sampled_from(
    [
        ["--help"],
        ["-h"],
        ["--formt", "json"],
        ["--all=1"],
        ["--root"],
        ["--"],
        ["pos"],
        ["--root", "--all"],
        ["--format", "xml"],
        ["-x"],
        ["--fail-on"],
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(token(), noise), max_size=6))
def test_fast_parse_agrees_with_click(tokens: list[list[str]]) -> None:
    argv = [t for tok in tokens for t in tok]
    fast = parse(OPTS, argv)
    if fast is not None:  # what the fast path reads, click reads the same way
        assert fast == click_params(argv), argv


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], {"fmt": "tree", "root": "/", "show_all": False, "exit_codes": "default", "fail_on": "critical"}),
        (["--format", "json", "--root=/r", "--all"], {"fmt": "json", "root": "/r", "show_all": True}),
        (["--format", "tree", "--format", "json"], {"fmt": "json"}),  # the last one wins, as in click
        (["--lspci-tree", "-", "--no-nvml"], {"lspci_tree_text": "-", "no_nvml": True}),
        (["--root="], {"root": ""}),
    ],
)
def test_fast_parse_table(argv: list[str], expected: dict[str, object]) -> None:
    params = parse(OPTS, argv)
    assert params is not None
    assert {k: params[k] for k in expected} == expected
    assert params == click_params(argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["-h"],
        ["--formt", "json"],
        ["--format", "xml"],
        ["--all=yes"],
        ["--root"],
        ["--root", "--all"],
        ["--", "--all"],
        ["extra"],
        ["--format"],
    ],
)
def test_fast_parse_declines_what_click_must_answer(argv: list[str]) -> None:
    assert parse(OPTS, argv) is None


def test_help_lists_the_same_options_as_the_rows() -> None:
    command = load_command("scan")
    names = [opt for p in command.params for opt in p.opts if opt != "--help"]
    assert names == [o.name for o in OPTS]


@pytest.mark.parametrize("fmt", ["json", "tree", "matrix"])
def test_a_plain_scan_starts_without_click_or_dataclasses(fixture_root, fmt) -> None:
    """Each costs milliseconds of start-up (the argv fast path keeps click off it; the model is
    msgspec); the NVML source is not even imported under a root that holds no NVML recording."""
    root = fixture_root("dgx-h100")
    probe = (
        "import sys\n"
        "sys.argv = ['topoagent', 'scan', '--root', sys.argv[1], '--format', sys.argv[2]]\n"
        "from topoagent.cli import main\n"
        "try:\n    main()\n"
        "except SystemExit:\n    pass\n"
        "print(sorted(m for m in ('click', 'dataclasses', 'topoagent.core.read.nvml')"
        " if m in sys.modules),"
        " file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe, str(root), fmt], capture_output=True, text=True, timeout=120)
    assert proc.stdout.startswith("{") if fmt == "json" else proc.stdout.strip(), proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "[]", proc.stderr
