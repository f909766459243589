"""The lint gate's versions agree: the ruff of pre-commit, of the test extra and of this venv.

A formatter's output changes between releases, so the pre-commit hook, CI (the README's test
command installs the ``test`` extra) and a developer's venv must run the same ruff, or one of
them rewrites what another accepted.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]


def _pinned_ruff() -> str:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    pins = [m.group(1) for req in extras if (m := re.fullmatch(r"ruff==([0-9.]+)", req))]
    assert len(pins) == 1, f"the test extra pins ruff exactly once: {extras}"
    return pins[0]


def test_pre_commit_runs_the_pinned_ruff():
    config = yaml.safe_load((REPO / ".pre-commit-config.yaml").read_text())
    revs = [r["rev"] for r in config["repos"] if r["repo"] == "https://github.com/astral-sh/ruff-pre-commit"]
    assert revs == [f"v{_pinned_ruff()}"]


def test_this_venv_runs_the_pinned_ruff():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent))
    if ruff is None:
        pytest.skip("ruff is not installed beside this Python (pip install -e '.[test]')")
    out = subprocess.run([ruff, "--version"], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["ruff", _pinned_ruff()]
