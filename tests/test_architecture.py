"""The architecture holds: the import contract (import-linter) and the type check (mypy) pass,
and a deliberately wrong import in a scratch copy of the package breaks the contract."""

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    exe = BIN / "lint-imports"
    if not exe.exists():
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    env = dict(os.environ, PYTHONPATH=str(cwd))
    return subprocess.run([str(exe), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_import_contract_holds():
    proc = _lint_imports(REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def _modules() -> list[str]:
    """Every module of the package, dotted (a package by its own name)."""
    names = []
    for path in sorted((REPO / "topoagent").rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def _layered() -> set[str]:
    """Every module or package a layers contract names."""
    contracts = msgspec.toml.decode((REPO / "pyproject.toml").read_bytes())["tool"]["importlinter"]["contracts"]
    return {n.strip() for c in contracts for layer in c.get("layers", ()) for n in re.split(r"[|:]", layer)}


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _unplaced(modules: list[str], named: set[str]) -> list[str]:
    """The modules no layers contract places: a module is placed where a contract names it, or
    where it lies in a named package whose parts no contract names apart (``core/parse/*`` are
    the core's ``parse`` layer; a module beside ``core/read/sysfs.py`` must join the read
    contract, one beside ``core/pci.py`` the core's, and a package's ``__init__`` its parent's)."""
    out = []
    for m in modules:
        parent = m.rpartition(".")[0]
        if not parent or m in named:
            continue
        siblings_named = any(_inside(n, parent) and n != parent and not _inside(n, m) for n in named)
        if siblings_named or not any(_inside(m, n) for n in named):
            out.append(m)
    return out


def test_every_module_is_in_a_contract():
    assert _unplaced(_modules(), _layered()) == []


@pytest.mark.parametrize(
    "module, placed",
    [
        ("topoagent.core.newbase", False),  # beside the core's named modules
        ("topoagent.core.read.newsource", False),  # beside the read contract's readers
        ("topoagent.features.daemon.newpart", False),
        ("topoagent.features.newslice", False),
        ("topoagent.core.parse.newformat", True),  # the parsers are one layer of the core
    ],
)
def test_a_module_in_no_contract_is_found(module, placed):
    assert (_unplaced([module], _layered()) == []) is placed


def _module_table() -> dict[str, set[str]]:
    """docs/architecture.md's module table: each folder (``core/`` for the core's own modules,
    named in its base row or as a row's file) and the modules it names."""
    text = (REPO / "docs" / "architecture.md").read_text()
    table = text.split("| where | modules | owns |\n", 1)[1].split("\n\n", 1)[0]
    places: dict[str, set[str]] = {"core/": set()}
    for row in table.splitlines()[1:]:
        where, names = row.split(" | ")[:2]
        for path in re.findall(r"`([\w/.]+)`", where):
            if re.fullmatch(r"core/\w+\.py", path):
                places["core/"].add(path[5:-3])
            elif path.endswith("/"):
                places.setdefault(path, set()).update(re.findall(r"`(\w+)`", names))
    return places


def test_the_module_table_is_the_package():
    pkg = REPO / "topoagent"
    folders = [pkg / "core", *(pkg / "core").iterdir(), *(pkg / "features").iterdir()]
    actual = {
        f"{d.relative_to(pkg)}/": {p.stem for p in d.glob("*.py") if p.stem != "__init__"}
        for d in folders
        if (d / "__init__.py").exists()
    }
    assert _module_table() == actual


@pytest.mark.parametrize(
    "module, bad_import",
    [
        ("topoagent/core/render/tree.py", "from topoagent.core.read import sysfs as _sysfs  # noqa"),
        ("topoagent/core/analysis/paths.py", "import subprocess as _subprocess  # noqa"),
        ("topoagent/core/topology.py", "from topoagent.core.result import ScanResult as _R  # noqa"),
        # the readers and parsers are the ground floor: below the model and what is concluded from it
        ("topoagent/core/read/expectation.py", "from topoagent.core.analysis import fingerprint as _f  # noqa"),
        ("topoagent/core/paste/amd.py", "from topoagent.core.topology import Topology as _T  # noqa"),
        ("topoagent/core/parse/kfd.py", "from topoagent.core.findings import Finding as _F  # noqa"),
        # an import for the type checker only counts too (exclude_type_checking_imports = false)
        (
            "topoagent/core/advice/cores.py",
            "from typing import TYPE_CHECKING as _TC\n"
            "if _TC:\n    from topoagent.core.result import ScanResult as _R  # noqa",
        ),
    ],
)
def test_a_wrong_import_breaks_the_contract(tmp_path, module, bad_import):
    scratch = tmp_path / "repo"
    shutil.copytree(REPO / "topoagent", scratch / "topoagent", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", scratch / "pyproject.toml")
    target = scratch / module
    target.write_text(target.read_text() + "\n" + bad_import + "\n")
    proc = _lint_imports(scratch)
    assert proc.returncode != 0, proc.stdout[-2000:]
    assert "BROKEN" in proc.stdout


def test_mypy_passes():
    try:
        import mypy  # noqa: F401
    except ImportError:
        pytest.skip("mypy is not installed (pip install -e '.[test]')")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary"], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_public_api_is_exported():
    import topoagent

    assert all(getattr(topoagent, n) is not None for n in topoagent.__all__)
    assert topoagent.scan is topoagent.core.api.scan


def test_the_lazy_api_and_its_type_checking_names_are_one_list():
    """``topoagent/__init__.py`` names each public name twice, for the run (``_API``, PEP 562)
    and for the type checker (``if TYPE_CHECKING:``): the two lists must be the same."""
    import ast

    import topoagent

    tree = ast.parse((REPO / "topoagent" / "__init__.py").read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    typed = {
        (node.module, alias.name) for node in block.body if isinstance(node, ast.ImportFrom) for alias in node.names
    }
    assert typed == {(module, name) for name, module in topoagent._API.items()}


def test_import_topoagent_loads_no_module_of_the_api():
    """``import topoagent`` (every command's first step) costs nothing until a name is asked
    for, so Ctrl-C during start-up reaches the CLI's boundary (tests/test_interrupt.py)."""
    code = "import sys, topoagent; print(sorted(m for m in sys.modules if m.startswith('topoagent')))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "['topoagent', 'topoagent.core', 'topoagent.core.version']"


def test_typed_marker_ships():
    assert (REPO / "topoagent" / "py.typed").exists()


#: The packages above the model: they learn about a device from its Device and about the host
#: from Topology's properties, never from the snapshot the model was built from.
ABOVE_THE_MODEL = (
    "topoagent/core/analysis",
    "topoagent/core/advice",
    "topoagent/core/render",
    "topoagent/core/command",
    "topoagent/features",
    "topoagent/cli.py",
)


def _snapshot_reads(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    return [
        f"{path.relative_to(REPO)}:{node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == "snapshot"
    ]


def test_nothing_above_the_model_reads_the_snapshot():
    files = [
        p
        for top in ABOVE_THE_MODEL
        for p in sorted((REPO / top).rglob("*.py") if (REPO / top).is_dir() else [REPO / top])
    ]
    assert len(files) > 50
    reads = [r for p in files for r in _snapshot_reads(p)]
    assert reads == [], "use Device's fields or Topology's properties: " + ", ".join(reads)
