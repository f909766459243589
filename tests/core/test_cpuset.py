import pytest
from hypothesis import given
from hypothesis import strategies as st

from topoagent.core.cpuset import CpuSet, CpuSetError, format_cpulist, parse_cpulist, parse_cpumask


@pytest.mark.parametrize(
    "text, cpus",
    [
        ("0-3", {0, 1, 2, 3}),
        ("0-55,112-167", set(range(56)) | set(range(112, 168))),
        ("0,4,8,12", {0, 4, 8, 12}),
        ("1-1", {1}),
        ("12", {12}),
        ("", set()),
        ("\n", set()),
        ("0-1,3\n", {0, 1, 3}),
    ],
)
def test_parse_cpulist(text, cpus):
    assert parse_cpulist(text) == frozenset(cpus)


@pytest.mark.parametrize("text", ["a-b", "3-1", "0-", "1,,x", "0x3"])
def test_parse_cpulist_rejects(text):
    with pytest.raises(CpuSetError):
        parse_cpulist(text)


@pytest.mark.parametrize(
    "mask, cpus",
    [
        ("ff", set(range(8))),
        ("00000000,000000ff", set(range(8))),
        ("0000,00000000,00000000,00000000,00000000,0000ffff", set(range(16))),
        ("0000,00000000,000000ff,ff000000,00000000,00000000", set(range(88, 104))),
        ("00000000", set()),
        ("", set()),
        ("11111111", {0, 4, 8, 12, 16, 20, 24, 28}),
    ],
)
def test_parse_cpumask(mask, cpus):
    assert parse_cpumask(mask) == frozenset(cpus)


def test_parse_cpumask_rejects_garbage():
    with pytest.raises(CpuSetError):
        parse_cpumask("zz,00")


@pytest.mark.parametrize(
    "cpus, text",
    [({0, 1, 2, 3}, "0-3"), ({0, 2}, "0,2"), (set(), ""), ({5}, "5"), ({1, 2, 4, 5, 6}, "1-2,4-6")],
)
def test_format_cpulist(cpus, text):
    assert format_cpulist(cpus) == text


@given(st.frozensets(st.integers(min_value=0, max_value=1023)))
def test_list_round_trip(cpus):
    assert parse_cpulist(format_cpulist(cpus)) == cpus


@given(st.frozensets(st.integers(min_value=0, max_value=1023)))
def test_mask_round_trip(cpus):
    assert parse_cpumask(CpuSet(cpus).mask()) == cpus


def test_mask_spelling():
    assert CpuSet().mask() == "00000000"
    assert CpuSet.parse("0-3,32").mask() == "00000001,0000000f"
