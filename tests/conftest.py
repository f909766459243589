import contextlib
import os
import shutil
import sys
from pathlib import Path

import pytest

# Bytecode is written and read as a regular install does: the suite starts `python -m topoagent`
# hundreds of times, and with PYTHONDONTWRITEBYTECODE set (as on some CI machines) each child
# would compile every module of the CLI again (~0.4 s of ~0.9 s here).  Children inherit this.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

# One way in: test helpers import from the repository root as the package ``tests``
# (``from tests.plan_helpers import ...``, ``from tests.fakesysfs import generate``).
REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# The real trees are unpacked once per session for every module that asks for them.
from tests.paths import repository_files  # noqa: E402  (after the path is set)
from tests.realtrees import real_tree_roots  # noqa: E402, F401  (a fixture, after the path is set)


def pytest_sessionstart(session):
    """A test run changes no file of the checkout (docs/testing.md): remember them all first
    (once, in the process that runs the session: xdist's workers are not it)."""
    updating = session.config.getoption("--update-golden")  # rewrites goldens on purpose
    if not hasattr(session.config, "workerinput") and not updating:
        session.config.stash[_BEFORE] = repository_files()


def pytest_sessionfinish(session):
    """Fail the run if any file of the checkout changed, appeared or went away while it ran."""
    before = session.config.stash.get(_BEFORE, None)
    if before is None:
        return
    after = repository_files() or {}
    changed = sorted(name for name in before.keys() | after.keys() if before.get(name) != after.get(name))
    if changed:
        session.config.stash[_CHANGED] = changed
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, config):
    from tests.paths import SHARED

    missing = [
        r
        for r in terminalreporter.stats.get("skipped", [])
        if isinstance(r.longrepr, tuple) and (str(SHARED) in r.longrepr[2] or "../shared" in r.longrepr[2])
    ]
    if missing:
        terminalreporter.write_line(
            f"{len(missing)} test(s) skipped for want of {SHARED} (../shared beside the checkout: README.md)"
        )
    changed = config.stash.get(_CHANGED, None)
    if changed:
        terminalreporter.section("files of the checkout the run changed", red=True)
        for name in changed:
            terminalreporter.write_line(name)


_BEFORE = pytest.StashKey[dict]()
_CHANGED = pytest.StashKey[list]()


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="Rewrite tests/golden/* from the current outputs instead of comparing.",
    )


@pytest.fixture(scope="session")
def update_golden(request) -> bool:
    return request.config.getoption("--update-golden")


@pytest.fixture
def golden(update_golden):
    """``golden(path, text)``: compare ``text`` with the golden file, or rewrite it under
    ``--update-golden`` (then review the diff)."""

    def check(path: Path, text: str) -> None:
        if update_golden:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return
        assert path.exists(), f"no golden file {path}: run pytest --update-golden"
        assert text == path.read_text(), f"{path} differs: review, then --update-golden"

    return check


#: Set (to anything) to keep what the session and module fixtures generate, for a look after
#: the run or to measure all a run writes (with ``-o tmp_path_retention_policy=all``).
KEEP_ENV = "TOPOAGENT_TEST_KEEP_TMP"


@contextlib.contextmanager
def _shared_dir(tmp_path_factory, name: str):
    """A directory for files a whole session or module shares, removed when it ends, also
    after a failure: what is here is generated and made again by ``python -m tests.fakesysfs``
    (a failed test's own ``tmp_path`` stays: ``tmp_path_retention_policy = "failed"`` in
    pyproject.toml).  :data:`KEEP_ENV` keeps it."""
    path = tmp_path_factory.mktemp(name)
    try:
        yield path
    finally:
        if not os.environ.get(KEEP_ENV):
            shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory, request):
    """A directory for what one test module's fixtures share (trees generated for the module),
    removed after the module (see :func:`_shared_dir`)."""
    with _shared_dir(tmp_path_factory, request.module.__name__.rsplit(".", 1)[-1]) as path:
        yield path


@pytest.fixture(scope="session")
def fixture_root(tmp_path_factory):
    """Generate (once per session) the fake sysfs root of a machine description by name.
    Shared by every test: read it, never change it (:func:`scratch_root` is for that)."""
    from tests.fakesysfs import generate

    cache: dict[str, Path] = {}
    with _shared_dir(tmp_path_factory, "machines") as base:

        def make(name: str) -> Path:
            if name not in cache:
                cache[name] = generate(name, base / name)
            return cache[name]

        yield make


@pytest.fixture(scope="session")
def _scratch_trees(tmp_path_factory, fixture_root):
    from tests.fakesysfs import generate
    from tests.scratch import ScratchTrees

    with _shared_dir(tmp_path_factory, "scratch") as base:
        yield ScratchTrees(base, fixture_root, generate)


@pytest.fixture
def scratch_root(_scratch_trees):
    """``scratch_root(name)``: a tree of the machine ``name`` that the test may change at will
    (tests/scratch.py): one per machine for the whole session, put back as generated after each
    test, instead of a copy per test.  Two trees of one machine in one test need a copy."""
    yield _scratch_trees.get
    _scratch_trees.restore()
