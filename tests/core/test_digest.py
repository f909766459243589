"""The OpenSSL-free SHA-256 gives hashlib's digest, on every path it can take."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest

from topoagent.core import digest


@pytest.mark.parametrize("data", [b"", b"abc", b"x" * 1000, bytes(range(256))])
def test_short_sha256_is_hashlibs(data):
    assert digest.short_sha256(data) == hashlib.sha256(data).hexdigest()[:16]


def test_without_cpythons_own_module_hashlib_serves(monkeypatch):
    def missing(name):
        raise ImportError(name)

    digest._sha256.cache_clear()
    monkeypatch.setattr(digest, "import_module", missing)
    try:
        assert digest.short_sha256(b"abc") == hashlib.sha256(b"abc").hexdigest()[:16]
    finally:
        digest._sha256.cache_clear()


def test_a_scan_process_does_not_load_openssl(fixture_root):
    """The point of the module: a scan that prints a fingerprint never imports _hashlib."""
    code = (
        "import sys; from topoagent.cli import main\n"
        "try: main(['scan', '--root', sys.argv[1], '--format', 'json'])\n"
        "except SystemExit: pass\n"
        "sys.stderr.write(str('_hashlib' in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(fixture_root("dgx-h100"))], capture_output=True, text=True)
    assert '"fingerprint"' in out.stdout
    assert out.stderr.endswith("False")
