"""One option vocabulary (issue 40 item 5): the same flag means the same thing in every command.

The table of options is derived from the click commands themselves (:data:`topoagent.cli.COMMANDS`)
and held against docs/cli.md's; the rules there are checked on the commands, and the JSON rule
on what they print: a new option, a second spelling of one, or a command that prints JSON
without ``--pretty`` fails here until the page and the commands agree.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys

import click
import pytest

from tests.paths import REPO
from tests.plan_helpers import run_cli
from topoagent.cli import COMMANDS, cli

PAGE = REPO / "docs/cli.md"

#: Options spelled two ways on purpose, each with its reason (docs/cli.md says it too).
TWO_FORMS = {"--undo": "apply undoes its whole journal (a flag); vms --undo names the domain to put back"}

#: What is not uniform yet, in features/fleet (another branch's, issue 40): remove on merge.
PENDING = {("fleet", "--output"), ("baseline", "--pretty")}

#: Commands that act on this machine or read what pasted text cannot give: no --paste.
NO_PASTE = ("apply", "audit", "fix acs", "fix peermem")


def commands() -> dict[str, click.Command]:
    """Every command and subcommand by its name as typed (``fix acs``)."""
    out: dict[str, click.Command] = {}
    for name in sorted(COMMANDS):
        command = cli.get_command(click.Context(cli), name)
        assert command is not None
        if isinstance(command, click.Group):
            out.update({f"{name} {sub}": c for sub, c in sorted(command.commands.items())})
        else:
            out[name] = command
    return out


def options(command: click.Command) -> dict[str, click.Option]:
    """A command's options by their long name."""
    return {max(p.opts, key=len): p for p in command.params if isinstance(p, click.Option)}


def form(p: click.Option) -> str:
    """How an option is written: its names (short first), and its value's metavar."""
    names = ", ".join(sorted(p.opts, key=len))
    if p.is_flag:
        return names
    return f"{names} {p.metavar or ('CHOICE' if isinstance(p.type, click.Choice) else p.type.name.upper())}"


def derived() -> dict[str, tuple[set[str], list[str]]]:
    """Each long option: the forms it is written in, and the commands that have it."""
    table: dict[str, tuple[set[str], list[str]]] = {}
    for name, command in commands().items():
        for long, p in options(command).items():
            forms, names = table.setdefault(long, (set(), []))
            forms.add(form(p))
            names.append(name)
    return table


def documented() -> dict[str, tuple[set[str], list[str]]]:
    """docs/cli.md's table, as :func:`derived` gives it."""
    table = {}
    for line in PAGE.read_text().splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        forms = {f.replace("\\|", "|") for f in re.findall(r"`([^`]+)`", cells[0])}
        names = re.findall(r"`([^`]+)`", cells[2])
        long = max(re.findall(r"--[\w-]+", next(iter(forms))), key=len)
        table[long] = (forms, names)
    return table


def test_the_page_is_the_commands_options():
    """docs/cli.md lists every option of every command, in the forms it is written, with the
    commands that have it; a new option or command changes the table."""
    got, page = derived(), documented()
    assert len(got) > 40
    assert set(page) == set(got), set(page) ^ set(got)
    for long, (forms, names) in got.items():
        assert page[long] == (forms, sorted(names)), long


def test_one_option_one_spelling_one_value():
    """The same option is written the same way everywhere (same names, same kind of value, the
    same choices where it has them -- ``--format`` excepted: each command has its own formats)."""
    for long, (forms, names) in derived().items():
        assert len(forms) == 1 or long in TWO_FORMS, (long, forms, names)
    by_option: dict[str, set[tuple[str, ...]]] = {}
    for command in commands().values():
        for long, p in options(command).items():
            if isinstance(p.type, click.Choice) and long != "--format":
                by_option.setdefault(long, set()).add(tuple(p.type.choices))
    assert by_option and all(len(choices) == 1 for choices in by_option.values()), by_option


def test_the_rules_of_the_vocabulary():
    """``--node`` is a Slurm node (health) and nothing else; every command that writes a
    document (``--format``, capture, baseline) has ``-o, --output``; the commands that read what
    pasted text cannot give, or act on this machine beyond a dry run, offer no ``--paste``."""
    all_commands = commands()
    assert [n for n, c in all_commands.items() if "--node" in options(c)] == ["health"]
    writers = [n for n, c in all_commands.items() if "--format" in options(c)] + ["capture", "baseline"]
    missing = {(n, "--output") for n in writers if "--output" not in options(all_commands[n])}
    assert missing <= PENDING, missing
    for name in NO_PASTE:
        assert "--paste" not in options(all_commands[name]), name
        assert "--paste" not in run_cli(*name.split(), "--help").stdout, name


#: Commands whose JSON the test reads, with the arguments that make them print on a fixture.
JSON_RUNS = {"scan": (), "plan": (), "audit": (), "vms": ()}


@pytest.mark.parametrize("command", sorted(JSON_RUNS))
def test_json_is_compact_and_pretty_indents_it(fixture_root, command):
    """Every format of a command that prints JSON prints one compact line, and indented lines
    with ``--pretty`` (issue 40: plan's, vms' and the DRA outputs were always indented)."""
    root = str(fixture_root("dgx-h100"))
    fmt = options(commands()[command])["--format"]
    assert isinstance(fmt.type, click.Choice)
    printed_json = []
    for choice in fmt.type.choices:
        out = run_cli(command, "--root", root, "--no-nvml", "--format", choice, *JSON_RUNS[command])
        try:
            json.loads(out.stdout)
        except ValueError:
            continue
        printed_json.append(choice)
        assert out.stdout.count("\n") <= 1, (command, choice)
        pretty = run_cli(command, "--root", root, "--no-nvml", "--format", choice, "--pretty")
        assert json.loads(pretty.stdout) == json.loads(out.stdout) and pretty.stdout.count("\n") > 5
    assert printed_json and "--pretty" in options(commands()[command])


def test_a_file_or_stdout_with_o(fixture_root, tmp_path):
    """``-o FILE`` writes what stdout would get, whole; ``-o -`` is stdout."""
    root = str(fixture_root("dgx-h100"))
    for args in (("scan", "--format", "json"), ("plan", "--format", "slurm"), ("audit",)):
        out = tmp_path / f"{args[0]}.out"
        printed = run_cli(*args, "--root", root, "--no-nvml")
        written = run_cli(*args, "--root", root, "--no-nvml", "-o", str(out))
        assert written.returncode == printed.returncode and written.stdout == ""
        assert out.read_text() == printed.stdout != ""
        assert run_cli(*args, "--root", root, "--no-nvml", "-o", "-").stdout == printed.stdout


def _stdout_on_a_terminal(*args: str) -> tuple[int, str]:
    """``python -m topoagent ARGS`` with stdout on a pseudo-terminal: exit status and stderr."""
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "topoagent", *args], stdout=slave, stderr=subprocess.PIPE, env=env)
    os.close(slave)
    _, err = proc.communicate(timeout=120)
    os.close(master)
    return proc.returncode, err.decode()


@pytest.mark.parametrize(
    "args",
    [("draw", "--format", "png"), ("draw", "--format", "png", "-o", "-"), ("capture", "-o", "-")],
    ids=["draw-png", "draw-png-o-", "capture-o-"],
)
def test_binary_output_is_refused_on_a_terminal_before_any_work(tmp_path, args):
    """Issue 40: ``draw --format png`` refused a terminal only after scanning and drawing, and
    ``capture -o -`` wrote the tarball to it.  Both refuse first, in one line: even a root that
    does not exist is not looked at."""
    code, err = _stdout_on_a_terminal(*args, "--root", str(tmp_path / "absent"))
    assert code == 2 and err.count("\n") == 1 and "is binary: give -o FILE or redirect stdout" in err, err
