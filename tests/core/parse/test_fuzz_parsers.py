"""Hostile-input suite, parsers: every parser of topoagent/core/parse/ (and CpuSet) fed real samples
mangled (tests/mangle.py), hostile values spliced in (non-ASCII digits, ``0-999999999``,
``Number of VFs: 1000000000``), arbitrary text and bytes, and the whole offline pipeline
(parse, merge, analyse, render) on the same.

The promise: a parser returns or raises the project's own error (TopoagentError), never anything
else, in bounded time.  The small sysfs-value parsers are documented to raise ValueError on text
not of their format (their caller records it as a lost probe): that is theirs.

Size: ``TOPOAGENT_FUZZ_EXAMPLES`` (see tests/fuzz/__init__.py); deterministic for CI.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz import ABSURD_SECONDS, HOSTILE_TEXTS, fuzz_settings, own_errors_only
from tests.mangle import mangle
from tests.paths import TESTS
from topoagent.core.cpuset import CpuSet
from topoagent.core.errors import TopoagentError
from topoagent.core.parse import (
    configspace,
    lspci_tree,
    lspci_verbose,
    nccl_xml,
    nvsmi_topo,
    paste,
    pciids,
    sysfs_values,
)
from topoagent.features.vms import domain as libvirt_domain
from topoagent.features.vms import esxcli, vmx

ALPHABET = "0123456789abcdefx:.-+|\\`[]() \t\nGPUNICXSYSNODEPHBPXBPIXNV#²١é\x00\ufeff"


def _samples(*patterns: str) -> tuple[str, ...]:
    out = []
    for pattern in patterns:
        for p in sorted(TESTS.glob(pattern)):
            data = p.read_bytes()
            out.append(paste.decode_text(data) if p.suffix == ".utf16" else data.decode("utf-8", "replace"))
    assert out, patterns
    return tuple(out)


PASTES = _samples("core/paste_samples/*.txt")
NVSMI = _samples("core/parse/samples/nvsmi/*.txt", "core/parse/samples/nvsmi/*.utf16", "offline_samples/*topo.txt")
LSPCI_TREE = _samples(
    "core/parse/samples/lspci/tree_*.txt", "core/parse/samples/lspci/paste_t*.txt", "offline_samples/*_tv.txt"
)
LSPCI_VERBOSE = _samples(
    "core/parse/samples/lspci/*vv*.txt",
    "core/parse/samples/lspci/D_*.txt",
    "core/parse/samples/lspci/paste_v*.txt",
    "offline_samples/*_vvvnn.txt",
)
LIBVIRT = _samples("fixtures/libvirt/*.xml", "fixtures/libvirt/qemu/*.xml")
VMX = _samples("vms_samples/*.vmx")
ESXCLI = _samples("vms_samples/esxcli-*.txt")
NCCL_XML = _samples("core/parse/samples/nccl_xml/*.xml")


def hostile_text(samples: tuple[str, ...]) -> st.SearchStrategy[str]:
    """A sample mangled, a sample with hostile values spliced in, a hostile value, or any text."""
    # By index: a strategy over the samples themselves would repr them all (tens of kB).
    sample = st.integers(0, len(samples) - 1).map(samples.__getitem__)
    mangled = st.builds(
        lambda rng, s: mangle(rng, s, ALPHABET, ("\t", "  ", " ")), st.randoms(use_true_random=False), sample
    )

    def splice(rng, s: str) -> str:
        lines = s.split("\n")
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(lines))
            line = lines[i]
            at = rng.randrange(len(line) + 1)
            cut = rng.randrange(at, len(line) + 1)
            lines[i] = line[:at] + rng.choice(HOSTILE_TEXTS) + line[cut:]
        return "\n".join(lines)

    spliced = st.builds(splice, st.randoms(use_true_random=False), sample)
    swollen = st.builds(swell, st.randoms(use_true_random=False), sample)
    return st.one_of(mangled, spliced, swollen, st.sampled_from(HOSTILE_TEXTS), st.text(max_size=300))


def swell(rng, text: str) -> str:
    """``text`` with some of its numbers 5,000 digits long: past what ``int()`` takes (issue 44)."""
    runs = list(re.finditer("[0-9]+", text))
    for m in sorted(rng.sample(runs, min(len(runs), rng.randint(1, 3))), key=lambda m: -m.start()):
        text = text[: m.start()] + "9" * 5000 + text[m.end() :]
    return text


def check(fn: Callable[[str], object], text: str) -> None:
    own_errors_only(fn, text)


# -- text parsers -------------------------------------------------------------------------------


@fuzz_settings()
@given(hostile_text(NVSMI))
def test_nvidia_smi_topo_matrix(text):
    check(nvsmi_topo.parse_topo_matrix, text)
    check(nvsmi_topo.read_topo_matrix, text)


@fuzz_settings()
@given(hostile_text(LSPCI_TREE))
def test_lspci_tree(text):
    check(lspci_tree.parse_lspci_tree, text)
    check(lspci_tree.read_lspci_tree, text)


@fuzz_settings()
@given(hostile_text(LSPCI_VERBOSE))
def test_lspci_verbose(text):
    check(lspci_verbose.parse_lspci_verbose, text)
    check(lspci_verbose.read_lspci_verbose, text)


def _no_lone_surrogates(text: str) -> str:
    # Lone surrogates: see test_libvirt_domain_with_a_lone_surrogate (a known failure).
    return text.encode("utf-8", "replace").decode("utf-8")


@fuzz_settings()
@given(hostile_text(LIBVIRT).map(_no_lone_surrogates))
def test_libvirt_domain(text):
    check(libvirt_domain.parse_domain, text)
    check(libvirt_domain.parse_libvirt_set, text)


@pytest.mark.parametrize("text", ["\udcff", "<domain type='kvm'><name>\udcff</name></domain>"])
def test_libvirt_domain_with_a_lone_surrogate(text):
    own_errors_only(libvirt_domain.parse_domain, text)


@fuzz_settings()
@given(hostile_text(VMX))
def test_vmx(text):
    check(vmx.parse_vmx, text)
    check(vmx.parse_passthru_id, text)


@fuzz_settings()
@given(hostile_text(ESXCLI))
def test_esxcli(text):
    check(esxcli.parse_esxcli_pci_list, text)


@fuzz_settings()
@given(hostile_text(NCCL_XML))
def test_nccl_topology_xml(text):
    """The parser, and the host made of what it read, analysed: a hand-written file may place a
    function twice, nest a <pci> anywhere or name any bus id."""
    from topoagent.core.api import analyse
    from topoagent.core.parse import segment
    from topoagent.core.paste import PasteInput, read_pastes

    check(nccl_xml.read_nccl_xml, text)
    check(lambda t: analyse(read_pastes([PasteInput("fuzz", t, segment.NCCL_XML)])), text)


@fuzz_settings()
@given(hostile_text(NVSMI + LSPCI_TREE))
def test_paste_cleaning_and_pci_ids(text):
    check(paste.clean_paste, text)
    check(pciids.parse_pci_ids, text)


@fuzz_settings()
@given(
    st.one_of(
        st.binary(max_size=400),
        hostile_text(NVSMI).map(lambda t: t.encode("utf-16", "surrogatepass")),
        hostile_text(LSPCI_TREE).map(lambda t: t.encode("utf-8", "surrogateescape")),
    )
)
def test_decode_text(data):
    check(paste.decode_text, data)


# -- the offline pipeline: parse, merge, analyse, render -----------------------------------------


@fuzz_settings(0.5)
@given(
    st.one_of(st.none(), hostile_text(NVSMI)),
    st.one_of(st.none(), hostile_text(LSPCI_TREE)),
    st.one_of(st.none(), hostile_text(LSPCI_VERBOSE)),
)
def test_offline_pipeline(topo, tree, verbose):
    if topo is None and tree is None and verbose is None:
        return
    from tests.formats import renderer
    from topoagent.core.api import analyse, read_offline

    start = time.perf_counter()
    try:
        result = analyse(read_offline(topo, tree, verbose))
    except TopoagentError:
        return
    for fmt in ("tree", "json", "matrix"):
        renderer("scan", fmt)(result, show_all=True)
    ids = [d.id for d in result.topology.devices]
    bdfs = [d.bdf for d in result.topology.devices if d.bdf is not None]
    assert len(ids) == len(set(ids)) and len(bdfs) == len(set(bdfs))
    assert time.perf_counter() - start < ABSURD_SECONDS


def _whole_paste(text: str) -> object:
    from topoagent.core.api import analyse
    from topoagent.core.paste import PasteInput, read_pastes

    return analyse(read_pastes([PasteInput("fuzz", text)]))


@fuzz_settings(0.5)
@given(hostile_text(PASTES))
def test_whole_pastes(text):
    """Every kind of output ``scan --paste`` reads (tests/core/paste_samples), found, read and
    analysed."""
    check(_whole_paste, text)


@pytest.mark.parametrize("sample", range(len(PASTES)))
def test_whole_pastes_with_one_number_of_5000_digits(sample):
    """Each sample with one of its numbers (up to 40 of them, spread over it) 5,000 digits long,
    past what ``int()`` takes: an AMD NUMA node, a ROCm weight or an lstopo size was an internal
    error (issue 44)."""
    text = PASTES[sample]
    runs = list(re.finditer("[0-9]+", text))
    for m in runs[:: max(1, len(runs) // 40)]:
        check(_whole_paste, text[: m.start()] + "9" * 5000 + text[m.end() :])


# -- sysfs values, CPU sets, config space ---------------------------------------------------------

SYSFS_VALUE_PARSERS = [
    getattr(sysfs_values, n) for n in sorted(dir(sysfs_values)) if n.startswith("parse_") and n != "parse_local_cpus"
]
VALUE_SAMPLES = (
    "0",
    "1",
    "-1",
    "0x10de",
    "0x030200",
    "32.0 GT/s PCIe",
    "16 GT/s",
    "Unknown",
    "16",
    "0-3,8",
    "ff,ffffffff",
    "4: ACTIVE",
    "400 Gb/sec (4X NDR)",
    "100000",
    "Node 0 MemTotal:  263921240 kB",
    "10 21",
    "Cpus_allowed_list:\t0-63",
    "Node: 2",
    "flags\t\t: fpu hypervisor",
    "RxErr 3\nBadTLP 0\nTOTAL_ERR_COR 3",
)


@fuzz_settings(2)
@given(st.sampled_from(SYSFS_VALUE_PARSERS), hostile_text(VALUE_SAMPLES))
def test_sysfs_values(parser, text):
    """ValueError (the documented "not of this file's format") or our own error, nothing else."""
    try:
        own_errors_only(parser, text)
    except ValueError:
        pass


INT_PARSERS = (
    sysfs_values.parse_int,
    sysfs_values.parse_numa_node,
    sysfs_values.parse_link_width,
    sysfs_values.parse_net_speed,
)


@fuzz_settings()
@given(st.sampled_from(INT_PARSERS), st.sampled_from(["١", "٣", "²", "߀", "𝟙", " ١٦ ", "-١", "٠"]))
def test_numbers_are_ascii_digits_only(parser, text):
    try:
        value = parser(text)
    except ValueError:
        return
    raise AssertionError(f"{parser.__name__}({text!r}) = {value!r}: not a number the kernel writes")


@fuzz_settings(2)
@given(st.one_of(hostile_text(("0-3,8,10-11", "0", "", "0-223", "1,3,5-7")), st.text(max_size=50)))
def test_cpulist(text):
    cpus = own_errors_only(CpuSet.parse, text)
    if cpus is not None:
        assert CpuSet.parse(str(cpus)) == cpus


@fuzz_settings(2)
@given(
    st.one_of(
        hostile_text(("ff,ffffffff", "00000000,0000000f", "f", "0", "ffffffff," * 8 + "1")),
        st.text(alphabet="0123456789abcdefABCDEF,x ", max_size=80),
    )
)
def test_cpumask(text):
    cpus = own_errors_only(CpuSet.parse_mask, text)
    if cpus is not None:
        assert all(c >= 0 for c in cpus)


@pytest.fixture(scope="module")
def config_samples(fixture_root) -> tuple[bytes, ...]:
    """Real-looking config spaces: every function of the DGX and SR-IOV fixtures."""
    out = []
    for name in ("dgx-h100", "sriov-nic"):
        devices = fixture_root(name) / "sys/bus/pci/devices"
        out += [(devices / bdf / "config").read_bytes() for bdf in sorted(p.name for p in devices.iterdir())]
    return tuple(out)


@fuzz_settings(2)
@given(data=st.data())
def test_config_space(config_samples, data):
    base = bytearray(data.draw(st.sampled_from(config_samples)))
    for _ in range(data.draw(st.integers(0, 8))):
        if not base:
            break
        at = data.draw(st.integers(0, len(base) - 1))
        base[at] = data.draw(st.integers(0, 255))  # a pointer into itself, a loop, a bad length...
    cut = data.draw(st.integers(0, len(base)))
    blob = data.draw(st.one_of(st.just(bytes(base)), st.just(bytes(base[:cut])), st.binary(max_size=4200)))
    own_errors_only(configspace.parse_config_space, blob)


# -- the shapes issue 12 named -------------------------------------------------------------------


def _lspci_chain(depth: int) -> str:
    s = "-[0000:00]---01.0"
    for i in range(depth):
        s += f"-[{i % 255 + 1:02x}]----00.0"
    return s + "  NVIDIA Corporation Device 2330\n"


def _glued_affinity(cpus: int) -> str:
    listing = ",".join(str(i) for i in range(0, cpus * 2, 2))
    return f"\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tNV1\t{listing}0\nGPU1\tNV1\t X \t{listing}1\n"


SHAPES = {
    "lspci -tv chain 500 bridges deep": (lspci_tree.parse_lspci_tree, _lspci_chain(500)),
    "lspci -tv chain 5000 bridges deep": (lspci_tree.parse_lspci_tree, _lspci_chain(5000)),
    "glued affinity columns, 3000 CPUs": (nvsmi_topo.parse_topo_matrix, _glued_affinity(3000)),
    "Number of VFs: 1000000000": (
        lspci_verbose.parse_lspci_verbose,
        "0000:17:00.0 Ethernet controller [0200]: Mellanox Technologies [15b3:1021]\n"
        "\tCapabilities: [180 v1] Single Root I/O Virtualization (SR-IOV)\n"
        "\t\tInitial VFs: 16, Total VFs: 16, Number of VFs: 1000000000, "
        "Function Dependency Link: 00\n\t\tVF offset: 1, stride: 1, Device ID: 101e\n",
    ),
    "cpulist 0-999999999": (CpuSet.parse, "0-999999999"),
    "cpumask of 2,000 words": (CpuSet.parse_mask, "ffffffff," * 2000 + "ff"),
    "lspci -vvv of 50,000 functions": (
        lspci_verbose.parse_lspci_verbose,
        "".join(
            f"0000:{b:02x}:{d:02x}.{f} Ethernet controller [0200]: Mellanox [15b3:101e]\n"
            for b in range(200)
            for d in range(32)
            for f in range(8)
        )[:4_000_000],
    ),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_named_shapes_are_bounded(shape):
    fn, text = SHAPES[shape]
    own_errors_only(fn, text)


def test_offline_pipeline_on_a_deep_chain():
    from tests.formats import renderer
    from topoagent.core.api import analyse, read_offline

    result = analyse(read_offline(lspci_tree=_lspci_chain(500)))
    doc = json.loads(renderer("scan", "json")(result))
    assert doc["devices"] and len({d["bdf"] for d in doc["devices"]}) == len(doc["devices"])
    renderer("scan", "tree")(result, show_all=True)
