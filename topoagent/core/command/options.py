"""The scan-input options every command takes, defined once: ``--root``, ``--no-nvml``, the
offline flags, ``--cross-check``.  :func:`scan_inputs` adds them to a click command and hands it
one :class:`~topoagent.core.inputs.Inputs`; :func:`run_scan` runs it or fails with one line."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from topoagent.core.api import run
from topoagent.core.command.common import fail
from topoagent.core.errors import OfflineInputError, TopoagentError
from topoagent.core.frozen import FrozenMap
from topoagent.core.inputs import NVML_AUTO, NVML_OFF, Inputs
from topoagent.core.parse.segment import KINDS
from topoagent.core.read import is_live
from topoagent.core.read.archive import resolve_root
from topoagent.core.read.kernel import same_boot
from topoagent.core.read.textinput import read_text_input
from topoagent.core.tree import Root, is_this_host, root_name

if TYPE_CHECKING:
    from topoagent.core.result import ScanResult

F = TypeVar("F", bound="Callable[..., Any]")

#: Offline inputs: Inputs field (also the option's dest), option, the name OfflineInputError
#: gives the argument, help.
OFFLINE_OPTIONS = (
    (
        "nvidia_smi_topo_text",
        "--nvidia-smi-topo",
        "nvidia_smi_topo",
        "Analyse this saved `nvidia-smi topo -m` output (- for stdin) instead of the host.",
    ),
    (
        "lspci_tree_text",
        "--lspci-tree",
        "lspci_tree",
        "Analyse this saved `lspci -tv` (or -t, -tvnn) output (- for stdin).",
    ),
    (
        "lspci_verbose_text",
        "--lspci-verbose",
        "lspci_verbose",
        "Analyse this saved `lspci -vvv` (or -vvvnn, -D -vvv; as root for ACS) output (- for stdin).",
    ),
)


def input_options(*, cross_check: bool, pasted: bool = True) -> Callable[[F], F]:
    """Decorate a click command with the scan-input options (``--cross-check`` only where the
    command offers it; ``--paste`` and the offline flags only where it accepts pasted output:
    ``--help`` offers only what the command accepts), in ``--help`` order; the command receives
    their raw values."""

    def decorate(fn: F) -> F:
        if cross_check:
            fn = click.option(
                "--cross-check",
                "cross_check",
                is_flag=True,
                help="Also run nvidia-smi topo -m and lspci -vvv (if installed) and report "
                "where they disagree with sysfs. Live host (/) only.",
            )(fn)
        for field, option, _, text in reversed(OFFLINE_OPTIONS if pasted else ()):
            fn = click.option(option, field, metavar="FILE", help=text)(fn)
        if pasted:
            fn = click.option(
                "--paste",
                "paste_files",
                metavar="FILE",
                multiple=True,
                help="Analyse every tool output found in this text (a bug report, an e-mail; - for stdin; "
                f"repeatable): {', '.join(k.name for k in KINDS)}.",
            )(fn)
        fn = click.option(
            "--no-nvml", "no_nvml", is_flag=True, help="Do not ask NVML (it is asked only when scanning /)."
        )(fn)
        return click.option(
            "--root",
            "root",
            default="/",
            metavar="DIR",
            show_default=True,
            help="Read the host tree below this directory (a fake or captured root).",
        )(fn)

    return decorate


def take_inputs(params: dict[str, Any]) -> Inputs:
    """Remove the scan-input values from parsed ``params`` and build their :class:`Inputs`."""
    files = {field: params.pop(field, None) for field, *_ in OFFLINE_OPTIONS}
    return build_inputs(
        root=params.pop("root"),
        no_nvml=params.pop("no_nvml"),
        files=files,
        cross_check=params.pop("cross_check", False),
        pastes=tuple(params.pop("paste_files", ())),
    )


def scan_inputs(*, cross_check: bool = True, pasted: bool = True) -> Callable[[F], F]:
    """Decorate a click command with the scan-input options; it receives ``inputs``.  A command
    that reads what pasted text cannot give (a host's /proc, its config space) takes
    ``pasted=False``: it offers no ``--paste``."""

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def command(*args: Any, **kwargs: Any) -> Any:
            kwargs["inputs"] = take_inputs(kwargs)
            return fn(*args, **kwargs)

        return input_options(cross_check=cross_check, pasted=pasted)(cast("F", command))

    return wrap


def is_this_machine(inputs: Inputs) -> bool:
    """Whether ``inputs`` describe the machine this runs on: the live host, or a tree of this
    boot of it (:func:`~topoagent.core.read.kernel.same_boot`: the host's /sys and /proc mounted
    in a container); never pasted output."""
    return is_live(inputs) or (not inputs.offline and same_boot(inputs.root))


def require_this_machine(inputs: Inputs, action: str, dry_run: str) -> None:
    """One line and exit 2 unless ``inputs`` describe this machine (:func:`is_this_machine`), for
    an ``action`` that acts on it (a process here, this node's Slurm state): another host's data
    would place a local command by a topology it does not have.  ``dry_run`` names how to see
    what it would do."""
    if is_this_machine(inputs):
        return
    origins = inputs.origins or {}
    source = ", ".join(origins.values()) if origins else f"--root {root_name(inputs.root)} (not this machine's boot)"
    fail(f"{action} acts on this machine: it needs this machine's own tree, not {source}; {dry_run} shows it")


def build_inputs(
    *, root: str, no_nvml: bool, files: dict[str, str | None], cross_check: bool, pastes: tuple[str, ...] = ()
) -> Inputs:
    """Inputs from the options; pasted files are read here (one line and exit 2 if they cannot be)."""
    given = {field: name for field, name in files.items() if name is not None}
    given.update({f"paste_texts#{n}": name for n, name in enumerate(pastes)})
    if cross_check and (given or not is_this_host(root)):
        fail("--cross-check runs this host's nvidia-smi and lspci: it needs a live scan of --root /")
    read: Root = root
    if not given and not os.path.isdir(os.path.join(root, "sys")):
        # A capture tarball (topoagent capture) replays like its unpacked directory (read into
        # memory, never unpacked to disk), and the reports name the tarball.
        try:
            read = resolve_root(root)
        except TopoagentError as exc:
            fail(f"--root {root}: {exc}")
    option_of = {field: option for field, option, *_ in OFFLINE_OPTIONS}
    option_of.update({f"paste_texts#{n}": "--paste" for n in range(len(pastes))})
    stdin = [option_of[f] for f, name in given.items() if name == "-"]
    if len(stdin) > 1:
        fail(f"{' and '.join(stdin)} cannot both read stdin (-)")
    texts: dict[str, str] = {}
    if given:
        for field, name in given.items():
            try:
                texts[field] = read_text_input(name)
            except TopoagentError as exc:
                fail(f"{option_of[field]} {name}: {exc}")
    origins = FrozenMap({field: f"{option_of[field]} {name}" for field, name in given.items()})
    return Inputs(
        root=read,
        nvml=NVML_OFF if no_nvml else NVML_AUTO,
        cross_check=cross_check,
        origins=origins,
        nvidia_smi_topo_text=texts.get("nvidia_smi_topo_text"),
        lspci_tree_text=texts.get("lspci_tree_text"),
        lspci_verbose_text=texts.get("lspci_verbose_text"),
        paste_texts=tuple(texts[f"paste_texts#{n}"] for n in range(len(pastes))),
    )


def run_scan(inputs: Inputs) -> ScanResult:
    """:func:`topoagent.core.api.run`, or one line naming the input at fault and exit 2."""
    try:
        return run(inputs)
    except OfflineInputError as exc:
        origins = inputs.origins or {}
        where = next((f"{origins[f]}: " for f, _, arg, _ in OFFLINE_OPTIONS if exc.input == arg and f in origins), "")
        if inputs.paste_texts:
            where = ""  # the message names each --paste file itself
        fail(where + str(exc))
    except TopoagentError as exc:
        fail(str(exc))
