"""Cost that stays linear in what is asked: NIC pairs and the NUMA distance table.

No timing: the test counts what the scan computes.  A host with 200 NIC functions (dual-port
ConnectX-7 cards, no SR-IOV: benchmarks/gen_tree.py ``nics``) must compute its 8 GPUs' pairs
with each other and with every NIC -- G*(G-1)/2 + G*N path classes -- in every output format,
and never the N*(N-1)/2 NIC pairs a quadratic scan would (19,900 here).
"""

import json

import jsonschema
import pytest
from benchmarks.gen_tree import nics, numa
from click.testing import CliRunner

from tests.fakesysfs import generate
from tests.paths import REPO
from topoagent.cli import cli
from topoagent.core.analysis import paths as paths_mod
from topoagent.core.analysis.paths import NIC_PAIR_LIMIT, path
from topoagent.core.api import scan
from topoagent.core.parse.sysfs_values import parse_distances
from topoagent.core.pci import DeviceKind

NICS = 200
GPUS = 8
LINEAR = GPUS * (GPUS - 1) // 2 + GPUS * NICS  # GPU-GPU + GPU-NIC

#: Every output that reads paths; each invocation analyses the host afresh.
COMMANDS = [
    ["scan", "--format", "json"],
    ["scan", "--format", "tree"],
    ["scan", "--format", "matrix"],
    ["plan", "--format", "text"],
    ["plan", "--format", "json"],
    ["plan", "--format", "slurm"],
    ["plan", "--format", "nccl-topo"],
    ["plan", "--format", "rails"],
    ["plan", "--format", "dra"],
    ["plan", "--format", "env", "--gpu", "0"],
    ["draw", "--format", "svg"],
    ["draw", "--format", "html"],
    ["draw", "--format", "dot"],
]


@pytest.fixture(scope="module")
def many_nics(module_tmp):
    return generate(nics(NICS), module_tmp / "nics")


@pytest.fixture
def count_paths(monkeypatch):
    """Counts path classes computed (every computed path goes through ``pcie_class``)."""
    calls = []
    real = paths_mod.pcie_class

    def counting(topo, a, b):
        calls.append((a.id, b.id))
        return real(topo, a, b)

    monkeypatch.setattr(paths_mod, "pcie_class", counting)
    return calls


def test_the_tree_has_what_the_test_counts_on(many_nics):
    topo = scan(root=many_nics, nvml=False).topology
    assert len(topo.gpus) == GPUS
    assert len([n for n in topo.nics if not n.is_vf]) == NICS > NIC_PAIR_LIMIT


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:3:2]))
def test_every_format_computes_linear_pairs(many_nics, count_paths, args):
    out = CliRunner().invoke(cli, [args[0], "--root", str(many_nics), *args[1:]])
    assert out.exit_code in (0, 1), out.output
    assert len(count_paths) == LINEAR
    assert not [p for p in count_paths if p[0].startswith("nic") and p[1].startswith("nic")]


def test_scan_lists_gpu_pairs_and_marks_the_nic_pairs_it_leaves_out(many_nics):
    result = scan(root=many_nics, nvml=False)
    kinds = {(result.device(p.a).kind, result.device(p.b).kind) for p in result.paths}
    assert len(result.paths) == LINEAR
    assert (DeviceKind.NIC, DeviceKind.NIC) not in kinds
    doc = json.loads(CliRunner().invoke(cli, ["scan", "--root", str(many_nics), "--format", "json"]).output)
    assert len(doc["paths"]) == LINEAR
    assert doc["paths_omitted"]["nic_nic"] == NICS * (NICS - 1) // 2
    assert doc["paths_omitted"]["physical_nics"] == NICS
    assert doc["paths_omitted"]["limit"] == NIC_PAIR_LIMIT
    jsonschema.validate(doc, json.loads((REPO / "topoagent/schema/scan.schema.json").read_text()))


def test_a_nic_pair_left_out_is_computed_when_asked(many_nics, count_paths):
    result = scan(root=many_nics, nvml=False)
    count_paths.clear()
    a, b = result.topology.nics[10], result.topology.nics[11]  # two ports of one card
    assert result.path(b.id, a.id) == path(result.topology, a, b)
    assert result.path(a.id, b.id).token == "PIX"
    assert count_paths == [("nic10", "nic11")] * 3  # each lookup computes it (device order), and so does path()


def test_matrix_past_the_bound_is_the_gpus_and_says_so(many_nics):
    text = CliRunner().invoke(cli, ["scan", "--root", str(many_nics), "--format", "matrix"]).output
    header = text.splitlines()[0].split("\t")
    assert [h for h in header if h.startswith("GPU") and h[3:].isdigit()] == [f"GPU{i}" for i in range(GPUS)]
    assert not [h for h in header if h.startswith("NIC")]
    assert f"NICs left out: {NICS} RDMA devices, more than {NIC_PAIR_LIMIT} columns" in text


def test_few_nics_keep_every_nic_pair(fixture_root):
    result = scan(root=fixture_root("dgx-h100"), nvml=False)
    n = len([d for d in result.topology.nics if not d.is_vf])
    nic_pairs = [p for p in result.paths if p.a.startswith("nic") and p.b.startswith("nic")]
    assert len(nic_pairs) == n * (n - 1) // 2 > 0
    doc = json.loads(
        CliRunner().invoke(cli, ["scan", "--root", str(fixture_root("dgx-h100")), "--format", "json"]).output
    )
    assert "paths_omitted" not in doc


def test_distance_rows_are_shared_tuples(tmp_path):
    root = generate(numa(256), tmp_path / "root")
    result = scan(root=root, nvml=False)
    raw = {n.id: n.distances for n in result.snapshot.numa_nodes}
    assert len(result.topology.nodes) == 256
    for node in result.topology.nodes:
        assert isinstance(node.distances, tuple) and len(node.distances) == 256
        assert node.distances is raw[node.id]  # one row per node, not a copy or a dict
        assert result.topology.node(node.id) is node
    doc = json.loads(CliRunner().invoke(cli, ["scan", "--root", str(root), "--format", "json"]).output)
    assert doc["numa_nodes"][3]["distances"] == [
        int(x) for x in (root / "sys/devices/system/node/node3/distance").read_text().split()
    ]


@pytest.mark.parametrize(
    "text, want",
    [
        ("10 21\n", (10, 21)),
        ("10 12 32 32\n", (10, 12, 32, 32)),
        ("", ()),
        ("10\t21", (10, 21)),
    ],
)
def test_parse_distances(text, want):
    assert parse_distances(text) == want


@pytest.mark.parametrize("text", ["10 -1", "10 ٢١", "10 0x15", "10 21\0", "1" * 20, "10 +21"])
def test_parse_distances_refuses(text):
    with pytest.raises(ValueError):
        parse_distances(text)
