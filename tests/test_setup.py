"""The test environment is the lock: what the README's test command installs, .ci/run runs, and
pyproject.toml's ranges allow are one thing (docs/testing.md, "Versions")."""

from __future__ import annotations

import os
import re
from importlib import metadata

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.paths import REPO

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

LOCK = REPO / "requirements" / "test.lock"
#: Set by scripts/canary, which runs the suite on the newest versions the ranges allow.
CANARY_ENV = "TOPOAGENT_CANARY"

#: ``name==version`` with its marker (``; python_full_version < '3.11'``), as uv writes a line.
_PIN = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;\\]+)\s*(?:;\s*(?P<marker>[^\\]+?))?\s*\\?$"
)


def locked() -> dict[str, Version]:
    """The lock's version of each package for this Python and platform (its markers applied)."""
    out: dict[str, Version] = {}
    for line in LOCK.read_text().splitlines():
        m = _PIN.match(line)
        if m and (m["marker"] is None or Marker(m["marker"]).evaluate()):
            out[canonicalize_name(m["name"])] = Version(m["version"])
    return out


def declared() -> list[Requirement]:
    """pyproject.toml's dependencies and its ``test`` extra, those that apply here."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in (*project["dependencies"], *project["optional-dependencies"]["test"])]
    return [r for r in reqs if r.marker is None or r.marker.evaluate()]


def test_every_hash_pinned_version_is_one_the_ranges_allow():
    """The lock is made from the ranges (scripts/lock): each declared package is in it, at a
    version its range admits, and pinned with hashes."""
    pins = locked()
    reqs = declared()
    assert reqs and pins
    for req in reqs:
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not in {LOCK.name}: run scripts/lock"
        assert req.specifier.contains(pins[name], prereleases=True), f"{req} but the lock has {pins[name]}"
    text = LOCK.read_text()
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        if "==" in block.split("\n", 1)[0]:
            assert "--hash=sha256:" in block, f"no hash for {block.splitlines()[0]}"


@pytest.mark.skipif(bool(os.environ.get(CANARY_ENV)), reason="the canary runs on the newest versions on purpose")
def test_the_suite_runs_on_the_lock():
    """Every package the lock pins for this Python is installed at that version: the suite's
    verdict is about the tested versions, not whatever the index served today."""
    wrong = []
    for name, version in sorted(locked().items()):
        try:
            installed = Version(metadata.version(name))
        except metadata.PackageNotFoundError:
            wrong.append(f"{name} (not installed; the lock has {version})")
            continue
        if installed != version:
            wrong.append(f"{name} {installed} (the lock has {version})")
    assert not wrong, (
        "install the test environment as README.md says (pip install -r requirements/test.lock), "
        f"or set {CANARY_ENV}=1 to test other versions on purpose: " + ", ".join(wrong)
    )


def _readme_test_command() -> str:
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```sh\n(.*?)\n```", text, re.S)
    commands = [b.strip() for b in blocks if "pytest" in b]
    assert len(commands) == 1, "README.md gives one test command"
    return commands[0]


def test_ci_runs_the_readmes_test_command():
    """.ci/run ends with exactly the README's test command, so CI tests what a newcomer runs."""
    ci = (REPO / ".ci" / "run").read_text().rstrip().splitlines()
    assert ci[-1] == _readme_test_command()


def test_the_readmes_test_command_installs_from_the_lock():
    command = _readme_test_command()
    assert "pip install -q -r requirements/test.lock" in command
    assert "--no-deps" in command  # the package itself adds nothing the lock did not pin
