"""The digit and name checks read exactly what their specifications (the patterns here) read."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from topoagent.core.bdf import is_bdf
from topoagent.core.digits import is_decimal, is_hex
from topoagent.core.read.attr import numbered

BDF = re.compile(r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")
DECIMAL = re.compile(r"[0-9]{1,20}")  # at most MAX_DIGITS: more is no number read from input
HEX = re.compile(r"[0-9a-fA-F]+")

#: characters that make near misses likely: hex digits, separators, look-alike digits
ALPHABET = st.sampled_from(list("0123456789abcdefABCDEFgG:.-x \n²١٣") + ["0000:", ":00", ".0"])


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("0000:00:00.0", True),
        ("0000:3b:1f.7", True),
        ("10000:00:00.0", True),
        ("FFFFFFFF:AB:cd.3", True),
        ("0000:00:00.8", False),
        ("000:00:00.0", False),
        ("000000000:00:00.0", False),
        ("0000:0:00.0", False),
        ("0000:00:00.0\n", False),
        (" 0000:00:00.0", False),
        ("0000:00:00:0", False),
        ("0000-00:00.0", False),
        ("0000:g0:00.0", False),
        ("0000:0²:00.0", False),
        ("pci0000:00", False),
        ("", False),
    ],
)
def test_is_bdf_table(name: str, expected: bool) -> None:
    assert is_bdf(name) is expected


@given(st.lists(ALPHABET, max_size=8).map("".join))
def test_is_bdf_reads_as_the_pattern(name: str) -> None:
    assert is_bdf(name) == bool(BDF.fullmatch(name))


@given(st.text(alphabet=st.sampled_from(list("0123456789 -+.x²١\n٣")), max_size=8))
def test_is_decimal_reads_as_the_pattern(text: str) -> None:
    assert is_decimal(text) == bool(DECIMAL.fullmatch(text))


@pytest.mark.parametrize(
    ("name", "prefix", "expected"),
    [
        ("node0", "node", 0),
        ("node12", "node", 12),
        ("cpu255", "cpu", 255),
        ("node", "node", None),
        ("node01", "node", None),
        ("node1\n", "node", None),
        ("node²", "node", None),
        ("nodes", "node", None),
        ("cpufreq", "cpu", None),
        ("cpu12345678", "cpu", None),
        ("possible", "node", None),
    ],
)
def test_numbered_directories(name: str, prefix: str, expected: int | None) -> None:
    assert numbered(name, prefix) == expected


@given(st.text(alphabet=st.sampled_from(list("0123456789abcdefABCDEFgxX _-²١\n")), max_size=8))
def test_is_hex_reads_as_the_pattern(text: str) -> None:
    assert is_hex(text) == bool(HEX.fullmatch(text))


@pytest.mark.parametrize(
    ("pf", "offset", "stride", "count", "expected"),
    [
        ("0000:39:00.0", 2, 1, 3, ["0000:39:00.2", "0000:39:00.3", "0000:39:00.4"]),
        ("0000:31:00.0", 8, 1, 2, ["0000:31:01.0", "0000:31:01.1"]),  # into the next device number
        ("0001:ff:1f.7", 1, 1, 5, []),  # routing ID past 0xFFFF: past the last bus
        ("0000:05:00.0", 1, 0, 4, ["0000:05:00.1"]),  # stride 0 names one VF, once
        ("10000:fe:00.0", 256, 2, 2, ["10000:ff:00.0", "10000:ff:00.2"]),  # an 8-digit (VMD) domain
    ],
)
def test_vf_bdfs_where_the_kernel_puts_them(pf: str, offset: int, stride: int, count: int, expected: list[str]) -> None:
    from topoagent.core.bdf import vf_bdfs

    assert list(vf_bdfs(pf, offset, stride, count)) == expected


@pytest.mark.parametrize("digits", [21, 4301, 5000])
def test_a_run_of_digits_longer_than_any_number_is_not_decimal(digits: int) -> None:
    """int() refuses more than 4,300 digits with its own ValueError: refused before it is asked."""
    assert not is_decimal("7" * digits)
