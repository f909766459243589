"""Where the tests find the repository and their data, wherever a test file sits."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

#: The repository's root (``pyproject.toml``, ``topoagent/``, ``docs/``).
REPO = Path(__file__).resolve().parent.parent
#: ``tests/``: fixtures, goldens, samples and the helpers.
TESTS = REPO / "tests"
#: ``../shared`` beside the checkout: real machines' captures and the consumers' own code
#: (NCCL's topology code, rdma_topo) that some tests need; they skip, naming it, without it.
SHARED = REPO.parent / "shared"


def repository_files() -> dict[str, str] | None:
    """Each file of the checkout that git tracks or would track (not ignored) -> its digest;
    None outside a git checkout (an unpacked release), where there is nothing to compare."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    digests = {}
    for name in os.fsdecode(listed).split("\0"):
        if name:
            try:
                digests[name] = hashlib.sha256((REPO / name).read_bytes()).hexdigest()
            except OSError:
                digests[name] = "unreadable or absent"
    return digests
