"""The NFD feature file expires (``# +expiry-time``) and says when scans fail, read by an
independent implementation of NFD's rules (tests/nfd_local.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.nfd_local import parse_feature_file, parse_rfc3339, utc, valid_label
from topoagent.core.api import scan
from topoagent.features.daemon.exports import NFD_EXPIRY_INTERVALS, nfd_expiry, nfd_features, render_nfd

NS = "feature.node.kubernetes.io"


@pytest.mark.parametrize(
    "text, ok",
    [
        ("2024-05-01T12:00:00Z", True),
        ("2024-05-01T12:00:00+02:00", True),
        ("2024-05-01T12:00:00.5Z", True),
        ("2024-05-01 12:00:00Z", False),
        ("2024-05-01T12:00:00", False),
        ("1714564800", False),
    ],
)
def test_the_reader_parses_rfc3339_as_go_does(text, ok):
    if ok:
        assert parse_rfc3339(text).tzinfo is not None
    else:
        with pytest.raises(ValueError):
            parse_rfc3339(text)


def test_the_reader_applies_a_directive_to_the_lines_after_it():
    now = utc(1_700_000_000)
    text = "a/x=1\n# +expiry-time=2000-01-01T00:00:00Z\na/y=2\n# +bogus=1\n"
    labels, errors = parse_feature_file(text, now)
    assert labels == {"a/x": "1"} and len(errors) == 1


@pytest.fixture(scope="module")
def dgx(fixture_root):
    return scan(fixture_root("dgx-h100"), nvml="off")


def test_labels_hold_until_the_expiry_and_vanish_after(dgx):
    good_at, interval, timeout = 1_700_000_000.0, 300.0, 120.0
    expires = nfd_expiry(good_at, interval, timeout)
    assert expires == good_at + NFD_EXPIRY_INTERVALS * interval + timeout
    text = render_nfd(nfd_features(dgx, degraded_links=False), NS, expires)
    assert text.startswith("# +expiry-time=2023-11-14T22:")  # the directive first, before any label
    fresh, errors = parse_feature_file(text, utc(good_at + interval))
    assert not errors and fresh[f"{NS}/topoagent.gpu.count"] == "8" and fresh[f"{NS}/topoagent.scan-ok"] == "true"
    assert all(valid_label(k, v) for k, v in fresh.items())
    stale, _ = parse_feature_file(text, utc(expires) + timedelta(seconds=1))
    assert stale == {}  # a stopped daemon's labels are gone


def test_a_failed_scan_is_labelled(dgx):
    text = render_nfd(nfd_features(dgx, degraded_links=False, scan_ok=False), NS, nfd_expiry(0.0, 300.0, 0.0))
    labels, _ = parse_feature_file(text, utc(100.0))
    assert labels[f"{NS}/topoagent.scan-ok"] == "false"


def test_without_expiry_the_file_is_as_before(dgx):
    text = render_nfd(nfd_features(dgx, degraded_links=False), NS)
    assert "+expiry-time" not in text
    labels, errors = parse_feature_file(text, utc(0.0))
    assert not errors and labels
