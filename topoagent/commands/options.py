"""The scan-input options every command takes, defined once: ``--root``, ``--no-nvml``, the
offline flags, ``--cross-check``.  :func:`scan_inputs` adds them and hands the command one
:class:`~topoagent.inputs.Inputs`; :func:`run_scan` runs it or fails with one line."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from topoagent.commands.common import fail
from topoagent.errors import OfflineInputError, TopoagentError
from topoagent.frozen import FrozenMap
from topoagent.inputs import NVML_AUTO, NVML_OFF, Inputs

if TYPE_CHECKING:
    from topoagent.result import ScanResult

F = TypeVar("F", bound=Callable[..., Any])

#: Offline inputs: Inputs field, option, the name OfflineInputError gives the argument.
OFFLINE_OPTIONS = (
    ("nvidia_smi_topo_text", "--nvidia-smi-topo", "nvidia_smi_topo"),
    ("lspci_tree_text", "--lspci-tree", "lspci_tree"),
    ("lspci_verbose_text", "--lspci-verbose", "lspci_verbose"),
)


def scan_inputs(*, cross_check: bool = True) -> Callable[[F], F]:
    """Decorate a click command with the scan-input options; it receives ``inputs``."""

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def command(*args: Any, root: str, no_nvml: bool, nvsmi_file: str | None, tree_file: str | None,
                    verbose_file: str | None, cross_check: bool = False, **kwargs: Any) -> Any:
            files = dict(zip((o[0] for o in OFFLINE_OPTIONS), (nvsmi_file, tree_file, verbose_file)))
            kwargs["inputs"] = build_inputs(root=root, no_nvml=no_nvml, files=files, cross_check=cross_check)
            return fn(*args, **kwargs)

        options = [
            click.option("--root", default="/", show_default=True, metavar="DIR",
                         help="Read the host tree below this directory (a fake or captured root)."),
            click.option("--no-nvml", is_flag=True, help="Do not ask NVML (it is asked only when scanning /)."),
            click.option("--nvidia-smi-topo", "nvsmi_file", metavar="FILE",
                         help="Analyse this saved `nvidia-smi topo -m` output (- for stdin) instead of the host."),
            click.option("--lspci-tree", "tree_file", metavar="FILE",
                         help="Analyse this saved `lspci -tv` (or -t, -tvnn) output (- for stdin)."),
            click.option("--lspci-verbose", "verbose_file", metavar="FILE",
                         help="Analyse this saved `lspci -vvv` (or -vvvnn, -D -vvv; as root for ACS) "
                              "output (- for stdin)."),
        ]
        if cross_check:
            options.append(click.option(
                "--cross-check", is_flag=True,
                help="Also run nvidia-smi topo -m and lspci -vvv (if installed) and report where they "
                     "disagree with sysfs. Live host (/) only."))
        for option in reversed(options):
            command = option(command)
        return command  # type: ignore[return-value]  # functools.wraps keeps fn's signature for click

    return wrap


def build_inputs(*, root: str, no_nvml: bool, files: dict[str, str | None], cross_check: bool) -> Inputs:
    """Inputs from the options; pasted files are read here (one line and exit 2 if they cannot be)."""
    given = {field: name for field, name in files.items() if name is not None}
    if cross_check and (given or os.path.realpath(root) != "/"):
        fail("--cross-check runs this host's nvidia-smi and lspci: it needs a live scan of --root /")
    if not given and not os.path.isdir(os.path.join(root, "sys")):
        # A capture tarball (topoagent capture) replays like its unpacked directory.
        from topoagent.sources.capture import resolve_root

        try:
            root = resolve_root(root)
        except TopoagentError as exc:
            fail(f"--root {root}: {exc}")
    option_of = {o[0]: o[1] for o in OFFLINE_OPTIONS}
    stdin = [option_of[f] for f, name in given.items() if name == "-"]
    if len(stdin) > 1:
        fail(f"{' and '.join(stdin)} cannot both read stdin (-)")
    texts: dict[str, str] = {}
    if given:
        from topoagent.sources.textinput import read_text_input

        for field, name in given.items():
            try:
                texts[field] = read_text_input(name)
            except TopoagentError as exc:
                fail(f"{option_of[field]} {name}: {exc}")
    origins = FrozenMap({field: f"{option_of[field]} {name}" for field, name in given.items()})
    return Inputs(root=root, nvml=NVML_OFF if no_nvml else NVML_AUTO, cross_check=cross_check,
                  origins=origins, nvidia_smi_topo_text=texts.get("nvidia_smi_topo_text"),
                  lspci_tree_text=texts.get("lspci_tree_text"), lspci_verbose_text=texts.get("lspci_verbose_text"))


def run_scan(inputs: Inputs) -> ScanResult:
    """:func:`topoagent.api.run`, or one line naming the input at fault and exit 2."""
    from topoagent.api import run

    try:
        return run(inputs)
    except OfflineInputError as exc:
        origins = inputs.origins or {}
        where = next((f"{origins[f]}: " for f, _, arg in OFFLINE_OPTIONS if exc.input == arg and f in origins), "")
        fail(where + str(exc))
    except TopoagentError as exc:
        fail(str(exc))
