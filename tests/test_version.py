"""The version is written once and says what a release is: ``topoagent/core/version.py`` holds it,
``pyproject.toml`` reads it, ``topoagent --version`` prints it, and CHANGELOG.md has its
section (Keep a Changelog: ``[Unreleased]`` on top, then ``[X.Y.Z] - date``)."""

from __future__ import annotations

import re
import sys
import warnings
from pathlib import Path

import pytest

from topoagent.core.version import __version__

REPO = Path(__file__).resolve().parents[1]

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def test_pyproject_reads_the_version_module():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"]  # written in one place only
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "topoagent.core.version.__version__"}
    config = pytest.importorskip("setuptools.config.pyprojecttoml")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # setuptools calls its [tool.setuptools] table beta
        expanded = config.read_configuration(REPO / "pyproject.toml", expand=True)
    assert expanded["project"]["version"] == __version__


def test_the_package_and_the_command_line_say_the_same_version(capsys):
    import topoagent
    from topoagent.cli import main

    assert topoagent.__version__ == __version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)
    main(["--version"])
    assert capsys.readouterr().out == f"topoagent, version {__version__}\n"


def test_the_changelog_has_a_section_for_this_version():
    text = (REPO / "CHANGELOG.md").read_text()
    heads = re.findall(r"^## (.+)$", text, flags=re.MULTILINE)
    assert heads[0] == "[Unreleased]"
    releases = [re.fullmatch(r"\[(\d+\.\d+\.\d+)\] - (\d{4}-\d\d-\d\d)", h) for h in heads[1:]]
    assert releases and all(releases), heads  # every other section is a dated version
    assert releases[0].group(1) == __version__  # the code says the newest release
    dates = [m.group(2) for m in releases]
    assert dates == sorted(dates, reverse=True)
