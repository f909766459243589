"""``plan --format dra`` against the upstream rules for ResourceSlice device attributes, the
``numaNode`` attribute in both of its forms, ``--claim``, and ``exec`` reading the DRA device
metadata a pod is handed.

The rules, as kubernetes/enhancements and k8s.io/dynamic-resource-allocation state them:

- KEP-4381 (``QualifiedName``): a name is a C identifier, or a DNS subdomain, ``/`` and a C
  identifier; the subdomain at most 63 characters, the identifier at most 32.  A device has
  at most 32 attributes and capacities; a value sets exactly one field; a string value is at
  most 64 characters.  A device name is a DNS label.
- ``resource.kubernetes.io/pcieRoot``: ``pci<domain>:<bus>``; ``pciBusID``: the extended BDF
  ``dddd:bb:dd.f`` (deviceattribute/attribute.go).
- KEP-6072 / deviceattribute/numa_linux.go: ``numaNode`` is the device's sysfs ``numa_node``
  (never published for -1) as ``int``, or as ``ints`` -- the node first, then the nodes at
  the smallest SLIT distance from it on no other socket.  IDs below 1024 (``maxNUMANodes``).
- KEP-5491: list values are non-empty; at most 48 values per device.
- KEP-5304: the metadata files are ``/var/run/dra-device-attributes/<claim>/<request>/<driver>-metadata.json``
  holding ``apiVersion: metadata.resource.k8s.io/v1alpha1``, ``kind: DeviceMetadata``.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.features.daemon.test_daemon_tree import copy_tree
from tests.plan_helpers import topoagent
from topoagent.core.api import scan

C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
PCIE_ROOT = re.compile(r"^pci[0-9a-f]{4,8}:[0-9a-f]{2}$")
PCI_BUS_ID = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
VALUE_FIELDS = ("int", "bool", "string", "version", "ints", "bools", "strings", "versions")


def qualified_name_ok(name: str) -> bool:
    domain, _, ident = name.rpartition("/")
    if domain and (len(domain) > 63 or not DNS_SUBDOMAIN.match(domain)):
        return False
    return len(ident) <= 32 and bool(C_IDENTIFIER.match(ident))


def upstream_problems(device: dict) -> list[str]:
    """What the API server would refuse in one device entry (empty: nothing)."""
    out = []
    if len(device["device"]) > 63 or not DNS_LABEL.match(device["device"]):
        out.append(f"device name {device['device']!r}")
    attrs = device["attributes"]
    if len(attrs) > 32:
        out.append("more than 32 attributes")
    values = 0
    for name, value in attrs.items():
        if not qualified_name_ok(name):
            out.append(f"name {name!r}")
        fields = [f for f in VALUE_FIELDS if f in value]
        if len(fields) != 1 or set(value) != set(fields):
            out.append(f"{name}: {value} sets {fields}")
            continue
        (field,) = fields
        v = value[field]
        if field.endswith("s"):
            if not v:
                out.append(f"{name}: empty list")
            values += len(v)
        else:
            values += 1
        if field == "string" and len(v) > 64:
            out.append(f"{name}: longer than 64")
        if name == "resource.kubernetes.io/pcieRoot" and (field != "string" or not PCIE_ROOT.match(v)):
            out.append(f"{name}: {v!r}")
        if name == "resource.kubernetes.io/pciBusID" and (field != "string" or not PCI_BUS_ID.match(v)):
            out.append(f"{name}: {v!r}")
        if name == "resource.kubernetes.io/numaNode":
            nodes = v if field == "ints" else [v]
            if field not in ("int", "ints") or not all(isinstance(n, int) and 0 <= n < 1024 for n in nodes):
                out.append(f"{name}: {v!r}")
    if values > 48:
        out.append("more than 48 attribute values")
    return out


def dra(root, *args: str) -> dict:
    out = topoagent("plan", "--root", str(root), "--no-nvml", "--format", "dra", *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


MACHINES = ["dgx-h100", "dgx-a100-nps4", "grace-hopper", "gb200-tray", "cloud-vm", "sriov-nic", "epyc-genoa-ccd"]


@pytest.mark.parametrize("form", ["scalar", "list"])
@pytest.mark.parametrize("machine", MACHINES)
def test_every_device_passes_the_upstream_rules(fixture_root, machine, form):
    doc = dra(fixture_root(machine), "--dra-numa", form)
    assert doc["devices"]
    for d in doc["devices"]:
        assert upstream_problems(d) == [], d


def test_the_checker_itself_refuses_what_the_api_server_refuses():
    good = {"device": "gpu0", "attributes": {"resource.kubernetes.io/numaNode": {"int": 0}}}
    assert upstream_problems(good) == []
    for bad in (
        {"device": "GPU_0", "attributes": {}},
        {"device": "gpu0", "attributes": {"resource.kubernetes.io/numaNode": {"int": 0, "ints": [0]}}},
        {"device": "gpu0", "attributes": {"resource.kubernetes.io/numaNode": {"ints": []}}},
        {"device": "gpu0", "attributes": {"resource.kubernetes.io/pcieRoot": {"string": "0000:15"}}},
        {"device": "gpu0", "attributes": {"resource.kubernetes.io/pciBusID": {"string": "1b:00.0"}}},
        {"device": "gpu0", "attributes": {"resource.kubernetes.io/" + "x" * 33: {"int": 1}}},
        {"device": "gpu0", "attributes": {"resource.kubernetes.io/numaNode": {"int": -1}}},
    ):
        assert upstream_problems(bad), bad


def test_numa_list_form_on_nps4_is_the_socket_at_the_nearest_distance(fixture_root):
    """DGX A100 at NPS4: nodes 0-3 on socket 0 at distance 12 from each other, 32 across.  A
    GPU on node 3 publishes [3, 0, 1, 2] (physical node first); the CPUs of node 3 just [3]."""
    doc = dra(fixture_root("dgx-a100-nps4"), "--dra-numa", "list")
    by_id = {d["device"]: d["attributes"] for d in doc["devices"]}
    assert by_id["gpu0"]["resource.kubernetes.io/numaNode"] == {"ints": [3, 0, 1, 2]}
    assert by_id["cpu-node3"]["resource.kubernetes.io/numaNode"] == {"ints": [3]}
    scalar = dra(fixture_root("dgx-a100-nps4"))
    assert {d["device"]: d["attributes"] for d in scalar["devices"]}["gpu0"]["resource.kubernetes.io/numaNode"] == {
        "int": 3
    }


def test_numa_list_form_keeps_a_cpu_less_node_at_the_nearest_distance(fixture_root):
    """Grace Hopper: the HBM node 1 has no CPUs, so no socket; upstream keeps a candidate whose
    socket is unknown when it is at the smallest distance (getEquidistantNUMANodes)."""
    from topoagent.features.plan.dra import equidistant_nodes

    result = scan(fixture_root("grace-hopper"), nvml="off")
    node0 = result.topology.node(0)
    assert node0 is not None
    ids = [n.id for n in result.topology.nodes]
    row = dict(zip(ids, node0.distances, strict=False))
    nearest = min(d for i, d in row.items() if i != 0)
    assert equidistant_nodes(result.topology, 0) == [0, *sorted(i for i, d in row.items() if i != 0 and d == nearest)]


# -- --claim ---------------------------------------------------------------------------------


def claim(root, spec: str, *args: str):
    out = topoagent("plan", "--root", str(root), "--no-nvml", "--format", "dra", "--claim", spec, *args)
    return out.returncode, (json.loads(out.stdout) if out.stdout.startswith("{") else None), out.stderr


def test_a_rail_claim_is_aligned(fixture_root):
    code, doc, _ = claim(fixture_root("dgx-h100"), "gpu0,mlx5_0,cpus=0-7")
    assert code == 0 and doc["aligned"] is True
    assert [c["attribute"] for c in doc["constraints"]] == [
        "resource.kubernetes.io/pcieRoot",
        "resource.kubernetes.io/numaNode",
    ]
    assert all(c["match"] for c in doc["constraints"])
    assert "gpu0 - nic2: PIX" in doc["topology"]


def test_a_claim_across_sockets_is_not_aligned(fixture_root):
    code, doc, _ = claim(fixture_root("dgx-h100"), "gpu0 cpus=56-63")
    assert code == 1 and doc["aligned"] is False
    (numa,) = doc["constraints"]
    assert numa["match"] is False and numa["values"] == {"gpu0": {"int": 0}, "cpus node1": {"int": 1}}
    assert any("outside gpu0's NUMA node 0" in line for line in doc["topology"])


def test_list_form_matches_a_same_socket_neighbour_that_scalar_refuses(fixture_root):
    """NPS4: gpu0 on node 3, CPUs of node 0 (same socket, distance 12).  Scalar numaNode:
    3 != 0, no match; list form: [3,0,1,2] and [0] intersect -- KEP-6072's cross-quadrant case.
    topoagent still says the CPUs are outside the GPU's own node."""
    root = fixture_root("dgx-a100-nps4")
    code, doc, _ = claim(root, "gpu0,cpus=32-35")  # node 0 = cores 0-15 and 128-143
    assert code == 1 and doc["constraints"][0]["match"] is False
    nodes = scan(root, nvml="off").topology.nodes
    cpus = next(n.cpus for n in nodes if n.id == 0)
    code, doc, _ = claim(root, f"gpu0,cpus={min(cpus)}-{min(cpus) + 3}", "--dra-numa", "list")
    assert doc["constraints"][0]["match"] is True
    assert code == 1 and doc["aligned"] is False  # the host's own view: not the GPU's node


def test_a_claim_naming_nothing_known_is_one_line(fixture_root):
    code, doc, err = claim(fixture_root("dgx-h100"), "gpu99")
    assert code == 2 and doc is None and err.count("\n") == 1 and "gpu99" in err
    out = topoagent("plan", "--root", str(fixture_root("dgx-h100")), "--claim", "gpu0")
    assert out.returncode == 2 and "--claim is for --format dra" in out.stderr


# -- exec inside a pod: the DRA device metadata ------------------------------------------------------


def metadata(bdfs: list[str], *, driver: str = "gpu.nvidia.com", spelling: str = "resource.kubernetes.io") -> str:
    return json.dumps(
        {
            "apiVersion": "metadata.resource.k8s.io/v1alpha1",
            "kind": "DeviceMetadata",
            "metadata": {"name": "gpus", "namespace": "default", "uid": "abc", "generation": 1},
            "requests": [
                {
                    "name": "gpu",
                    "devices": [
                        {
                            "name": f"gpu-{i}",
                            "driver": driver,
                            "pool": "node-1",
                            "attributes": {f"{spelling}/pciBusID": {"string": b}, "index": {"int": i}},
                        }
                        for i, b in enumerate(bdfs)
                    ],
                }
            ],
        }
    )


def pod_root(fixture_root, tmp_path, files: dict[str, str]):
    """A copy of the DGX H100 tree (files hard-linked) with metadata files below var/run."""
    root = copy_tree(fixture_root("dgx-h100"), tmp_path / "pod")
    for rel, text in files.items():
        path = root / "var/run/dra-device-attributes" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_exec_auto_takes_the_pods_gpus_from_dra_metadata(fixture_root, tmp_path):
    # gpu4 and gpu5 of the DGX (0000:9d:00.0, 0000:c3:00.0), listed out of order, and a NIC
    # from another driver's file: local rank 1 is the second GPU in PCI order, gpu5.
    root = pod_root(
        fixture_root,
        tmp_path,
        {
            "gpus/gpu/gpu.nvidia.com-metadata.json": metadata(["0000:c3:00.0", "0000:9d:00.0"]),
            "nics/nic/sriov.example.com-metadata.json": metadata(["0000:18:00.0"], driver="sriov.example.com"),
        },
    )
    out = topoagent(
        "exec", "--root", str(root), "--auto", "--dry-run", "--", "python", "train.py", env={"LOCAL_RANK": "1"}
    )
    assert out.stdout.startswith("# gpu5 (0000:c3:00.0), NUMA node 1\n"), out.stdout + out.stderr
    assert "gpu5 is the job's GPU 1 (DRA device metadata" in out.stderr
    assert "export CUDA_VISIBLE_DEVICES" not in out.stdout  # the container's own numbering stays
    narrowed = topoagent(
        "exec",
        "--root",
        str(root),
        "--auto",
        "--narrow-visible",
        "--dry-run",
        "--",
        "python",
        "x",
        env={"LOCAL_RANK": "1"},
    )
    assert "export CUDA_VISIBLE_DEVICES=1\n" in narrowed.stdout  # the container numbers its GPUs from 0


def test_exec_reads_the_keps_example_spelling_and_skips_a_bad_file(fixture_root, tmp_path):
    root = pod_root(
        fixture_root,
        tmp_path,
        {
            "c/r/a.example.com-metadata.json": metadata(["0000:9d:00.0"], spelling="resource.k8s.io"),
            "c/r/b.example.com-metadata.json": '{"apiVersion": "v1", "kind": "Pod"}',
        },
    )
    out = topoagent("exec", "--root", str(root), "--auto", "--dry-run", "--", "python", "x", env={"LOCAL_RANK": "0"})
    assert out.stdout.startswith("# gpu4 (0000:9d:00.0)"), out.stdout + out.stderr
    assert "DRA device metadata skipped" in out.stderr and "b.example.com-metadata.json" in out.stderr


def test_the_environment_wins_over_dra_metadata(fixture_root, tmp_path):
    root = pod_root(fixture_root, tmp_path, {"c/r/gpu.nvidia.com-metadata.json": metadata(["0000:9d:00.0"])})
    out = topoagent(
        "exec",
        "--root",
        str(root),
        "--auto",
        "--dry-run",
        "--",
        "python",
        "x",
        env={"LOCAL_RANK": "0", "CUDA_VISIBLE_DEVICES": "6"},
    )
    assert out.stdout.startswith("# gpu6 "), out.stdout + out.stderr
