"""Where the tests find the repository and their data, wherever a test file sits."""

from __future__ import annotations

from pathlib import Path

#: The repository's root (``pyproject.toml``, ``topoagent/``, ``docs/``).
REPO = Path(__file__).resolve().parent.parent
#: ``tests/``: fixtures, goldens, samples and the helpers.
TESTS = REPO / "tests"
