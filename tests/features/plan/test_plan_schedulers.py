"""``plan --format rails`` (NVIDIA/topograph's GPU-to-NIC rail record), ``plan --format dra``
(Kubernetes DRA standard attributes) and the DRA_PCIE_ROOT_MISMATCH finding."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.fakesysfs import generate, machine_names
from tests.paths import TESTS
from tests.plan_helpers import tiny
from topoagent.cli import cli
from topoagent.core.api import scan

GOLDEN = TESTS / "golden"
PCI_ADDRESS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
PCIE_ROOT = re.compile(r"^pci[0-9a-f]{4}:[0-9a-f]{2}$")  # `pci<domain>:<bus>`, as sysfs names the root bus


def plan(root: Path, fmt: str, *args: str) -> str:
    """``plan --format FMT`` indented (``--pretty``), as the goldens keep it for review."""
    result = CliRunner().invoke(cli, ["plan", "--root", str(root), "--format", fmt, "--pretty", *args])
    assert result.exit_code in (0, 1), result.output
    return result.output


@pytest.mark.parametrize("machine", machine_names())
@pytest.mark.parametrize("fmt", ["rails", "dra"])
def test_golden(machine, fmt, fixture_root, golden):
    golden(GOLDEN / machine / f"{fmt}.json", plan(fixture_root(machine), fmt))


def test_rails_record_has_the_proposal_shape(fixture_root):
    doc = json.loads(plan(fixture_root("dgx-h100"), "rails", "--node-uid", "3e931c2b-6a5d-4c17-93bc-bc3a34132bd2"))
    assert list(doc) == ["schemaVersion", "nodeUID", "railSource", "gpuKey", "nics", "gpus"]
    assert doc["schemaVersion"] == "v1alpha1"
    assert doc["nodeUID"] == "3e931c2b-6a5d-4c17-93bc-bc3a34132bd2"
    assert doc["railSource"] == "topoagent"
    # The DGX H100's eight rail NICs, rail i the i-th in PCI order; storage/management NICs on none.
    rail_nics = [
        "0000:18:00.0",
        "0000:40:00.0",
        "0000:4f:00.0",
        "0000:5e:00.0",
        "0000:9a:00.0",
        "0000:c0:00.0",
        "0000:ce:00.0",
        "0000:dc:00.0",
    ]
    assert doc["nics"] == {nic: [f"rail{i}"] for i, nic in enumerate(rail_nics)}
    gpus = [
        "0000:1b:00.0",
        "0000:43:00.0",
        "0000:52:00.0",
        "0000:61:00.0",
        "0000:9d:00.0",
        "0000:c3:00.0",
        "0000:d1:00.0",
        "0000:df:00.0",
    ]
    assert list(doc["gpus"]) == gpus and doc["gpuKey"] == "pciAddress"  # no NVML here: keyed by PCI address
    for i, gpu in enumerate(doc["gpus"].values()):
        assert list(gpu) == ["pciAddress", "rails"] and PCI_ADDRESS.match(gpu["pciAddress"])
        assert list(gpu["rails"]) == [f"rail{r}" for r in range(8)]
        for nics in gpu["rails"].values():
            assert [list(n) for n in nics] == [["nic", "path"]]
            assert nics[0]["path"] in ("PIX", "PXB", "PHB", "NODE", "SYS")
        # GPU i shares its switch with rail i's NIC; the others are NODE (same socket) or SYS
        assert gpu["rails"][f"rail{i}"] == [{"nic": rail_nics[i], "path": "PIX"}]
        assert {gpu["rails"][f"rail{r}"][0]["path"] for r in range(8) if r != i} == {"NODE", "SYS"}


def test_rails_keys_gpus_by_nvml_uuid(fixture_root):
    from tests.fakenvml import make_fake
    from topoagent.features.plan.rails import record

    result = scan(fixture_root("dgx-h100"), nvml=make_fake("hgx_h100_8gpu"))
    uuids = {g.bdf: g.uuid for g in result.snapshot.nvml_gpus}
    assert len(uuids) == 8 and all(u and u.startswith("GPU-") for u in uuids.values())
    rec = record(result)
    assert {key: g.pci_address for key, g in rec.gpus.items()} == {u: bdf for bdf, u in uuids.items()}
    assert rec.gpu_key == "uuid"


def test_rails_keys_every_gpu_alike_when_nvml_named_only_some(fixture_root):
    """Issue 31 item 16: a record whose keys mix UUIDs and PCI addresses cannot be read by key
    kind; where NVML did not give every GPU's UUID, every GPU is keyed by PCI address and the
    record says so."""
    import msgspec

    from tests.fakenvml import make_fake
    from topoagent.features.plan.rails import record

    result = scan(fixture_root("dgx-h100"), nvml=make_fake("hgx_h100_8gpu"))
    g0 = result.topology.gpus[0]
    assert g0.nvml is not None
    devices = tuple(
        msgspec.structs.replace(d, nvml=msgspec.structs.replace(d.nvml, uuid=None)) if d is g0 else d
        for d in result.topology.devices
    )
    rec = record(msgspec.structs.replace(result, topology=msgspec.structs.replace(result.topology, devices=devices)))
    assert rec.gpu_key == "pciAddress" and all(not k.startswith("GPU-") for k in rec.gpus)


def test_rails_tell_a_grace_gpus_own_cpu_nic_from_the_other_cpus(fixture_root):
    """Issue 31 item 16: nvidia-smi prints SYS from a C2C GPU to every NIC; NCCL takes the own
    Grace's fastest NIC as P2C (GPUDirect RDMA on).  The record adds NCCL's class there."""
    doc = json.loads(plan(fixture_root("gb200-tray"), "rails"))
    for gpu in doc["gpus"].values():
        entries = [n for nics in gpu["rails"].values() for n in nics]
        assert {n["path"] for n in entries} == {"SYS"}
        assert {n.get("ncclPath") for n in entries} == {"P2C", None}  # own CPU's NICs, and the other's


def test_dra_attributes(fixture_root):
    doc = json.loads(plan(fixture_root("dgx-h100"), "dra"))
    by_id = {d["device"]: d for d in doc["devices"]}
    assert {d["kind"] for d in doc["devices"]} == {"gpu", "nic", "cpu"}
    gpu0 = by_id["gpu0"]["attributes"]
    assert gpu0 == {
        "resource.kubernetes.io/pcieRoot": {"string": "pci0000:15"},
        "resource.kubernetes.io/pciBusID": {"string": "0000:1b:00.0"},
        "resource.kubernetes.io/numaNode": {"int": 0},
    }
    # GPU i and its rail NIC share a root complex: a claim matching on pcieRoot pairs them
    nic = next(d for d in doc["devices"] if d["key"] == "0000:18:00.0")
    assert nic["attributes"]["resource.kubernetes.io/pcieRoot"] == {"string": "pci0000:15"}
    for d in doc["devices"]:
        if d["kind"] != "cpu":  # CPUs are no PCI device: no pcieRoot
            assert PCIE_ROOT.match(d["attributes"]["resource.kubernetes.io/pcieRoot"]["string"])
    # each NUMA node's CPUs, as the CPU DRA driver publishes them (one device per node)
    assert [d for d in doc["devices"] if d["kind"] == "cpu"] == [
        {
            "device": f"cpu-node{n}",
            "key": f"node{n}",
            "kind": "cpu",
            "attributes": {"resource.kubernetes.io/numaNode": {"int": n}},
            "cpus": cpus,
        }
        for n, cpus in ((0, "0-55,112-167"), (1, "56-111,168-223"))
    ]


def test_dra_leaves_out_an_unknown_numa_node(fixture_root):
    doc = json.loads(plan(fixture_root("cloud-vm"), "dra"))  # numa_node = -1 on every device
    assert doc["devices"]
    for d in (d for d in doc["devices"] if d["kind"] != "cpu"):
        assert "resource.kubernetes.io/numaNode" not in d["attributes"]
        assert d["attributes"]["resource.kubernetes.io/pcieRoot"] == {"string": "pci0000:00"}


def dra_findings(result):
    return [f for f in result.findings if f.code == "DRA_PCIE_ROOT_MISMATCH"]


def test_no_dra_finding_with_one_root_per_rail(fixture_root):
    assert dra_findings(scan(fixture_root("dgx-h100"))) == []


def test_dra_finding_when_the_root_is_too_coarse(tmp_path):
    # Two root ports on one root bus, each with a switch holding a GPU and its NIC: a claim
    # matching on pcieRoot may hand gpu0 the other switch's NIC (PHB) instead of its own (PIX).
    result = scan(generate(tiny(gpus=2), tmp_path / "tiny"))
    (f,) = dra_findings(result)
    # info: a fact about a claim the host may never see, not a fault (issue 32 item 12)
    assert f.severity.label == "info"
    assert f.subjects == ("gpu0", "nic0", "gpu1", "nic1")
    assert "pci0000:10 also holds nic1 (PHB), farther than its rail NIC nic0 (PIX)" in f.message


def test_dra_finding_when_the_rail_nic_is_under_another_root(fixture_root):
    (f,) = dra_findings(scan(fixture_root("grace-hopper")))
    assert f.subjects == ("gpu0", "nic0")
    assert "its rail NIC nic0 (mlx5_0) is under pci0000:00, the GPU under pci0009:00" in f.message
    assert [e.value for e in f.evidence] == ["../../../devices/pci0009:00/...", "../../../devices/pci0000:00/..."]


def test_dra_document_decodes_as_its_own_type(fixture_root):
    """The attribute's ``int`` field is named like the builtin: the type must still decode."""
    import msgspec

    from topoagent.features.plan import dra as plan_dra

    text = CliRunner().invoke(cli, ["plan", "--root", str(fixture_root("dgx-h100")), "--format", "dra"]).output
    devices = json.loads(text)["devices"]
    decoded = msgspec.convert(devices, list[plan_dra.DraDevice])
    assert any(a.int == 0 for d in decoded for a in d.attributes.values())
