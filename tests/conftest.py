import sys
from pathlib import Path

import pytest

# One way in: test helpers import from the repository root as the package ``tests``
# (``from tests.plan_helpers import ...``, ``from tests.fakesysfs import generate``).
REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# The real trees are unpacked once per session for every module that asks for them.
from tests.realtrees import real_tree_roots  # noqa: E402, F401  (a fixture, after the path is set)


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


@pytest.fixture(scope="session")
def fixture_root(tmp_path_factory):
    """Generate (once per session) the fake sysfs root of a machine description by name."""
    from tests.fakesysfs import generate

    cache: dict[str, Path] = {}
    base = tmp_path_factory.mktemp("machines")

    def make(name: str) -> Path:
        if name not in cache:
            cache[name] = generate(name, base / name)
        return cache[name]

    return make
