"""One error base in fact: every exception class the package defines for callers derives from
:class:`topoagent.core.errors.TopoagentError`, so ``except TopoagentError`` catches every deliberate
error and lets bugs through."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import topoagent
from topoagent.core.errors import InputError, TopoagentError

#: Exceptions that never leave the module that raises them (control flow inside a parser or
#: reader).
INTERNAL = {
    "topoagent.core.hostfs._Fail",
    "topoagent.core.read.nvml._Skip",
    "topoagent.core.parse.lspci_common.LineError",
    "topoagent.core.platform._Unrecognised",  # recognise() turns it into Platform.problem
    "topoagent.core.command.interrupt.Interrupted",  # Ctrl-C: cli.main turns it into one line and exit 130
}


def _exception_classes() -> dict[str, type[BaseException]]:
    found = {}
    for info in pkgutil.walk_packages(topoagent.__path__, "topoagent."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == info.name:
                found[f"{info.name}.{value.__qualname__}"] = value
    return found


def test_importing_every_module_changes_no_file():
    """No import has side effects: importing every module of the package (a ``__main__`` among
    them) writes nothing into the checkout (before: the schemas and docs/findings.md)."""
    from tests.paths import repository_files

    before = repository_files()
    if before is None:
        pytest.skip("not a git checkout: nothing to compare with")
    modules = [info.name for info in pkgutil.walk_packages(topoagent.__path__, "topoagent.")]
    assert "topoagent.schema.__main__" in modules
    for name in modules:
        importlib.import_module(name)
    assert repository_files() == before


def test_every_exception_class_derives_from_the_base():
    classes = _exception_classes()
    assert len(classes) > 15  # the walk found the package's exceptions
    assert set(classes) >= INTERNAL, "an internal exception moved: update INTERNAL"
    strays = sorted(
        name for name, cls in classes.items() if name not in INTERNAL and not issubclass(cls, TopoagentError)
    )
    assert strays == []


def test_mempolicy_error_is_both_ours_and_an_os_error():
    from topoagent.features.act.mempolicy import MempolicyError

    exc = MempolicyError(22, "set_mempolicy: Invalid argument")
    assert isinstance(exc, TopoagentError) and isinstance(exc, OSError)
    assert exc.errno == 22


@pytest.mark.parametrize(
    "module, function, args",
    [
        ("topoagent.core.advice.cores", "split_cores", ((), 0)),
        ("topoagent.features.daemon.config", "parse_listen", ("nowhere",)),
        ("topoagent.features.daemon.config", "parse_listen", ("[::zz]:9464",)),
        ("topoagent.features.daemon.config", "parse_listen", ("127.0.0.1:70000",)),
        ("topoagent.core.digits", "parse_decimal", ("12a",)),
        ("topoagent.core.parse.sysfs_values", "parse_hex_id", ("12",)),
    ],
)
def test_bad_values_raise_input_errors_that_are_still_value_errors(module, function, args):
    with pytest.raises(InputError) as info:
        getattr(importlib.import_module(module), function)(*args)
    assert isinstance(info.value, ValueError)  # callers that catch ValueError still do
