"""Every device appears in every view: the header's counts match the tree, ``--all`` shows
every PCI function (switch downstream ports and empty ports included), and a function whose
parent bridge is missing, or whose NUMA node the host does not list, is still drawn."""

import json
import re

import pytest
from click.testing import CliRunner

from tests.fakesysfs import machine_names
from topoagent.cli import cli
from topoagent.core.api import scan

BDF_RE = re.compile(r"\b[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]\b")


def tree(root, *args):
    res = CliRunner().invoke(cli, ["scan", "--root", str(root), "--no-nvml", *args])
    assert res.exit_code in (0, 1), res.output
    return res.output


def drawn_bdfs(text: str) -> list[str]:
    """BDFs that start a tree line (a device drawn), not those quoted in findings."""
    out = []
    for line in text.splitlines():
        body = line.lstrip("│├└─ ")
        m = BDF_RE.match(body)
        if m and line != body:
            out.append(m.group())
    return out


@pytest.mark.parametrize("machine", machine_names())
def test_all_shows_every_function_once(machine, fixture_root):
    root = fixture_root(machine)
    r = scan(root, nvml="off")
    drawn = drawn_bdfs(tree(root, "--all"))
    assert sorted(drawn) == sorted(d.bdf for d in r.topology.devices)
    assert "not shown" not in tree(root, "--all")


def test_real_trees_show_every_function(real_tree_roots):
    assert real_tree_roots
    for root in real_tree_roots.values():
        r = scan(root, nvml="off")
        assert sorted(drawn_bdfs(tree(root, "--all"))) == sorted(d.bdf for d in r.topology.devices), root


def test_a_missing_bridge_keeps_its_devices_on_their_node(scratch_root):
    """Remove a switch port from the middle of a DGX rail chain: its GPU stays, on node 1."""
    root = scratch_root("dgx-h100")
    before = scan(root, nvml="off")
    gpu = before.topology.by_id("gpu4")
    hidden = gpu.ancestors[2]  # a switch port between the root port and the GPU
    (root / "sys/bus/pci/devices" / hidden).unlink()  # firmware hides it: its directory stays
    after = scan(root, nvml="off")
    moved = after.by_bdf(gpu.bdf)
    assert moved is not None and moved.numa_node == 1 == gpu.numa_node
    assert hidden not in moved.ancestors and moved.parent in gpu.ancestors
    assert moved.notes and hidden in moved.notes[0]
    text = tree(root, "--all")
    assert gpu.bdf in drawn_bdfs(text) and "placed under its nearest listed ancestor" in text
    doc = json.loads(CliRunner().invoke(cli, ["scan", "--root", str(root), "--format", "json"]).output)
    assert next(d for d in doc["devices"] if d["bdf"] == gpu.bdf)["notes"] == list(moved.notes)
    assert len(doc["devices"]) == len(before.topology.devices) - 1


def test_a_node_the_host_does_not_list_still_shows_its_devices(scratch_root):
    root = scratch_root("workstation")
    r = scan(root, nvml="off")
    gpu = r.topology.gpus[0]
    for d in r.topology.devices:  # firmware puts the GPU's whole root bus on a node it never lists
        if d.root_bus == gpu.root_bus:
            (root / "sys/bus/pci/devices" / d.bdf / "numa_node").write_text("7\n")
    text = tree(root)
    assert "NUMA node 7 (not among the host's NUMA nodes)" in text
    assert gpu.bdf in drawn_bdfs(text)


def test_a_gpu_virtual_function_is_analysed_through_its_physical_function(fixture_root):
    """A GPU with SR-IOV enabled (vGPU) lists a VF of GPU class.  VFs are not paired (a VF's path
    is its PF's), so rails and findings must look its paths up through the PF; they once raised
    KeyError for it."""
    import msgspec

    from topoagent.core.api import read_host
    from topoagent.core.result import analyse

    snap = read_host(fixture_root("sriov-nic"), nvml="off")
    gpu = next(f for f in snap.pci if f.class_code is not None and f.class_code >> 8 == 0x0302)
    bus, _, fn = gpu.bdf.rpartition(".")
    vf_bdf = f"{bus}.{int(fn) + 1}"
    assert all(f.bdf != vf_bdf for f in snap.pci)
    sysfs_path = gpu.sysfs_path.rpartition("/")[0] + "/" + vf_bdf if gpu.sysfs_path else None
    vf = msgspec.structs.replace(gpu, bdf=vf_bdf, sysfs_path=sysfs_path, physfn=gpu.bdf, driver=None)
    result = analyse(msgspec.structs.replace(snap, pci=snap.pci + (vf,)))
    assert result.by_bdf(vf_bdf) is not None
    pf = result.by_bdf(gpu.bdf)
    assert result.path(result.by_bdf(vf_bdf).id, result.topology.nics[0].id) == result.path(
        pf.id, result.topology.nics[0].id
    )


def test_a_function_below_an_unplaced_bridge_is_drawn_once(tmp_path):
    """An lspci excerpt that starts below its root-bus line: the bridges are in "no PCI tree",
    and the functions below them are drawn under them, not a second time beside them."""
    paste = tmp_path / "tree.txt"
    paste.write_text(
        "           +-01.4-[05-06]----00.0-[06]----00.0  NVIDIA Corporation Device 2335\n"
        "           +-01.5-[07]----00.0  NVIDIA Corporation Device 2335\n"
    )
    res = CliRunner().invoke(cli, ["scan", "--lspci-tree", str(paste), "--all"])
    assert res.exit_code in (0, 1), res.output
    drawn = drawn_bdfs(res.output)
    assert sorted(drawn) == ["0000:05:00.0", "0000:06:00.0", "0000:07:00.0"]
